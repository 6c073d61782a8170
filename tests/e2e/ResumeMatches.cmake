# Resume must reproduce an uninterrupted run: trains 2 epochs straight, then 1 epoch + resume for
# the second, and requires the two final checkpoints (weights, optimizer state, RNG) to be
# byte-identical. Args: -D EXE=<fashion_mnist> -D WORK=<folder>.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(common --model mlp --device cpu --limit-train 3000 --batch-size 100 --seed 7)

function(run_step)
  execute_process(COMMAND "${EXE}" ${common} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fashion_mnist ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

run_step(--epochs 2 --save "${WORK}/straight.safetensors" --out "${WORK}/straight")
run_step(--epochs 1 --save "${WORK}/resumed.safetensors" --out "${WORK}/resumed")
run_step(--epochs 2 --resume "${WORK}/resumed.safetensors" --save "${WORK}/resumed.safetensors"
         --out "${WORK}/resumed")
execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK}/straight.safetensors"
                "${WORK}/resumed.safetensors" RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "resumed run differs from the uninterrupted run")
endif()
message(STATUS "resume reproduces the uninterrupted run byte for byte")
