#!/usr/bin/env python3
"""Writes the seed corpus of the fuzzers in this folder (tools/run-fuzz.sh runs them).

    tests/fuzz/make_seeds.py                 npy, safetensors, recipe, runlog_schema, cli,
                                             sweep_spec
    tests/fuzz/make_seeds.py --build DIR [--lpx LPX]
                                             also runlog and dequantize, from
                                             DIR/tests/fuzz/runlog_seeds (a build with
                                             LPX_FUZZ=ON, e.g. build-fuzz/) and LPX
                                             (default DIR/tools/lpx)

Tensor-file bytes are built from the format descriptions with the standard library only
(no numpy), so seeds do not depend on the writers under test. Recipe seeds are the
catalogue (recipes/catalogue/*.json) and variants of it a step away from valid; cli seeds
are command lines (arguments separated by NUL bytes) from the README and `lpx CMD --help`;
sweep-spec seeds follow the format at the top of tools/lpx/cmd_sweep.cpp; dequantize seeds
are packed .safetensors of `lpx quantize --emit packed` and copies with changed metadata.
Run-log seeds are real logs of `lpx train --steps 2` on tiny models and the files
runlog_seeds.cpp writes (write_run, RunLog with a checkpoint, damaged variants). Files land
in corpus/<kind> next to this script. Regression seeds (inputs that once crashed a fuzzer)
are committed by hand beside these and are named regress-*.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(major, header, data, pad=True):
    prefix = 10 if major == 1 else 12
    if pad:
        total = (prefix + len(header) + 1 + 63) // 64 * 64
        header = header + " " * (total - prefix - len(header) - 1) + "\n"
    hb = header.encode("utf-8")
    length = struct.pack("<H", len(hb)) if major == 1 else struct.pack("<I", len(hb))
    return b"\x93NUMPY" + bytes([major, 0]) + length + hb + data


def st(header, data, pad=True):
    hb = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        hb += b" " * (-len(hb) % 8)
    return struct.pack("<Q", len(hb)) + hb + data


def d(descr, shape, fortran=False):
    return "{'descr': %r, 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", repr(tuple(shape)))


f4 = struct.pack("<6f", 1.0, -2.5, 3.25, 0.0, -0.0, 1e-30)
h2 = struct.pack("<3H", 0x3C00, 0x0001, 0xFBFF)

NPY = {
    "v1-f4-2x3": npy(1, d("<f4", (2, 3)), f4),
    "v2-f2-3": npy(2, d("<f2", (3,)), h2),
    "v3-bf16-V2": npy(3, d("|V2", (3,)), h2),
    "v1-bf16-lV2": npy(1, d("<V2", (1, 3)), h2),
    "v1-u1": npy(1, d("|u1", (4,)), b"\x00\x01\x7f\xff"),
    "v1-u2-scalar": npy(1, d("<u2", ()), b"\x01\x02"),
    "v1-empty": npy(1, d("<f4", (0,)), b""),
    "v1-unpadded-dq": npy(1, '{"descr":"<f4","fortran_order":False,"shape":(6L,)}', f4, pad=False),
    "bad-fortran": npy(1, d("<f4", (2, 3), fortran=True), f4),
    "bad-f8": npy(1, d("<f8", (3,)), f4),
    "bad-structured": npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", f4),
    "bad-truncated": npy(1, d("<f4", (2, 3)), f4[:10]),
    "bad-trailing": npy(1, d("<f4", (2, 3)), f4 + b"xx"),
    "bad-negative": npy(1, d("<f4", (-1, 6)), f4),
    "bad-overflow": npy(1, d("<f4", (4294967296, 4294967296)), f4),
    "bad-hlen": b"\x93NUMPY\x01\x00\xff\xff{'descr'",
    "bad-magic": b"\x93NUMPX\x01\x00\x10\x00{}",
}

def st_valid():
    data = struct.pack("<2H", 0x3F80, 0x4000) + struct.pack("<3f", 0.5, -1.0, 8.0) + b"\x7e\x01\x38\x05"
    hdr = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [3], "data_offsets": [4, 16]},
        "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [0, 4]},
        "e4": {"dtype": "F8_E4M3", "shape": [3], "data_offsets": [16, 19]},
        "u": {"dtype": "U8", "shape": [], "data_offsets": [19, 20]},
        "z": {"dtype": "F16", "shape": [0], "data_offsets": [20, 20]},
    }
    return st(hdr, data)

ST = {
    "valid-mixed": st_valid(),
    "valid-empty": st({}, b""),
    "valid-f16-e5m2-u16": st({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
                               "e": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [4, 6]},
                               "w": {"dtype": "U16", "shape": [1], "data_offsets": [6, 8]}},
                              b"\x00\x3c\x00\xbc\x7b\x7c\x01\x02"),
    "bad-overlap": st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
    "bad-hole": st({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8),
    "bad-json": st(b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]', b"\0" * 4, pad=False),
    "bad-dup": st(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\0\0"),
    "bad-dtype": st({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
    "bad-size": st({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
    "bad-hlen": struct.pack("<Q", 1 << 40) + b"{}",
    "bad-neg": st(b'{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}', b"\0"),
}

ROOT = os.path.dirname(os.path.dirname(HERE))
CATALOGUE = os.path.join(ROOT, "recipes", "catalogue")


def recipe_seeds():
    out = {}
    for fn in sorted(os.listdir(CATALOGUE)):
        if fn.endswith(".json"):
            with open(os.path.join(CATALOGUE, fn), "rb") as f:
                out["catalogue-" + fn[:-5]] = f.read()
    with open(os.path.join(CATALOGUE, "nvfp4.json")) as f:
        base = json.load(f)

    def variant(change):
        r = json.loads(json.dumps(base))
        change(r)
        return json.dumps(r, indent=1).encode()

    def role(key, value, r_name="fwd_x"):
        def f(r):
            if value is None:
                r["roles"][r_name].pop(key, None)
            else:
                r["roles"][r_name][key] = value
        return f

    def top(key, value):
        def f(r):
            if value is None:
                r.pop(key, None)
            else:
                r[key] = value
        return f

    roles = ["fwd_x", "fwd_w", "dgrad_dy", "dgrad_w", "wgrad_x", "wgrad_dy"]
    minimal = {"name": "m", "source": "s", "roles": {r: {"format": "mxfp8_e4m3"} for r in roles}}
    out["valid-minimal"] = json.dumps(minimal).encode()
    out["valid-specs"] = json.dumps({"name": "specs", "source": "s", "roles": {
        "fwd_x": {"format": "e2m1:b32:e8m0:rceil", "round": "sr", "sr_bits": 8},
        "fwd_w": {"format": "e2m0:16x16:e8m0:even"},
        "dgrad_dy": {"format": "e4m3:tensor:fp32", "margin": 2,
                     "amax_history": {"length": 16, "reduction": "most_recent"}},
        "dgrad_w": {"format": "e4m3:b128:pow2", "scale_rule": "ceil"},
        "wgrad_x": {"format": "e1m2:b16:e4m3", "headroom_3_4": True,
                    "transform": {"kind": "rht", "size": 64, "signs": "per_call"}},
        "wgrad_dy": {"format": "ternary_absmean",
                     "transform": {"kind": "rht", "size": 64, "signs": "per_call"}}},
        "accumulation": {"mantissa_bits": 10, "promote_every": 128},
        "master_weights": "bf16_sr", "optimizer_state": "fp8_e4m3",
        "high_precision": {"first_blocks": 1, "last_blocks": 1, "format": "fp32"}}).encode()
    bad = {
        "unknown-key": top("learning_rate", 1),
        "missing-source": top("source", None),
        "missing-role": lambda r: r["roles"].pop("dgrad_w"),
        "unknown-role": lambda r: r["roles"].__setitem__("fwd_y", {"format": "bf16"}),
        "role-unknown-key": role("scale", "e8m0"),
        "format-missing": role("format", None),
        "format-unknown": role("format", "e9m9:b32"),
        "format-block-zero": role("format", "e2m1:b0:e8m0"),
        "format-tile-huge": role("format", "e2m1:4294967296x4294967296:e8m0"),
        "format-empty": role("format", ""),
        "round-unknown": role("round", "stochastic"),
        "sr-bits-zero": role("sr_bits", 0),
        "sr-bits-33": role("sr_bits", 33),
        "sr-bits-string": role("sr_bits", "32"),
        "sr-bits-float": role("sr_bits", 2.5),
        "sr-bits-huge": role("sr_bits", 1e300),
        "sr-bits-int64-max": role("sr_bits", 9223372036854775807),
        "scale-rule-on-fp32": role("scale_rule", "floor", "fwd_x"),
        "margin-negative": role("margin", -1),
        "margin-on-e8m0": lambda r: (role("format", "mxfp8_e4m3")(r), role("margin", 1)(r)),
        "amax-history-zero": lambda r: (role("format", "e4m3:tensor:fp32")(r),
                                        role("amax_history", {"length": 0, "reduction": "max"})(r)),
        "amax-history-huge": lambda r: (role("format", "e4m3:tensor:fp32")(r),
                                        role("amax_history", {"length": 18446744073709551615,
                                                              "reduction": "max"})(r)),
        "amax-history-on-block": role("amax_history", {"length": 4, "reduction": "max"}),
        "transform-size-48": role("transform", {"kind": "rht", "size": 48, "signs": "fixed"}),
        "transform-signs-bad": role("transform", {"kind": "rht", "size": 16, "signs": "random"}),
        "transform-partner-differs": role("transform", {"kind": "rht", "size": 32, "signs": "fixed"},
                                          "wgrad_x"),
        "headroom-on-bf16": lambda r: (role("format", "bf16")(r), role("headroom_3_4", True)(r)),
        "high-precision-negative": lambda r: r["high_precision"].__setitem__("first_blocks", -1),
        "high-precision-huge": lambda r: r["high_precision"].__setitem__("last_blocks", 2 ** 63),
        "high-precision-format": lambda r: r["high_precision"].__setitem__("format", "e4m3"),
        "accumulation-bits-0": top("accumulation", {"mantissa_bits": 0, "promote_every": 4}),
        "accumulation-bits-24": top("accumulation", {"mantissa_bits": 24, "promote_every": 4}),
        "accumulation-promote-0": top("accumulation", {"mantissa_bits": 7, "promote_every": 0}),
        "master-weights-bad": top("master_weights", "fp16"),
        "optimizer-state-bad": top("optimizer_state", "int8"),
        "name-bad-chars": top("name", "NV FP4/\u0000"),
        "name-empty": top("name", ""),
        "roles-array": top("roles", []),
    }
    for name, change in bad.items():
        out["bad-" + name] = variant(change)
    text = json.dumps(minimal)
    out["bad-duplicate-key"] = text.replace('"name": "m",', '"name": "m", "name": "n",').encode()
    out["bad-truncated"] = text[: len(text) // 2].encode()
    out["bad-trailing"] = (text + " {}").encode()
    out["bad-not-object"] = b"[1, 2, 3]"
    out["bad-empty"] = b""
    out["bad-nul-raw"] = text.encode().replace(b'"m"', b'"m\x00x"')
    out["bad-nul-escaped"] = text.encode().replace(b'"m"', b'"m\\u0000x"')
    out["bad-invalid-utf8"] = text.encode().replace(b'"s"', b'"\xff\xfe"')
    out["bad-deep-nesting"] = b'{"name": "d", "source": "s", "notes": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    out["bad-comment"] = b"// a comment\n" + text.encode()
    return out


# Command lines after "lpx", one argument per NUL-separated field.
CLI = {
    "tour": ["tour", "--size", "1024", "--seed", "7"],
    "formats": ["formats"],
    "info": ["info", "e4m3"],
    "table-generic": ["table", "e3m2b2fn"],
    "cast": ["cast", "--to", "e4m3", "x.f32", "codes.bin"],
    "cast-sr": ["cast", "--to", "e2m1", "--round", "sr", "--seed", "7", "--sr-bits", "8",
                "--stream", "3", "--overflow", "sat", "--emit", "values", "--shape", "4x8",
                "--threads", "2", "x.f32", "y.npy"],
    "cast-eq": ["cast", "--to=e5m2", "--tensor=w", "in.safetensors", "-"],
    "decode": ["decode", "--from", "e5m2", "--shape", "64x128", "codes.bin", "y.f32"],
    "quantize": ["quantize", "--format", "mxfp4", "--block", "32", "--axis", "-1",
                 "--scale-rule", "rceil", "--round", "sr", "--seed", "1", "--emit", "packed",
                 "--headroom-3-4", "--flush-subnormals", "x.npy", "q.safetensors"],
    "quantize-spec": ["quantize", "--format", "e2m1:16x16:e4m3", "--shape", "32x32", "x.f32", "y.f32"],
    "dequantize": ["dequantize", "--format", "nvfp4", "--shape", "16x32", "--axis", "1", "q.npy", "y.npy"],
    "analyze": ["analyze", "--formats", "mxfp4,nvfp4", "--tensor", "a", "--tensor", "b", "--json",
                "--round", "sr", "--seed", "3", "w.safetensors", "x.npy"],
    "recipes-show": ["recipes", "show", "nvfp4"],
    "recipes-check": ["recipes", "check", "r.json"],
    "bench": ["bench", "--size", "4096", "--filter", "e2m1", "--json", "--reps", "1"],
    "bench-train": ["bench", "--train", "--models", "mlp", "--recipes", "fp32,nvfp4", "--steps", "2"],
    "validate": ["validate", "--elements", "1000", "--bench-bytes", "4096"],
    "train": ["train", "--model", "gpt", "--recipe", "mxfp8", "--steps", "500", "--checkpoint-every",
              "100", "--eval-every", "50", "--lr", "3e-3", "--batch", "16", "--layers", "2",
              "--channels", "64", "--heads", "4", "--context", "64", "--activation", "swiglu",
              "--weight-decay", "0.1", "--out", "gpt.h5"],
    "train-mlp": ["train", "--model", "mlp", "--hidden", "256", "128", "--stats-every", "0",
                  "--device", "cpu", "--threads", "1", "--seed", "18446744073709551615", "--out", "m.h5"],
    "train-resume": ["train", "--out", "gpt.h5", "--resume", "--stop-on-divergence",
                     "--thresholds", "t.json", "--steps", "10"],
    "sweep-spec": ["sweep", "spec.json", "--jobs", "2", "--dry-run"],
    "sweep-flags": ["sweep", "--recipes", "fp32,nvfp4", "--seeds", "3", "--set", "lr=1e-3,3e-3",
                    "--set", "batch=16", "--model", "mlp", "--steps", "4", "--reference", "fp32",
                    "--out", "sw", "--launcher", "slurm", "--submit"],
    "report": ["report", "sw", "--format", "md", "--reference", "fp32", "--thresholds", "t.json"],
    "help": ["--help"],
    "version": ["--version"],
    "sub-help": ["quantize", "--help"],
    "bad-unknown": ["cats", "--to", "e4m3"],
    "bad-range": ["cast", "--to", "e4m3", "--sr-bits", "99", "--threads", "-5", "x", "y"],
    "bad-seed": ["tour", "--seed", "-1"],
    "bad-seed-hex": ["tour", "--seed", "0x10"],
    "bad-huge-int": ["train", "--steps", "99999999999999999999999", "--out", "a.h5"],
    "bad-nan": ["train", "--lr", "nan", "--weight-decay", "inf", "--out", "a.h5"],
    "bad-empty-args": ["cast", "", "", "--to", ""],
}


def sweep_seeds():
    # The spec format is at the top of tools/lpx/cmd_sweep.cpp.
    full = {"name": "fmt-scale", "model": "gpt", "steps": 20, "seeds": [0, 1, 2], "reference": "bf16",
            "grid": {"recipe": ["mxfp8", "mxfp4-rne"], "lr": [1e-3, 3e-3]},
            "runs": [{"name": "lr10", "recipe": "fp32", "lr": 0.01}],
            "fixed": {"batch": 16, "threads": 1, "layers": 1, "channels": 16, "heads": 2, "context": 16},
            "detectors": {"loss_spike_z": 6}, "jobs": 2, "out": "runs/fmt-scale"}
    seeds = {
        "valid-full": full,
        "valid-minimal": {"grid": {"recipe": ["fp32"]}},
        "valid-seed-count": {"seeds": 3, "grid": {"recipe": ["nvfp4"], "hidden": [[64, 32], [128]]},
                             "fixed": {"activation": "gelu", "stats_every": 2, "eval_every": 5}},
        "bad-no-recipe": {"steps": 5},
        "bad-steps-zero": {"grid": {"recipe": ["fp32"]}, "steps": 0},
        "bad-steps-huge": {"grid": {"recipe": ["fp32"]}, "steps": 2 ** 41},
        "bad-seeds-negative": {"grid": {"recipe": ["fp32"]}, "seeds": -1},
        "bad-too-many-runs": {"grid": {"recipe": ["fp32"], "lr": [1e-3] * 200, "batch": list(range(1, 101))}},
        "bad-unknown-key": {"grid": {"recipe": ["fp32"], "learning_rate": [1]}},
        "bad-unknown-recipe": {"grid": {"recipe": ["fp7"]}},
        "bad-missing-recipe-file": {"grid": {"recipe": ["/nonexistent/r.json"]}},
        "bad-control-char": {"grid": {"recipe": ["fp32"]}, "out": "a\nb", "name": "x\ty"},
        "bad-long-name": {"grid": {"recipe": ["fp32"]}, "name": "n" * 300},
        "bad-lr-nan-string": {"grid": {"recipe": ["fp32"], "lr": ["nan"]}},
        "bad-jobs": {"grid": {"recipe": ["fp32"]}, "jobs": 100000},
        "bad-detectors": {"grid": {"recipe": ["fp32"]}, "detectors": {"loss_spike_z": "high"}},
        "bad-grid-not-list": {"grid": {"recipe": "fp32"}},
        "bad-runs-not-objects": {"runs": ["fp32"]},
        "valid-slurm": {"grid": {"recipe": ["fp32"]}, "slurm": {"partition": "gpu", "time": "1-02:00:00", "mem": "4G",
                                                              "account": "a", "cpus_per_task": 2,
                                                              "sbatch_args": ["--qos=low"]}},
        "bad-slurm-key": {"grid": {"recipe": ["fp32"]}, "slurm": {"nodes": 2}},
    }
    out = {k: json.dumps(v, indent=1).encode() for k, v in seeds.items()}
    out["bad-duplicate-key"] = b'{"grid": {"recipe": ["fp32"]}, "steps": 3, "steps": 5}'
    out["bad-deep"] = b'{"grid": {"recipe": ["bf16"]}, "fixed": {"data": ' + b"[" * 100 + b"]" * 100 + b"}}"
    out["bad-truncated"] = json.dumps(full).encode()[:120]
    return out


def dequantize_seeds(lpx, out):
    # Packed .safetensors from `lpx quantize --emit packed` of small tensors, and the same
    # files with their metadata changed (the header is JSON; the data stays as it was).
    rnd = random.Random(2)
    values = [rnd.gauss(0, 1) * (100 if i % 17 == 0 else 1) for i in range(4 * 64)]
    data = struct.pack("<%df" % len(values), *values)
    cases = {
        "mxfp4-4x64": (["--format", "mxfp4"], (4, 64)),
        "nvfp4-4x64": (["--format", "nvfp4"], (4, 64)),
        "nvfp4-2d-16x16": (["--format", "nvfp4_2d"], (16, 16)),
        "mxfp8-axis0-64x4": (["--format", "mxfp8_e4m3", "--axis", "0"], (64, 4)),
        "fp8-tensor-256": (["--format", "fp8_tensor"], (256,)),
        "mxint8-2x2x64": (["--format", "mxint8"], (2, 2, 64)),
        "e2m0-tile-headroom": (["--format", "e2m0:16x16:e8m0:even", "--headroom-3-4"], (16, 16)),
        "e1m2-b16-e4m3": (["--format", "e1m2:b16:e4m3"], (8, 32)),
        "mxfp6-ragged-3x40": (["--format", "mxfp6_e3m2"], (3, 40)),
    }
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    made = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (args, shape) in cases.items():
            n = 1
            for extent in shape:
                n *= extent
            src = os.path.join(tmp, name + ".npy")
            with open(src, "wb") as f:
                f.write(npy(1, d("<f4", shape), data[: 4 * n]))
            dst = os.path.join(tmp, name + ".safetensors")
            subprocess.run([lpx, "quantize", "--emit", "packed"] + args + [src, dst], check=True, env=env)
            with open(dst, "rb") as f:
                made["valid-" + name] = f.read()

    def with_meta(blob, change):
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        change(header["__metadata__"])
        return st(header, blob[8 + n:])

    base = made["valid-nvfp4-4x64"]
    bad = {
        "no-format": lambda m: m.pop("format"),
        "format-unknown": lambda m: m.__setitem__("format", "e9m9:b32"),
        "format-other-bits": lambda m: m.__setitem__("format", "mxfp8_e4m3"),
        "axis-text": lambda m: m.__setitem__("axis", "one"),
        "axis-huge": lambda m: m.__setitem__("axis", "99999999999999999999"),
        "axis-beyond-rank": lambda m: m.__setitem__("axis", "5"),
        "shape-bigger": lambda m: m.__setitem__("shape", "4x6400"),
        "shape-overflow": lambda m: m.__setitem__("shape", "4294967296x4294967296x8"),
        "shape-zero": lambda m: m.__setitem__("shape", "0x64"),
        "shape-text": lambda m: m.__setitem__("shape", "4 by 64"),
        "packing-other": lambda m: m.__setitem__("packing", "byte"),
        "headroom-odd": lambda m: m.__setitem__("headroom_3_4", "yes"),
    }
    for name, change in bad.items():
        made["meta-" + name] = with_meta(base, change)
    os.makedirs(out, exist_ok=True)
    for name, blob in made.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)


def schema_seeds():
    # fuzz_runlog_schema reads choices, not file bytes (FuzzedDataProvider): an exhausted
    # input takes the first choice everywhere (the schema's types), so short inputs already
    # make whole logs; the others vary every choice.
    rnd = random.Random(1)
    out = {"empty": b"", "zeros-64": b"\0" * 64, "zeros-4096": b"\0" * 4096, "ones-256": b"\xff" * 256}
    for n in (64, 512, 4096):
        out[f"random-{n}"] = bytes(rnd.randrange(256) for _ in range(n))
    return out


def runlog_seeds(build, lpx):
    lpx = lpx or os.path.join(build, "tools", "lpx")
    writer = os.path.join(build, "tests", "fuzz", "runlog_seeds")
    for exe in (lpx, writer):
        if not os.access(exe, os.X_OK):
            raise SystemExit(f"make_seeds: {exe} is missing (build the targets lpx and runlog_seeds)")
    out = os.path.join(HERE, "corpus", "runlog")
    os.makedirs(out, exist_ok=True)
    subprocess.run([writer, out], check=True)
    tiny_mlp = ["--model", "mlp", "--hidden", "4", "--batch", "4"]
    tiny_gpt = ["--model", "gpt", "--layers", "1", "--channels", "8", "--heads", "1",
                "--context", "8", "--batch", "2"]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    with tempfile.TemporaryDirectory() as tmp:
        # fp8-delayed with 16-step amax histories (the catalogue's 1024 make a 280 kB log)
        with open(os.path.join(CATALOGUE, "fp8-delayed.json")) as f:
            delayed = json.load(f)
        for spec in delayed["roles"].values():
            if spec.get("amax_history"):
                spec["amax_history"]["length"] = 16
        delayed_path = os.path.join(tmp, "fp8-delayed-16.json")
        with open(delayed_path, "w") as f:
            json.dump(delayed, f)
        runs = {
            "train-mlp-fp32": tiny_mlp + ["--recipe", "fp32"],
            "train-gpt-fp8-delayed": tiny_gpt + ["--recipe", delayed_path, "--eval-every", "1"],
        }
        for name, args in runs.items():
            log = os.path.join(tmp, name + ".h5")
            subprocess.run([lpx, "train", "--steps", "2", "--seed", "1", "--out", log] + args,
                           check=True, env=env, stdout=subprocess.DEVNULL)
            shutil.copyfile(log, os.path.join(out, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", help="a build with LPX_FUZZ=ON: also write the run-log seeds")
    ap.add_argument("--lpx", help="the lpx that writes the training logs (default BUILD/tools/lpx)")
    args = ap.parse_args()
    seeds = {"npy": NPY, "safetensors": ST, "recipe": recipe_seeds(), "runlog_schema": schema_seeds(),
             "sweep_spec": sweep_seeds(),
             "cli": {k: b"\0".join(a.encode() for a in v) for k, v in CLI.items()}}
    for sub, blobs in seeds.items():
        os.makedirs(os.path.join(HERE, "corpus", sub), exist_ok=True)
        for name, blob in blobs.items():
            with open(os.path.join(HERE, "corpus", sub, name), "wb") as f:
                f.write(blob)
    if args.build:
        runlog_seeds(args.build, args.lpx)
        dequantize_seeds(args.lpx or os.path.join(args.build, "tools", "lpx"),
                         os.path.join(HERE, "corpus", "dequantize"))


if __name__ == "__main__":
    main()
