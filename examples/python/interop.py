"""Sinter and PyTorch in one program: a model trained in Sinter is saved as safetensors and loaded
by the same model written with torch.nn (the state_dict keys are PyTorch's), which gives the
same outputs; a batch goes each way by DLPack without a copy (a write through one library is seen
by the other), and gradients computed by Sinter train a torch model.

    python3 examples/python/interop.py          # exit status 77 where torch is not installed
"""

import os
import sys
import tempfile

import sinter
import sinter.nn as nn
import sinter.nn.functional as F

try:
    import torch
except ImportError:
    print("torch is not installed: nothing to exchange with")
    sys.exit(77)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.norm(self.conv(x))), 2)
        return self.fc(x.flatten(1))


class TorchNet(torch.nn.Module):
    """The same model in torch.nn, with the same attribute names."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.norm(self.conv(x))), 2)
        return self.fc(x.flatten(1))


def check(ok, what):
    if not ok:
        print(f"FAILED: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def main():
    sinter.manual_seed(0)
    x = sinter.randn(16, 1, 8, 8)
    y = sinter.randint(0, 3, (16,))

    # 1. Train in Sinter.
    model = Net()
    opt = sinter.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(20):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    print(f"sinter: trained 20 steps, loss {loss.item():.4f}")

    # 2. Save as safetensors; torch.nn loads it under the same names.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "net.safetensors")
        sinter.safetensors.save_file(model.state_dict(), path)
        theirs = TorchNet()
        state = {k: torch.from_dlpack(v) for k, v in sinter.safetensors.load_file(path).items()}
        missing, unexpected = theirs.load_state_dict(state, strict=False)
        check(not unexpected and missing in ([], ["norm.num_batches_tracked"]),
              f"torch.nn loads Sinter's state_dict ({len(state)} tensors)")
    theirs.eval()

    # 3. A batch from torch to Sinter and the logits back, by DLPack: the same memory.
    batch = torch.randn(4, 1, 8, 8)
    as_sinter = sinter.from_dlpack(batch)
    batch[0, 0, 0, 0] = 123.0
    check(as_sinter[0, 0, 0, 0].item() == 123.0, "a torch write is seen by Sinter (no copy)")
    with sinter.no_grad():
        logits = torch.from_dlpack(model(as_sinter))
    with torch.no_grad():
        want = theirs(batch)
    check(torch.allclose(logits, want, atol=1e-5), "the same logits from both libraries")

    # 4. Sinter computes a gradient that a torch optimizer applies.
    w = torch.zeros(3, requires_grad=False)
    target = sinter.tensor([1.0, -2.0, 3.0])
    torch_opt = torch.optim.SGD([torch.nn.Parameter(w)], lr=0.5)
    param = torch_opt.param_groups[0]["params"][0]
    for _ in range(30):
        sw = sinter.from_dlpack(param.detach()).detach().requires_grad_(True)
        ((sw - target) ** 2).sum().backward()
        param.grad = torch.from_dlpack(sw.grad)
        torch_opt.step()
    check(torch.allclose(param.detach(), torch.tensor([1.0, -2.0, 3.0]), atol=1e-4),
          "torch's SGD converges on Sinter's gradients")
    return 0


if __name__ == "__main__":
    sys.exit(main())
