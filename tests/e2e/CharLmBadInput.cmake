# char_lm on bad input: each case must exit with the status of Note [exit statuses] (2 for what the
# command line asked, never a signal) and a message naming the problem. Trains a tiny model for a few steps on a corpus written here, so it needs no
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

include(${CMAKE_CURRENT_LIST_DIR}/ExpectExit.cmake)

expect(0 "" ${tiny} --data "${WORK}/corpus.txt" --save "${good}" --out "${WORK}/out")
expect(0 "" --generate 20 --prompt "The quick" --checkpoint "${good}")
if(NOT stdout MATCHES "^The quick")
  message(FATAL_ERROR "the sample does not continue its prompt:\n${stdout}")
endif()
expect(3 "above --max-val-loss" ${tiny} --data "${WORK}/corpus.txt" --max-val-loss 0.01
       --out "${WORK}/out")
expect(2 "does not exist" ${tiny} --data "${WORK}/missing" --out "${WORK}/out")
expect(2 "garbage.safetensors" ${tiny} --resume "${WORK}/garbage.safetensors" --out "${WORK}/out")
expect(2 "garbage.safetensors" --generate 5 --checkpoint "${WORK}/garbage.safetensors")
expect(2 "missing.safetensors" --generate 5 --checkpoint "${WORK}/missing.safetensors")
expect(2 "--lr (checkpoint: 0.003)" --resume "${good}" --lr 0.5 --out "${WORK}/out")
expect(2 "--data differs" --resume "${good}" --data "${WORK}" --out "${WORK}/out")
expect(2 "not a multiple of --heads" ${tiny} --width 30 --heads 4 --data "${WORK}/corpus.txt")
expect(2 "--warmup 9 must be in [0, --steps 4)" ${tiny} --warmup 9 --data "${WORK}/corpus.txt")
expect(2 "--stop-at 9" ${tiny} --stop-at 9 --data "${WORK}/corpus.txt")
expect(2 "already at step 4" --resume "${good}" --stop-at 2 --out "${WORK}/out")
expect(nonzero "--temperature" --generate 5 --checkpoint "${good}" --temperature 0)
# A bad option or value: one line naming it, status 2, when parsing or setting up (Note [exit
# statuses] in examples/training.h).
expect(2 "--bogus" --bogus)
expect(2 "--amp" --amp f32)
expect(2 "--steps" --steps -3)
expect(2 "--batch-size" --batch-size 0)
expect(2 "--width" --width wide)
file(MAKE_DIRECTORY "${WORK}/empty")
expect(2 "no text in" ${tiny} --data "${WORK}/empty" --out "${WORK}/out")
expect(2 "--out ${WORK}/corpus.txt: cannot create the folder" ${tiny} --data "${WORK}/corpus.txt"
       --out "${WORK}/corpus.txt")
file(APPEND "${WORK}/corpus.txt" "one more line\n")
expect(2 "is not the one the checkpoint was trained on" --resume "${good}" --out "${WORK}/out")
message(STATUS "every bad input was refused with its message")
