"""The non-attention pieces of a BERT layer: erf, GELU, LayerNorm, a dense layer.

Every function keeps its input's dtype (float32 stays float32): constants are
cast to the input's dtype before they touch it, so no float64 sneaks in.
"""

from __future__ import annotations

import numpy as np

# W. J. Cody, "Rational Chebyshev approximations for the error function",
# Math. Comp. 23 (1969) 631-637, as in his CALERF routine (SPECFUN, netlib).
# Near-minimax rationals; relative error below 1e-16 in double precision.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03, 1.85777706184603153e-1)  # fmt: skip
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
          2.84423683343917062e03)  # fmt: skip
_ERFC_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
           2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
           2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)  # fmt: skip
_ERFC_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
           1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
           3.43936767414372164e03, 1.23033935480374942e03)  # fmt: skip
_ERFC_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
           1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)  # fmt: skip
_ERFC_Q = (2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1,
           6.05183413124413191e-2, 2.33520497626869185e-3)  # fmt: skip
_INV_SQRT_PI = 5.6418958354775628695e-1
_THRESH = 0.46875


def _horner(y: np.ndarray, top: float, coefficients: tuple[float, ...]) -> np.ndarray:
    """((top·y + c0)·y + c1)·y + …, in place: the shape of Cody's numerators and denominators."""
    out = y * top
    for c in coefficients:
        out += c
        out *= y
    return out


def _erf_small(x: np.ndarray) -> np.ndarray:
    """erf(x) for |x| ≤ 0.46875: x · A(x²) / B(x²)."""
    ysq = x * x
    num = _horner(ysq, _ERF_A[4], _ERF_A[:3])
    den = _horner(ysq, 1.0, _ERF_B[:3])
    num += _ERF_A[3]
    den += _ERF_B[3]
    num /= den
    num *= x
    return num


def _erfc_medium(y: np.ndarray) -> np.ndarray:
    """erfc(y) for 0.46875 < y ≤ 4: exp(-y²) · C(y) / D(y)."""
    num = _horner(y, _ERFC_C[8], _ERFC_C[:7])
    den = _horner(y, 1.0, _ERFC_D[:7])
    num += _ERFC_C[7]
    den += _ERFC_D[7]
    num /= den
    num *= np.exp(-(y * y))
    return num


def _erfc_large(y: np.ndarray) -> np.ndarray:
    """erfc(y) for y > 4: exp(-y²)/y · (1/√π − P(1/y²) / (y² Q(1/y²)))."""
    inv_sq = 1.0 / (y * y)
    num = _horner(inv_sq, _ERFC_P[5], _ERFC_P[:4])
    den = _horner(inv_sq, 1.0, _ERFC_Q[:4])
    num += _ERFC_P[4]
    den += _ERFC_Q[4]
    series = inv_sq * num / den
    erfc: np.ndarray = np.exp(-(y * y)) * (_INV_SQRT_PI - series) / y
    return erfc


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in ``x``'s dtype (float32 or float64).

    Cody's rational Chebyshev approximations on three ranges, evaluated in float64:
    absolute error below 1e-15 before the final rounding to ``x``'s dtype (so
    within 3e-8 in float32) — unlike the Abramowitz-Stegun formulas (1.5e-7 at best).
    Evaluating the rationals in float32 instead would cost up to 3 ulps (1.7e-7).
    """
    x = np.asarray(x)
    dtype = x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    x64 = x.astype(np.float64)
    y = np.abs(x64)
    # Below float32's resolution erfc(y > 4) < 1.6e-8 rounds away: one range fewer.
    far = 4.0 if dtype == np.float32 else 27.0  # erfc(27) < 1e-300
    np.minimum(y, far, out=y)
    large = y > 4
    # Both rationals over the whole array and a select beat gathering each range:
    # boolean indexing costs more than the arithmetic it would save.
    tail = _erfc_medium(np.minimum(y, 4.0))
    if large.any():
        tail[large] = _erfc_large(y[large])
    np.subtract(1.0, tail, out=tail)  # erf(|x|) = 1 - erfc(|x|)
    np.copysign(tail, x64, out=tail)
    near_zero = _erf_small(np.clip(x64, -1.0, 1.0))  # clipped: no overflow where unused
    out = np.where(y <= _THRESH, near_zero, tail)
    return out.astype(dtype, copy=False)


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU: x · Φ(x) = x/2 · (1 + erf(x/√2)), in ``x``'s dtype.

    float32 takes :func:`_gelu_float32` (no float64 temporaries, 4× faster) unless
    an entry is huge, infinite or NaN; float64 goes through :func:`erf`.
    """
    t = x.dtype.type
    if x.dtype == np.float32 and x.size:
        fast = _gelu_float32(x)
        if fast is not None:
            return fast
    exact: np.ndarray = x * t(0.5) * (t(1) + erf(x * t(_SQRT_HALF)))
    return exact


_SQRT_HALF = 0.7071067811865476  # 1/√2
#: Largest z = |x|/√2 the float32 GELU takes: D(z) ~ z⁸ stays finite in float32 (< 6e4).
_GELU_FLOAT32_MAX_Z = np.float32(1e4)


def _gelu_float32(x: np.ndarray) -> np.ndarray | None:
    """GELU of float32 ``x`` in float32 arithmetic; None if an |x|/√2 exceeds 1e4 (or is NaN).

    x · Φ(x) = relu(x) − |x| · Φ(−|x|), and Φ(−|x|) = erfc(z)/2 with z = |x|/√2,
    erfc(z) = exp(−z²) · C(z)/D(z): Cody's rational for 0.46875 < z ≤ 4, which
    (checked against math.erfc in float64) stays within 5e-12 relative down to z = 0
    and 7e-8 up to z = 26, so one rational serves every z, with no select. The
    subtracted term is at most 0.17, so its few float32 roundings stay below 1e-7
    absolute: measured within 3.1 ulps for x ≥ 0 (the erf route: 1.6) and 7e-6
    relative for −9 < x < 0, where the erf route keeps none (1 + erf cancels).
    About 40 float32 passes instead of the erf route's ~60 float64 ones, and no
    8-byte temporaries: on (32, 1536) 0.13 ms instead of 0.55 ms. In the MiniLM
    forward the erf route's freed 400 KB temporaries went back to the OS and were
    page-faulted in again on every call (6,200 minor faults per forward, then 860).
    """
    f = np.float32
    magnitude = np.abs(x)  # |x|
    z = magnitude * f(_SQRT_HALF)
    if not z.max() <= _GELU_FLOAT32_MAX_Z:  # False for NaN too
        return None
    # Python-float constants leave float32 arrays float32 (in-place, and as weak scalars).
    ratio = _horner(z, _ERFC_C[8], _ERFC_C[:7])
    ratio += _ERFC_C[7]
    den = _horner(z, 1.0, _ERFC_D[:7])
    den += _ERFC_D[7]
    ratio /= den  # C(z)/D(z) = exp(z²) · erfc(z)
    np.multiply(z, z, out=den)
    np.negative(den, out=den)
    np.exp(den, out=den)  # exp(−z²); 0 beyond z ≈ 10.3
    ratio *= den  # erfc(z) = 2 · Φ(−|x|)
    ratio *= magnitude
    ratio *= f(0.5)  # |x| · Φ(−|x|)
    out: np.ndarray = np.add(x, magnitude, out=magnitude)  # x + |x| = 2 · relu(x)
    out *= f(0.5)
    out -= ratio
    return out


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU's tanh approximation (``gelu_new`` / ``gelu_pytorch_tanh``)."""
    t = x.dtype.type
    inner = t(0.7978845608028654) * (x + t(0.044715) * x * x * x)
    approximate: np.ndarray = t(0.5) * x * (t(1) + np.tanh(inner))
    return approximate


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0)."""
    positive: np.ndarray = np.maximum(x, x.dtype.type(0))
    return positive


ACTIVATION_FUNCTIONS = {
    "gelu": gelu,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": relu,
}


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """Normalise the last axis to mean 0, variance 1 (biased), then scale and shift."""
    t = x.dtype.type
    centred: np.ndarray = x - x.mean(axis=-1, keepdims=True)  # (..., hidden)
    variance = np.mean(np.square(centred), axis=-1, keepdims=True)  # (..., 1)
    centred *= 1 / np.sqrt(variance + t(eps))  # one division per row, as torch's rsqrt
    centred *= weight
    centred += bias
    return centred


def dense(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """A PyTorch Linear: x Wᵀ + b, with W stored (out, in)."""
    out: np.ndarray = x @ weight.T  # (..., in) @ (in, out) -> (..., out)
    out += bias  # in place: no second (..., out) array
    return out
