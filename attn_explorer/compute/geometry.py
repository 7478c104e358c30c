"""Queries and keys as arrows: lengths, angles, projections, and a 2-D view of any d.

Pure numpy, never imports Qt. The vectors view draws what these functions return:
for d ≤ 2 the vectors themselves (exact), for d > 2 a projection onto two axes —
the two principal axes of the head's queries and keys together, or two chosen
dimensions. A projection does not preserve dot products; the view says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Relative size under which a vector counts as having no direction (zero length).
ZERO_LENGTH = 1e-12
SIGN_TIE = 1e-6  # relative: |components| this close to the largest count as tied


def length(vector: np.ndarray) -> float:
    """Euclidean length |v| of one vector ``(d,)``."""
    return float(np.linalg.norm(np.asarray(vector, dtype=np.float64)))


def angle_degrees(a: np.ndarray, b: np.ndarray) -> float | None:
    """The angle θ between two vectors in degrees (0…180); None if either has zero length."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    la, lb = length(a), length(b)
    if la <= ZERO_LENGTH or lb <= ZERO_LENGTH:
        return None
    cosine = float(np.dot(a, b)) / (la * lb)
    return float(np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))))


def project_onto(vector: np.ndarray, onto: np.ndarray) -> np.ndarray:
    """The projection of ``vector`` onto the line of ``onto``: (v·u / u·u) u.

    Its signed length along ``onto`` is v·u / |u|, so q·k = |q| × (signed length of
    k's projection onto q). A zero-length ``onto`` has no line: the result is zero.
    """
    v = np.asarray(vector, dtype=np.float64)
    u = np.asarray(onto, dtype=np.float64)
    uu = float(np.dot(u, u))
    if uu <= ZERO_LENGTH**2:
        return np.zeros_like(u)
    return (float(np.dot(v, u)) / uu) * u  # (d,)


def snap(value: float | np.ndarray, step: float) -> np.ndarray:
    """Round to the nearest multiple of ``step`` (no rounding if step ≤ 0); never -0."""
    values = np.asarray(value, dtype=np.float64)
    if not step > 0 or not np.isfinite(step):
        return values + 0.0
    return np.round(values / step) * step + 0.0  # + 0.0 turns -0.0 into 0.0


@dataclass(frozen=True)
class Plane:
    """A 2-D view of a head's queries and keys.

    ``axes`` is ``(2, d)``: each row a unit vector; a vector v is drawn at
    ``axes @ v``. ``exact`` is True when nothing is lost (d ≤ 2 and the axes are
    d1, d2), so dot products of the drawn arrows are the real ones. ``explained``
    is the share of the vectors' total squared length along each axis (0…1).
    """

    axes: np.ndarray  # (2, d)
    labels: tuple[str, str]
    explained: tuple[float, float]
    exact: bool
    method: str  # "exact", "pca" or "dims"

    def place(self, vectors: np.ndarray) -> np.ndarray:
        """Coordinates ``(T, 2)`` of vectors ``(T, d)`` in this plane."""
        points: np.ndarray = np.asarray(vectors, dtype=np.float64) @ self.axes.T  # (T, d) @ (d, 2)
        return points  # (T, 2)


def _explained(points: np.ndarray, axes: np.ndarray) -> tuple[float, float]:
    total = float(np.sum(points * points))
    if total <= 0.0:
        return (0.0, 0.0)
    along = np.sum((points @ axes.T) ** 2, axis=0) / total  # (2,)
    return (float(along[0]), float(along[1]))


def exact_plane(dim: int) -> Plane:
    """d1 and d2 themselves (d ≤ 2; for d = 1 the second axis is empty)."""
    axes = np.zeros((2, dim))
    for n in range(min(dim, 2)):
        axes[n, n] = 1.0
    return Plane(axes, ("d1", "d2"), (1.0, 0.0) if dim == 1 else (1.0, 1.0), True, "exact")


def dims_plane(query: np.ndarray, key: np.ndarray, first: int, second: int) -> Plane:
    """Two chosen dimensions (0-based) as the axes; exact only if they are all there is."""
    points = np.concatenate([np.asarray(query, float), np.asarray(key, float)])  # (2T, d)
    d = points.shape[1]
    if not (0 <= first < d and 0 <= second < d) or first == second:
        raise ValueError(
            f"dimensions: choose two different ones from d1 to d{d}, got d{first + 1} and "
            f"d{second + 1}"
        )
    axes = np.zeros((2, d))
    axes[0, first] = axes[1, second] = 1.0
    exact = d <= 2 and (first, second) == (0, 1)
    return Plane(
        axes,
        (f"d{first + 1}", f"d{second + 1}"),
        _explained(points, axes),
        exact,
        "exact" if exact else "dims",
    )


def pca_plane(query: np.ndarray, key: np.ndarray) -> Plane:
    """The two principal axes of the queries and keys together, about the origin.

    About the origin, not the mean, because arrows start there and a dot product
    sees the whole vector: the axes are the top eigenvectors of the second-moment
    matrix Pᵀ P of every query and key row. Sign convention, so the picture never
    flips between recomputes: each axis has its largest-|component| entry
    positive (the first such entry on a tie, entries within ``SIGN_TIE`` of the largest
    counting as tied). Vectors that span fewer than two
    directions get the next unused dimension as an axis (explaining 0).
    """
    points = np.concatenate([np.asarray(query, float), np.asarray(key, float)])  # (2T, d)
    d = points.shape[1]
    if d <= 2:
        return exact_plane(d)
    moment = points.T @ points  # (d, 2T) @ (2T, d) -> (d, d)
    values, vectors = np.linalg.eigh(moment)  # ascending eigenvalues
    order = np.argsort(-values, kind="stable")
    axes = vectors[:, order[:2]].T.copy()  # (2, d)
    scale = max(float(values.max()), 0.0)
    for n in range(2):
        if values[order[n]] <= ZERO_LENGTH * max(scale, 1.0):
            axes[n] = _unused_axis(axes[:n], d)
        size = np.abs(axes[n])
        # the first entry within rounding of the largest: two near-equal components must
        # not trade places (and mirror the picture) on a 1e-9 edit
        biggest = int(np.flatnonzero(size >= size.max() * (1 - SIGN_TIE))[0])
        if axes[n, biggest] < 0:
            axes[n] = -axes[n]
    explained = _explained(points, axes)
    return Plane(
        axes,
        (f"PC1 ({explained[0]:.0%})", f"PC2 ({explained[1]:.0%})"),
        explained,
        False,
        "pca",
    )


def _unused_axis(taken: np.ndarray, d: int) -> np.ndarray:
    """The first standard axis orthogonal enough to ``taken``, made orthogonal to it."""
    for n in range(d):
        axis = np.zeros(d)
        axis[n] = 1.0
        for row in taken:
            axis = axis - np.dot(axis, row) * row
        norm = np.linalg.norm(axis)
        if norm > 0.5:
            return axis / norm
    raise AssertionError("unreachable: d ≥ 3 always leaves a free axis")
