#!/usr/bin/env python3
"""lm's Hugging Face folders, the commands of the README's "next stops".

1. `lm --model llama --tokenizer bpe --export-hf A` and the same with --model gpt write folders that
   AutoModelForCausalLM.from_pretrained(A) and AutoTokenizer.from_pretrained(A) load with no other
   argument; the tokenizer's ids are lm's BPE and greedy generation runs. A Llama trained with
   --fp8 writes its weights alone (no FP8 state), which load with no key missing or left over.
2. `lm --init-from A --lr 1e-12 --export-hf B` starts from A's weights: B's tensors are A's (the
   steps at that rate move nothing visible at 1e-6).
3. A folder that transformers wrote (a LlamaForCausalLM of lm's shape with A's tokenizer) is
   fine-tuned by `lm --init-from`; one whose MLP width lm's settings cannot say is refused, naming
   intermediate_size, with status 2.

  check_lm_hf.py LM_EXE CORPUS WORK_DIR
Skips (77) without torch and transformers.
"""
import os
import subprocess
import sys

from hf_checks import check, finish, fresh_folder, load_file, np, torch, transformers

exe, corpus, work = sys.argv[1:4]
fresh_folder(work)


def lm(*args, status=0):
    r = subprocess.run([exe, "--device", "cpu", "--data", corpus, "--batch-size", "4",
                        "--steps", "4", "--warmup", "1", "--eval-interval", "2",
                        "--eval-batches", "1", *args], capture_output=True, text=True)
    if r.returncode != status:
        raise SystemExit(f"lm {' '.join(args)}: status {r.returncode}, expected {status}\n"
                         f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


tiny = ["--tokenizer", "bpe", "--vocab", "300", "--layers", "2", "--heads", "4", "--width", "32",
        "--context", "32"]
text = "%\nThe secret of success is"
for model in ("llama", "gpt"):
    folder = os.path.join(work, model)
    extra = ["--kv-heads", "2"] if model == "llama" else []
    lm("--model", model, *tiny, *extra, "--out", os.path.join(work, model + "_out"),
       "--export-hf", folder)
    m = transformers.AutoModelForCausalLM.from_pretrained(folder)
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tok(text)["input_ids"]
    check(len(ids) < len(text) and max(ids) < 300 and tok.decode(ids) == text,
          f"{model}: AutoTokenizer encodes with lm's BPE ({len(ids)} ids for {len(text)} bytes) "
          "and decodes back")
    with torch.no_grad():
        out = m.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False,
                         min_new_tokens=8, pad_token_id=m.config.eos_token_id)
    check(out.shape == (1, len(ids) + 8), f"{model}: transformers generates from the folder")

# A Llama trained with --fp8: its layers' FP8 state stays out of the folder, which transformers
# loads with no key left over.
folder = os.path.join(work, "llama_fp8")
lm("--model", "llama", *tiny, "--kv-heads", "2", "--fp8", "delayed", "--out",
   os.path.join(work, "llama_fp8_out"), "--export-hf", folder)
m, info = transformers.AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
keys = load_file(os.path.join(folder, "model.safetensors")).keys()
check(not any("fp8" in k for k in keys) and not info["unexpected_keys"]
      and not info["missing_keys"],
      f"an --fp8 run's folder holds the weights alone and loads whole: {info}")

# --init-from: the weights arrive, and a transformers-written folder fine-tunes.
a = os.path.join(work, "llama")
b = os.path.join(work, "llama_again")
lm("--init-from", a, "--lr", "1e-12", "--min-lr", "0", "--out", os.path.join(work, "again_out"),
   "--export-hf", b)
wa, wb = load_file(os.path.join(a, "model.safetensors")), load_file(os.path.join(b, "model.safetensors"))
same = wa.keys() == wb.keys() and all(np.allclose(wa[k], wb[k], rtol=1e-6, atol=1e-7) for k in wa)
check(same, "lm --init-from starts from the folder's weights (--export-hf gives them back)")
r = lm("--init-from", a, "--layers", "3", "--out", os.path.join(work, "bad_out"), status=2)
check("--layers (the folder's: 2)" in r.stderr, f"a flag against the folder is refused: {r.stderr.strip()}")

tok = transformers.AutoTokenizer.from_pretrained(a)
for width, status in ((96, 0), (100, 2)):  # lm's MLP width for 32 is 96
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=width,
                                   num_hidden_layers=1, num_attention_heads=4,
                                   num_key_value_heads=1, max_position_embeddings=32,
                                   rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)
    folder = os.path.join(work, f"transformers_{width}")
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    r = lm("--init-from", folder, "--out", os.path.join(work, f"ft_{width}_out"), status=status)
    if status == 0:
        check("final validation loss" in r.stdout, "lm fine-tunes a folder transformers wrote")
    else:
        check("intermediate_size 100" in r.stderr,
              f"an MLP width lm cannot say is refused: {r.stderr.strip()}")

finish()
