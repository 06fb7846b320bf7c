#!/usr/bin/env python3
"""Start-up cost of a command: the median wall time and the peak RSS over N runs (after
one warm-up), measured with fork + exec + wait4 so that no shell is counted.

    tools/bench-startup.py [--runs N] build/tools/lpx --version
"""
import argparse
import os
import statistics
import sys
import time

from one_line_args import OneLineParser, whole_number  # tools/one_line_args.py: bad flags in one line


def once(argv):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench-startup: {' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024.0


def main():
    p = OneLineParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=whole_number(1, 1000), default=7)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if not a.command:
        p.error("give a command to time")
    once(a.command)
    runs = [once(a.command) for _ in range(a.runs)]
    ms = [t * 1e3 for t, _ in runs]
    print(f"{' '.join(a.command)}: median {statistics.median(ms):.1f} ms "
          f"(min {min(ms):.1f}, max {max(ms):.1f}, {a.runs} runs), "
          f"peak RSS {max(r for _, r in runs):.1f} MB")


if __name__ == "__main__":
    main()
