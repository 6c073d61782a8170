# Included by the *BadInput.cmake scripts: expect(want message args...) runs ${EXE} with the args and
# requires exit status `want` ("nonzero": any status but 0; never a signal) and stderr containing
# `message`. The run's stdout is left in `stdout`.
function(expect want message)
  execute_process(COMMAND "${EXE}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  get_filename_component(program "${EXE}" NAME)
  if(NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "${program} ${ARGN} died: ${rc}\n${out}\n${err}")
  endif()
  if((want STREQUAL "nonzero" AND rc EQUAL 0) OR (NOT want STREQUAL "nonzero" AND
                                                   NOT rc EQUAL want))
    message(FATAL_ERROR "${program} ${ARGN}: status ${rc}, expected ${want}\n${out}\n${err}")
  endif()
  string(FIND "${err}" "${message}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${program} ${ARGN}: stderr lacks '${message}':\n${err}")
  endif()
  set(stdout "${out}" PARENT_SCOPE)
endfunction()
