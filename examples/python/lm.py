"""Trains a byte-level language model from Python on Debian's fortunes (or any text): by default a
GPT written here in Python (class GPT(sinter.nn.Module), from Sinter's layers and functional
ops), or the C++ library's GPT or Llama (--model gpt|llama). It reports the validation loss
against the bigram baseline of the same text, then samples from the model.

    python3 examples/python/lm.py --steps 2000                  # the Python GPT
    python3 examples/python/lm.py --model llama --kv-heads 2    # the C++ Llama
    python3 examples/python/lm.py --steps 600 --max-val-loss bigram   # exit status 3 above it
"""

import argparse
import math
import sys
import time

import sinter
import sinter.nn as nn
import sinter.nn.functional as F
from sinter.utils.data import DataLoader


class Block(nn.Module):
    """A pre-LayerNorm transformer block (GPT-2's): causal self-attention, then a 4x MLP."""

    def __init__(self, width, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    """Token and position embeddings, `layers` blocks, a final LayerNorm and an untied head."""

    def __init__(self, vocab, context, layers, heads, width, dropout=0.0):
        super().__init__()
        self.context_length = context
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        # GPT-2's initialization: weights normal(0, 0.02), the residual projections scaled down.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight",
                                                                    "out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(sinter.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    @sinter.no_grad()
    def generate(self, prompt, max_new_tokens, temperature=1.0, top_k=0):
        """prompt (B, T0) followed by sampled tokens, the whole window fed at each step."""
        idx = prompt
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.context_length:])[:, -1, :] / temperature
            if top_k:
                kth = logits.topk(top_k).values[:, -1:]
                logits = logits.masked_fill(logits < kth, -math.inf)
            idx = sinter.cat([idx, F.softmax(logits, -1).multinomial(1)], dim=1)
        return idx


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=["python", "gpt", "llama"], default="python")
    p.add_argument("--data", nargs="*", help="text files or folders (default: the fortunes)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, help="llama: key/value heads (default: --heads)")
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--eval-interval", type=int, default=250)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--sample", type=int, default=200, help="bytes to sample at the end")
    p.add_argument("--save", help="write the trained weights to this safetensors file")
    p.add_argument("--max-val-loss", help="a number, or 'bigram': exit status 3 above it")
    return p.parse_args(argv)


def make_model(args, device):
    if args.model == "python":
        model = GPT(256, args.context, args.layers, args.heads, args.width, args.dropout)
    elif args.model == "gpt":
        model = sinter.models.GPT(context_length=args.context, n_layer=args.layers,
                                  n_head=args.heads, n_embd=args.width, dropout=args.dropout,
                                  tie_weights=False)
    else:
        model = sinter.models.Llama(context_length=args.context, n_layer=args.layers,
                                    n_head=args.heads, n_kv_head=args.kv_heads,
                                    n_embd=args.width)
    return model.to(device)


def evaluate(model, corpus, batch_size):
    model.eval()
    total, count = 0.0, 0
    with sinter.no_grad():
        for x, y in DataLoader(corpus.val, batch_size=batch_size, device=model_device(model)):
            logits = model(x)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
            count += 1
    model.train()
    return total / max(count, 1)


def model_device(model):
    return next(iter(model.parameters())).device


def main(argv=None):
    args = parse_args(argv)
    sinter.manual_seed(args.seed)
    device = args.device
    if device == "auto":
        device = "cuda" if sinter.cuda.is_available() else "cpu"
    corpus = sinter.datasets.TextCorpus(args.data or None, context=args.context, seed=args.seed,
                                        train_windows=args.steps * args.batch_size,
                                        val_windows=args.eval_batches * args.batch_size)
    baselines = corpus.byte_baselines()
    model = make_model(args, device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"data: {corpus.num_bytes} bytes ({len(corpus.files)} files); model: {args.model}, "
          f"{n_params} parameters on {device}; baselines: unigram {baselines['unigram']:.3f}, "
          f"bigram {baselines['bigram']:.3f} nats/byte", flush=True)

    # Weight decay on the matrices only, as GPT-2's training.
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": args.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = sinter.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95))
    warmup, steps = args.warmup, args.steps

    def schedule(t):  # linear warmup, then cosine to a tenth of the peak
        if t < warmup:
            return (t + 1) / warmup
        done = min(1.0, (t - warmup) / max(1, steps - warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done))

    sched = sinter.optim.lr_scheduler.LambdaLR(opt, schedule)
    start, val = time.time(), float("nan")
    loader = DataLoader(corpus.train, batch_size=args.batch_size, device=device)
    for step, (x, y) in enumerate(loader, 1):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        sinter.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if step % args.eval_interval == 0 or step == steps:
            val = evaluate(model, corpus, args.batch_size)
            rate = step * args.batch_size * args.context / (time.time() - start)
            print(f"step {step}/{steps}: train {loss.item():.3f}, val {val:.3f} nats/byte "
                  f"({rate:.0f} tokens/s)", flush=True)

    if args.save:
        sinter.safetensors.save_file(model.state_dict(), args.save)
    if args.sample:
        prompt = sinter.tensor([list(b"%\n")], device=device)
        out = model.generate(prompt, args.sample, temperature=0.8, top_k=40)
        text = bytes(out[0, 2:].tolist()).decode("utf-8", errors="replace")
        print("sample:\n" + text, flush=True)
    if args.max_val_loss is not None:
        limit = baselines["bigram"] if args.max_val_loss == "bigram" else float(args.max_val_loss)
        if not val < limit:
            print(f"validation loss {val:.3f} is not below {limit:.3f}", file=sys.stderr)
            return 3
        print(f"validation loss {val:.3f} < {limit:.3f} ({args.max_val_loss})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
