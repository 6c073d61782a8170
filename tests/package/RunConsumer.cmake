# Run by the PackageConsumer test (cmake -P): installs a Sinter build into WORK_DIR/prefix, then
# configures, builds and runs the consumer project beside this file against that prefix only.
foreach(var SINTER_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "RunConsumer.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "PackageConsumer: ${what} failed (${rc}): ${ARGN}")
  endif()
endfunction()

# CONFIG is empty for a single-config build without CMAKE_BUILD_TYPE.
set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

run_step("install" ${CMAKE_COMMAND} --install "${SINTER_BUILD_DIR}" --prefix "${prefix}" ${config_args})

set(configure_args -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
# A shared libsinter has its private dependencies linked in: its consumer must configure with none
# of their packages to be found.
if(LIBRARY_TYPE STREQUAL "SHARED_LIBRARY")
  foreach(pkg CUDAToolkit MPI Protobuf ONNX ZLIB)
    list(APPEND configure_args "-DCMAKE_DISABLE_FIND_PACKAGE_${pkg}=ON")
  endforeach()
  list(APPEND configure_args --no-warn-unused-cli)
endif()
run_step("configure" ${CMAKE_COMMAND} ${configure_args})

# The consumer must have found the Sinter just installed, not one elsewhere on the system.
file(STRINGS "${build}/CMakeCache.txt" sinter_dir REGEX "^Sinter_DIR:")
string(REGEX REPLACE "^Sinter_DIR:[A-Z]+=" "" sinter_dir "${sinter_dir}")
file(REAL_PATH "${prefix}" real_prefix)
file(REAL_PATH "${sinter_dir}" real_sinter_dir)
string(FIND "${real_sinter_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "PackageConsumer: found Sinter in ${sinter_dir}, not under ${prefix}")
endif()

run_step("build" ${CMAKE_COMMAND} --build "${build}" ${config_args})

if(CONFIG AND EXISTS "${build}/${CONFIG}/sinter_consumer")
  set(program "${build}/${CONFIG}/sinter_consumer")
else()
  set(program "${build}/sinter_consumer")
endif()
run_step("run" "${program}")
message(STATUS "PackageConsumer: built and ran against ${prefix}")
