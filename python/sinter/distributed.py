"""sinter.distributed: data parallelism across the ranks of an mpirun, with torch.distributed's
names. init_process_group() joins the ranks (MPI for CPU tensors, NCCL for CUDA tensors); the
collectives work in place on a tensor; sinter.nn.parallel.DistributedDataParallel averages the
gradients during backward. Run with `mpirun -np N python train.py`."""

from . import _C

_group = None


class ReduceOp:
    SUM = "sum"
    AVG = "avg"
    MAX = "max"


def init_process_group(backend=None, timeout=None, **kwargs):
    """Joins the ranks of the mpirun this process is part of. backend is taken for torch's callers
    (CPU tensors go through MPI, CUDA tensors through NCCL); timeout (a datetime.timedelta or
    seconds) fails a collective that waits longer, instead of hanging."""
    del backend, kwargs
    global _group
    if _group is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    seconds = 300.0 if timeout is None else getattr(timeout, "total_seconds", lambda: timeout)()
    _group = _C.distributed.ProcessGroup.init(float(seconds))


def is_initialized():
    return _group is not None


def _default():
    if _group is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to "
                           "call init_process_group.")
    return _group


def group():
    """The default process group (what DistributedDataParallel uses)."""
    return _default()


def get_rank():
    return _default().rank()


def get_world_size():
    return _default().size()


def get_local_rank():
    return _default().local_rank()


def all_reduce(tensor, op=ReduceOp.SUM):
    _default().all_reduce(tensor, op)


def broadcast(tensor, src=0):
    _default().broadcast(tensor, src)


def all_gather(tensor_list, tensor):
    """Fills tensor_list[r] with rank r's tensor."""
    stacked = _default().all_gather(tensor)
    if len(tensor_list) != stacked.shape[0]:
        raise ValueError(f"all_gather: {len(tensor_list)} tensors for {stacked.shape[0]} ranks")
    for r, t in enumerate(tensor_list):
        t.copy_(stacked[r])


def barrier():
    _default().barrier()


def destroy_process_group():
    global _group
    _group = None


class ZeroRedundancyOptimizer(_C.distributed._ZeRO):
    """ZeRO over a DistributedDataParallel's gradient buckets (Note [zero sharding]): each rank
    keeps the optimizer state of its 1/N shard of the parameters (stage 1), and with stage 2 only
    its shard of the averaged gradients; step() updates the shard and all-gathers the parameters,
    so every rank ends with the same model. optimizer_class is one of sinter.optim's, with its
    keyword options:

        ddp = sinter.nn.parallel.DistributedDataParallel(model)
        opt = ZeroRedundancyOptimizer(ddp, sinter.optim.AdamW, lr=3e-4, weight_decay=0.1)

    It is an optimizer like the others: param_groups, schedules, zero_grad; clip_grad_norm_
    clips by the norm over every rank's shard; save_sharded/load_sharded checkpoint it."""

    def __init__(self, ddp, optimizer_class, stage=2, **defaults):
        super().__init__(ddp._ddp, optimizer_class.__name__, defaults, stage)
