"""Hypothesis strategies for shapes and tilings, leftovers and size-1 tiles included, and
the seed of a test's random values.

Every random input of a property test comes from its own draw: the shapes and scalars from
these strategies, the arrays from ``np.random.default_rng(seed)`` with ``seed`` drawn by
``seeds()``. Never from a module-level generator: its state depends on which examples ran
before (in this file, this process), so hypothesis's replay of a failure draws other
arrays — the failure is reported "flaky" and cannot be reproduced or shrunk
(tests/test_determinism.py checks that no test module holds one).
"""
import numpy as np
from hypothesis import strategies as st


def seeds():
    """The seed of a property test's numpy generator: ``rng = np.random.default_rng(seed)``."""
    return st.integers(0, 2**32 - 1)


@st.composite
def shape_and_tiles(draw, min_ndim=1, max_ndim=3, max_dim=13):
    """A shape and a tile shape for it: any tile size from 1 to the dimension."""
    ndim = draw(st.integers(min_ndim, max_ndim))
    shape = tuple(draw(st.integers(1, max_dim)) for _ in range(ndim))
    tiles = tuple(draw(st.integers(1, s)) for s in shape)
    return shape, tiles


def tile_for(draw, size: int) -> int:
    """A tile size for a dimension of ``size`` (inside @st.composite)."""
    return draw(st.integers(1, size))


@st.composite
def gemm_case(draw):
    """Group sizes (batch, m, n, k dims), sizes and tiles for each dim, transpose flags."""
    nb, nm, nn, nk = (draw(st.integers(lo, 2)) for lo in (0, 0, 0, 1))
    dims = {g: [draw(st.integers(1, 9)) for _ in range(c)]
            for g, c in zip("bmnk", (nb, nm, nn, nk))}
    tiles = {g: [draw(st.integers(1, s)) for s in dims[g]] for g in "bmnk"}
    return dims, tiles, draw(st.booleans()), draw(st.booleans())


def gemm_layouts(case):
    """(shape, tiles) of a, b and c for a ``gemm_case``: a is (b, k, m) when transposed
    else (b, m, k), b likewise, c (b, m, n), each group of dims in order."""
    dims, tiles, ta, tb = case

    def layout(groups):
        return (tuple(s for g in groups for s in dims[g]),
                tuple(t for g in groups for t in tiles[g]))
    return (layout("bkm" if ta else "bmk"), layout("bnk" if tb else "bkn"), layout("bmn"))


def gemm_ulps(case) -> float:
    """Roundings a ``gemm_case`` may take: γ_k of the k-dims' product (the dot's length),
    plus the α scaling, the tiles' partial sums added in float32 (one per k tile) and β·C."""
    from tests.tolerance import dot_ulps
    dims, tiles, _, _ = case
    k = int(np.prod(dims["k"]))
    k_tiles = int(np.prod([-(-s // t) for s, t in zip(dims["k"], tiles["k"])]))
    return dot_ulps(k) + k_tiles + 2


def gemm_reference(case, a, b, c0, alpha, beta):
    """(want, magnitude) in float64 of a ``gemm_case``'s α·op(a)·op(b) + β·c0, each group of
    dims flattened to (batch, m, k) @ (batch, k, n); magnitude is the sum of the terms'
    absolute values (``tests.tolerance.assert_close``'s magnitude). β = 0 ignores c0, NaN
    included (BLAS's rule)."""
    dims, _, ta, tb = case
    bsz, m, n, k = (int(np.prod(dims[g])) for g in "bmnk")
    a2 = a.astype(np.float64).reshape((bsz, k, m) if ta else (bsz, m, k))
    b2 = b.astype(np.float64).reshape((bsz, n, k) if tb else (bsz, k, n))
    opa, opb = (a2.transpose(0, 2, 1) if ta else a2), (b2.transpose(0, 2, 1) if tb else b2)
    c_term = beta * np.nan_to_num(c0.astype(np.float64)) if beta else 0.0
    want = alpha * np.matmul(opa, opb).reshape(c0.shape) + c_term
    magnitude = abs(alpha) * np.matmul(abs(opa), abs(opb)).reshape(c0.shape) + abs(c_term)
    return want, magnitude
