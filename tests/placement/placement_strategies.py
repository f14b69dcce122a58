"""Hypothesis strategies shared by the batch-placement tests: tiny VM and PM types (a few cores, a little memory,
zero to two disks per VM), small enough for an exact brute force to check the solvers against."""

from __future__ import annotations

from hypothesis import strategies as st

from dcplace.placement.problem import PMType, VMType


def vm_types(names: str = "ab") -> st.SearchStrategy[VMType]:
    """A VM type named by one of ``names``: 1-3 cores, 1-6 memory units, 0-2 disks of one size 1-5."""
    return st.builds(
        VMType,
        st.sampled_from(list(names)),
        st.integers(1, 3),
        st.integers(1, 6),
        st.integers(0, 2).flatmap(lambda n: st.integers(1, 5).map(lambda s: (s,) * n)),
    )


pm_types: st.SearchStrategy[PMType] = st.builds(
    PMType,
    st.sampled_from(["p", "q"]),
    st.integers(3, 8),
    st.integers(6, 16),
    st.lists(st.integers(3, 12), min_size=1, max_size=3).map(tuple),
    st.integers(1, 20),
)
"""A PM type p or q: 3-8 cores, 6-16 memory units, 1-3 disks of 3-12, cost 1-20."""
