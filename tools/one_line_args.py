"""argparse for the scripts in tools/, under the project's rule for bad input: one error line
and a non-zero exit (docs/input-policy.md, rule 1). argparse's own error() prints the usage
block first; this parser prints only "SCRIPT: MESSAGE" (SCRIPT without its .py) and exits
with 2, as lpx does for a bad flag. whole_number(lo, hi) is the type of a count flag:
anything else than a whole number in [lo, hi] is the same kind of error.

    from one_line_args import OneLineParser, whole_number
    ap = OneLineParser(description=...)
    ap.add_argument("--steps", type=whole_number(1, 10000), default=7)
"""
import argparse
import os
import sys


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's hook for every parse error
        name = os.path.splitext(os.path.basename(self.prog))[0]
        sys.stderr.write(f"{name}: {message}\n")
        sys.exit(2)


def whole_number(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is outside [{lo}, {hi}]")
        return value
    return parse
