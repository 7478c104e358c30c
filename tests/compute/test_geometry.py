"""The vectors view's geometry without Qt: lengths, angles, projections, planes, snapping."""

from __future__ import annotations

import numpy as np
import pytest

from attn_explorer.compute.geometry import (
    angle_degrees,
    dims_plane,
    exact_plane,
    length,
    pca_plane,
    project_onto,
    snap,
)

WORKED = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


def test_lengths_and_angles_of_the_worked_example():
    assert length(WORKED[2]) == pytest.approx(np.sqrt(2))
    assert angle_degrees(WORKED[0], WORKED[1]) == pytest.approx(90.0)
    assert angle_degrees(WORKED[0], WORKED[2]) == pytest.approx(45.0)
    assert angle_degrees(WORKED[1], [2.0, 0.0]) == pytest.approx(90.0)  # q2 against k4
    assert angle_degrees([1.0, 0.0], [-3.0, 0.0]) == pytest.approx(180.0)


def test_a_zero_length_vector_has_no_angle_and_projects_to_zero():
    assert angle_degrees([0.0, 0.0], [2.0, 0.0]) is None
    assert angle_degrees([1.0, 1.0], [0.0, 0.0]) is None
    np.testing.assert_array_equal(project_onto([2.0, 0.0], [0.0, 0.0]), [0.0, 0.0])
    assert not np.isnan(project_onto([0.0, 0.0], [1.0, 1.0])).any()


def test_projection_of_k_onto_q():
    # k4 = (2, 0) onto q2 = (0, 1): perpendicular, so nothing is left.
    np.testing.assert_allclose(project_onto([2.0, 0.0], [0.0, 1.0]), [0.0, 0.0])
    # k4 onto q1 = (1, 0): all of it.
    np.testing.assert_allclose(project_onto([2.0, 0.0], [1.0, 0.0]), [2.0, 0.0])
    # k3 = (1, 1) onto q1: (1, 0); onto q3 = (1, 1): itself.
    np.testing.assert_allclose(project_onto([1.0, 1.0], [1.0, 0.0]), [1.0, 0.0])
    np.testing.assert_allclose(project_onto([1.0, 1.0], [2.0, 2.0]), [1.0, 1.0])
    # q·k = |q| × signed length of k's projection onto q, for random vectors.
    rng = np.random.default_rng(3)
    for _ in range(20):
        q, k = rng.standard_normal((2, 5))
        foot = project_onto(k, q)
        signed = np.dot(foot, q) / length(q)
        assert length(q) * signed == pytest.approx(np.dot(q, k))


def test_snap_rounds_to_the_step_and_never_gives_minus_zero():
    np.testing.assert_allclose(snap([0.26, -0.74, 1.24], 0.5), [0.5, -0.5, 1.0])
    assert str(snap(-0.1, 0.5)) == "0.0"
    np.testing.assert_array_equal(snap([0.123], 0.0), [0.123])  # off
    np.testing.assert_array_equal(snap([0.123], float("nan")), [0.123])


def test_exact_plane_is_d1_d2_and_keeps_dot_products():
    plane = exact_plane(2)
    assert plane.exact and plane.labels == ("d1", "d2")
    placed = plane.place(WORKED)
    np.testing.assert_array_equal(placed, WORKED)
    np.testing.assert_array_equal(placed @ placed.T, [[1, 0, 1], [0, 1, 1], [1, 1, 2]])
    one = exact_plane(1).place([[3.0], [-2.0]])
    np.testing.assert_array_equal(one, [[3.0, 0.0], [-2.0, 0.0]])


def test_pca_of_d2_is_the_exact_plane():
    assert pca_plane(WORKED, WORKED).exact


def test_pca_finds_the_plane_the_vectors_lie_in():
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.standard_normal((16, 2)))[0].T  # (2, 16) orthonormal rows
    query = rng.standard_normal((8, 2)) * [3.0, 1.0] @ basis  # (8, 16)
    key = rng.standard_normal((8, 2)) * [3.0, 1.0] @ basis
    plane = pca_plane(query, key)
    assert not plane.exact and plane.method == "pca"
    assert sum(plane.explained) == pytest.approx(1.0)
    assert plane.explained[0] >= plane.explained[1] > 0
    np.testing.assert_allclose(plane.axes @ plane.axes.T, np.eye(2), atol=1e-12)
    # In their own plane the projection is a rotation: dot products survive.
    q2, k2 = plane.place(query), plane.place(key)
    np.testing.assert_allclose(q2 @ k2.T, query @ key.T, atol=1e-9)
    assert plane.labels[0].startswith("PC1 (") and plane.labels[1].startswith("PC2 (")


def test_pca_sign_convention_never_flips():
    rng = np.random.default_rng(1)
    query, key = rng.standard_normal((2, 10, 6))
    first = pca_plane(query, key)
    for axis in first.axes:
        assert axis[np.argmax(np.abs(axis))] > 0  # largest-|component| entry is positive
    # The same vectors in another order, or with every sign flipped, give the same axes.
    order = rng.permutation(10)
    again = pca_plane(key[order], query[order])
    np.testing.assert_allclose(again.axes, first.axes, atol=1e-10)
    flipped = pca_plane(-query, -key)
    np.testing.assert_allclose(flipped.axes, first.axes, atol=1e-10)


def test_pca_of_vectors_along_one_line_or_none():
    line = np.outer([1.0, -2.0, 3.0], [0.0, 0.0, 1.0, 0.0])  # all along d3
    plane = pca_plane(line, line)
    np.testing.assert_allclose(np.abs(plane.axes[0]), [0, 0, 1, 0])
    assert plane.explained == pytest.approx((1.0, 0.0))
    assert abs(float(plane.axes[0] @ plane.axes[1])) < 1e-12
    zeros = pca_plane(np.zeros((3, 5)), np.zeros((3, 5)))
    np.testing.assert_array_equal(zeros.axes, np.eye(5)[:2])
    assert zeros.explained == (0.0, 0.0)


def test_two_chosen_dimensions():
    query = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 4.0]])
    key = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    plane = dims_plane(query, key, 2, 0)
    assert plane.labels == ("d3", "d1") and plane.method == "dims" and not plane.exact
    np.testing.assert_array_equal(plane.place(query), [[3.0, 1.0], [4.0, 0.0]])
    total = (query**2).sum() + (key**2).sum()
    assert plane.explained == pytest.approx(((9 + 16) / total, 2 / total))
    with pytest.raises(ValueError, match="two different"):
        dims_plane(query, key, 1, 1)
    with pytest.raises(ValueError, match="d1 to d3"):
        dims_plane(query, key, 0, 3)


def test_pca_sign_does_not_flip_when_two_components_nearly_tie():
    """Two near-equal components of an axis must not trade places on a tiny edit and mirror
    the picture (found in review: ±1e-9 on one value flipped PC1)."""
    from attn_explorer.compute.geometry import pca_plane

    q = np.array([[1.0, -1.0, 0.0], [2.0, -2.0, 0.1]])
    k = np.array([[0.5, -0.5, 0.0]])
    planes = []
    for nudge in (-1e-9, 0.0, 1e-9):
        edited = q.copy()
        edited[1, 0] += nudge
        planes.append(pca_plane(edited, k).axes)
    for axes in planes[1:]:
        np.testing.assert_allclose(axes[0], planes[0][0], atol=1e-6)
