# Mixed precision must train as well as full precision: runs the trainer twice with the same
# arguments, once with AMP (e.g. --amp bf16), and requires the test accuracies ("test accuracy:
# 0.XXXX" in the output) to differ by at most MAX_GAP_E4 ten-thousandths (50: 0.5 percentage
# points). Args: -D EXE=<trainer> -D WORK=<folder>, the space-separated arguments COMMON (both runs)
# and AMP (the mixed-precision run), -D MAX_GAP_E4=<n>.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
foreach(list COMMON AMP)
  separate_arguments(${list} UNIX_COMMAND "${${list}}")
endforeach()

# The accuracy in ten-thousandths (0.8527 -> 8527).
function(accuracy_of result name)
  execute_process(COMMAND "${EXE}" ${COMMON} ${ARGN} --out "${WORK}/${name}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  if(NOT out MATCHES "test accuracy: ([01])\\.([0-9][0-9][0-9][0-9])")
    message(FATAL_ERROR "no \"test accuracy: 0.XXXX\" in the output of ${EXE} ${ARGN}:\n${out}")
  endif()
  math(EXPR e4 "${CMAKE_MATCH_1} * 10000 + 1${CMAKE_MATCH_2} - 10000")
  message(STATUS "${name}: test accuracy ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  set(${result} ${e4} PARENT_SCOPE)
endfunction()

accuracy_of(full full)
accuracy_of(mixed amp ${AMP})
math(EXPR gap "${full} - ${mixed}")
if(gap LESS 0)
  math(EXPR gap "-${gap}")
endif()
if(gap GREATER MAX_GAP_E4)
  message(FATAL_ERROR "mixed precision reached ${mixed}e-4, full precision ${full}e-4: a gap of "
                      "${gap}e-4, over ${MAX_GAP_E4}e-4")
endif()
message(STATUS "mixed and full precision within ${gap}e-4 of each other (limit ${MAX_GAP_E4}e-4)")
