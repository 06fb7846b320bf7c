"""CUDA tensors through DLPack (docs/python.md#dlpack).

lpx.cast, lpx.decode and lpx.fake_quantize hand a CUDA tensor (any object whose
__dlpack_device__() is (2, id), kDLCUDA) to the kernels library's device API
(kernels/include/lpx/kernels/cast.hpp, quantize.hpp) through its DLPack capsule: no copy
to the host. The result goes to `out=` (a CUDA tensor of the result's dtype and shape)
or, for a torch.Tensor input, to a new tensor on the input's device. Inputs must be
C-contiguous (a torch.Tensor is made contiguous first). The kernels run on the default
stream (DLPack's stream=None). Without lpx's CUDA module or without a device the kernels
library's "no CUDA device: ..." line is raised as a ValueError.
"""
from . import _arrays as _a
from . import _core


def _prepare(x):
    if _a.is_torch(x):
        x = x.detach()
        if not x.is_contiguous():
            x = x.contiguous()
    return x


def _out(x, out, dtype):
    """out= checked to be a CUDA DLPack object, or a new torch tensor like x."""
    if out is not None:
        if not _a.is_cuda(out):
            raise TypeError("out must be a CUDA tensor (an object with __dlpack__) when x is one")
        return out
    if _a.is_torch(x):
        import torch
        return torch.empty(tuple(x.shape), dtype=getattr(torch, dtype), device=x.device)
    raise ValueError("a CUDA input that is not a torch.Tensor needs out= (a CUDA array of the result's "
                     "dtype and shape)")


def cast(x, to, round, overflow, seed, stream, sr_bits, emit, out, words):
    if words is not None:
        raise ValueError("random_words are host memory: a CUDA tensor takes seed and stream")
    x = _prepare(x)
    # torch has no uint16 (1.13): 9- to 16-bit codes go into int16 with the same bits
    dtype = "float32" if emit == "values" else ("uint8" if _core.format_bits(to) <= 8 else "int16")
    o = _out(x, out, dtype)
    _core.cuda_cast(x.__dlpack__(), o.__dlpack__(), to, round, overflow, seed, stream, sr_bits, emit)
    return o


def decode(codes, fmt, out):
    codes = _prepare(codes)
    o = _out(codes, out, "float32")
    _core.cuda_decode(codes.__dlpack__(), o.__dlpack__(), fmt)
    return o


def fake_quantize(x, args, out):
    x = _prepare(x)
    o = _out(x, out, "float32")
    _core.cuda_fake_quantize(x.__dlpack__(), o.__dlpack__(), args)
    return o
