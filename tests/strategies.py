"""Hypothesis strategies for shapes and tilings, leftovers and size-1 tiles included."""
from hypothesis import strategies as st


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
