#!/usr/bin/env python3
"""Times torch's own FP8 cast, x.to(torch.float8_e4m3fn) (and e5m2), on a float32 CUDA
tensor of --bytes bytes, the same size lpx's GPU benchmarks use, and prints GB/s (bytes
read + written) beside a device-to-device copy measured in the same run. Skips (exit 0)
when torch, its float8 dtypes or a CUDA device are missing."""
import sys

from one_line_args import OneLineParser, whole_number  # tools/one_line_args.py: bad flags in one line


def main() -> int:
    ap = OneLineParser(description=__doc__)
    ap.add_argument("--bytes", type=whole_number(4, 1 << 40), default=1 << 30,
                    help="float32 input bytes (default 1 GiB)")
    ap.add_argument("--reps", type=whole_number(1, 1000), default=5)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_torch_cast: skipped: torch is not installed")
        return 0
    if not torch.cuda.is_available() or not hasattr(torch, "float8_e4m3fn"):
        print("bench_torch_cast: skipped: no CUDA device or no float8 dtypes in torch")
        return 0
    n = args.bytes // 4
    x = torch.randn(n, device="cuda", dtype=torch.float32)

    def median_seconds(fn):
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.reps):
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e-3)
        times.sort()
        return times[len(times) // 2]

    out = torch.empty_like(x)
    copy_s = median_seconds(lambda: out.copy_(x))
    copy_gbps = 2 * n * 4 / copy_s / 1e9
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    print(f"{'path':32} {'bytes':>14} {'seconds':>10} {'GB/s':>8} {'x copy':>8}")
    print(f"{'copy d2d':32} {2 * n * 4:14d} {copy_s:10.6f} {copy_gbps:8.1f} {1.0:8.3f}")
    del out
    for name in ("float8_e4m3fn", "float8_e5m2"):
        dtype = getattr(torch, name)
        s = median_seconds(lambda: x.to(dtype))
        nbytes = n * 4 + n
        gbps = nbytes / s / 1e9
        print(f"{'x.to(' + name + ')':32} {nbytes:14d} {s:10.6f} {gbps:8.1f} {gbps / copy_gbps:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
