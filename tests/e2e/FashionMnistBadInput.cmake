# fashion_mnist on bad input: every case exits with status 2 (Note [exit statuses] in
# examples/training.h) and one line naming the problem, before any training. Args: -D EXE=<fashion_mnist>
# -D WORK=<folder>.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/empty")
file(WRITE "${WORK}/garbage.safetensors" "not a checkpoint\n")
file(WRITE "${WORK}/a-file" "not a folder\n")
include(${CMAKE_CURRENT_LIST_DIR}/ExpectExit.cmake)

expect(2 "--epochs" --epochs -3)
expect(2 "--epochs" --epochs 0)
expect(2 "--batch-size" --batch-size many)
expect(2 "--model" --model foo)
expect(2 "--device" --device tpu)
expect(2 "--bogus" --bogus)
expect(2 "missing" --device cpu --data "${WORK}/missing")
expect(2 "empty" --device cpu --data "${WORK}/empty")
expect(2 "a-file" --device cpu --data "${WORK}/a-file")
expect(2 "garbage.safetensors" --device cpu --limit-train 100 --resume "${WORK}/garbage.safetensors")
expect(2 "--lr" --device cpu --limit-train 100 --lr -1)
expect(2 "--limit-train" --device cpu --limit-train -5)
expect(2 "--min-accuracy" --min-accuracy 80)
# --quantize int8: no calibration batches, an unknown calibrator, an --export-onnx path that cannot
# be written (checked before training, so nothing is written).
expect(2 "--calibration-batches" --quantize int8 --calibration-batches 0)
expect(2 "--calibrator" --quantize int8 --calibrator kl)
expect(2 "--quantize" --quantize int4)
expect(2 "missing-folder" --device cpu --limit-train 100 --quantize int8
       --export-onnx "${WORK}/missing-folder/model.onnx")
expect(2 "is a folder" --device cpu --limit-train 100 --export-onnx "${WORK}/empty")
# --tensorboard where a file is in the way; --log-every 0, or without --tensorboard; values out of
# range, each error stating its bound plainly.
expect(2 "a-file" --device cpu --limit-train 100 --tensorboard "${WORK}/a-file/tb")
expect(2 "--log-every: must be at least 1, got 0" --log-every 0 --tensorboard "${WORK}/tb")
expect(2 "--log-every requires --tensorboard" --log-every 5)
expect(2 "--lr: must be a positive number, got -1" --lr -1)
expect(2 "--limit-test: must be at least 0, got -2" --limit-test -2)
# --help: each option with its default.
expect(0 "" --help)
if(NOT stdout MATCHES "--log-every INT=10" OR NOT stdout MATCHES "--model TEXT:[^\n]*=cnn")
  message(FATAL_ERROR "fashion_mnist --help does not show the defaults:\n${stdout}")
endif()
expect(2 "--profile-schedule" --device cpu --limit-train 100 --profile "${WORK}/trace.json"
       --profile-schedule 1,x,3)
# A GPU asked for where none is: one line, status 2 (on a machine with one, a short run passes).
execute_process(COMMAND "${EXE}" --device cuda --epochs 1 --limit-train 200
                --out "${WORK}/cuda" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT (rc EQUAL 0 OR (rc EQUAL 2 AND err MATCHES "CUDA")))
  message(FATAL_ERROR "fashion_mnist --device cuda: status ${rc}\n${err}")
endif()
message(STATUS "every bad input was refused with status 2 and its message")
