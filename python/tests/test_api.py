"""What the package promises beyond the CLI's bytes (docs/python.md): shapes and dtypes,
the input rules, thread-count independence, the QuantizedTensor round trips, the
Hadamard transform, run logs."""
import os
import subprocess
import threading

import numpy as np
import pytest

import lpx
from conftest import sample


def test_shapes_and_dtypes():
    for shape in [(), (7,), (3, 5), (2, 3, 4, 5)]:
        x = sample(shape if shape else (1,), seed=1).reshape(shape)
        c = lpx.cast(x, "e4m3")
        assert c.shape == x.shape and c.dtype == np.uint8
        assert lpx.cast(x, "bf16").dtype == np.uint16
        v = lpx.cast(x, "e2m1", emit="values")
        assert v.shape == x.shape and v.dtype == np.float32
        assert lpx.decode(c, "e4m3").shape == x.shape


def test_input_dtypes_follow_the_stated_rules():
    x = sample((64, 33), seed=2)
    ref = lpx.cast(x, "e5m2", round="rtz")
    # float16: converted exactly, so the result is that of the float32 values
    h = np.clip(x, -60000, 60000).astype(np.float16)
    assert np.array_equal(lpx.cast(h, "e5m2", round="rtz"), lpx.cast(h.astype(np.float32), "e5m2", round="rtz"))
    # float64: rounded to float32 (RNE, NumPy's astype) first
    d = x.astype(np.float64) * (1 + 2**-30)
    assert np.array_equal(lpx.cast(d, "e5m2", round="rtz"), lpx.cast(d.astype(np.float32), "e5m2", round="rtz"))
    # non-contiguous float32 is copied into C order: the same results as the copy
    f = np.asfortranarray(x)
    assert np.array_equal(lpx.cast(f, "e5m2", round="rtz"), ref)
    assert np.array_equal(lpx.cast(x[:, ::2], "e5m2", round="rtz"), lpx.cast(x[:, ::2].copy(), "e5m2", round="rtz"))
    b = x.astype(">f4")
    assert np.array_equal(lpx.cast(b, "e5m2", round="rtz"), ref)
    # lists are arrays too (float64 values)
    assert lpx.cast([1.0, 2.0, 3.0], "e4m3").tolist() == lpx.cast(np.array([1, 2, 3], np.float32), "e4m3").tolist()
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        return
    bf = x.astype(ml_dtypes.bfloat16)
    assert np.array_equal(lpx.cast(bf, "e4m3"), lpx.cast(bf.astype(np.float32), "e4m3"))


def test_out_is_written_in_place():
    x = sample((16, 64), seed=4)
    out = np.empty(x.shape, np.uint8)
    r = lpx.cast(x, "e4m3", out=out)
    assert r is out or np.shares_memory(r, out)
    assert np.array_equal(out, lpx.cast(x, "e4m3"))
    vals = np.empty(x.shape, np.float32)
    r = lpx.fake_quantize(x, "nvfp4", out=vals)
    assert np.shares_memory(r, vals) and np.array_equal(vals, lpx.fake_quantize(x, "nvfp4"), equal_nan=True)


def test_results_do_not_depend_on_threads():
    x = sample((257, 96), seed=6)
    x[~np.isfinite(x)] = 0
    for kw in [dict(round="sr", seed=11), dict(round="rne")]:
        ref = lpx.cast(x, "e2m1", threads=1, **kw)
        for t in (2, 3, 0):
            assert np.array_equal(lpx.cast(x, "e2m1", threads=t, **kw), ref)
        q1 = lpx.quantize(x, "nvfp4", threads=1, **kw)
        for t in (2, 0):
            q = lpx.quantize(x, "nvfp4", threads=t, **kw)
            assert np.array_equal(q.codes, q1.codes) and np.array_equal(q.scales, q1.scales)
            assert q.tensor_scale == q1.tensor_scale


def test_stochastic_rounding_is_keyed():
    x = np.full(4096, 1.1, np.float32)
    a = lpx.cast(x, "e2m1", round="sr", seed=1)
    assert np.array_equal(a, lpx.cast(x, "e2m1", round="sr", seed=1))
    assert not np.array_equal(a, lpx.cast(x, "e2m1", round="sr", seed=2))
    assert not np.array_equal(a, lpx.cast(x, "e2m1", round="sr", seed=1, stream=1))
    # unbiased: the mean of the rounded values is close to 1.1 (1.0 and 1.5 the neighbours)
    assert abs(lpx.decode(a, "e2m1").mean() - 1.1) < 0.02


def test_quantized_tensor_round_trips():
    x = sample((40, 96), seed=8)
    x[~np.isfinite(x)] = 0
    for spec in ["mxfp4", "mxfp6_e2m3", "nvfp4", "fp8_block128", "e4m3:b32:pow2", "fp8_tensor"]:
        q = lpx.quantize(x, spec, axis=0) if spec not in ("fp8_tensor",) else lpx.quantize(x, spec)
        assert q.codes.shape == x.shape
        assert q.scales.dtype == (np.float32 if (":pow2" in spec or "fp8" in spec) else np.uint8)
        assert (q.tensor_scale is not None) == spec.startswith("nvfp4")
        v = q.dequantize()
        p = q.packed()
        n = x.size
        packed_size = {4: (n + 1) // 2, 6: 3 * ((n + 3) // 4), 8: n}[max(q.element_bits, 4) if q.element_bits != 5 else 6]
        assert p["codes"].ndim == 1 and p["codes"].size == packed_size
        back = lpx.QuantizedTensor.from_packed(p["codes"], p["scales"], p["spec"], p["shape"],
                                               p["axis"], p["tensor_scale"], p["headroom_3_4"])
        assert np.array_equal(back.codes, q.codes)
        assert np.array_equal(back.dequantize(), v)
        # a hand-built tensor from the same fields dequantizes the same
        h = lpx.QuantizedTensor(q.codes, q.scales, q.spec, q.axis, q.tensor_scale)
        assert np.array_equal(h.dequantize(), v)
    # scales on the block grid: (40, 96) in 1x32 blocks along axis 1 -> (40, 3)
    assert lpx.quantize(x, "mxfp4").scales.shape == (40, 3)
    assert lpx.quantize(x, "mxfp4", axis=0).scales.shape == (2, 96)
    assert lpx.quantize(x, "nvfp4_2d").scales.shape == (3, 6)


def test_pack_unpack():
    rng = np.random.default_rng(0)
    for bits in range(1, 9):
        c = rng.integers(0, 2**bits, 37).astype(np.uint8)
        p, name = lpx.pack(c, bits)
        assert np.array_equal(lpx.unpack(p, 37, bits), c)
        assert name in ("fp4_nibbles_low_first", "fp6_4in3_le", "u8")


def sylvester(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def test_hadamard_is_the_normalized_transform():
    x = sample((8, 64), seed=10)
    x[~np.isfinite(x)] = 0
    x = np.clip(x, -100, 100)
    for n in (16, 32, 64):
        s = lpx.hadamard_signs(n, seed=5, stream=2)
        assert set(np.unique(s)) <= {-1.0, 1.0}
        y = lpx.hadamard(x, n, signs=s)
        h = sylvester(n) / np.sqrt(n)
        want = (x.astype(np.float64).reshape(8, -1, n) * s) @ h.T
        np.testing.assert_allclose(y, want.reshape(8, 64), rtol=1e-6, atol=1e-6)
        # orthonormal: the same Q on both operands keeps the dot products
        z = sample((16, 64), seed=11)
        z[~np.isfinite(z)] = 0
        z = np.clip(z, -100, 100)
        np.testing.assert_allclose(lpx.hadamard(x, n, seed=5, stream=2) @ lpx.hadamard(z, n, seed=5, stream=2).T,
                                   x.astype(np.float64) @ z.T.astype(np.float64), rtol=1e-4, atol=1e-3)
    # down the columns (axis 0) is the transform of the transpose
    assert np.array_equal(lpx.hadamard(x.T.copy(), 8, axis=0), lpx.hadamard(x, 8).T)


def test_analyze_rows():
    x = sample((16, 64), seed=12)
    rows = lpx.analyze(x, ["mxfp8_e4m3", "mxfp4", "e2m1:16x16:e8m0"])
    assert {r["format"] for r in rows} == {"mxfp8_e4m3", "mxfp4", "e2m1:16x16:e8m0"}
    ok = [r for r in rows if not r["note"]]
    assert [r["sqnr_db"] for r in ok] == sorted(r["sqnr_db"] for r in ok)
    one_d = lpx.analyze(x.reshape(-1), ["e2m1:16x16:e8m0", "mxfp4"])
    assert one_d[-1]["format"] == "e2m1:16x16:e8m0" or not one_d[-1]["note"]


def test_gil_is_released():
    # two threads casting at once finish and agree with one thread's result
    x = sample((512, 1024), seed=13)
    ref = lpx.cast(x, "e4m3", round="sr", seed=3)
    results = [None, None]

    def work(k):
        results[k] = lpx.cast(x, "e4m3", round="sr", seed=3, threads=1)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(np.array_equal(r, ref) for r in results)


def test_recipes_validate(tmp_path):
    r = lpx.recipes.load("mxfp8")
    assert lpx.recipes.validate(r) == lpx.recipes.show("mxfp8")
    path = tmp_path / "r.json"
    path.write_text(lpx.recipes.show("nvfp4"))
    assert lpx.recipes.load(path)["name"] == "nvfp4"
    bad = dict(r)
    bad["roles"] = dict(r["roles"])
    bad["roles"]["fwd_x"] = dict(r["roles"]["fwd_x"], round="nearest")
    with pytest.raises(ValueError, match=r"roles\.fwd_x\.round"):
        lpx.recipes.validate(bad)
    with pytest.raises(ValueError):
        lpx.recipes.show("no-such-recipe")


def test_runs_load(lpx_bin, tmp_path):
    out = tmp_path / "run.h5"
    p = subprocess.run([lpx_bin, "train", "--model", "mlp", "--recipe", "mxfp8", "--steps", "4",
                        "--hidden", "32", "--batch", "32", "--eval-every", "2", "--threads", "1",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0 and "Fashion-MNIST" in p.stderr:
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, p.stderr
    run = lpx.runs.load(out)
    assert run.header["recipe"] == "mxfp8" and run.header["model"] == "mlp"
    assert run.steps == 4 and run.metrics["step"].tolist() == [0, 1, 2, 3]
    assert run.metrics["loss"].dtype == np.float64 and np.all(np.isfinite(run.metrics["loss"]))
    assert run.eval["step"].tolist() == [2, 4]
    # the losses the trainer printed (4 decimals) are the logged ones
    printed = [float(l.split("eval loss")[1].split()[0]) for l in p.stdout.splitlines() if "eval loss" in l]
    assert np.allclose(run.eval["loss"], printed, atol=5e-5)
    L = len(run.quant["layers"])
    assert L >= 1 and run.quant["roles"][0] == "fwd_x"
    assert run.quant["amax"].shape == (4, L, 6)
    assert len(run.quant["applied"]) == L * 6
    assert run.checkpoint_step == 4
    with pytest.raises(ValueError, match="nope.h5"):
        lpx.runs.load(tmp_path / "nope.h5")
    (tmp_path / "not.h5").write_bytes(b"hello")
    with pytest.raises(ValueError, match="not.h5"):
        lpx.runs.load(tmp_path / "not.h5")


def test_no_copy_of_contiguous_float32_input(tmp_path):
    # NumPy reports its buffers to tracemalloc: a copy of the 16 MiB input (in lpx's
    # Python layer or in pybind11's argument conversion) would show in the peak.
    import tracemalloc
    x = np.random.default_rng(0).standard_normal(1 << 22, dtype=np.float32)
    codes = np.empty(x.shape, np.uint8)
    values = np.empty(x.shape, np.float32)
    lpx.cast(x, "e4m3", out=codes)  # warm-up
    tracemalloc.start()
    try:
        lpx.cast(x, "e4m3", out=codes)
        lpx.fake_quantize(x, "mxfp4", out=values)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (1 << 20), peak
    # the rule's other side: a strided view is copied (and so shows up)
    tracemalloc.start()
    try:
        lpx.cast(x[::2], "e4m3")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak >= x[::2].nbytes
    # read-only (memory-mapped) input is read in place too
    np.save(tmp_path / "x.npy", x)
    m = np.load(tmp_path / "x.npy", mmap_mode="r")
    assert np.array_equal(lpx.cast(m, "e4m3"), codes)


def test_every_alias_names_its_format():
    al = lpx.aliases()
    assert al and set(al.values()) <= set(lpx.formats())
    for alias, canonical in al.items():
        i = lpx.info(alias)
        assert i.name == canonical and alias in i.aliases
        assert np.array_equal(lpx.table(alias)[1], lpx.table(canonical)[1], equal_nan=True)
    # finfo-like values agree with the code table
    for name in lpx.formats():
        i = lpx.info(name)
        codes, values = lpx.table(name)
        finite = values[np.isfinite(values)]
        assert i.max == finite.max() and i.min == finite.min()
        assert i.smallest_subnormal == finite[finite > 0].min()
        assert i.finite_codes == finite.size and i.codes == codes.size == 2 ** i.bits
        if not i.is_integer and i.mantissa_bits > 0:
            above_one = finite[finite > 1].min()
            assert i.eps == above_one - 1


def test_large_casts_with_streamed_stores():
    """Casts of more than 64 MiB of input and output (formats/src/cast.cpp: kStreamBytes)
    use non-temporal stores; byte codes there crashed on AVX2 (a 16-byte stream of an
    8-byte vector). The codes equal those of small (unstreamed) casts of the same slices."""
    n = (14 << 20) + 13  # past the threshold, with a ragged tail
    x = np.random.default_rng(9).standard_normal(n, dtype=np.float32) * 40
    for fmt, kw in (("e4m3fn", {}), ("e2m1", dict(overflow="sat")), ("e5m2", dict(round="rtz"))):
        codes = lpx.cast(x, fmt, **kw)
        for lo in (0, n // 2 + 3, n - 5000):
            assert np.array_equal(codes[lo:lo + 5000], lpx.cast(x[lo:lo + 5000], fmt, **kw)), (fmt, lo)
