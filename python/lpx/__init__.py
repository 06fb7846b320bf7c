"""lpx: bit-exact emulation of low-precision number formats (FP8, FP6, FP4, MX, NVFP4,
sub-4-bit) on NumPy arrays, over lpx's C++ library: the same bits as the `lpx` command
line (docs/python.md).

    >>> import numpy as np, lpx
    >>> x = np.random.default_rng(0).standard_normal((64, 128), dtype=np.float32)
    >>> codes = lpx.cast(x, "e4m3")                    # uint8 codes, shape (64, 128)
    >>> y = lpx.decode(codes, "e4m3")                  # float32 values
    >>> q = lpx.quantize(x, "mxfp4")                   # codes + e8m0 scales (64, 4)
    >>> xq = q.dequantize()                            # == lpx.fake_quantize(x, "mxfp4")
    >>> lpx.analyze(x, ["mxfp8_e4m3", "nvfp4"])        # `lpx analyze`'s rows

Inputs (lpx._arrays): float32 is used in place when C-contiguous, other float32 layouts
are copied once, float16/bfloat16 converted exactly, float64 rounded to float32 first
(RNE); other dtypes raise TypeError, empty arrays ValueError. Every bad argument raises
ValueError or TypeError with the CLI's one-line message; the GIL is released while the
library works; threads=0 uses OpenMP's default and the results never depend on it.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _core
from . import _arrays as _a
from . import _cuda
from ._quantized import QuantizedTensor
from . import recipes, runs

__version__ = _core.__version__

__all__ = [
    "formats", "aliases", "block_formats", "register_format", "info", "table", "FormatInfo", "cast", "decode",
    "quantize", "fake_quantize", "QuantizedTensor", "pack", "unpack", "hadamard",
    "hadamard_signs", "analyze", "load", "recipes", "runs",
]


def load(path, names=None):
    """The tensors of a .npy or .safetensors file, read by lpx's own reader (the CLI's
    checks and messages): {name: array} with float tensors as float32 (float16, bfloat16
    and float8 converted exactly) and uint8/uint16 tensors as codes; a .npy file's one
    tensor is named "". names: only these tensors of a .safetensors file."""
    import os
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    names = [] if names is None else [_a.str_arg("names[]", n) for n in names]
    return _core.load_tensors(os.fspath(path), names)


def formats():
    """The canonical names of the named element formats, in `lpx formats`' order. Aliases
    (aliases()) and the generic grammar [u]e<X>m<Y>[b<BIAS>][fn|fnuz|ieee] are accepted
    wherever a format is."""
    return _core.format_names()


def aliases():
    """{alias: canonical name} of every alias the CLI accepts."""
    return dict(_core.format_aliases())


def block_formats():
    """The block presets (mxfp8_e4m3 ... fp8_block128x128); any spec
    ELEMENT:BLOCK[:SCALE[:RULE]] is accepted too (docs/formats.md#block-formats)."""
    return _core.block_presets()


@dataclass(frozen=True)
class FormatInfo:
    """What `lpx info FORMAT` prints, as numbers (finfo-like). For integer formats bias is
    the number of fraction bits, eps the resolution, emin and min_normal None."""
    name: str
    aliases: list
    bits: int
    is_integer: bool
    is_signed: bool
    exponent_bits: int
    mantissa_bits: int
    bias: int
    emax: int
    emin: Optional[int]
    max: float
    min_normal: Optional[float]
    smallest_subnormal: float
    eps: float
    finite_codes: int
    codes: int
    specials: str
    has_inf: bool
    has_nan: bool
    has_zero: bool
    nan_code: Optional[int]
    inf_code: Optional[int]

    @property
    def min(self):
        """The smallest finite value: -max for signed floats; from the code table
        otherwise (two's complement integers have one more code below zero, unsigned
        formats start at 0, e8m0 at 2^-127)."""
        if self.is_signed and not self.is_integer:
            return -self.max
        values = _core.format_table(self.name)[1]
        return float(values[np.isfinite(values)].min())


def register_format(descriptor):
    """Registers a user-defined element format, as `lpx --format-file F.json` does
    (docs/formats.md#format-descriptor-files), after which its name goes wherever a format
    name goes (cast, decode, quantize specs, info, table) for the life of the process.

    `descriptor` is a dict with the file's keys (name, exponent_bits and mantissa_bits
    required; signed, bias, specials, subnormals, nan_codes, inf_codes, reserved_codes,
    notes optional) or the path of such a JSON file. The C++ reader of `--format-file`
    checks it, so both accept and refuse the same descriptors. Returns the format's name.
    ValueError (one line) for an unknown key, a value of the wrong type, a malformed
    format or a name already taken."""
    import json
    import os
    if isinstance(descriptor, (str, os.PathLike)):
        path = os.fspath(descriptor)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read((1 << 16) + 1)  # one byte past the limit: refused as too long
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from None
        origin = path
    elif isinstance(descriptor, dict):
        try:
            text = json.dumps(descriptor)
        except (TypeError, ValueError) as e:
            raise ValueError(f"a format descriptor holds JSON values only: {e}") from None
        origin = "format descriptor"
    else:
        raise ValueError("a format descriptor is a dict (a JSON object) or a file's path")
    return _core.register_format_json(text, origin)


def info(name):
    """Properties of one element format (name, alias or generic eXmY)."""
    return FormatInfo(**_core.format_info(_a.str_arg("name", name)))


def table(name):
    """Every code of a format with its value, as `lpx table`: (codes uint32, values
    float64), both of length 2^bits."""
    return _core.format_table(_a.str_arg("name", name))


def _threads(threads):
    return _a.int_arg("threads", threads, 0, _a.MAX_THREADS)


def cast(x, to, round="rne", overflow="ieee", seed=None, stream=None, sr_bits=None,
         emit="codes", threads=0, out=None, random_words=None):
    """Element cast of every value of x to format `to`, as `lpx cast`.

    round: rne (default), rna, rtz, rup, rdn, rto (to odd), or the stochastic sr, sr-fast,
    sr-rne, sr-odd (docs/formats.md states each rule); overflow: ieee (default; Inf/NaN as
    ml_dtypes) or sat (clamp to +-max). seed/stream/sr_bits: stochastic rounding's Philox
    key, stream and random bits (only with a stochastic round; element i of x in C order
    uses random_bits(seed, stream, i)). random_words: a uint32 array of at least x.size
    words that replaces Philox's (element i takes word i; its top sr_bits bits are r), as
    `--random-words`. emit="codes" returns the codes (uint8, or uint16 for 9- to 16-bit
    formats), emit="values" the float32 values after the round trip; both in x's shape.
    out: an array to write the result into (C-contiguous, of the result's dtype and
    shape). float64 input is rounded to float32 first (see lpx._arrays).
    """
    to = _a.str_arg("to", to)
    round, overflow, emit = (_a.str_arg(n, v) for n, v in
                             (("round", round), ("overflow", overflow), ("emit", emit)))
    _core.rounding_check(round)
    words = _a.random_words_arg(round, seed, stream, random_words)
    seed, stream, sr_bits = _a.sr_options(round, seed, stream, sr_bits)
    threads = _threads(threads)
    bits = _core.format_bits(to)
    if _a.is_cuda(x):
        return _cuda.cast(x, to, round, overflow, seed, stream, sr_bits, emit, out, words)
    xf = _a.float_input(x)
    if out is not None:
        dtype = np.float32 if emit == "values" else (np.uint8 if bits <= 8 else np.uint16)
        _a.out_array(out, xf.shape, dtype, xf)
    return _core.cast(xf, to, round, overflow, seed, stream, sr_bits, emit, threads, out, words)


def decode(codes, fmt, threads=0, out=None):
    """Codes of format fmt (uint8, or uint16 for formats wider than 8 bits) to float32
    values of the same shape, as `lpx decode`. A code with bits above the format's width
    is a ValueError naming the first one."""
    fmt = _a.str_arg("fmt", fmt)
    bits = _core.format_bits(fmt)
    name = _core.format_info(fmt)["name"]
    threads = _threads(threads)
    if _a.is_cuda(codes):
        return _cuda.decode(codes, fmt, out)
    c = _a.code_input(codes, np.uint8 if bits <= 8 else np.uint16, name)
    _a.out_array(out, c.shape, np.float32, c)
    return _core.decode(c, fmt, threads, out)


def _quantize_args(fmt, block, axis, scale_rule, round, seed, stream, sr_bits, headroom_3_4,
                   flush_subnormals, threads, random_words=None):
    a = _core.QuantizeArgs()
    a.format = _a.str_arg("fmt", fmt)
    a.round = _a.str_arg("round", round)
    _core.rounding_check(a.round)
    a.random_words = _a.random_words_arg(a.round, seed, stream, random_words)
    a.seed, a.stream, a.sr_bits = _a.sr_options(round, seed, stream, sr_bits)
    if block is not None:
        a.block = _a.int_arg("block", block, 1, _a.INT64_MAX)
    if axis is not None:
        a.axis = _a.int_arg("axis", axis, _a.INT_MIN, _a.INT_MAX)
    if scale_rule is not None:
        a.scale_rule = _a.str_arg("scale_rule", scale_rule)
    for n, v in (("headroom_3_4", headroom_3_4), ("flush_subnormals", flush_subnormals)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{n} must be a bool, not {type(v).__name__}")
    a.headroom_3_4 = bool(headroom_3_4)
    a.flush_subnormals = bool(flush_subnormals)
    a.threads = _threads(threads)
    return a


def quantize(x, fmt, block=None, axis=None, scale_rule=None, round="rne", seed=None,
             stream=None, sr_bits=None, headroom_3_4=False, flush_subnormals=False,
             threads=0, random_words=None):
    """Block quantization of x to a block format, as `lpx quantize --emit packed`.

    fmt: a preset (mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4, mxint8, nvfp4,
    nvfp4_2d, fp8_tensor, fp8_block128, fp8_block128x128) or ELEMENT:BLOCK[:SCALE[:RULE]]
    (docs/formats.md#block-formats). block: the length N of 1xN blocks; axis: the axis
    they run along (default -1); scale_rule: floor|rceil|ceil|even (e8m0/pow2 scales).
    round/seed/stream/sr_bits/random_words as in cast() (element i in C order takes
    word i); elements saturate. headroom_3_4: scale from
    x, cast x * 3/4 (dequantize divides by 0.75); flush_subnormals: zero float32
    subnormal inputs first. Returns a QuantizedTensor (codes in x's shape, scales on the
    block grid, the NVFP4 tensor scale, the spec, the axis).
    """
    a = _quantize_args(fmt, block, axis, scale_rule, round, seed, stream, sr_bits,
                       headroom_3_4, flush_subnormals, threads, random_words)
    if _a.is_cuda(x):
        raise ValueError("lpx.quantize takes CPU arrays: for a CUDA tensor use lpx.fake_quantize "
                         "(on the device) or quantize x.cpu()")
    d = _core.quantize(_a.float_input(x), a)
    return QuantizedTensor(d["codes"], d["scales"], d["spec"], d["axis"], d["tensor_scale"],
                           d["headroom_3_4"], amax=d["amax"], stats=d["stats"], _checked=True)


def fake_quantize(x, fmt, block=None, axis=None, scale_rule=None, round="rne", seed=None,
                  stream=None, sr_bits=None, headroom_3_4=False, flush_subnormals=False,
                  threads=0, out=None, random_words=None):
    """quantize(x, ...).dequantize() in one fused pass, without the codes: the float32
    values of `lpx quantize --emit values` (same arguments as quantize(); out as in
    cast())."""
    a = _quantize_args(fmt, block, axis, scale_rule, round, seed, stream, sr_bits,
                       headroom_3_4, flush_subnormals, threads, random_words)
    if _a.is_cuda(x):
        return _cuda.fake_quantize(x, a, out)
    xf = _a.float_input(x)
    _a.out_array(out, xf.shape, np.float32, xf)
    return _core.fake_quantize(xf, a, out)


def pack(codes, bits):
    """Element codes (uint8, one per byte) packed densely as `lpx quantize --emit packed`
    writes them (formats/packing.hpp): (packed uint8 1-D, packing name)."""
    bits = _a.int_arg("bits", bits, 1, 8)
    c = _a.code_input(codes, np.uint8, f"a {bits}-bit format")
    return _core.pack(c.reshape(-1), bits)


def unpack(packed, n, bits):
    """The inverse of pack(): n codes (uint8, 1-D) from packed bytes."""
    bits = _a.int_arg("bits", bits, 1, 8)
    n = _a.int_arg("n", n, 1, _a.INT64_MAX)
    p = _a.code_input(packed, np.uint8, "packed codes", name="packed")
    return _core.unpack(p.reshape(-1), n, bits)


def hadamard_signs(n, seed, stream=0):
    """The recipes' Philox sign vector (float32 +-1, length n): s_j = -1 iff the top bit
    of random_bits(seed, stream, j) is set (numerics/hadamard.hpp)."""
    n = _a.int_arg("n", n, 1, 1 << 20)
    return _core.hadamard_signs(n, _a.int_arg("seed", seed, 0, _a.UINT64_MAX),
                                _a.int_arg("stream", stream, 0, _a.UINT32_MAX))


def hadamard(x, n, axis=-1, signs=None, seed=None, stream=0):
    """The (random) Hadamard transform the recipes use: every run of n consecutive
    elements along `axis` of a 1-D or 2-D array becomes (1/sqrt n) H_n diag(s) of it
    (numerics/hadamard.hpp's hadamard_blocks; n in 1, 2, 4, ..., 128; the extent along
    axis a multiple of n). signs: a length-n +-1 vector, or seed (and stream) for
    hadamard_signs(n, seed, stream), or neither (all +1, the plain normalized
    transform). Returns a new float32 array."""
    xf = _a.float_input(x)
    n = _a.int_arg("n", n, 1, 128)
    axis = _a.int_arg("axis", axis, _a.INT_MIN, _a.INT_MAX)
    if xf.ndim not in (1, 2):
        raise ValueError(f"hadamard takes a 1-D or 2-D array, not {xf.ndim}-D")
    if not -xf.ndim <= axis < xf.ndim:
        raise ValueError(f"axis {axis} is out of range for a {xf.ndim}-D array")
    if signs is not None and seed is not None:
        raise ValueError("signs and seed conflict: give one")
    if seed is not None:
        signs = hadamard_signs(n, seed, stream)
    elif signs is not None:
        signs = np.ascontiguousarray(signs, dtype=np.float32)
        if signs.shape != (n,):
            raise ValueError(f"signs has shape {signs.shape}; the transform needs ({n},)")
    if xf.ndim == 1:
        rows, cols, ax = 1, xf.shape[0], 1
    else:
        rows, cols = xf.shape
        ax = axis % 2
    return _core.hadamard(xf, rows, cols, ax, n, signs)


def analyze(x, formats=None, round="rne", seed=None, name=""):
    """What each format does to x: `lpx analyze --json`'s rows (tensor, format, elements,
    nonfinite, sqnr_db, mse, max_abs_error, max_rel_error, flushed_pct, saturated_pct,
    clamped_blocks_pct, note), worst SQNR first and formats that do not apply last, as
    the CLI sorts them. formats: block presets, block specs or element formats (default:
    the CLI's list); round/seed as the CLI's --round/--seed."""
    if formats is None:
        formats = _core.default_analyze_formats.split(",")
    elif isinstance(formats, str):
        formats = [f for f in formats.split(",") if f]
    formats = [_a.str_arg("formats[]", f) for f in formats]
    if not formats:
        raise ValueError("formats needs at least one format")
    round = _a.str_arg("round", round)
    _core.rounding_check(round)
    if seed is not None and round not in _a.STOCHASTIC:
        raise ValueError("seed needs round='sr' (or sr-fast, sr-rne, sr-odd)")
    seed = 0 if seed is None else _a.int_arg("seed", seed, 0, _a.UINT64_MAX)
    xf = _a.float_input(x)
    rows = _core.analyze(xf, formats, round, seed)
    tensor = f"{name}{' ' if name else ''}[{_a.shape_text(xf.shape) or 'scalar'}]"
    for r in rows:
        r["tensor"] = tensor
    # Worst SQNR first; rows where the format did not apply go last (stable, as the CLI).
    return sorted(rows, key=lambda r: (r["note"] != "", r["sqnr_db"] if r["note"] == "" else 0))
