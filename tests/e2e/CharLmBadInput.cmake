# char_lm on bad input: each case must exit with a non-zero status (not a signal) and a message
# naming the problem. Trains a tiny model for a few steps on a corpus written here, so it needs no
# installed text. Args: -D EXE=<char_lm> -D WORK=<folder>.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
string(REPEAT "The quick brown fox jumps over the lazy dog; pack my box with five dozen jugs.\n"
       800 text)
file(WRITE "${WORK}/corpus.txt" "${text}")
file(WRITE "${WORK}/garbage.safetensors" "not a checkpoint\n")
set(tiny --device cpu --layers 1 --heads 2 --width 16 --context 16 --batch-size 4 --steps 4
    --warmup 1 --eval-interval 2 --eval-batches 1)
set(good "${WORK}/good.safetensors")

# Runs char_lm with ARGN and requires status `want` ("nonzero": any exit status but 0) and stderr
# containing `message`.
function(expect want message)
  execute_process(COMMAND "${EXE}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc MATCHES "^[0-9]+$")
    message(FATAL_ERROR "char_lm ${ARGN} died: ${rc}\n${out}\n${err}")
  endif()
  if((want STREQUAL "nonzero" AND rc EQUAL 0) OR (NOT want STREQUAL "nonzero" AND
                                                   NOT rc EQUAL want))
    message(FATAL_ERROR "char_lm ${ARGN}: status ${rc}, expected ${want}\n${out}\n${err}")
  endif()
  string(FIND "${err}" "${message}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "char_lm ${ARGN}: stderr lacks '${message}':\n${err}")
  endif()
  set(stdout "${out}" PARENT_SCOPE)
endfunction()

expect(0 "" ${tiny} --data "${WORK}/corpus.txt" --save "${good}" --out "${WORK}/out")
expect(0 "" --generate 20 --prompt "The quick" --checkpoint "${good}")
if(NOT stdout MATCHES "^The quick")
  message(FATAL_ERROR "the sample does not continue its prompt:\n${stdout}")
endif()
expect(3 "above --max-val-loss" ${tiny} --data "${WORK}/corpus.txt" --max-val-loss 0.01
       --out "${WORK}/out")
expect(1 "does not exist" ${tiny} --data "${WORK}/missing" --out "${WORK}/out")
expect(1 "garbage.safetensors" ${tiny} --resume "${WORK}/garbage.safetensors" --out "${WORK}/out")
expect(1 "garbage.safetensors" --generate 5 --checkpoint "${WORK}/garbage.safetensors")
expect(1 "missing.safetensors" --generate 5 --checkpoint "${WORK}/missing.safetensors")
expect(1 "--lr (checkpoint: 0.003)" --resume "${good}" --lr 0.5 --out "${WORK}/out")
expect(1 "--data differs" --resume "${good}" --data "${WORK}" --out "${WORK}/out")
expect(1 "not a multiple of --heads" ${tiny} --width 30 --heads 4 --data "${WORK}/corpus.txt")
expect(1 "--warmup 9 must be in [0, --steps 4)" ${tiny} --warmup 9 --data "${WORK}/corpus.txt")
expect(1 "--stop-at 9" ${tiny} --stop-at 9 --data "${WORK}/corpus.txt")
expect(1 "already at step 4" --resume "${good}" --stop-at 2 --out "${WORK}/out")
expect(nonzero "--temperature" --generate 5 --checkpoint "${good}" --temperature 0)
# A bad option or value: one line naming it, status 2 (examples/training.h, parse_command_line).
expect(2 "--bogus" --bogus)
expect(2 "--amp" --amp f32)
file(APPEND "${WORK}/corpus.txt" "one more line\n")
expect(1 "is not the one the checkpoint was trained on" --resume "${good}" --out "${WORK}/out")
message(STATUS "every bad input was refused with its message")
