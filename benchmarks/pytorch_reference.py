#!/usr/bin/env python3
"""PyTorch eager training steps for the reference workloads (mlp, cnn, resnet20, gpt-mini,
llama-mini, vit-tiny), timed the way bench_train_step times Sinter's, so that benchmarks/compare.py can put
the two side by side.

One step = zero grads, forward, loss, backward, optimizer step, on one fixed random batch already on
the device. Precisions: fp32 (TF32 off), tf32 (matmul and cuDNN in TF32), bf16 (autocast to bf16
with fp32 master weights; TF32 off for what stays in fp32). After warm-up, 5 batches of 30 steps are
timed with CUDA events around each batch; the figure is the median of the 5 per-step means. The
precisions of --compile-precisions (default tf32) are measured once more with the model under
torch.compile(mode="reduce-overhead"), reported as "<precision>+compile" (bench_train_step's graphed
steps are "<precision>+graph"), after every eager figure. --out is rewritten after each workload.

  python3 benchmarks/pytorch_reference.py --out results.json   # on a CUDA machine
  python3 benchmarks/pytorch_reference.py --smoke              # one small step of each, CPU or GPU

With --device cpu the same steps run on the CPU at --threads threads (torch.set_num_threads; fp32
and bf16, timed by the wall clock, 5 batches of 5 steps by default): the counterpart of
bench_train_step --device=cpu --threads=N.

  python3 benchmarks/pytorch_reference.py --device cpu --threads 2 --out pytorch_cpu.json

Without torch, or without a CUDA device (and no --smoke or --device cpu), it says so and exits 0.
Downloads nothing.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

WORKLOADS = ("mlp", "cnn", "resnet20", "gpt-mini", "llama-mini", "vit-tiny")
PRECISIONS = ("fp32", "tf32", "bf16")

# Batch sizes of workloads.md; --smoke uses SMOKE_BATCH instead (same models, one step).
BATCH = {"mlp": 256, "cnn": 256, "resnet20": 128, "gpt-mini": 32, "llama-mini": 32,
         "vit-tiny": 128}
SMOKE_BATCH = 2

# gpt-mini: vocab 256, context 256, 6 layers, 6 heads, width 384.
GPT_VOCAB, GPT_CONTEXT, GPT_LAYERS, GPT_HEADS, GPT_WIDTH = 256, 256, 6, 6, 384


def build_models(torch):
    """The model constructors, defined here so that the module imports without torch."""
    nn = torch.nn
    F = torch.nn.functional

    def mlp():
        # x: (N, 784) -> logits (N, 10)
        return nn.Sequential(
            nn.Linear(784, 1024), nn.ReLU(),
            nn.Linear(1024, 1024), nn.ReLU(),
            nn.Linear(1024, 10))

    def cnn():
        # x: (N, 1, 28, 28) -> (N, 32, 14, 14) -> (N, 64, 7, 7) -> (N, 3136) -> logits (N, 10)
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(3136, 128), nn.ReLU(),
            nn.Linear(128, 10))

    class BasicBlock(nn.Module):
        # Two 3x3 convs with BN; a 1x1 conv + BN shortcut where the shape changes.
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Identity()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + self.shortcut(x))

    def resnet20(in_channels=3):
        # x: (N, 3, 32, 32) -> (N, 16, 32, 32) -> (N, 32, 16, 16) -> (N, 64, 8, 8)
        #   -> average pool (N, 64) -> logits (N, 10). Laid out as Sinter's resnet20(), so that
        # the state_dict keys are the same: 0 conv, 1 BN, 2 ReLU, 3-11 blocks, 12 pool, 13
        # Flatten, 14 Linear.
        layers, cin = [nn.Conv2d(in_channels, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                       nn.ReLU()], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                layers.append(BasicBlock(cin, cout, stride if i == 0 else 1))
                cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
        return nn.Sequential(*layers)

    def causal_attention(q, k, v):
        # q, k, v: (B, heads, T, D) -> (B, heads, T, D)
        if hasattr(F, "scaled_dot_product_attention"):
            # What a PyTorch user writes: the fused kernel PyTorch picks for the dtype.
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # PyTorch before 2.0 (Debian's 1.13): the same attention written out.
        t = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
        return scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v

    # The GPT under Sinter's names (nn::models::GPT): wte, wpe, blocks.i.{ln1, attn.qkv,
    # attn.out_proj, ln2, fc, proj}, ln_f and, untied, lm_head; tied, the logits are x wte^T.
    class Attention(nn.Module):
        # x: (B, T, C) -> q, k, v: (B, heads, T, C / heads) -> causal attention -> (B, T, C)
        def __init__(self, width, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(width, 3 * width)
            self.out_proj = nn.Linear(width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            return self.out_proj(causal_attention(q, k, v).transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self, width, heads):
            super().__init__()
            self.ln1 = nn.LayerNorm(width)
            self.attn = Attention(width, heads)
            self.ln2 = nn.LayerNorm(width)
            self.fc = nn.Linear(width, 4 * width)
            self.proj = nn.Linear(4 * width, width)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        # tokens: (B, T) int64 -> logits (B, T, vocab)
        def __init__(self, vocab=GPT_VOCAB, context=GPT_CONTEXT, layers=GPT_LAYERS,
                     heads=GPT_HEADS, width=GPT_WIDTH, tied=False):
            super().__init__()
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(context, width)
            self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = None if tied else nn.Linear(width, vocab, bias=False)

        def forward(self, tokens):
            pos = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.ln_f(self.blocks(self.wte(tokens) + self.wpe(pos)))
            return F.linear(x, self.wte.weight) if self.lm_head is None else self.lm_head(x)

    # The Llama under Sinter's (and Hugging Face's) names (nn::models::Llama): model.embed_tokens,
    # model.layers.i.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
    # mlp.{gate,up,down}_proj}, model.norm, lm_head. Written out for PyTorch 1.13, which has
    # neither rms_norm nor scaled_dot_product_attention.
    class RmsNorm(nn.Module):
        def __init__(self, width, eps):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(width))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rope(x, base):
        # x: (B, heads, T, D); the halves of each head turned by position * base^(-2i / D).
        t, d = x.shape[-2], x.shape[-1]
        inv = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2.0 / d)
        angle = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
        cos, sin = angle.cos().to(x), angle.sin().to(x)
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    class LlamaAttention(nn.Module):
        def __init__(self, width, heads, kv_heads, base):
            super().__init__()
            self.heads, self.kv_heads, self.base = heads, kv_heads, base
            d = width // heads
            self.q_proj = nn.Linear(width, width, bias=False)
            self.k_proj = nn.Linear(width, kv_heads * d, bias=False)
            self.v_proj = nn.Linear(width, kv_heads * d, bias=False)
            self.o_proj = nn.Linear(width, width, bias=False)

        def forward(self, x):
            b, t, c = x.shape
            d = c // self.heads
            q = rope(self.q_proj(x).view(b, t, self.heads, d).transpose(1, 2), self.base)
            k = rope(self.k_proj(x).view(b, t, self.kv_heads, d).transpose(1, 2), self.base)
            v = self.v_proj(x).view(b, t, self.kv_heads, d).transpose(1, 2)
            group = self.heads // self.kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            return self.o_proj(causal_attention(q, k, v).transpose(1, 2).reshape(b, t, c))

    class LlamaMlp(nn.Module):
        def __init__(self, width, hidden):
            super().__init__()
            self.gate_proj = nn.Linear(width, hidden, bias=False)
            self.up_proj = nn.Linear(width, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, width, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class LlamaLayer(nn.Module):
        def __init__(self, width, heads, kv_heads, hidden, base, eps):
            super().__init__()
            self.input_layernorm = RmsNorm(width, eps)
            self.self_attn = LlamaAttention(width, heads, kv_heads, base)
            self.post_attention_layernorm = RmsNorm(width, eps)
            self.mlp = LlamaMlp(width, hidden)

        def forward(self, x):
            x = x + self.self_attn(self.input_layernorm(x))
            return x + self.mlp(self.post_attention_layernorm(x))

    class LlamaModel(nn.Module):
        def __init__(self, vocab, layers, heads, kv_heads, width, hidden, base, eps):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, width)
            self.layers = nn.Sequential(
                *[LlamaLayer(width, heads, kv_heads, hidden, base, eps) for _ in range(layers)])
            self.norm = RmsNorm(width, eps)

        def forward(self, tokens):
            return self.norm(self.layers(self.embed_tokens(tokens)))

    class Llama(nn.Module):
        # tokens: (B, T) int64 -> logits (B, T, vocab); llama-mini by default.
        def __init__(self, vocab=256, layers=6, heads=6, kv_heads=2, width=384, hidden=1024,
                     base=10000.0, eps=1e-5, tied=False):
            super().__init__()
            self.model = LlamaModel(vocab, layers, heads, kv_heads, width, hidden, base, eps)
            self.lm_head = None if tied else nn.Linear(width, vocab, bias=False)

        def forward(self, tokens):
            x = self.model(tokens)
            if self.lm_head is None:
                return F.linear(x, self.model.embed_tokens.weight)
            return self.lm_head(x)

    # The ViT under Sinter's names (nn::models::ViT, vit_tiny): patch_embed, pos_embed, blocks.i.{ln1,
    # attn.qkv, attn.out_proj, ln2, fc, proj} (pre-LayerNorm, not causal, exact GELU), ln, head;
    # 32x32 RGB images in 4x4 patches, width 64, 4 blocks of 4 heads, the mean over the patches.
    class VitBlock(nn.Module):
        def __init__(self, width, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(width)
            self.attn = nn.Module()
            self.attn.qkv = nn.Linear(width, 3 * width)
            self.attn.out_proj = nn.Linear(width, width)
            self.ln2 = nn.LayerNorm(width)
            self.fc = nn.Linear(width, 4 * width)
            self.proj = nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.attn.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            if hasattr(F, "scaled_dot_product_attention"):
                a = F.scaled_dot_product_attention(q, k, v)
            else:
                a = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(-1) @ v
            x = x + self.attn.out_proj(a.transpose(1, 2).reshape(b, t, c))
            return x + self.proj(F.gelu(self.fc(self.ln2(x))))

    class Vit(nn.Module):
        def __init__(self, image=32, patch=4, width=64, layers=4, heads=4, classes=10):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, width, patch, stride=patch)
            self.pos_embed = nn.Parameter(torch.zeros(1, (image // patch) ** 2, width))
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            self.blocks = nn.Sequential(*[VitBlock(width, heads) for _ in range(layers)])
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, classes)

        def forward(self, x):
            t = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed
            return self.head(self.ln(self.blocks(t)).mean(1))

    return {"mlp": mlp, "cnn": cnn, "resnet20": resnet20, "gpt-mini": Gpt, "llama-mini": Llama,
            "vit-tiny": Vit}


def make_workload(torch, name, batch, device):
    """(model, optimizer, inputs, targets, loss_fn) for one workload, seeded: every run is alike."""
    torch.manual_seed(0)
    model = build_models(torch)[name]().to(device)
    model.train()
    g = torch.Generator(device="cpu").manual_seed(1)
    F = torch.nn.functional
    if name in ("gpt-mini", "llama-mini"):  # the same vocabulary and context
        tokens = torch.randint(0, GPT_VOCAB, (batch, GPT_CONTEXT + 1), generator=g)
        x, y = tokens[:, :-1].to(device), tokens[:, 1:].to(device)

        def loss_fn(logits, targets):
            return F.cross_entropy(logits.reshape(-1, GPT_VOCAB), targets.reshape(-1))
    else:
        shape = {"mlp": (batch, 784), "cnn": (batch, 1, 28, 28), "resnet20": (batch, 3, 32, 32),
                 "vit-tiny": (batch, 3, 32, 32)}
        x = torch.randn(shape[name], generator=g).to(device)
        y = torch.randint(0, 10, (batch,), generator=g).to(device)
        loss_fn = F.cross_entropy
    params = model.parameters()
    if name == "mlp":
        opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    elif name == "cnn":
        opt = torch.optim.Adam(params, lr=1e-3)
    elif name == "resnet20":
        opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=5e-4)
    else:
        opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1)
    return model, opt, x, y, loss_fn


def set_precision(torch, precision):
    """TF32 on for tf32 only; fp32 and bf16 keep full fp32 arithmetic wherever fp32 remains."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def make_step(torch, model, opt, x, y, loss_fn, precision, device):
    """One training step; returns the loss tensor (not synchronized)."""
    autocast = precision == "bf16"

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def time_workload(torch, name, precision, warmup, reps, steps, compiled=False, device_type="cuda"):
    """Median ms per step over `reps` batches of `steps` steps, and the first and last loss."""
    device = torch.device(device_type)
    if device.type == "cuda":
        set_precision(torch, precision)
    model, opt, x, y, loss_fn = make_workload(torch, name, BATCH[name], device)
    if compiled:
        model = torch.compile(model, mode="reduce-overhead")
    step = make_step(torch, model, opt, x, y, loss_fn, precision, device)
    first_loss = float(step())  # also the first warm-up step
    for _ in range(warmup - 1):
        step()
    per_step = []
    if device.type == "cpu":
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(steps):
                loss = step()
            float(loss)
            per_step.append((time.perf_counter() - start) * 1e3 / steps)
        return statistics.median(per_step), first_loss, float(loss)
    torch.cuda.synchronize()
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            loss = step()
        stop.record()
        stop.synchronize()
        per_step.append(start.elapsed_time(stop) / steps)
    last_loss = float(loss)
    return statistics.median(per_step), first_loss, last_loss


def print_table(rows, columns):
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")


def smoke(torch, workloads, precisions):
    """One step of each workload on a batch of SMOKE_BATCH: the models build, run and learn."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"smoke: one step per workload and precision, batch {SMOKE_BATCH}, on {device}")
    failed = 0
    rows = []
    for name in workloads:
        for precision in precisions:
            if device.type == "cuda":
                set_precision(torch, precision)
            model, opt, x, y, loss_fn = make_workload(torch, name, SMOKE_BATCH, device)
            loss = float(make_step(torch, model, opt, x, y, loss_fn, precision, device)())
            grads = all(p.grad is not None for p in model.parameters())
            ok = math.isfinite(loss) and grads
            failed += not ok
            rows.append({"workload": name, "precision": precision, "loss": f"{loss:.4f}",
                         "status": "ok" if ok else "FAILED"})
    print_table(rows, ("workload", "precision", "loss", "status"))
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--smoke", action="store_true",
                        help="one untimed step of each workload on a tiny batch (CPU without CUDA)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated subset of " + ",".join(WORKLOADS))
    parser.add_argument("--precisions", default=",".join(PRECISIONS),
                        help="comma-separated subset of " + ",".join(PRECISIONS))
    parser.add_argument("--compile-precisions", default="tf32",
                        help="precisions also timed under torch.compile (default tf32; '' for none)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps first (default 10; 3 on the CPU)")
    parser.add_argument("--reps", type=int, default=5, help="timed batches (default 5)")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per timed batch (default 30; 5 on the CPU)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="where the steps run (default cuda)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (torch.set_num_threads; default PyTorch's own)")
    args = parser.parse_args()
    cpu = args.device == "cpu"
    if args.warmup is None:
        args.warmup = 3 if cpu else 10
    if args.steps is None:
        args.steps = 5 if cpu else 30
    if cpu and "--compile-precisions" not in sys.argv:
        args.compile_precisions = ""
    if cpu and "--precisions" not in sys.argv:
        args.precisions = "fp32,bf16"
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")

    workloads = [w for w in args.workloads.split(",") if w]
    precisions = [p for p in args.precisions.split(",") if p]
    for w in workloads:
        if w not in WORKLOADS:
            parser.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    compiled = [p for p in args.compile_precisions.split(",") if p]
    for p in precisions + compiled:
        if p not in PRECISIONS:
            parser.error(f"unknown precision {p!r}; choose from {', '.join(PRECISIONS)}")
    variants = [(p, False) for p in precisions] + [(p, True) for p in compiled]
    if args.warmup < 1 or args.reps < 1 or args.steps < 1:
        parser.error("--warmup, --reps and --steps must be at least 1")

    try:
        import torch
    except ImportError as e:
        print(f"pytorch_reference: PyTorch is not importable ({e}); nothing measured")
        return 0

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.smoke:
        return smoke(torch, workloads, precisions)
    if cpu:
        device_name = f"CPU, {torch.get_num_threads()} threads"
    elif not torch.cuda.is_available():
        print(f"pytorch_reference: no CUDA device visible to PyTorch {torch.__version__}; nothing "
              "measured (--smoke runs one step of each workload on the CPU)")
        return 0

    if not cpu:
        device_name = torch.cuda.get_device_name(0)
    print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
          f"{torch.backends.cudnn.version()}) on {device_name}, eager; median ms per step of "
          f"{args.reps} x {args.steps} steps after {args.warmup} warm-up steps")
    results, rows, failed = [], [], 0

    def write_results():
        # After every workload, through a temporary file: a run cut short keeps what it measured.
        if not args.out:
            return
        doc = {
            "device": device_name,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "threads": torch.get_num_threads() if cpu else None,
            "method": {"warmup": args.warmup, "reps": args.reps, "steps": args.steps,
                       "statistic": "median of per-step means of " +
                                    ("wall-clock" if cpu else "CUDA-event") + "-timed batches"},
            "results": results,
        }
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.out)

    # Every eager figure before the first compiled one, which compiles for minutes.
    for base, use_compile in variants:
        for name in workloads:
            precision = base + "+compile" if use_compile else base
            try:
                ms, first, last = time_workload(torch, name, base, args.warmup, args.reps,
                                                args.steps, use_compile, args.device)
            except RuntimeError as e:  # CUDA and cuDNN errors; report and go on with the rest
                print(f"{name}/{precision}: FAILED: {e}", file=sys.stderr)
                failed += 1
                rows.append({"workload": name, "precision": precision, "ms_per_step": "FAILED",
                             "loss": "-"})
                continue
            finally:
                if not cpu:
                    torch.cuda.empty_cache()
            if not (math.isfinite(first) and math.isfinite(last)):
                # A step that produces NaN may take another path than a real one: no figure.
                print(f"{name}/{precision}: FAILED: loss {first} -> {last}", file=sys.stderr)
                failed += 1
                rows.append({"workload": name, "precision": precision, "ms_per_step": "FAILED",
                             "loss": f"{first:.4f} -> {last:.4f}"})
                continue
            results.append({"workload": name, "precision": precision, "ms_per_step": ms,
                            "first_loss": first, "last_loss": last})
            write_results()
            rows.append({"workload": name, "precision": precision, "ms_per_step": f"{ms:.3f}",
                         "loss": f"{first:.4f} -> {last:.4f}"})
    print_table(rows, ("workload", "precision", "ms_per_step", "loss"))
    write_results()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
