"""The Python package gives the CLI's bytes on the same inputs (docs/python.md#testing):
every named element format x every rounding mode, the block formats with each scale rule,
dequantize, analyze, info/table and the recipe catalogue."""
import json

import numpy as np
import pytest

import lpx
from conftest import sample

STOCHASTIC = ["sr", "sr-fast", "sr-rne", "sr-odd"]
ROUNDINGS = ["rne", "rna", "rtz", "rup", "rdn", "rto"] + STOCHASTIC
SR = {"seed": 7, "stream": 3, "sr_bits": 9}


def sr_cli(round):
    return ["--seed", SR["seed"], "--stream", SR["stream"], "--sr-bits", SR["sr_bits"]] if round in STOCHASTIC else []


def sr_py(round):
    return dict(SR) if round in STOCHASTIC else {}


# IEEE P3109 formats by gfloat's names (not in lpx.formats(): the grammar makes them)
P3109 = ["p3109_k8p4se", "p3109_k8p3sf", "p3109_k8p4ue", "p3109_k6p3sf", "p3109_k4p2uf", "p3109_k8p1se"]


@pytest.mark.parametrize("fmt", P3109)
def test_cast_p3109_every_rounding(fmt, cli, tmp_path):
    x = sample((7, 33), seed=len(fmt), scale=lpx.info(fmt).max / 4)
    x[0, :4] = [-1.5, -0.0, np.inf, -np.inf]  # negatives and -0 to unsigned formats too
    np.save(tmp_path / "x.npy", x)
    for round in ROUNDINGS:
        for overflow in ("ieee", "sat"):
            cli("cast", "--to", fmt, "--round", round, "--overflow", overflow, *sr_cli(round), "x.npy", "c.npy")
            got = lpx.cast(x, fmt, round=round, overflow=overflow, **sr_py(round))
            assert got.tobytes() == np.load(tmp_path / "c.npy").tobytes(), (fmt, round, overflow)


@pytest.mark.parametrize("round", STOCHASTIC)
def test_random_words_match_cli(round, cli, tmp_path):
    x = sample((9, 64), seed=5)
    x[~np.isfinite(x)] = 0.5
    words = np.random.default_rng(11).integers(0, 2**32, size=x.size + 3, dtype=np.uint32)
    np.save(tmp_path / "x.npy", x)
    words.astype("<u4").tofile(tmp_path / "w.bin")
    cli("cast", "--to", "e2m1", "--round", round, "--sr-bits", 5, "--random-words", "w.bin", "x.npy", "c.npy")
    got = lpx.cast(x, "e2m1", round=round, sr_bits=5, random_words=words)
    assert got.tobytes() == np.load(tmp_path / "c.npy").tobytes()
    cli("quantize", "--format", "mxfp4", "--round", round, "--sr-bits", 5, "--random-words", "w.bin",
        "--emit", "values", "x.npy", "v.npy")
    got = lpx.fake_quantize(x, "mxfp4", round=round, sr_bits=5, random_words=words)
    assert got.tobytes() == np.load(tmp_path / "v.npy").tobytes()
    # other words give other codes somewhere: the words are used, not Philox's
    other = lpx.cast(x, "e2m1", round=round, sr_bits=5, random_words=words[::-1].copy())
    assert other.tobytes() != lpx.cast(x, "e2m1", round=round, sr_bits=5, random_words=words).tobytes()


@pytest.mark.parametrize("fmt", lpx.formats())
def test_cast_codes_every_format_and_rounding(fmt, cli, tmp_path):
    top = lpx.info(fmt).max
    x = sample((3, 5, 41), seed=len(fmt), scale=min(top, 1e30) / 8)
    np.save(tmp_path / "x.npy", x)
    for round in ROUNDINGS:
        for overflow in ("ieee", "sat"):
            cli("cast", "--to", fmt, "--round", round, "--overflow", overflow, *sr_cli(round),
                "x.npy", "c.npy")
            want = np.load(tmp_path / "c.npy")
            got = lpx.cast(x, fmt, round=round, overflow=overflow, **sr_py(round))
            assert got.shape == x.shape and got.dtype == want.dtype
            assert got.tobytes() == want.tobytes(), (fmt, round, overflow)
        # values: the round trip, NaN payloads included
        cli("cast", "--to", fmt, "--round", round, "--emit", "values", *sr_cli(round), "x.npy", "v.npy")
        got = lpx.cast(x, fmt, round=round, emit="values", **sr_py(round))
        assert got.tobytes() == np.load(tmp_path / "v.npy").tobytes(), (fmt, round)


@pytest.mark.parametrize("fmt", lpx.formats())
def test_decode_every_code(fmt, cli, tmp_path):
    codes, values = lpx.table(fmt)
    dtype = np.uint8 if lpx.info(fmt).bits <= 8 else np.uint16
    c = codes.astype(dtype).reshape(-1)
    np.save(tmp_path / "c.npy", c)
    cli("decode", "--from", fmt, "c.npy", "y.npy")
    got = lpx.decode(c, fmt)
    assert got.tobytes() == np.load(tmp_path / "y.npy").tobytes()
    # table() is the codec's decode too (in float64; every value is exact in float32)
    assert np.array_equal(values.astype(np.float32), got, equal_nan=True)


BLOCKS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "nvfp4", "nvfp4_2d",
          "fp8_block128", "fp8_tensor"]


def rules_of(spec):
    return ["floor", "rceil", "ceil", "even"] if spec.startswith("mx") else [None]


CASES = [(s, r) for s in BLOCKS for r in rules_of(s)]


@pytest.mark.parametrize("spec,rule", CASES)
def test_quantize_matches_cli(spec, rule, cli, tmp_path):
    x = sample((48, 256), seed=3)
    x[~np.isfinite(x)] = 1.0  # keep most blocks finite (a NaN block is tested apart)
    x[5, 7] = np.nan
    np.save(tmp_path / "x.npy", x)
    for round in ("rne", "sr"):
        for axis in ([None, 0] if spec not in ("nvfp4_2d", "fp8_tensor") else [None]):
            opts = (["--scale-rule", rule] if rule else []) + (["--axis", axis] if axis is not None else [])
            kw = dict(scale_rule=rule, axis=axis, round=round, **sr_py(round))
            cli("quantize", "--format", spec, "--round", round, *opts, *sr_cli(round), "x.npy", "v.npy")
            got = lpx.fake_quantize(x, spec, **kw)
            assert got.tobytes() == np.load(tmp_path / "v.npy").tobytes(), (spec, rule, round, axis)

            cli("quantize", "--format", spec, "--round", round, "--emit", "packed", *opts,
                *sr_cli(round), "x.npy", "p.npy")
            q = lpx.quantize(x, spec, **kw)
            p = q.packed()
            assert p["codes"].tobytes() == np.load(tmp_path / "p.npy").tobytes()
            scales = np.load(tmp_path / "p.scales.npy")
            assert p["scales"].dtype == scales.dtype and p["scales"].shape == scales.shape
            assert p["scales"].tobytes() == scales.tobytes()
            if q.tensor_scale is None:
                assert not (tmp_path / "p.tensor_scale.npy").exists()
            else:
                assert p["tensor_scale"].tobytes() == np.load(tmp_path / "p.tensor_scale.npy").tobytes()
            # the fused values equal dequantize(quantize(x))
            assert q.dequantize().tobytes() == got.tobytes()
            # and `lpx dequantize` of the CLI's packed files equals q.dequantize()
            deq = ["--axis", q.axis] if axis is not None else []
            cli("dequantize", "--format", q.spec, "--shape", "48x256", *deq, "p.npy", "d.npy")
            assert np.load(tmp_path / "d.npy").tobytes() == q.dequantize().tobytes()


def test_quantize_block_override_and_headroom(cli, tmp_path):
    x = sample((6, 100), seed=9)
    x[~np.isfinite(x)] = 0
    np.save(tmp_path / "x.npy", x)
    cli("quantize", "--format", "mxfp4", "--block", 16, "--headroom-3-4", "--flush-subnormals",
        "x.npy", "v.npy")
    got = lpx.fake_quantize(x, "mxfp4", block=16, headroom_3_4=True, flush_subnormals=True)
    assert got.tobytes() == np.load(tmp_path / "v.npy").tobytes()


def test_analyze_matches_cli_json(cli, tmp_path):
    x = sample((32, 128), seed=5)
    np.save(tmp_path / "x.npy", x)
    fmts = "mxfp8_e4m3,mxfp4,nvfp4,nvfp4_2d,fp8_tensor,e2m1,bfloat16,int8"
    rows = json.loads(cli("analyze", "--json", "--formats", fmts, "x.npy").stdout)
    got = lpx.analyze(x, fmts.split(","))
    assert [r["format"] for r in got] == [r["format"] for r in rows]  # the same order
    for g, w in zip(got, rows):
        for key in ("elements", "nonfinite", "note", "tensor"):
            assert g[key] == w[key], (w["format"], key)
        for key in ("sqnr_db", "mse", "max_abs_error", "max_rel_error", "flushed_pct",
                    "saturated_pct", "clamped_blocks_pct"):
            # the CLI's JSON: shortest round-trip decimals, null for NaN, "inf" strings
            want = float("nan") if w[key] is None else float(w[key])
            assert g[key] == want or (np.isnan(g[key]) and np.isnan(want)), (w["format"], key)
    # the default list is the CLI's
    rows = json.loads(cli("analyze", "--json", "x.npy").stdout)
    assert sorted(r["format"] for r in rows) == sorted(r["format"] for r in lpx.analyze(x))


def test_info_and_table_match_cli(cli):
    for fmt in lpx.formats() + ["e2m0", "e3m2b2fn", "ue4m3"]:
        i = lpx.info(fmt)
        lines = dict(l.split(None, 1) if " " in l else (l, "") for l in
                     (ln.replace("max finite", "max_finite").replace("min normal", "min_normal")
                      .replace("min positive", "min_positive").replace("finite codes", "finite_codes")
                      for ln in cli("info", fmt).stdout.splitlines()))
        assert lines["format"].strip() == i.name
        assert int(lines["bits"].split()[0]) == i.bits
        assert float(lines["max_finite"].split()[0]) == i.max
        assert float(lines["min_positive"].split()[0]) == i.smallest_subnormal
        assert lines["finite_codes"].strip() == f"{i.finite_codes} of {i.codes}"
        assert lines["specials"].strip() == i.specials
        if i.bits <= 8:
            codes, values = lpx.table(fmt)
            rows = cli("table", fmt).stdout.splitlines()[1:]
            assert len(rows) == len(codes)
            for c, v, row in zip(codes, values, rows):
                code, _, text = row.split(None, 2)
                assert int(code, 16) == c
                w = float(text.split()[0])
                assert (np.isnan(v) and np.isnan(w)) or v == w


def test_recipes_match_cli(cli, tmp_path):
    names = lpx.recipes.list()
    assert names and all(isinstance(n, str) for n in names)
    for n in names:
        assert lpx.recipes.show(n) == cli("recipes", "show", n).stdout
        assert lpx.recipes.load(n)["name"] == n
    listing = cli("recipes").stdout
    for r in lpx.recipes.catalogue():
        assert r["describe"] in listing and r["summary"] in listing


def test_load_reads_the_cli_packed_safetensors(cli, tmp_path):
    x = sample((16, 64), seed=21)
    x[~np.isfinite(x)] = 0
    np.save(tmp_path / "x.npy", x)
    cli("quantize", "--format", "nvfp4", "--emit", "packed", "x.npy", "p.safetensors")
    t = lpx.load(tmp_path / "p.safetensors")
    p = lpx.quantize(x, "nvfp4").packed()
    assert sorted(t) == ["codes", "scales", "tensor_scale"]
    assert t["codes"].tobytes() == p["codes"].tobytes() and t["codes"].dtype == np.uint8
    assert t["scales"].tobytes() == p["scales"].tobytes() and t["scales"].shape == p["scales"].shape
    assert t["tensor_scale"].tobytes() == p["tensor_scale"].tobytes()
    assert np.array_equal(lpx.load(tmp_path / "x.npy")[""], x)
    assert list(lpx.load(tmp_path / "p.safetensors", names=["scales"])) == ["scales"]
    with pytest.raises(ValueError):
        lpx.load(tmp_path / "x.f32")
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(ValueError, match="bad.npy"):
        lpx.load(tmp_path / "bad.npy")


def test_registered_format_matches_cli_format_file(cli, tmp_path):
    """lpx.register_format takes the descriptor of `lpx --format-file`, and the format it
    registers casts, decodes and block-quantizes as the CLI's does, byte for byte."""
    desc = {"name": "py_e3m3_b5", "exponent_bits": 3, "mantissa_bits": 3, "bias": 5, "specials": "fn",
            "notes": "a test format"}
    (tmp_path / "fmt.json").write_text(json.dumps(desc))
    assert lpx.register_format(tmp_path / "fmt.json") == "py_e3m3_b5"
    x = sample((5, 64), seed=3, scale=8.0)
    np.save(tmp_path / "x.npy", x)
    cli("--format-file", "fmt.json", "cast", "--to", "py_e3m3_b5", "--round", "rne", "x.npy", "c.npy")
    codes = lpx.cast(x, "py_e3m3_b5")
    assert codes.tobytes() == np.load(tmp_path / "c.npy").tobytes()
    cli("--format-file", "fmt.json", "decode", "c.npy", "--from", "py_e3m3_b5", "d.npy")
    assert lpx.decode(codes, "py_e3m3_b5").tobytes() == np.load(tmp_path / "d.npy").tobytes()
    assert lpx.info("py_e3m3_b5").bits == 7
    # the same name again, an unknown key, a wrong type, a malformed format: one ValueError each
    for bad, msg in ((desc, "py_e3m3_b5"), ({**desc, "name": "x2", "colour": 1}, 'unknown key "colour"'),
                     ({**desc, "name": "x3", "bias": "5"}, '"bias" must be an integer'),
                     ({**desc, "name": "x4", "exponent_bits": 12}, "x4"),
                     ({**desc, "name": "x5", "nan_codes": ["0x7F"], "inf_codes": [127]}, "listed both"),
                     ([1, 2], "dict"), ({"name": float("nan")}, "not valid JSON|must be a string")):
        with pytest.raises(ValueError, match=msg):
            lpx.register_format(bad)


def test_registered_format_with_reserved_codes_matches_cli(cli, tmp_path):
    """A descriptor listing reserved codes and switching subnormals off registers from a dict
    and casts as `lpx --format-file` does; its table marks what the lists said."""
    desc = {"name": "py_hw_e4m3", "exponent_bits": 4, "mantissa_bits": 3, "bias": 7, "subnormals": False,
            "nan_codes": ["0x7F", "0xFF"], "reserved_codes": [0x7E, 0xFE]}
    (tmp_path / "fmt.json").write_text(json.dumps(desc))
    assert lpx.register_format(desc) == "py_hw_e4m3"
    x = np.concatenate([sample((4, 64), seed=5, scale=300.0).ravel(), np.array([440.0, 0.01, 0.007, -0.01], np.float32)])
    np.save(tmp_path / "x.npy", x)
    for ovf in ("ieee", "sat"):
        cli("--format-file", "fmt.json", "cast", "--to", "py_hw_e4m3", "--overflow", ovf, "x.npy", "c.npy")
        codes = lpx.cast(x, "py_hw_e4m3", overflow=ovf)
        assert codes.tobytes() == np.load(tmp_path / "c.npy").tobytes()
    assert list(codes[-4:]) == [0x7D, 0x08, 0x00, 0x88]  # sat: 416 is the largest finite value
    info = lpx.info("py_hw_e4m3")
    assert info.max == 416.0 and info.smallest_subnormal == 2.0 ** -6
    _, values = lpx.table("py_hw_e4m3")
    assert np.isnan(values[[0x7E, 0xFE, 0x7F, 0xFF]]).all() and values[0x01] == 0.0
