"""QuantizedTensor: the result of lpx.quantize (docs/python.md#quantizedtensor)."""
import numpy as np

from . import _core
from . import _arrays as _a


class QuantizedTensor:
    """A block-quantized tensor: the fields of the library's lpx::QuantizedTensor
    (formats/quantize.hpp) as NumPy arrays.

    codes         uint8, the input's shape: one element code per element (right-aligned)
    scales        the scale grid (the shape with each axis divided, rounded up, by the
                  block extent along it): uint8 codes for e8m0 (2^(code-127), 0xFF NaN)
                  and e4m3 scales, float32 decode multipliers for pow2 and fp32 scales
    tensor_scale  the NVFP4 (e4m3-scaled) per-tensor float32 decode scale, else None
    spec          the canonical block spec (ELEMENT:BLOCK:SCALE[:RULE])
    axis          the block axis (non-negative for results of lpx.quantize)
    headroom_3_4  whether x * 3/4 was quantized (dequantize divides by 0.75)
    amax, stats   the input's largest finite |x| and the quantizer's counts
                  (clamped_scales, saturated, flushed); None for a tensor built by hand

    Built by hand, QuantizedTensor(codes, scales, spec, axis, tensor_scale, headroom_3_4)
    is checked as `lpx dequantize` checks a packed file: codes that do not fit the
    element, scales of the wrong dtype or grid, or a missing or stray tensor_scale raise
    ValueError (non-contiguous arrays are copied).
    """

    def __init__(self, codes, scales, spec, axis=-1, tensor_scale=None, headroom_3_4=False,
                 *, amax=None, stats=None, _checked=False):
        spec = _a.str_arg("spec", spec)
        if not _checked:
            codes = np.ascontiguousarray(codes)
            scales = np.ascontiguousarray(scales)
            axis = _a.int_arg("axis", axis, _a.INT_MIN, _a.INT_MAX)
            if tensor_scale is not None:
                ts = np.asarray(tensor_scale)
                if ts.size != 1 or ts.dtype.kind != "f":
                    raise ValueError("a two-level format needs a float32 tensor_scale of one value")
                tensor_scale = float(ts.reshape(-1)[0].astype(np.float32))
            if codes.size == 0:
                raise ValueError("empty input (no codes)")
            _core.dequantize(codes, scales, tensor_scale, spec, axis, bool(headroom_3_4), 0, True)
            spec = _core.canonical_block_spec(spec)
        self.codes = codes
        self.scales = scales
        self.spec = spec
        self.axis = axis
        self.tensor_scale = tensor_scale
        self.headroom_3_4 = bool(headroom_3_4)
        self.amax = amax
        self.stats = stats

    @property
    def shape(self):
        return self.codes.shape

    @property
    def element_bits(self):
        return _core.element_bits(self.spec)

    def dequantize(self, threads=0):
        """The float32 values (the input's shape), as `lpx dequantize`."""
        threads = _a.int_arg("threads", threads, 0, _a.MAX_THREADS)
        return _core.dequantize(self.codes, self.scales, self.tensor_scale, self.spec,
                                self.axis, self.headroom_3_4, threads, False)

    def packed(self):
        """The packed form `lpx quantize --emit packed` writes: a dict with codes (uint8
        1-D, packed as formats/packing.hpp says), scales, tensor_scale (float32 [1] or
        None), packing, spec, shape, axis, headroom_3_4. from_packed() reads it back."""
        codes, packing = _core.pack(self.codes.reshape(-1), self.element_bits)
        ts = None if self.tensor_scale is None else np.array([self.tensor_scale], np.float32)
        return {"codes": codes, "scales": self.scales, "tensor_scale": ts, "packing": packing,
                "spec": self.spec, "shape": self.shape, "axis": self.axis,
                "headroom_3_4": self.headroom_3_4}

    @classmethod
    def from_packed(cls, codes, scales, spec, shape, axis=-1, tensor_scale=None,
                    headroom_3_4=False):
        """A QuantizedTensor from packed codes (the inverse of packed())."""
        shape = tuple(_a.int_arg("shape[]", d, 0, _a.INT64_MAX) for d in shape)
        n = int(np.prod(shape, dtype=np.int64))
        bits = _core.element_bits(_a.str_arg("spec", spec))
        p = _a.code_input(codes, np.uint8, "packed codes", name="codes")
        unpacked = _core.unpack(p.reshape(-1), n, bits).reshape(shape)
        return cls(unpacked, scales, spec, axis, tensor_scale, headroom_3_4)

    def __repr__(self):
        ts = "" if self.tensor_scale is None else f", tensor_scale={self.tensor_scale!r}"
        return (f"QuantizedTensor(spec={self.spec!r}, shape={self.shape}, axis={self.axis}, "
                f"scales={self.scales.dtype}{list(self.scales.shape)}{ts})")
