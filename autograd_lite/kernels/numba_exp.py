"""exp for float32 that LLVM vectorises. numba's loops call libm's scalar expf (the llvmlite
wheels carry no SVML), so a kernel that calls np.exp inside a loop runs one element at a
time; `exp32` is written as arithmetic only, which LLVM turns into SIMD code when it is
inlined into a loop (compiled with contract=True, so that the polynomial runs as FMAs).

    exp(x) = 2^k · exp(r),  k = round(x / ln 2),  r = x - k ln 2 ∈ [-ln2/2, ln2/2]

r is computed in two steps with ln 2 split into a high part of 15 significant bits (k·hi is
exact) and a low part; exp(r) is 1 + r + r²·p(r), p of degree 5 with the coefficients of
Cephes' expf (Moshier's Cephes library), and 2^k is assembled from exponent bits as
2^k1 · 2^k2 with k1 + k2 = k, so that results in the subnormal range and up to FLT_MAX are
rounded once. Within 3 ulp of numpy's exp over the whole float32 range (tests/test_kernels.py
samples every 61st bit pattern), with exp(-inf) = 0, exp(inf) = inf, exp(NaN) = NaN.
"""
import numba
import numpy as np

from .numba_compile import compiled
from .parallel import split_rows

_LOG2_E = np.float32(1.4426950408889634)
_LN2_HIGH = np.float32(0.693145751953125)  # 15 significant bits: k · _LN2_HIGH is exact
_LN2_LOW = np.float32(1.428606765330187e-06)
_LOWEST = np.float32(-104.0)  # exp(-104) < half the smallest subnormal: rounds to 0
_HIGHEST = np.float32(89.0)  # exp(89) > FLT_MAX: overflows to inf
_CEPHES = tuple(np.float32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                        4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))


@numba.njit(inline="always")
def _power_of_two(k):
    """2^k as float32 from its exponent bits, for k in [-126, 127]."""
    return np.int32((k + 127) << 23).view(np.float32)


@numba.njit(inline="always")
def exp32(x):
    """exp(x) for a float32 x, in arithmetic LLVM vectorises (the module's docstring)."""
    v = min(max(x, _LOWEST), _HIGHEST)
    k = np.floor(v * _LOG2_E + np.float32(0.5))
    r = (v - k * _LN2_HIGH) - k * _LN2_LOW
    c0, c1, c2, c3, c4, c5 = _CEPHES
    p = ((((c0 * r + c1) * r + c2) * r + c3) * r + c4) * r + c5
    p = p * r * r + r + np.float32(1)
    whole = np.int32(k)
    half = whole >> 1
    y = p * _power_of_two(half) * _power_of_two(whole - half)
    return y if x == x else x  # NaN stays NaN (the clamp above would lose it)


@compiled(contract=True)
def _exp_into(x, out, start, stop):
    for i in range(start, stop):
        out[i] = exp32(x[i])


def exp_float32(x):
    """exp of a float32 array, a fresh array (exp32 over every element, in shares of entries
    where parallel.split_rows splits)."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    split_rows(_exp_into, flat.size, flat, out)
    return out.reshape(x.shape)
