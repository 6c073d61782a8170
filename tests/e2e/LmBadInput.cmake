# lm on good and bad input: a tiny model trained for a few steps on a corpus written here (so it
# needs no installed text), sampled from, its text written as token shards and trained from them;
# then each bad case must exit with the status of Note [exit statuses] (2 for what the command
# line asked, never a signal) and a message naming the problem. Args: -D EXE=<lm> -D WORK=<folder>.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
string(REPEAT "The quick brown fox jumps over the lazy dog; pack my box with five dozen jugs.\n"
       800 text)
file(WRITE "${WORK}/corpus.txt" "${text}")
file(WRITE "${WORK}/garbage.safetensors" "not a checkpoint\n")
set(tiny --device cpu --layers 1 --heads 2 --width 16 --context 16 --batch-size 4 --steps 4
    --warmup 1 --eval-interval 2 --eval-batches 1)
set(llama --model llama --kv-heads 1)
set(good "${WORK}/good.safetensors")
set(bpe "${WORK}/bpe.safetensors")

include(${CMAKE_CURRENT_LIST_DIR}/ExpectExit.cmake)

# What works: bytes and BPE, the GPT and the Llama, shards written and read, sampling.
expect(0 "" ${tiny} --data "${WORK}/corpus.txt" --save "${good}" --out "${WORK}/out")
expect(0 "" --generate 20 --prompt "The quick" --checkpoint "${good}")
if(NOT stdout MATCHES "^The quick")
  message(FATAL_ERROR "the sample does not continue its prompt:\n${stdout}")
endif()
# A checkpoint of an --fp8 run (its layers' FP8 state in it) samples too.
expect(0 "" ${tiny} --fp8 delayed --data "${WORK}/corpus.txt" --save "${WORK}/fp8.safetensors"
       --out "${WORK}/out_fp8")
if(NOT stdout MATCHES "FP8 [^\n]* in 2 Linear layers")
  message(FATAL_ERROR "the --fp8 run did not take the 2 inner Linear layers:\n${stdout}")
endif()
expect(0 "" --generate 20 --prompt "The quick" --checkpoint "${WORK}/fp8.safetensors")
expect(0 "" ${tiny} ${llama} --tokenizer bpe --vocab 300 --data "${WORK}/corpus.txt"
       --save "${bpe}" --out "${WORK}/out")
expect(0 "KV cache" --generate 20 --prompt "The lazy" --checkpoint "${bpe}")
if(NOT stdout MATCHES "^The lazy")
  message(FATAL_ERROR "the Llama's sample does not continue its prompt:\n${stdout}")
endif()
expect(0 "" --tokenizer bpe --vocab 300 --data "${WORK}/corpus.txt" --write-shards "${WORK}/shards")
foreach(f train_000000.bin val_000000.bin tokenizer.json)
  if(NOT EXISTS "${WORK}/shards/${f}")
    message(FATAL_ERROR "--write-shards did not write ${f}")
  endif()
endforeach()
expect(0 "" ${tiny} ${llama} --data "${WORK}/shards" --out "${WORK}/out_shards")
if(NOT stdout MATCHES "vocabulary of 300")
  message(FATAL_ERROR "training from the shards did not take their tokenizer:\n${stdout}")
endif()

# A short run without --warmup: the default warm-up shrinks to a tenth of its steps.
expect(0 "" --device cpu --layers 1 --heads 2 --width 16 --context 16 --batch-size 4 --steps 20
       --eval-interval 10 --eval-batches 1 --data "${WORK}/corpus.txt" --out "${WORK}/out20")
if(NOT stdout MATCHES "warm-up 2," OR NOT stdout MATCHES "step 20:")
  message(FATAL_ERROR "lm --steps 20 did not warm up for 2 steps and run 20:\n${stdout}")
endif()
# --help: each option with its default (the settings' defaults in their help, per device).
expect(0 "" --help)
if(NOT stdout MATCHES "--log-every INT=10" OR NOT stdout MATCHES "--out TEXT=lm_out"
   OR NOT stdout MATCHES "--steps[^\n]*default: 1500 on the CPU, 5000 on a GPU")
  message(FATAL_ERROR "lm --help does not show the defaults:\n${stdout}")
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
expect(2 "--kv-heads 3 does not divide --heads 4" ${tiny} --model llama --heads 4 --kv-heads 3
       --data "${WORK}/corpus.txt")
expect(2 "--vocab 200 is too small" ${tiny} --tokenizer bpe --vocab 200
       --data "${WORK}/corpus.txt")
expect(2 "--model must be gpt or llama" ${tiny} --model bert --data "${WORK}/corpus.txt")
expect(2 "--batch-tokens 100 is not a multiple" ${tiny} --batch-tokens 100
       --data "${WORK}/corpus.txt")
expect(2 "more than the model's context of 16" --generate 5 --checkpoint "${good}"
       --prompt "a prompt of more than sixteen bytes")
expect(2 "--warmup 9 must be in [0, --steps 4)" ${tiny} --warmup 9 --data "${WORK}/corpus.txt")
expect(2 "--stop-at 9" ${tiny} --stop-at 9 --data "${WORK}/corpus.txt")
expect(2 "already at step 4" --resume "${good}" --stop-at 2 --out "${WORK}/out")
expect(nonzero "--temperature" --generate 5 --checkpoint "${good}" --temperature 0)
# Shards and their tokenizer: another version, a truncated file, a tokenizer.json that does not
# parse, tokens past the vocabulary.
file(COPY "${WORK}/shards/" DESTINATION "${WORK}/v2")
file(COPY "${WORK}/shards/" DESTINATION "${WORK}/cut")
# A header of magic 20240520 (0x0134d888, little-endian) and version 2, no tokens; and the
# validation shard cut short.
execute_process(COMMAND sh -c "{ printf '\\210\\330\\064\\001\\002\\000\\000\\000'; head -c 1016 /dev/zero; } > '${WORK}/v2/val_000000.bin' && head -c 2000 '${WORK}/shards/val_000000.bin' > '${WORK}/cut/val_000000.bin'"
                RESULT_VARIABLE made)
if(NOT made EQUAL 0)
  message(FATAL_ERROR "could not write the corrupt shards")
endif()
expect(2 "val_000000.bin: version 2" ${tiny} --data "${WORK}/v2" --out "${WORK}/out")
expect(2 "(truncated)" ${tiny} --data "${WORK}/cut" --out "${WORK}/out")
file(COPY "${WORK}/shards/" DESTINATION "${WORK}/badjson")
file(WRITE "${WORK}/badjson/tokenizer.json" "{\"model\": ")
expect(2 "tokenizer.json is not JSON" ${tiny} --data "${WORK}/badjson" --out "${WORK}/out")
file(COPY "${WORK}/shards/train_000000.bin" "${WORK}/shards/val_000000.bin"
     DESTINATION "${WORK}/notokenizer")
expect(2 "outside the 256 tokens of the byte tokenizer" ${tiny} --data "${WORK}/notokenizer"
       --out "${WORK}/out")
expect(2 "shards carry their tokenizer" ${tiny} --tokenizer bpe --data "${WORK}/shards"
       --out "${WORK}/out")
# A bad option or value: one line naming it, status 2, when parsing or setting up (Note [exit
# statuses] in examples/training.h).
expect(2 "--bogus" --bogus)
expect(2 "--amp" --amp f32)
expect(2 "--steps" --steps -3)
expect(2 "--batch-size" --batch-size 0)
expect(2 "--optimizer must be adamw or muon, got sgd" --optimizer sgd)
expect(2 "--fp8 must be off, current, delayed or block, got e4m3" --fp8 e4m3)
expect(2 "--width" --width wide)
file(MAKE_DIRECTORY "${WORK}/empty")
expect(2 "no text in" ${tiny} --data "${WORK}/empty" --out "${WORK}/out")
expect(2 "--out ${WORK}/corpus.txt: cannot create the folder" ${tiny} --data "${WORK}/corpus.txt"
       --out "${WORK}/corpus.txt")
expect(2 "--zero 2 needs --ddp" ${tiny} --zero 2 --data "${WORK}/corpus.txt" --out "${WORK}/out")
expect(2 "--tp 2: 1 ranks make 0 tensor-parallel groups" ${tiny} --tp 2 --data "${WORK}/corpus.txt"
       --out "${WORK}/out")
expect(2 "--tp combines with --ddp or --fsdp" ${tiny} --tp 2 --zero 1 --ddp
       --data "${WORK}/corpus.txt" --out "${WORK}/out")
expect(2 "--fsdp and --ddp exclude each other" ${tiny} --fsdp --ddp --data "${WORK}/corpus.txt"
       --out "${WORK}/out")
expect(2 "cannot create the log folder" ${tiny} --data "${WORK}/corpus.txt" --out "${WORK}/out"
       --tensorboard "${WORK}/corpus.txt/tb")
expect(2 "--log-every" --log-every -1)
expect(2 "--export-gguf writes a Llama" ${tiny} --data "${WORK}/corpus.txt" --out "${WORK}/out"
       --export-gguf "${WORK}/m.gguf")
expect(2 "--export-gguf: the folder" ${tiny} --model llama --data "${WORK}/corpus.txt"
       --out "${WORK}/out" --export-gguf "${WORK}/missing-folder/m.gguf")
expect(2 "--export-hf: the folder" ${tiny} --data "${WORK}/corpus.txt" --out "${WORK}/out"
       --export-hf "${WORK}/missing-folder/hf/")
expect(2 "--export-hf: ${WORK}/corpus.txt is a file" ${tiny} --data "${WORK}/corpus.txt"
       --out "${WORK}/out" --export-hf "${WORK}/corpus.txt")
expect(2 "--init-from: from_pretrained: ${WORK}/corpus.txt is not a folder" ${tiny}
       --data "${WORK}/corpus.txt" --out "${WORK}/out" --init-from "${WORK}/corpus.txt")
expect(2 "--gguf-type" --gguf-type q4_0)
expect(2 "--log-every: must be at least 1, got 0" --log-every 0 --tensorboard "${WORK}/tb")
expect(2 "--log-every requires --tensorboard" --log-every 5)
file(APPEND "${WORK}/corpus.txt" "one more line\n")
expect(2 "are not those the checkpoint was trained on" --resume "${good}" --out "${WORK}/out")
message(STATUS "every bad input was refused with its message")
