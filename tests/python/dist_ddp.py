"""Run under `mpirun -np 2` (CTest PythonDistributed): sinter.distributed and DDP over a module
written in Python. Every rank checks that DDP gave it rank 0's parameters, that the gradients after
backward are the average of what each rank's batch gives alone (computed here from a plain copy
of the module), that no_sync accumulates, and that DistributedSampler shards the data. Exits
non-zero, naming the check, on a mismatch."""

import sys

import sinter
import sinter.distributed as dist
from sinter import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.norm = nn.BatchNorm1d(3)
        self.gain = nn.Parameter(sinter.randn(3))

    def forward(self, x):
        return self.norm(self.fc(x)) * self.gain


def check(ok, what):
    if not ok:
        print(f"rank {dist.get_rank()}: FAILED: {what}", flush=True)
        sys.exit(1)


def close(a, b, tol=1e-5):
    return all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a.flatten().tolist(),
                                                               b.flatten().tolist()))


def batch(rank):
    sinter.manual_seed(100 + rank)
    return sinter.randn(5, 4), sinter.randn(5, 3)


def main():
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    check(world == 2, f"world size {world}")

    t = sinter.full((2,), float(rank + 1))
    dist.all_reduce(t)
    check(t.tolist() == [3.0, 3.0], f"all_reduce gave {t.tolist()}")
    gathered = [sinter.zeros(2), sinter.zeros(2)]
    dist.all_gather(gathered, sinter.full((2,), float(rank)))
    check([g.tolist() for g in gathered] == [[0.0, 0.0], [1.0, 1.0]], "all_gather")

    sinter.manual_seed(rank)  # each rank starts from its own parameters
    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model)
    params = dist.group().all_gather(nn.utils.parameters_to_vector(model.parameters()))
    check(close(params[0], params[1], 0.0), "DDP did not give every rank rank 0's parameters")

    # A plain copy with the same parameters computes each rank's gradients alone.
    reference = Net()
    reference.load_state_dict(model.state_dict())
    expected = [sinter.zeros_like(p) for p in reference.parameters()]
    for r in range(world):
        reference.zero_grad()
        reference.load_state_dict(model.state_dict())
        x, y = batch(r)
        ((reference(x) - y) ** 2).mean().backward()
        for e, p in zip(expected, reference.parameters()):
            e.add_(p.grad / world)

    x, y = batch(rank)
    ((ddp(x) - y) ** 2).mean().backward()
    for (name, p), e in zip(model.named_parameters(), expected):
        check(close(p.grad, e), f"the gradient of {name} is not the ranks' average")

    # no_sync: two local backwards, then a synchronized one, average the three batches' sum.
    model.zero_grad()
    with ddp.no_sync():
        ((ddp(x) - y) ** 2).mean().backward()
    local = [p.grad.clone() for p in model.parameters()]
    check(any(not close(a, e) for a, e in zip(local, expected)), "no_sync still averaged")
    ((ddp(x) - y) ** 2).mean().backward()

    # ZeRO-2 with AdamW trains as plain AdamW on the averaged gradients does.
    sinter.manual_seed(7)
    full, sharded = Net(), Net()
    sharded.load_state_dict(full.state_dict())
    ddp_full = nn.parallel.DistributedDataParallel(full)
    ddp_sharded = nn.parallel.DistributedDataParallel(sharded)
    opt_full = sinter.optim.AdamW(full.parameters(), lr=0.05, betas=(0.9, 0.95))
    opt_zero = dist.ZeroRedundancyOptimizer(ddp_sharded, sinter.optim.AdamW, lr=0.05,
                                            betas=(0.9, 0.95))
    check(opt_zero.param_groups[0]["lr"] == 0.05 and opt_zero.stage == 2, "ZeRO's options")
    for _ in range(3):
        for d, o in ((ddp_full, opt_full), (ddp_sharded, opt_zero)):
            o.zero_grad()
            ((d(x) - y) ** 2).mean().backward()
            o.step()
    for (name, a), b in zip(full.named_parameters(), sharded.parameters()):
        check(close(a.detach(), b.detach(), 1e-5), f"ZeRO's {name} differs from AdamW's")

    sampler = sinter.utils.data.DistributedSampler(list(range(9)), shuffle=True, seed=3)
    mine = list(sampler)
    both = dist.group().all_gather(sinter.tensor(mine))
    check(len(mine) == 5 and set(both.flatten().tolist()) == set(range(9)),
          f"DistributedSampler shards {both.tolist()}")
    dist.barrier()
    print(f"rank {rank}: ok", flush=True)


if __name__ == "__main__":
    main()
