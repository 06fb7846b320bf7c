"""Shared fixtures: the built `lpx` binary (LPX_BINARY, set by ctest: python/CMakeLists.txt)
and a helper that runs it. The bit-exactness tests compare the Python package with the
CLI on the same inputs, byte for byte."""
import os
import subprocess

import numpy as np
import pytest


@pytest.fixture(scope="session")
def lpx_bin():
    path = os.environ.get("LPX_BINARY")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("LPX_BINARY (the built lpx binary) is not set; ctest sets it")
    return path


@pytest.fixture
def cli(lpx_bin, tmp_path):
    """cli(*args) -> CompletedProcess of `lpx args...` run in tmp_path."""
    def run(*args, check=True):
        p = subprocess.run([lpx_bin, *map(str, args)], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
        if check and p.returncode != 0:
            raise AssertionError(f"lpx {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
        return p
    return run


def cli_error(proc):
    """The one-line message of a failed CLI run, without the 'lpx: ' prefix."""
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("lpx: ")
    return lines[0][len("lpx: "):]


def sample(shape, seed=0, scale=1.0):
    """Normal values over many binades, with zeros, -0, Inf, NaN and subnormals mixed in:
    inputs that reach every branch of the codec (rounding ties included, by the exact
    multiples of small powers of two)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    x = rng.standard_normal(n).astype(np.float32) * np.float32(scale)
    x *= np.exp2(rng.integers(-12, 12, n)).astype(np.float32)
    k = max(1, n // 16)
    # Exact ties and near-ties: k/16 and k/64 are exact in every format's neighbourhood.
    x[:k] = (rng.integers(-256, 256, k) / 16.0).astype(np.float32)
    x[k:2 * k] = (rng.integers(-1024, 1024, k) / 64.0).astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 3.4e38, -65504.0,
                         448.0, 464.0, 57344.0, 6.0, -7.0, 0.25, 0.75, 1.5, 2.5], np.float32)
    x[2 * k:2 * k + len(specials)] = specials[: max(0, min(len(specials), n - 2 * k))]
    return x.reshape(shape)
