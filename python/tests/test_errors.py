"""Bad input raises one ValueError or TypeError carrying the CLI's one-line message
(option names spelled as keywords: --scale-rule is scale_rule); nothing crashes the
interpreter (docs/python.md#errors)."""
import subprocess
import sys

import numpy as np
import pytest

import lpx
from conftest import cli_error, sample

# The CLI's option names as the keyword arguments spell them.
KEYWORDS = [("--seed, --stream and --sr-bits need --round sr", "seed, stream and sr_bits need round='sr'"),
            ("--scale-rule", "scale_rule"), ("--block", "block"), ("--axis", "axis")]


def as_keywords(message):
    for cli_words, py_words in KEYWORDS:
        message = message.replace(cli_words, py_words)
    return message


def without_path(message):
    """'x.npy: what' -> 'what' (the CLI names the file; an array has no name)."""
    return message.split(": ", 1)[1]


@pytest.fixture
def x_npy(tmp_path):
    x = sample((8, 64), seed=1)
    np.save(tmp_path / "x.npy", x)
    return x


def raises_like(exc, cli_message, fn, *args, **kw):
    with pytest.raises(exc) as e:
        fn(*args, **kw)
    assert str(e.value) == cli_message
    return e


def test_unknown_names_carry_the_cli_message(cli, x_npy):
    msg = cli_error(cli("cast", "--to", "e9m9z", "x.npy", "o.npy", check=False))
    raises_like(ValueError, msg, lpx.cast, x_npy, "e9m9z")
    raises_like(ValueError, msg, lpx.decode, np.zeros(3, np.uint8), "e9m9z")
    raises_like(ValueError, msg, lpx.info, "e9m9z")
    msg = cli_error(cli("cast", "--to", "e4m3", "--round", "nearest", "x.npy", "o.npy", check=False))
    raises_like(ValueError, msg, lpx.cast, x_npy, "e4m3", round="nearest")
    msg = cli_error(cli("cast", "--to", "e4m3", "--overflow", "wrap", "x.npy", "o.npy", check=False))
    raises_like(ValueError, msg, lpx.cast, x_npy, "e4m3", overflow="wrap")
    msg = cli_error(cli("quantize", "--format", "mxfp5", "x.npy", "o.npy", check=False))
    raises_like(ValueError, msg, lpx.quantize, x_npy, "mxfp5")
    raises_like(ValueError, msg, lpx.fake_quantize, x_npy, "mxfp5")
    msg = cli_error(cli("quantize", "--format", "mxfp4", "--scale-rule", "up", "x.npy", "o.npy", check=False))
    raises_like(ValueError, msg, lpx.quantize, x_npy, "mxfp4", scale_rule="up")
    msg = cli_error(cli("analyze", "--formats", "mxfp4,nope", "x.npy", check=False))
    raises_like(ValueError, msg, lpx.analyze, x_npy, ["mxfp4", "nope"])
    msg = cli_error(cli("recipes", "show", "nope", check=False))
    raises_like(ValueError, msg, lpx.recipes.show, "nope")


def test_conflicting_options_carry_the_cli_message(cli, x_npy):
    cases = [
        (["cast", "--to", "e4m3", "--seed", "3"], lambda: lpx.cast(x_npy, "e4m3", seed=3)),
        (["quantize", "--format", "mxfp4", "--stream", "1"], lambda: lpx.quantize(x_npy, "mxfp4", stream=1)),
        (["quantize", "--format", "nvfp4", "--scale-rule", "floor"],
         lambda: lpx.quantize(x_npy, "nvfp4", scale_rule="floor")),
        (["quantize", "--format", "nvfp4_2d", "--axis", "0"], lambda: lpx.quantize(x_npy, "nvfp4_2d", axis=0)),
        (["quantize", "--format", "fp8_tensor", "--block", "16"], lambda: lpx.fake_quantize(x_npy, "fp8_tensor", block=16)),
        (["quantize", "--format", "mxfp4", "--axis", "2"], lambda: lpx.quantize(x_npy, "mxfp4", axis=2)),
        (["cast", "--to", "e4m3", "--emit", "bits"], lambda: lpx.cast(x_npy, "e4m3", emit="bits")),
    ]
    for args, call in cases:
        msg = as_keywords(cli_error(cli(*args, "x.npy", "o.npy", check=False)))
        if "--emit" in args:
            msg = msg.replace("--emit must be codes or values", "emit must be codes or values")
        raises_like(ValueError, msg, call)


def test_out_of_range_numbers():
    x = np.ones(4, np.float32)
    for kw in [dict(seed=-1), dict(seed=2**64), dict(stream=2**32), dict(sr_bits=0), dict(sr_bits=33)]:
        with pytest.raises(ValueError, match="is not a whole number in"):
            lpx.cast(x, "e4m3", round="sr", **kw)
    for kw in [dict(seed=1.5), dict(seed="7"), dict(seed=True)]:
        with pytest.raises(TypeError):
            lpx.cast(x, "e4m3", round="sr", **kw)
    with pytest.raises(ValueError, match="threads"):
        lpx.cast(x, "e4m3", threads=100000)
    with pytest.raises(ValueError, match="block 0 is not a whole number"):
        lpx.quantize(x, "mxfp4", block=0)
    with pytest.raises(TypeError):
        lpx.cast(x, 8)


def test_wrong_dtypes_and_empty_arrays(cli, tmp_path):
    for bad in [np.arange(6, dtype=np.int32), np.ones(3, np.complex64), np.array(["a"]), np.ones(2, bool)]:
        with pytest.raises(TypeError, match="lpx takes float32"):
            lpx.cast(bad, "e4m3")
        with pytest.raises(TypeError):
            lpx.quantize(bad, "mxfp4")
    np.save(tmp_path / "e.npy", np.zeros((0, 4), np.float32))
    msg = without_path(cli_error(cli("cast", "--to", "e4m3", "e.npy", "o.npy", check=False)))
    for fn in (lambda a: lpx.cast(a, "e4m3"), lambda a: lpx.quantize(a, "mxfp4"),
               lambda a: lpx.fake_quantize(a, "nvfp4"), lambda a: lpx.analyze(a)):
        raises_like(ValueError, msg, fn, np.zeros((0, 4), np.float32))
    # codes: the dtype the format's codes have, and codes that fit it
    np.save(tmp_path / "c.npy", np.ones(4, np.float32))
    msg = without_path(cli_error(cli("decode", "--from", "e4m3", "c.npy", "o.npy", check=False)))
    raises_like(TypeError, "codes " + msg.replace("holds", "hold", 1).replace("tensor", "array"),
                lpx.decode, np.ones(4, np.float32), "e4m3")
    with pytest.raises(TypeError, match="codes of bfloat16 are uint16"):
        lpx.decode(np.ones(4, np.uint8), "bf16")
    c = np.array([1, 2, 3, 0x1F], np.uint8)
    np.save(tmp_path / "c.npy", c)
    msg = without_path(cli_error(cli("decode", "--from", "e2m1", "c.npy", "o.npy", check=False)))
    raises_like(ValueError, msg, lpx.decode, c, "e2m1")


def test_out_arrays_are_checked():
    x = sample((4, 32))
    with pytest.raises(TypeError):
        lpx.cast(x, "e4m3", out=np.empty(x.shape, np.uint16))
    with pytest.raises(ValueError):
        lpx.cast(x, "e4m3", out=np.empty((4, 31), np.uint8))
    with pytest.raises(ValueError):
        lpx.cast(x, "e4m3", out=np.empty((32, 4), np.uint8).T)
    with pytest.raises(ValueError, match="overlaps"):
        lpx.cast(x, "e4m3", emit="values", out=x)
    ro = np.empty(x.shape, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        lpx.fake_quantize(x, "mxfp4", out=ro)


def test_mismatched_quantized_tensor(cli, tmp_path):
    x = sample((8, 64), seed=2)
    x[~np.isfinite(x)] = 0
    np.save(tmp_path / "x.npy", x)
    q = lpx.quantize(x, "mxfp4")
    # scales of the wrong size: the CLI's `lpx dequantize` message for the same files
    cli("quantize", "--format", "mxfp4", "--emit", "packed", "x.npy", "p.npy")
    np.save(tmp_path / "p.scales.npy", q.scales.reshape(-1)[:-1])
    msg = without_path(cli_error(cli("dequantize", "--format", "mxfp4", "--shape", "8x64", "p.npy",
                                     "d.npy", check=False)))
    raises_like(ValueError, msg, lpx.QuantizedTensor, q.codes, q.scales.reshape(-1)[:-1], q.spec, q.axis)
    # scales of the wrong dtype
    with pytest.raises(ValueError, match="scales must be 16 uint8 values"):
        lpx.QuantizedTensor(q.codes, q.scales.astype(np.float32), q.spec, q.axis)
    # the right count in the wrong shape
    with pytest.raises(ValueError, match="not the scale grid 8x2"):
        lpx.QuantizedTensor(q.codes, q.scales.reshape(2, 8), q.spec, q.axis)
    # codes that do not fit the element
    bad = q.codes.copy()
    bad[1, 2] = 0x1F
    with pytest.raises(ValueError, match="does not fit float4_e2m1fn"):
        lpx.QuantizedTensor(bad, q.scales, q.spec, q.axis)
    # an NVFP4 tensor without its tensor scale, and a stray one
    n = lpx.quantize(x, "nvfp4")
    with pytest.raises(ValueError, match="needs a float32 tensor_scale"):
        lpx.QuantizedTensor(n.codes, n.scales, n.spec, n.axis)
    with pytest.raises(ValueError, match="tensor_scale is for two-level"):
        lpx.QuantizedTensor(q.codes, q.scales, q.spec, q.axis, tensor_scale=1.0)
    # an axis beyond the codes' rank
    with pytest.raises(ValueError):
        lpx.QuantizedTensor(q.codes, q.scales, q.spec, 5)
    # a field changed after construction is checked again by dequantize()
    q.scales = q.scales[:, :1]
    with pytest.raises(ValueError, match="scales must be"):
        q.dequantize()


def test_hadamard_errors():
    x = np.ones((4, 48), np.float32)
    with pytest.raises(ValueError, match="not a multiple of the Hadamard size 32"):
        lpx.hadamard(x, 32)
    with pytest.raises(ValueError, match="not a power of two"):
        lpx.hadamard(x, 12)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        lpx.hadamard(np.ones((2, 2, 16), np.float32), 16)
    with pytest.raises(ValueError, match="conflict"):
        lpx.hadamard(x, 16, signs=np.ones(16), seed=1)


def test_bad_input_never_crashes_the_interpreter():
    # every error above in a fresh interpreter: it ends normally (no signal, no abort)
    code = (
        "import numpy as np, lpx\n"
        "bad = [lambda: lpx.cast(np.ones(3, np.float32), 'zz'), lambda: lpx.decode(np.ones(3, np.uint8), 'e2m1'),\n"
        "       lambda: lpx.QuantizedTensor(np.zeros((4, 4), np.uint8), np.zeros(0, np.uint8), 'mxfp4'),\n"
        "       lambda: lpx.quantize(np.ones((2, 2), np.float32), 'nvfp4_2d', axis=0),\n"
        "       lambda: lpx.runs.load('/nonexistent/run.h5'), lambda: lpx.hadamard(np.ones(5, np.float32), 4),\n"
        "       lambda: lpx.unpack(np.zeros(1, np.uint8), 5, 4), lambda: lpx.pack(np.full(3, 200, np.uint8), 4)]\n"
        "for f in bad:\n"
        "    try:\n        f()\n    except (ValueError, TypeError):\n        pass\n"
        "print('ok')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_random_words_refusals(x_npy):
    w = np.zeros(x_npy.size, dtype=np.uint32)
    with pytest.raises(ValueError, match="needs a stochastic round"):
        lpx.cast(x_npy, "e4m3", random_words=w)
    with pytest.raises(ValueError, match="drop seed and stream"):
        lpx.cast(x_npy, "e4m3", round="sr", seed=1, random_words=w)
    with pytest.raises(TypeError, match="uint32"):
        lpx.cast(x_npy, "e4m3", round="sr", random_words=w.astype(np.int64))
    with pytest.raises(ValueError):  # fewer words than elements: the library's one line
        lpx.cast(x_npy, "e4m3", round="sr", random_words=w[:-1])
    with pytest.raises(ValueError):
        lpx.quantize(x_npy, "mxfp4", round="sr-rne", random_words=w[:-1])
