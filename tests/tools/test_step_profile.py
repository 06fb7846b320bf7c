#!/usr/bin/env python3
"""tools/step-profile.py against a stand-in `perf` whose report is written here, so the
test needs neither perf nor permission to sample: the parsing of perf's padded report
lines, the per-function extra over the reference summed over rounds, the noise line, the
order of the table, the flags every `lpx train` gets, and one error line (exit 1) for each bad input.

    test_step_profile.py PATH/TO/tools/step-profile.py
"""
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else None

# perf record: `perf record -q -F 999 -o DATA -- LPX train ... --recipe R ...` writes R and
# how many times R was recorded into DATA; perf report prints that recipe's samples, the
# symbols padded to the longest and followed by the two "-" columns perf adds.
FAKE_PERF = textwrap.dedent("""\
    #!/usr/bin/env python3
    import os, sys
    args = sys.argv[1:]
    if args[0] == "record":
        if "STEP_PROFILE_TRAIN_LOG" in os.environ:  # the lpx train command lines, one a line
            with open(os.environ["STEP_PROFILE_TRAIN_LOG"], "a") as log:
                log.write(" ".join(args[args.index("--") + 2:]) + "\\n")
        data = args[args.index("-o") + 1]
        recipe = args[args.index("--recipe") + 1]
        if recipe == "broken":
            sys.stderr.write("lpx: something went wrong\\nlpx: the last line\\n")
            sys.exit(2)
        count_file = os.path.join(os.path.dirname(data), "count-" + recipe)
        n = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
        open(count_file, "w").write(str(n))
        open(data, "w").write(f"{recipe} {n}")
        sys.exit(0)
    data = args[args.index("-i") + 1]
    recipe, n = open(data).read().split()
    if recipe == "fp32":
        rows = [("ExactGemmRows", 1000 if n == "1" else 1040, "."), ("AdamW::update", 100, ".")]
    else:
        rows = [("ExactGemmRows", 1010, "."), ("AdamW::update", 100, "."),
                ("QuantizeColumnsT<(lpx::Rounding)5, false, true, true>", 300, "."),
                ("blocks_down_columns", 150, "."), ("clear_page_erms", 20, "k")]
    print("# Samples: 1K of event 'cpu-clock:ppp'")
    print("#")
    width = max(len(r[0]) for r in rows) + 4
    for name, count, kind in rows:
        print(f"    12.34%  {count:12d}  [{kind}] {name.ljust(width)}-      -            ")
""")


class StepProfile(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.bin = os.path.join(self.dir.name, "bin")
        os.mkdir(self.bin)
        self.lpx = os.path.join(self.dir.name, "lpx")
        for path, text in ((os.path.join(self.bin, "perf"), FAKE_PERF), (self.lpx, "#!/bin/sh\nexit 0\n")):
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)

    def tearDown(self):
        self.dir.cleanup()

    def run_script(self, *args, path=None):
        env = dict(os.environ, PATH=path if path is not None else self.bin + os.pathsep + os.environ["PATH"],
                   TMPDIR=self.dir.name, STEP_PROFILE_TRAIN_LOG=os.path.join(self.dir.name, "train.log"))
        return subprocess.run([sys.executable, SCRIPT, *args], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)

    def test_table_sums_rounds_and_ranks_the_extra(self):
        r = self.run_script("quartet-like", "--lpx", self.lpx, "--rounds", "2", "--top", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        # fp32: 1100 + 1140 samples; the recipe 2 x 1580
        self.assertIn("3160 samples against 2240 (1.41x)", lines[0])
        # the GEMM moved by 40 samples between fp32's rounds, of 1120 a round
        self.assertIn("moved by up to 3.6% of its run", lines[1])
        rows = [l for l in lines if l.startswith("| `")]
        self.assertEqual(rows, [
            "| `QuantizeColumnsT<(lpx::Rounding)5, false, true, true>` | 600 | 0 | 26.8% |",
            "| `blocks_down_columns` | 300 | 0 | 13.4% |",
            "| `clear_page_erms` | 40 | 0 | 1.8% |",
            "| `AdamW::update` | 200 | 200 | 0.0% |",
        ])

    def test_every_run_collects_the_statistics_as_asked(self):
        log = os.path.join(self.dir.name, "train.log")
        for every, rounds, said in (("1", None, "statistics every step"), ("50", "2", "statistics every 50 steps"),
                                    ("0", "1", "no statistics")):
            if os.path.exists(log):
                os.remove(log)
            args = ["nvfp4", "--lpx", self.lpx] + (["--stats-every", every] if rounds else [])
            r = self.run_script(*args + (["--rounds", rounds] if rounds else []))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"one thread, {said}: ", r.stdout.splitlines()[0])
            lines = open(log).read().splitlines()
            # the reference and the recipe alternate, round by round, each with the same flags
            self.assertEqual([l.split("--recipe ")[1].split()[0] for l in lines],
                             ["fp32", "nvfp4"] * int(rounds or 2))
            for line in lines:
                self.assertTrue(line.startswith("train --preset gpt-medium "), line)
                self.assertIn(f" --stats-every {every} ", line)

    def test_a_failed_record_is_one_line(self):
        r = self.run_script("broken", "--lpx", self.lpx, "--rounds", "1", "--reference", "broken")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip(),
                         "step-profile: perf record of lpx train --recipe broken exited with 2: lpx: the last line")

    def test_bad_inputs_are_one_line_each(self):
        # usage errors (a flag out of range or not a number, a missing argument) exit 2,
        # an environment that cannot run the profile exits 1
        cases = [
            (["x", "--lpx", self.lpx, "--steps", "0"], None, 2, "argument --steps: 0 is outside [1, 10000]"),
            (["x", "--lpx", self.lpx, "--stats-every", "-1"], None, 2, "argument --stats-every: -1 is outside [0, 1099511627776]"),
            (["x", "--lpx", self.lpx, "--stats-every", "abc"], None, 2, "argument --stats-every: 'abc' is not a whole number"),
            (["x", "--lpx", self.lpx, "--steps", "1.5"], None, 2, "argument --steps: '1.5' is not a whole number"),
            (["--lpx", self.lpx], None, 2, "the following arguments are required: recipe"),
            (["x", "--lpx", self.lpx, "--no-such-flag"], None, 2, "unrecognized arguments: --no-such-flag"),
            (["x", "--lpx", os.path.join(self.dir.name, "missing")], None, 1, "is not an executable"),
            (["x", "--lpx", self.lpx], self.dir.name, 1, "perf is not installed"),
        ]
        for args, path, status, text in cases:
            r = self.run_script(*args, path=path)
            self.assertEqual(r.returncode, status, args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertTrue(r.stderr.startswith("step-profile: "), r.stderr)
            self.assertIn(text, r.stderr)


if __name__ == "__main__":
    if SCRIPT is None:
        sys.exit("usage: test_step_profile.py PATH/TO/tools/step-profile.py")
    unittest.main(verbosity=2)
