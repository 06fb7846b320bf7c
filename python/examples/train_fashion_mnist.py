#!/usr/bin/env python3
"""Train a small PyTorch MLP on Fashion-MNIST under lpx recipes and open the report
(docs/python.md#examples).

    PYTHONPATH=build/python /usr/bin/python3 python/examples/train_fashion_mnist.py \\
        --recipes fp32,mxfp8 --epochs 2 --out runs/ --lpx build/tools/lpx

Each recipe trains the same model from the same initial weights and batch order with
lpx.torch.apply_recipe (every nn.Linear's six GEMM operands quantized by the C++
trainer's quantizer), writes OUT/<recipe>.h5, and prints its test accuracy; then
`lpx report OUT` writes OUT/report.html beside them and prints its table. Data: Debian's
dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
"""
import argparse
import gzip
import os
import subprocess
import sys
import time

import numpy as np
import torch

_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # the built lpx, not python/lpx
import lpx  # noqa: E402,F401
import lpx.torch as lt  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data):
    def images(name):
        return torch.from_numpy(idx(os.path.join(data, name)).reshape(-1, 784).astype(np.float32) / 255.0)

    def labels(name):
        return torch.from_numpy(idx(os.path.join(data, name)).astype(np.int64))

    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


def train(recipe, data, a):
    xtr, ytr, xte, yte = data
    torch.manual_seed(a.seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, a.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(a.hidden, a.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(a.hidden, 10))
    h = lt.apply_recipe(model, recipe, seed=a.seed, log=os.path.join(a.out, f"{recipe}.h5"))
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    g = torch.Generator().manual_seed(a.seed)
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        order = torch.randperm(len(xtr), generator=g)
        for i in range(0, len(xtr) - a.batch + 1, a.batch):
            b = order[i:i + a.batch]
            loss = torch.nn.functional.cross_entropy(model(xtr[b]), ytr[b])
            opt.zero_grad()
            loss.backward()
            for f in h.step(loss.item(), lr=a.lr):
                print(f"  flag: {f['describe']}")
            opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(xte)
            test_loss = torch.nn.functional.cross_entropy(logits, yte).item()
            acc = (logits.argmax(1) == yte).float().mean().item()
        model.train()
        h.eval(test_loss, acc)
        print(f"{recipe:<14} epoch {epoch + 1}: test loss {test_loss:.4f}  accuracy {100 * acc:.2f}%  "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    h.close()
    return acc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", default="fp32,mxfp8")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--out", default="runs-torch")
    ap.add_argument("--lpx", default="build/tools/lpx", help="the lpx binary (for lpx report)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    data = load(a.data)
    acc = {r: train(r, data, a) for r in a.recipes.split(",")}
    base = acc.get("fp32")
    for r, v in acc.items():
        gap = "" if base is None else f"  ({100 * (v - base):+.2f} points vs fp32)"
        print(f"{r:<14} {100 * v:.2f}%{gap}")
    if os.access(a.lpx, os.X_OK):
        subprocess.run([a.lpx, "report", a.out, "--format", "md"], check=False)
        print(f"report: {os.path.join(a.out, 'report.html')} (lpx report {a.out})")


if __name__ == "__main__":
    main()
