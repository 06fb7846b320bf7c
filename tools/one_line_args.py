"""argparse for the scripts in tools/, under the project's rule for bad input: one error line
and a non-zero exit (docs/input-policy.md, rule 1). argparse's own error() prints the usage block first;
this parser prints only "SCRIPT: MESSAGE" (SCRIPT without its .py) and exits with 2, as lpx
does for a bad flag.

    from one_line_args import OneLineParser
    ap = OneLineParser(description=...)
"""
import argparse
import os
import sys


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's hook for every parse error
        name = os.path.splitext(os.path.basename(self.prog))[0]
        sys.stderr.write(f"{name}: {message}\n")
        sys.exit(2)
