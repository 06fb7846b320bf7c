#!/usr/bin/env python3
"""The scripts in tools/ under the input policy (docs/input-policy.md, rule 1): a flag that
is unknown, missing, not a whole number or out of range is one line on stderr, "SCRIPT: ...",
and exit status 2, before the script starts any work (no lpx, perf or torch is needed).
tools_step_profile checks step-profile.py's own cases.

    test_script_flags.py PATH/TO/tools
"""
import os
import subprocess
import sys
import unittest

TOOLS = None


class ScriptFlags(unittest.TestCase):
    def run_script(self, script, *args):
        return subprocess.run([sys.executable, os.path.join(TOOLS, script), *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)

    def test_bad_flags_are_one_line_and_status_2(self):
        cases = [
            ("bench_torch_step.py", ["--steps", "0"], "argument --steps: 0 is outside [1, 10000]"),
            ("bench_torch_step.py", ["--threads", "2000"], "argument --threads: 2000 is outside [1, 1024]"),
            ("bench_torch_step.py", ["--rounds", "two"], "argument --rounds: 'two' is not a whole number"),
            ("bench_torch_step.py", ["--steps", "1e3"], "argument --steps: '1e3' is not a whole number"),
            ("bench_torch_step.py", ["--preset", "gpt-huge"], "argument --preset: invalid choice: 'gpt-huge'"),
            ("bench_torch_cast.py", ["--reps", "-1"], "argument --reps: -1 is outside [1, 1000]"),
            ("bench_torch_cast.py", ["--bytes", "0x10"], "argument --bytes: '0x10' is not a whole number"),
            ("bench-startup.py", ["--runs", "0", "/bin/true"], "argument --runs: 0 is outside [1, 1000]"),
            ("bench-startup.py", [], "give a command to time"),
            ("orderings.py", ["--jobs", "0"], "argument --jobs: 0 is outside [1, 1024]"),
            ("divergence-grid.py", ["--mlp", "a"], "the following arguments are required: --gpt"),
            ("step-profile.py", ["x", "--top", "many"], "argument --top: 'many' is not a whole number"),
            ("orderings.py", ["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        ]
        for script, args, text in cases:
            with self.subTest(script=script, args=args):
                r = self.run_script(script, *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stdout, "")
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                # argparse adds the choices after an invalid one
                self.assertTrue(lines[0].startswith(f"{os.path.splitext(script)[0]}: {text}"), lines[0])

    def test_a_good_count_passes_the_parser(self):
        # bench-startup times a command that exists: the flag's check lets 1 through
        r = self.run_script("bench-startup.py", "--runs", "1", "/bin/true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/bin/true: median", r.stdout)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_script_flags.py PATH/TO/tools")
    TOOLS = sys.argv.pop(1)
    unittest.main(verbosity=2)
