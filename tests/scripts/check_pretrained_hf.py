"""Hugging Face folders both ways, as a new user meets them.

Out: the folders Sinter's save_pretrained writes (tests/tools/pretrained_dump.cpp) load with
AutoModelForCausalLM.from_pretrained(dir) and AutoTokenizer.from_pretrained(dir) alone, and give
Sinter's token ids, logits (1e-5 relative in f32) and greedy tokens: a Llama with grouped-query
attention (untied and tied), a GPT as GPT2LMHeadModel (tied with biases, untied without), bf16 and
sharded files.
In: folders that transformers' save_pretrained wrote (LlamaForCausalLM with GQA, tied and untied;
GPT2LMHeadModel; f32, bf16, f16, sharded), with a tokenizer, read by from_pretrained and giving
transformers' logits; a config Sinter's model does not compute is refused, naming the field.

  check_pretrained_hf.py PRETRAINED_DUMP WORK_DIR
Skips (77) without torch and transformers.
"""

import json
import os
import shutil
import subprocess
import sys

from hf_checks import check, finish, fresh_folder, load_file, np, torch, transformers

DUMP, WORK = sys.argv[1], sys.argv[2]
fresh_folder(WORK)


def dump(*args):
    r = subprocess.run([DUMP, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"pretrained_dump {' '.join(args)} failed:\n{r.stderr}")


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def hf_run(model, ids, n=8):
    with torch.no_grad():
        x = torch.tensor(ids, dtype=torch.long)[None]
        logits = model(x).logits[0].float().numpy()
        out = model.generate(x, max_new_tokens=n, do_sample=False, min_new_tokens=n,
                             pad_token_id=model.config.eos_token_id)
    return logits, out[0, len(ids):].numpy()


# --- out: Sinter's folders in transformers ---
for kind, dtype, shard, tol in [("llama", "f32", None, 1e-5), ("llama-tied", "f32", None, 1e-5),
                                ("gpt", "f32", None, 1e-5), ("gpt-untied", "f32", None, 1e-5),
                                ("llama", "bf16", "40000", 1e-2), ("gpt", "f16", "60000", 1e-2)]:
    tag = f"{kind} {dtype}" + (f" in shards of {shard} bytes" if shard else "")
    folder = os.path.join(WORK, f"out-{kind}-{dtype}")
    ref_path = folder + ".safetensors"
    dump("save", kind, folder, ref_path, dtype, *([shard] if shard else []))
    ref = load_file(ref_path)
    if shard:
        index = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
        files = set(index["weight_map"].values())
        check(len(files) > 1 and not os.path.exists(os.path.join(folder, "model.safetensors")),
              f"{tag}: written in {len(files)} shards with an index")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)  # no other argument
    model.eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    cls = "LlamaForCausalLM" if kind.startswith("llama") else "GPT2LMHeadModel"
    check(type(model).__name__ == cls, f"{tag}: AutoModelForCausalLM gives {type(model).__name__}")
    text = "<|endoftext|>The quick brown fox, or not to be"
    ids = tok(text)["input_ids"]
    check(ids == ref["ids"].tolist(), f"{tag}: AutoTokenizer gives Sinter's ids")
    check(tok.decode(ids) == text, f"{tag}: AutoTokenizer decodes the text back")
    want_dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    got_dtype = getattr(model.config, "dtype", None) or model.config.torch_dtype
    if isinstance(got_dtype, str):  # transformers before 4.56 keeps "dtype" as written
        got_dtype = getattr(torch, got_dtype)
    check(got_dtype == want_dtype, f"{tag}: config.json's dtype is {want_dtype}")
    model = model.float()
    logits, greedy = hf_run(model, ref["ids"].tolist())
    err = rel_err(logits, ref["logits"])
    check(err <= tol, f"{tag}: transformers' logits within {tol} of Sinter's ({err:.2e})")
    if dtype == "f32":
        check(greedy.tolist() == ref["greedy"].tolist(),
              f"{tag}: the same greedy tokens {greedy.tolist()}")

# --- in: transformers' folders in Sinter ---
# The tokenizer of the folders: Sinter's (a byte-level BPE), saved by transformers.
sinter_tok = transformers.PreTrainedTokenizerFast(
    tokenizer_file=os.path.join(WORK, "out-llama-f32", "tokenizer.json"),
    eos_token="<|endoftext|>", bos_token="<|endoftext|>")
ids_path = os.path.join(WORK, "out-llama-f32.safetensors")
ids = load_file(ids_path)["ids"].tolist()


def hf_folder(name, model, dtype, shard=None):
    folder = os.path.join(WORK, "in-" + name)
    model.to(dtype).save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    sinter_tok.save_pretrained(folder)
    # The reference reads the folder back in f32, as Sinter does: a model cast down and up again
    # would keep its rope frequencies rounded to the narrow dtype.
    return folder, transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)


llama_config = dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                    rms_norm_eps=1e-5, rope_theta=500.0, bos_token_id=287, eos_token_id=287)
cases = []
for tied in (False, True):
    m = transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama_config,
                                                               tie_word_embeddings=tied))
    cases.append((f"llama-{'tied' if tied else 'untied'}", m, torch.float32, None))
m = transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama_config))
cases.append(("llama-bf16-sharded", m, torch.bfloat16, "50KB"))
m = transformers.GPT2LMHeadModel(transformers.GPT2Config(
    vocab_size=300, n_positions=64, n_embd=64, n_layer=2, n_head=4, bos_token_id=287,
    eos_token_id=287))
cases.append(("gpt2", m, torch.float32, None))
m = transformers.GPT2LMHeadModel(transformers.GPT2Config(
    vocab_size=300, n_positions=64, n_embd=64, n_layer=2, n_head=4))
cases.append(("gpt2-f16", m, torch.float16, None))
for name, m, dtype, shard in cases:
    with torch.no_grad():  # off the initial biases and gains, as a trained model is
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    folder, m32 = hf_folder(name, m, dtype, shard)
    m32.eval()
    out_path = os.path.join(WORK, f"in-{name}.safetensors")
    dump("load", folder, ids_path, out_path)
    got = load_file(out_path)
    logits, greedy = hf_run(m32, ids)
    err = rel_err(got["logits"], logits)
    check(err <= 1e-5, f"{name}: Sinter's logits within 1e-5 of transformers' ({err:.2e})")
    check(got["greedy"].tolist() == greedy.tolist(), f"{name}: the same greedy tokens")
    check("tokenizer_ids" in got and got["tokenizer_ids"].tolist() == ids,
          f"{name}: the folder's tokenizer read with it")


# --- configs Sinter's model does not compute are refused, naming the field ---
def refused(name, edit, fragment):
    src = os.path.join(WORK, "in-llama-untied" if "llama" in name else "in-gpt2")
    folder = os.path.join(WORK, "bad-" + name)
    shutil.copytree(src, folder)
    cfg = json.load(open(os.path.join(folder, "config.json")))
    edit(cfg)
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"))
    r = subprocess.run([DUMP, "load", folder, ids_path, os.path.join(WORK, "bad.safetensors")],
                       capture_output=True, text=True)
    check(r.returncode == 1 and fragment in r.stderr,
          f"{name}: refused naming {fragment!r} ({r.stderr.strip()[:160]})")


refused("llama-rope-scaling",
        lambda c: c.update(rope_parameters={"rope_type": "linear", "factor": 2.0,
                                            "rope_theta": 500.0}),
        '"rope_parameters" has rope_type "linear"')
refused("llama-attention-bias", lambda c: c.update(attention_bias=True), '"attention_bias"')
refused("llama-act", lambda c: c.update(hidden_act="gelu"), '"hidden_act" is "gelu"')
refused("gpt2-eps", lambda c: c.update(layer_norm_epsilon=1e-6), '"layer_norm_epsilon"')
refused("gpt2-act", lambda c: c.update(activation_function="relu"), '"activation_function"')
refused("llama-vocab", lambda c: c.update(vocab_size=301), "has shape [300, 64]; the config makes it [301, 64]")

finish()
