#!/usr/bin/env python3
"""Times one fp32 training step of lpx's GPT (`lpx bench --train`) against the same model
in PyTorch on the CPU, in one run, and prints the ratio (README "Recipe studies").

The PyTorch model is lpx's GPT (sim/src/models.cpp): GPT-2 blocks (LayerNorm, fused QKV
with bias, causal softmax attention, output projection, LayerNorm, a 4C MLP with GELU's
tanh form), learned position embeddings, a final LayerNorm and an untied head without
bias; batch 16; the vocabulary of Debian's fortunes as lpx reads it. A step is what lpx
times: zero the gradients, forward, cross-entropy, backward, clip the gradient norm at 1,
AdamW. Both sides run with the same thread count, alternately, and each side's median
over its rounds is kept. Exits 0 with one line when torch is missing."""
import json
import os
import statistics
import subprocess
import sys
import time

from one_line_args import OneLineParser, whole_number  # tools/one_line_args.py: bad flags in one line

PRESETS = {"gpt-tiny": (2, 64, 4, 64), "gpt-small": (6, 128, 4, 64), "gpt-medium": (8, 192, 6, 128)}
FORTUNES = "/usr/share/games/fortunes"


def corpus_vocab(path: str) -> int:
    """The number of distinct bytes in the corpus, as sim/src/data.cpp reads a directory."""
    files = [path]
    if os.path.isdir(path):
        files = [os.path.join(path, n) for n in sorted(os.listdir(path))
                 if not n.startswith(".") and not n.endswith((".dat", ".u8"))
                 and os.path.isfile(os.path.join(path, n))]
    seen = set()
    for f in files:
        with open(f, "rb") as fh:
            seen.update(fh.read())
    return len(seen)


def torch_step_seconds(preset: str, steps: int, threads: int) -> float:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    layers, c, heads, t = PRESETS[preset]
    v, b = corpus_vocab(FORTUNES), 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
            self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.fc, self.fcproj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.register_buffer("mask", torch.tril(torch.ones(t, t, dtype=torch.bool)))

        def forward(self, x):
            q, k, val = self.qkv(self.ln1(x)).split(c, dim=2)
            hs = c // heads
            q, k, val = (z.view(b, t, heads, hs).transpose(1, 2) for z in (q, k, val))
            att = (q @ k.transpose(-2, -1)) / hs ** 0.5
            att = att.masked_fill(~self.mask, float("-inf")).softmax(dim=-1)
            y = (att @ val).transpose(1, 2).reshape(b, t, c)
            x = x + self.proj(y)
            return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(v, c), nn.Embedding(t, c)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.lnf, self.head = nn.LayerNorm(c), nn.Linear(c, v, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(t))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.lnf(x))

    torch.manual_seed(0)
    model = Gpt()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    x = torch.randint(0, v, (b, t))
    y = torch.randint(0, v, (b, t))

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x).view(-1, v), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    step()  # warm-up, as lpx's bench
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def lpx_step_seconds(lpx: str, preset: str, steps: int, threads: int) -> float:
    out = subprocess.run([lpx, "bench", "--train", "--models", preset, "--recipes", "fp32", "--steps", str(steps),
                          "--threads", str(threads), "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)[0]["seconds_per_step"]


def main() -> int:
    ap = OneLineParser(description=__doc__)
    ap.add_argument("--lpx", default="build/tools/lpx")
    ap.add_argument("--preset", default="gpt-small", choices=sorted(PRESETS))
    ap.add_argument("--steps", type=whole_number(1, 10000), default=7, help="timed steps per measurement (median)")
    ap.add_argument("--rounds", type=whole_number(1, 100), default=2, help="alternating rounds per side")
    ap.add_argument("--threads", type=whole_number(1, 1024), default=min(os.cpu_count() or 1, 1024))
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("bench_torch_step: skipped: torch is not installed (Debian: python3-torch)")
        return 0
    lp, tp = [], []
    for _ in range(args.rounds):
        try:
            lp.append(lpx_step_seconds(args.lpx, args.preset, args.steps, args.threads))
        except OSError as e:
            print(f"bench_torch_step: cannot run {args.lpx}: {e.strerror} (build lpx first, or pass --lpx)",
                  file=sys.stderr)
            return 1
        except subprocess.CalledProcessError as e:
            last = (e.stderr.strip().splitlines() or ["(no output)"])[-1]
            print(f"bench_torch_step: lpx bench exited with {e.returncode}: {last}", file=sys.stderr)
            return 1
        tp.append(torch_step_seconds(args.preset, args.steps, args.threads))
    l, t = statistics.median(lp), statistics.median(tp)
    print(f"{args.preset}, fp32, {args.threads} thread(s): lpx {l * 1e3:.1f} ms/step, "
          f"PyTorch {torch.__version__} {t * 1e3:.1f} ms/step; lpx is {t / l:.2f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
