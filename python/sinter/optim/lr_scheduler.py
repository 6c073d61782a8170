"""sinter.optim.lr_scheduler: learning-rate schedules over an optimizer, as torch's. StepLR,
CosineAnnealingLR and OneCycleLR run in C++; LambdaLR, MultiplicativeLR, MultiStepLR,
ExponentialLR, LinearLR and ReduceLROnPlateau are written here over the optimizer's param_groups.
Each sets every group's lr at construction (epoch 0) and at each step(); the closed forms below
are torch's for a scheduler used alone."""

import bisect
import math

from .._C.optim.lr_scheduler import (  # noqa: F401  (re-exported)
    CosineAnnealingLR,
    LRScheduler,
    OneCycleLR,
    StepLR,
)


class _Schedule:
    """lr of group g at epoch t = base_lrs[g] * factor(g, t), set by step()."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def factor(self, group, t):
        raise NotImplementedError

    def get_last_lr(self):
        return list(self._last_lr)

    def step(self):
        self.last_epoch += 1
        self._last_lr = [base * self.factor(g, self.last_epoch)
                         for g, base in enumerate(self.base_lrs)]
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items()
                if k != "optimizer" and not callable(v) and k != "lr_lambdas"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class LambdaLR(_Schedule):
    """lr = base_lr * lr_lambda(epoch); one function, or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else \
            [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def factor(self, group, t):
        return self.lr_lambdas[group](t)


class MultiplicativeLR(LambdaLR):
    """Each step multiplies the lr by lr_lambda(epoch): lr = base_lr * prod of lr_lambda(1..t)."""

    def step(self):
        self.last_epoch += 1
        groups = self.optimizer.param_groups
        if self.last_epoch > 0:
            for g, group in enumerate(groups):
                group["lr"] = group["lr"] * self.lr_lambdas[g](self.last_epoch)
        self._last_lr = [group["lr"] for group in groups]


class MultiStepLR(_Schedule):
    """lr = base_lr * gamma ** (the milestones passed)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def factor(self, group, t):
        return self.gamma ** bisect.bisect_right(self.milestones, t)


class ExponentialLR(_Schedule):
    """lr = base_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def factor(self, group, t):
        return self.gamma ** t


class LinearLR(_Schedule):
    """lr = base_lr * (start_factor, linearly to end_factor over total_iters epochs)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, \
            total_iters
        super().__init__(optimizer, last_epoch)

    def factor(self, group, t):
        done = min(t, self.total_iters) / self.total_iters if self.total_iters else 1.0
        return self.start_factor + (self.end_factor - self.start_factor) * done


class ReduceLROnPlateau:
    """Multiplies each group's lr by `factor` when the metric given to step(metric) has not
    improved for `patience` epochs, as torch's (threshold modes "rel" and "abs", cooldown,
    min_lr)."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"mode {mode} / threshold_mode {threshold_mode} is unknown!")
        n = len(optimizer.param_groups)
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = threshold, \
            threshold_mode, cooldown, eps
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * n
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _better(self, a):
        if self.mode == "min":
            edge = self.best * (1 - self.threshold) if self.threshold_mode == "rel" else \
                self.best - self.threshold
            return a < edge
        edge = self.best * (1 + self.threshold) if self.threshold_mode == "rel" else \
            self.best + self.threshold
        return a > edge

    def step(self, metrics):
        current = float(metrics)
        self.last_epoch += 1
        if self._better(current):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                old = group["lr"]
                new = max(old * self.factor, min_lr)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)
