"""numerics/exact.py: small products and norms as ordered elementwise float ops (hand-computed values)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from worldrecall.numerics import exact


def test_matmul_matrix_and_vector_hand_computed():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]])
    # row 0: (1 + 0 + 6, 0 + 2 - 3) = (7, -1); row 1: (4 + 0 + 12, 0 + 5 - 6) = (16, -1)
    assert exact.matmul(a, b).tolist() == [[7.0, -1.0], [16.0, -1.0]]
    assert exact.matmul(a, np.array([1.0, -1.0, 0.5])).tolist() == [0.5, 2.0]  # 1-2+1.5, 4-5+3
    assert exact.matmul(np.array([3.0, 4.0]), np.array([3.0, 4.0])) == 25.0


def test_matmul_broadcasts_over_leading_axes_and_promotes_like_the_operator():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 5, 3)).astype(np.float32)
    b = rng.normal(size=(3, 3))
    out = exact.matmul(a, b)
    assert out.shape == (4, 5, 3) and out.dtype == (a @ b).dtype == np.float64
    # the sum is taken k = 0, 1, 2 in that order, each product and sum rounded on its own
    ref = (a[..., 0, None] * b[0] + a[..., 1, None] * b[1]) + a[..., 2, None] * b[2]
    assert np.array_equal(out, ref)
    assert np.allclose(out, a @ b, rtol=1e-12, atol=1e-12)
    a32 = a.astype(np.float32)
    assert exact.matmul(a32, b.astype(np.float32)).dtype == np.float32


def test_matmul_refuses_shapes_that_do_not_chain():
    with pytest.raises(ValueError, match="do not chain"):
        exact.matmul(np.ones((2, 3)), np.ones((2, 2)))


def test_norm_hand_computed():
    assert exact.norm([3.0, 4.0]) == 5.0
    assert exact.norm(np.array([[1.0, 2.0], [2.0, 4.0]])) == 5.0  # flattened: 1 + 4 + 4 + 16
    assert exact.norm([]) == 0.0


def test_rigid_inverse_of_a_yaw_and_a_translation():
    a = math.radians(90.0)
    c2w = np.array([[math.cos(a), 0.0, math.sin(a), 1.0], [0.0, 1.0, 0.0, 2.0],
                    [-math.sin(a), 0.0, math.cos(a), 3.0], [0.0, 0.0, 0.0, 1.0]])
    w2c = exact.rigid_inverse(c2w)
    # R^T (1, 2, 3) with R = yaw 90°: R^T = [[0, 0, -1], [0, 1, 0], [1, 0, 0]] -> (-3, 2, 1); t' = (3, -2, -1)
    assert np.allclose(w2c[:3, 3], [3.0, -2.0, -1.0], atol=1e-15)
    assert w2c[3].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert np.allclose(exact.matmul(c2w, w2c), np.eye(4), atol=1e-15)
    batch = exact.rigid_inverse(np.stack([c2w, np.eye(4)]))
    assert np.array_equal(batch[0], w2c) and np.array_equal(batch[1], np.eye(4))


def test_sample_wrap_is_bilinear_on_a_32nd_pixel_grid_and_wraps_hand_computed():
    from worldrecall.plugins.synthetic.render import sample_wrap

    tex = np.array([[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]], np.float32)  # 2 rows x 3 columns
    x = np.array([0.0, 0.5, 1.25, 2.5, -0.5, 0.51], np.float32)
    y = np.array([0.0, 0.0, 0.5, 0.0, 1.0, 0.0], np.float32)
    got = sample_wrap(tex, x, y).tolist()
    # (0, 0) -> 0; (0.5, 0) -> (0 + 1) / 2; (1.25, 0.5): rows 1.25 and 11.25, halfway -> 6.25
    # (2.5, 0): columns 2 and 0 (wrapped) -> (2 + 0) / 2; (-0.5, 1): columns 2 (wrapped) and 0 of row 1 -> 11
    # 0.51 rounds to 16/32 of a pixel (0.51 * 32 = 16.32 -> 16): the same as 0.5
    assert got == [0.0, 0.5, 6.25, 1.0, 11.0, 0.5]
