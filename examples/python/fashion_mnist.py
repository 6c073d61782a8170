"""Trains a reference model (mlp, cnn or resnet20) on Fashion-MNIST from Python, with the C++
example's options, optimizers and printed figures (examples/fashion_mnist.cpp): for the same seed
and options the two print the same numbers.

    PYTHONPATH=build/python python3 examples/python/fashion_mnist.py --model cnn --epochs 10
"""

import argparse
import time

import sinter
import sinter.nn.functional as F
from sinter.datasets import FashionMNIST
from sinter.utils.data import DataLoader, first


def make_optimizer(name, model, lr):
    if name == "mlp":
        return sinter.optim.SGD(model.parameters(), lr=lr or 0.01, momentum=0.9)
    if name == "resnet20":
        return sinter.optim.SGD(model.parameters(), lr=lr or 0.05, momentum=0.9,
                                weight_decay=5e-4)
    return sinter.optim.Adam(model.parameters(), lr=lr or 1e-3)


def pad_to_32(dataset):
    """ResNet-20's 32x32 input: the images centred on the value a black pixel normalizes to."""
    x, y = dataset.tensors
    black = (0.0 - 0.2860) / 0.3530
    padded = sinter.full((x.shape[0], 1, 32, 32), black)
    padded[:, :, 2:30, 2:30] = x
    return sinter.utils.data.TensorDataset(padded, y)


def evaluate(model, loader, device):
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    with sinter.no_grad():
        for x, y in loader:
            logits = model(x.to(device))
            y = y.to(device)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
            seen += y.shape[0]
    model.train()
    return loss_sum / seen, correct / seen


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="cnn", choices=["mlp", "cnn", "resnet20"])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.0, help="0: the model's default")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit-train", type=int, default=0, help="0: all 60000")
    p.add_argument("--limit-test", type=int, default=0, help="0: all 10000")
    args = p.parse_args()

    sinter.manual_seed(args.seed)
    train_set = FashionMNIST(args.data, train=True)
    test_set = FashionMNIST(args.data, train=False)
    if args.limit_train:
        train_set = first(train_set, args.limit_train)
    if args.limit_test:
        test_set = first(test_set, args.limit_test)
    if args.model == "resnet20":
        train_set, test_set = pad_to_32(train_set), pad_to_32(test_set)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, seed=args.seed)
    test_loader = DataLoader(test_set, batch_size=1000)
    model = getattr(sinter.models, args.model)(1) if args.model == "resnet20" else \
        getattr(sinter.models, args.model)()
    model.to(args.device)
    opt = make_optimizer(args.model, model, args.lr)
    n_params = sum(t.numel() for t in model.parameters())
    print(f"model {args.model} on {args.device}: {n_params} parameters, {len(train_set)} training "
          f"samples, batch {args.batch_size}")

    for epoch in range(1, args.epochs + 1):
        start = time.time()
        # The figures add up on the device, read once per epoch (as the C++ example's).
        loss_sum = sinter.zeros((), device=args.device)
        correct = sinter.zeros((), dtype=sinter.int64, device=args.device)
        seen = 0
        for x, y in train_loader:
            x, y = x.to(args.device), y.to(args.device)
            opt.zero_grad()
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            with sinter.no_grad():
                loss_sum.add_(loss.detach(), alpha=y.shape[0])
                correct.add_((logits.argmax(1) == y).sum())
            seen += y.shape[0]
        test_loss, test_acc = evaluate(model, test_loader, args.device)
        print(f"epoch {epoch}: train loss {loss_sum.item() / seen:.4f} "
              f"acc {correct.item() / seen:.4f} | "
              f"test loss {test_loss:.4f} acc {test_acc:.4f} | {time.time() - start:.1f}s")
    print(f"test accuracy: {test_acc:.4f}")


if __name__ == "__main__":
    main()
