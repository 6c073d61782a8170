# Resume must reproduce an uninterrupted run: trains straight, then in two sessions (the second
# with --resume), and requires the two final checkpoints (weights, optimizer state, RNG, ...) to be
# byte-identical. Args: -D EXE=<trainer> -D WORK=<folder>, and the space-separated arguments
# COMMON (every run), STRAIGHT (the straight run), FIRST and SECOND (the two sessions).
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
foreach(list COMMON STRAIGHT FIRST SECOND)
  separate_arguments(${list} UNIX_COMMAND "${${list}}")
endforeach()

function(run_step)
  execute_process(COMMAND "${EXE}" ${COMMON} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

run_step(${STRAIGHT} --save "${WORK}/straight.safetensors" --out "${WORK}/straight")
run_step(${FIRST} --save "${WORK}/resumed.safetensors" --out "${WORK}/resumed")
run_step(${SECOND} --resume "${WORK}/resumed.safetensors" --save "${WORK}/resumed.safetensors"
         --out "${WORK}/resumed")
execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK}/straight.safetensors"
                "${WORK}/resumed.safetensors" RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "resumed run differs from the uninterrupted run")
endif()
message(STATUS "resume reproduces the uninterrupted run byte for byte")
