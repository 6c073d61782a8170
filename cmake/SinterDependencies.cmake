# Finders for the libraries that ship without a CMake package: OpenBLAS, NCCL and cuDNN. Each makes an
# imported target. Installed next to SinterConfig.cmake, which calls them again so that a static
# libsinter's private link dependencies (exported as $<LINK_ONLY:Sinter::...>) resolve for consumers.
include_guard(GLOBAL)

# Debian ships OpenBLAS in pthread/openmp/serial variants behind alternatives symlinks; pkg-config's
# dirs come first so that cblas.h and the library are taken from the same variant.
function(sinter_find_openblas out_found)
  if(TARGET Sinter::OpenBLAS)
    set(${out_found} TRUE PARENT_SCOPE)
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(SINTER_PC_OPENBLAS QUIET openblas)
  endif()
  find_package(OpenBLAS CONFIG QUIET)
  find_path(SINTER_OPENBLAS_INCLUDE_DIR cblas.h
    HINTS ${SINTER_PC_OPENBLAS_INCLUDE_DIRS} ${OpenBLAS_INCLUDE_DIRS}
    PATH_SUFFIXES openblas openblas-pthread openblas-openmp openblas-serial
    DOC "Directory holding OpenBLAS's cblas.h")
  find_library(SINTER_OPENBLAS_LIBRARY NAMES openblas
    HINTS ${SINTER_PC_OPENBLAS_LIBRARY_DIRS} ${SINTER_PC_OPENBLAS_LIBDIR}
    DOC "The OpenBLAS library")
  if(NOT SINTER_OPENBLAS_INCLUDE_DIR OR NOT SINTER_OPENBLAS_LIBRARY)
    set(${out_found} FALSE PARENT_SCOPE)
    return()
  endif()
  add_library(Sinter::OpenBLAS UNKNOWN IMPORTED)
  set_target_properties(Sinter::OpenBLAS PROPERTIES
    IMPORTED_LOCATION "${SINTER_OPENBLAS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${SINTER_OPENBLAS_INCLUDE_DIR}")
  set(${out_found} TRUE PARENT_SCOPE)
endfunction()

# A header and a library from the CUDA toolkit's folders (NCCL and cuDNN are installed into them here),
# made into the imported target `target`.
function(_sinter_find_cuda_side_library target header library out_found)
  if(TARGET ${target})
    set(${out_found} TRUE PARENT_SCOPE)
    return()
  endif()
  string(MAKE_C_IDENTIFIER "SINTER_${library}" prefix)
  string(TOUPPER "${prefix}" prefix)
  find_path(${prefix}_INCLUDE_DIR ${header}
    HINTS ${CUDAToolkit_INCLUDE_DIRS} PATHS /usr/local/cuda/include)
  find_library(${prefix}_LIBRARY ${library}
    HINTS ${CUDAToolkit_LIBRARY_DIR} PATHS /usr/local/cuda/lib64)
  if(NOT ${prefix}_INCLUDE_DIR OR NOT ${prefix}_LIBRARY)
    set(${out_found} FALSE PARENT_SCOPE)
    return()
  endif()
  add_library(${target} UNKNOWN IMPORTED)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION "${${prefix}_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${${prefix}_INCLUDE_DIR}")
  set(${out_found} TRUE PARENT_SCOPE)
endfunction()

function(sinter_find_nccl out_found)
  _sinter_find_cuda_side_library(Sinter::NCCL nccl.h nccl found)
  set(${out_found} ${found} PARENT_SCOPE)
endfunction()

function(sinter_find_cudnn out_found)
  _sinter_find_cuda_side_library(Sinter::cuDNN cudnn.h cudnn found)
  set(${out_found} ${found} PARENT_SCOPE)
endfunction()
