"""Input rules shared by every lpx function (docs/python.md#inputs).

Values: float32 arrays are used in place when C-contiguous, aligned and native-endian
(zero copy); any other float32 array (strided views, Fortran order, byte-swapped) is
copied once into a C-order float32 array. float16 and bfloat16 (ml_dtypes) are converted
exactly to float32. float64 is rounded to float32 first (round to nearest, ties to even,
as NumPy's astype; values beyond float32's range become +-inf), and the format's rounding
applies to that float32: a double rounding, so pass float32 when the last bit matters.
Every other dtype is a TypeError; an array without elements is a ValueError, as it is for
every tensor command of the CLI ("empty input (no elements)").

DLPack: an object with __dlpack__ (a PyTorch CPU tensor, ...) is read through
np.from_dlpack (zero copy) and then follows the same rules; CUDA tensors go to lpx._cuda
from cast, decode and fake_quantize and are a ValueError elsewhere
(docs/python.md#dlpack).
"""
import numpy as np

# DLPack device types (docs/python.md#dlpack)
DL_CPU, DL_CUDA = 1, 2

MAX_THREADS = 1024  # as the CLI's --threads (tools/lpx/cli_util.hpp)
UINT64_MAX = 2**64 - 1
UINT32_MAX = 2**32 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1


def dlpack_device(x):
    """(device type, device id) of an object that is not an ndarray but has __dlpack__
    (a PyTorch tensor, ...), else None."""
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        return None
    dev = x.__dlpack_device__()
    return int(dev[0]), int(dev[1])


def is_cuda(x):
    d = dlpack_device(x)
    return d is not None and d[0] == DL_CUDA


def is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def from_dlpack(x, name):
    """x's data as an ndarray when x is a CPU object with __dlpack__ (zero copy through
    np.from_dlpack; a tensor that requires grad is detached first, bfloat16 PyTorch
    tensors are widened exactly to float32), else None. CUDA tensors are a ValueError here:
    only cast, decode and fake_quantize take them."""
    dev = dlpack_device(x)
    if dev is None:
        return None
    if dev[0] == DL_CUDA:
        raise ValueError(f"{name} is a CUDA tensor: this call takes CPU arrays (lpx.cast, lpx.decode "
                         f"and lpx.fake_quantize take CUDA tensors)")
    if dev[0] != DL_CPU:
        raise ValueError(f"{name} is on DLPack device type {dev[0]}; lpx takes CPU arrays and CUDA tensors")
    if getattr(x, "requires_grad", False) and hasattr(x, "detach"):
        x = x.detach()
    if is_torch(x) and str(x.dtype) == "torch.bfloat16":
        import torch
        bits = np.from_dlpack(x.view(torch.int16)).view(np.uint16)
        return (bits.astype(np.uint32) << 16).view(np.float32)
    try:
        return np.from_dlpack(x)
    except (TypeError, ValueError, RuntimeError, BufferError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TypeError(f"{name}: NumPy cannot read it through DLPack ({why})") from None


def float_input(x, name="x"):
    """x as a C-contiguous native float32 ndarray (see the module docstring)."""
    if not isinstance(x, np.ndarray):
        d = from_dlpack(x, name)
        x = x if d is None else d
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    dt = a.dtype
    if dt.kind == "f" and dt.itemsize == 4:  # float32 of either byte order
        if not (a.flags.c_contiguous and a.flags.aligned and dt.isnative):
            a = np.ascontiguousarray(a, dtype=np.float32)
    elif (dt.kind == "f" and dt.itemsize in (2, 8)) or dt.name == "bfloat16":
        a = np.ascontiguousarray(a.astype(np.float32))
    else:
        raise TypeError(
            f"{name} holds {dt} values; lpx takes float32, float16, bfloat16 or float64 "
            f"(codes go to lpx.decode)")
    if a.size == 0:
        raise ValueError("empty input (no elements)")
    return a


def code_input(codes, want, fmt_name, name="codes"):
    """codes as a C-contiguous native array of dtype `want` (uint8 or uint16)."""
    if not isinstance(codes, np.ndarray):
        d = from_dlpack(codes, name)
        codes = codes if d is None else d
    a = codes if isinstance(codes, np.ndarray) else np.asarray(codes)
    if a.dtype.kind not in "ui" or a.dtype.itemsize != np.dtype(want).itemsize or a.dtype.kind != "u":
        values = a.dtype.kind == "f" or a.dtype.name == "bfloat16"
        raise TypeError(
            f"{name} hold {a.dtype}, but the codes of {fmt_name} are {np.dtype(want)}"
            + (" (a float array holds values, not codes)" if values else ""))
    if not (a.flags.c_contiguous and a.flags.aligned and a.dtype.isnative):
        a = np.ascontiguousarray(a, dtype=want)
    if a.size == 0:
        raise ValueError("empty input (no codes)")
    return a


def out_array(out, shape, dtype, x):
    """The caller's out= array, checked: an ndarray of `dtype` and `shape`, C-contiguous,
    writeable and not overlapping the input (the library writes it in place)."""
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, not {type(out).__name__}")
    if out.dtype != np.dtype(dtype) or not out.dtype.isnative:
        raise TypeError(f"out holds {out.dtype}; this result is {np.dtype(dtype)}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}; the result has shape {tuple(shape)}")
    if not (out.flags.c_contiguous and out.flags.writeable and out.flags.aligned):
        raise ValueError("out must be a writeable, C-contiguous array")
    if np.may_share_memory(out, x):
        raise ValueError("out overlaps the input; give a separate array")
    return out


def int_arg(name, value, lo, hi):
    """A whole-number option in [lo, hi], as the CLI's range-checked options (bool, float
    and str are TypeErrors, not truncated)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} {value} is not a whole number in [{lo}, {hi}]")
    return value


def str_arg(name, value):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


# The stochastic rounding modes (docs/formats.md: sr and its variants).
STOCHASTIC = ("sr", "sr-fast", "sr-rne", "sr-odd")


def sr_options(round, seed, stream, sr_bits):
    """(seed, stream, sr_bits) with their defaults; giving any of them without a
    stochastic round is the CLI's conflict error."""
    if (seed is not None or stream is not None or sr_bits is not None) and round not in STOCHASTIC:
        raise ValueError("seed, stream and sr_bits need round='sr' (or sr-fast, sr-rne, sr-odd)")
    seed = 0 if seed is None else int_arg("seed", seed, 0, UINT64_MAX)
    stream = 0 if stream is None else int_arg("stream", stream, 0, UINT32_MAX)
    sr_bits = 32 if sr_bits is None else int_arg("sr_bits", sr_bits, 1, 32)
    return seed, stream, sr_bits


def shape_text(shape):
    return "x".join(str(d) for d in shape)


def random_words_arg(round, seed, stream, words):
    """Caller-given random words (docs/formats.md#caller-given-random-bits) as a C-order
    uint32 array, or None; the CLI's --random-words conflicts. The library refuses words
    that do not cover the input."""
    if words is None:
        return None
    if round not in STOCHASTIC:
        raise ValueError("random_words needs a stochastic round (sr, sr-fast, sr-rne, sr-odd)")
    if seed is not None or stream is not None:
        raise ValueError("random_words replaces the Philox stream: drop seed and stream")
    w = np.asarray(words)
    if w.dtype != np.uint32:
        raise TypeError(f"random_words must be a uint32 array, not {w.dtype}")
    return np.ascontiguousarray(w).reshape(-1)
