"""DLPack input (docs/python.md#dlpack): CPU tensors of any DLPack producer (PyTorch) go
through the same calls as NumPy arrays, read in place; CUDA tensors go to the kernels
library's device API, which refuses in one line where there is no CUDA module or device.

No GPU is needed: a CUDA tensor is imitated by a hand-made DLPack capsule (device type
kDLCUDA) whose pointer is never dereferenced, because the kernels library refuses before
any CUDA call. Under the CPU stand-in for the CUDA module (ctest
python_dlpack_mock_module) the imitations point at NumPy buffers and run the whole path.
test_cuda_tensors_match_the_cpu only runs where torch sees a CUDA device."""
import ctypes
import os

import numpy as np
import pytest

import lpx
from lpx import _arrays, _core

from conftest import sample


class Wrapped:
    """A DLPack producer that is not NumPy or torch: it hands out an ndarray's capsule."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_any_cpu_dlpack_producer_is_read_in_place():
    x = sample((8, 64), seed=3)
    w = Wrapped(x)
    assert np.shares_memory(_arrays.float_input(w), x)  # zero copy
    assert np.array_equal(lpx.cast(w, "e4m3"), lpx.cast(x, "e4m3"))
    assert np.array_equal(lpx.fake_quantize(w, "mxfp4"), lpx.fake_quantize(x, "mxfp4"), equal_nan=True)


# --- PyTorch CPU tensors -------------------------------------------------------------

torch = pytest.importorskip("torch")


def test_torch_float32_is_zero_copy_and_bit_identical():
    x = sample((16, 64), seed=1)
    t = torch.from_numpy(x.copy())
    assert np.shares_memory(_arrays.float_input(t), t.numpy())
    for fmt in ("e4m3", "e2m1", "bf16"):
        assert np.array_equal(lpx.cast(t, fmt, round="sr", seed=5), lpx.cast(x, fmt, round="sr", seed=5))
    q, qn = lpx.quantize(t, "nvfp4"), lpx.quantize(x, "nvfp4")
    assert np.array_equal(q.codes, qn.codes) and np.array_equal(q.scales, qn.scales)
    assert q.tensor_scale == qn.tensor_scale
    assert np.array_equal(lpx.fake_quantize(t, "mxfp8_e4m3"), lpx.fake_quantize(x, "mxfp8_e4m3"),
                          equal_nan=True)
    finite = np.random.default_rng(1).standard_normal((16, 64), dtype=np.float32)
    rows = lpx.analyze(torch.from_numpy(finite), ["mxfp4", "e4m3"])
    assert rows == lpx.analyze(finite, ["mxfp4", "e4m3"]) and np.isfinite(rows[0]["sqnr_db"])


def test_torch_layouts_and_dtypes():
    x = sample((32, 16), seed=2)
    t = torch.from_numpy(x.copy())
    # a strided view (the transpose) is copied once into C order, like a NumPy view
    assert np.array_equal(lpx.cast(t.T, "e5m2"), lpx.cast(np.ascontiguousarray(x.T), "e5m2"))
    # a tensor that requires grad is read through its detached view
    g = torch.from_numpy(x.copy()).requires_grad_()
    assert np.array_equal(lpx.cast(g, "e4m3"), lpx.cast(x, "e4m3"))
    # float16 and bfloat16 are widened exactly to float32 first
    h = t.to(torch.float16)
    assert np.array_equal(lpx.cast(h, "e4m3"), lpx.cast(h.numpy().astype(np.float32), "e4m3"))
    b = t.to(torch.bfloat16)
    wide = b.to(torch.float32).numpy()
    assert np.array_equal(_arrays.float_input(b), wide, equal_nan=True)
    assert np.array_equal(lpx.cast(b, "e2m1"), lpx.cast(wide, "e2m1"))
    # codes from a torch uint8 tensor
    codes = lpx.cast(x, "e4m3")
    assert np.array_equal(lpx.decode(torch.from_numpy(codes), "e4m3"), lpx.decode(codes, "e4m3"),
                          equal_nan=True)


def test_torch_bad_dtypes_raise_one_line():
    with pytest.raises(TypeError, match="holds int32 values"):
        lpx.cast(torch.ones(4, dtype=torch.int32), "e4m3")
    with pytest.raises(TypeError, match="the codes of float8_e4m3fn are uint8"):
        lpx.decode(torch.ones(4, dtype=torch.float32), "e4m3")
    with pytest.raises(ValueError, match="empty input"):
        lpx.cast(torch.ones(0), "e4m3")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device for torch")
def test_cuda_tensors_match_the_cpu():
    x = sample((64, 256), seed=4)
    t = torch.from_numpy(x).cuda()
    for fmt, kw in (("e4m3", {}), ("e2m1", dict(round="sr", seed=3, overflow="sat"))):
        c = lpx.cast(t, fmt, **kw)
        assert c.is_cuda and c.dtype == torch.uint8
        assert np.array_equal(c.cpu().numpy(), lpx.cast(x, fmt, **kw))
        v = lpx.cast(t, fmt, emit="values", **kw)
        assert np.array_equal(v.cpu().numpy(), lpx.cast(x, fmt, emit="values", **kw), equal_nan=True)
    codes = lpx.cast(x, "e4m3")
    d = lpx.decode(torch.from_numpy(codes).cuda(), "e4m3")
    assert np.array_equal(d.cpu().numpy(), lpx.decode(codes, "e4m3"), equal_nan=True)
    for fmt in ("mxfp8_e4m3", "mxfp4", "nvfp4"):
        y = lpx.fake_quantize(t, fmt)
        assert np.array_equal(y.cpu().numpy(), lpx.fake_quantize(x, fmt), equal_nan=True)


# --- a CUDA tensor imitated by a hand-made capsule ----------------------------------

class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_NAME = b"dltensor"
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCuda:
    """__dlpack_device__() == (2, 0): a CUDA tensor as far as DLPack says; its data
    pointer is a dummy that nothing may dereference (no CUDA call is made without a
    device)."""

    def __init__(self, shape, code=2, bits=32, data=0x1000):
        self.shape = tuple(shape)
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._m = _Managed()
        t = self._m.dl_tensor
        t.data, t.device, t.ndim = data, _Device(2, 0), len(shape)
        t.dtype = _DType(code, bits, 1)
        t.shape = self._shape
        t.strides = None

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        return _new_capsule(ctypes.addressof(self._m), _NAME, None)


cuda_device = pytest.mark.skipif(_core.cuda_available(), reason="a CUDA device is present: the "
                                 "imitation's dummy pointer must not reach a kernel")


@cuda_device
def test_cuda_tensor_without_a_device_is_one_value_error():
    x, codes, values = FakeCuda((4, 32)), FakeCuda((4, 32), code=1, bits=8), FakeCuda((4, 32))
    calls = [lambda: lpx.cast(x, "e4m3", out=codes),
             lambda: lpx.cast(x, "e2m1", round="sr", seed=1, emit="values", out=values),
             lambda: lpx.decode(codes, "e4m3", out=values),
             lambda: lpx.fake_quantize(x, "nvfp4", out=values)]
    for call in calls:
        with pytest.raises(ValueError) as e:
            call()
        msg = str(e.value)
        assert msg.startswith("no CUDA device: ") and "\n" not in msg, msg


def test_cuda_tensor_argument_errors():
    x = FakeCuda((4, 32))
    with pytest.raises(ValueError, match="lpx.quantize takes CPU arrays"):
        lpx.quantize(x, "mxfp4")
    with pytest.raises(ValueError, match="x is a CUDA tensor: this call takes CPU arrays"):
        lpx.analyze(x, ["mxfp4"])
    with pytest.raises(ValueError, match="needs out="):
        lpx.cast(x, "e4m3")
    with pytest.raises(TypeError, match="out must be a CUDA tensor"):
        lpx.cast(x, "e4m3", out=np.zeros((4, 32), np.uint8))
    with pytest.raises(TypeError, match="it must be uint8"):
        lpx.cast(x, "e4m3", out=FakeCuda((4, 32)))  # float32 out for codes
    with pytest.raises(TypeError, match="x holds DLPack dtype"):
        lpx.cast(FakeCuda((4, 32), code=0, bits=32), "e4m3", out=FakeCuda((4, 32), code=1, bits=8))
    with pytest.raises(ValueError, match="out has shape 4x16; the result has shape 4x32"):
        lpx.cast(x, "e4m3", out=FakeCuda((4, 16), code=1, bits=8))
    with pytest.raises(ValueError, match="rank 3"):
        lpx.fake_quantize(FakeCuda((2, 2, 32)), "mxfp4", out=FakeCuda((2, 2, 32)))
    with pytest.raises(ValueError, match="random_words are host memory"):
        lpx.cast(x, "e4m3", round="sr", random_words=np.zeros(128, np.uint32), out=FakeCuda((4, 32), 1, 8))


mock_module = pytest.mark.skipif(not (os.environ.get("LPX_CUDA_MODULE", "").endswith("lpx_cuda_mock.so")
                                      and _core.cuda_available()),
                                 reason="needs the CPU stand-in CUDA module (ctest python_dlpack_mock_module)")


@mock_module
def test_cuda_path_through_the_stand_in_module_equals_the_cpu():
    """Under the CPU stand-in for the CUDA module (device memory is host memory), imitated
    CUDA tensors over NumPy buffers go the whole CUDA path (capsule, device API, module)
    and give the CPU path's bits: casts in two modes, decode, and block fake-quantization."""
    x = sample((8, 64), seed=9, scale=4.0)
    def cuda_like(a):
        kind = {np.float32: (2, 32), np.uint8: (1, 8)}[a.dtype.type]
        return FakeCuda(a.shape, *kind, data=a.ctypes.data)
    codes = np.zeros(x.shape, np.uint8)
    lpx.cast(cuda_like(x), "e4m3", out=cuda_like(codes))
    assert codes.tobytes() == lpx.cast(x, "e4m3").tobytes()
    values = np.zeros(x.shape, np.float32)
    lpx.cast(cuda_like(x), "e2m1", round="sr", seed=3, stream=2, sr_bits=8, emit="values", out=cuda_like(values))
    assert values.tobytes() == lpx.cast(x, "e2m1", round="sr", seed=3, stream=2, sr_bits=8, emit="values").tobytes()
    decoded = np.zeros(x.shape, np.float32)
    lpx.decode(cuda_like(codes), "e4m3", out=cuda_like(decoded))
    assert decoded.tobytes() == lpx.decode(codes, "e4m3").tobytes()
    for fmt in ("mxfp8_e4m3", "nvfp4", "mxfp4"):
        y = np.zeros(x.shape, np.float32)
        lpx.fake_quantize(cuda_like(x), fmt, out=cuda_like(y))
        assert y.tobytes() == lpx.fake_quantize(x, fmt).tobytes(), fmt
