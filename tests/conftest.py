"""Shared fixtures: tiny traces written by the tests themselves."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest

from dcplace.workload.table import RequestTable


def make_table(rows: list[tuple[float, float, float, float]], threshold: float = 32.0) -> RequestTable:
    """rows of (arrival, lifetime, cpu, mem)."""
    a = np.array(rows, dtype=float).reshape(-1, 4)
    return RequestTable.from_arrays(a[:, 0], a[:, 0] + a[:, 1], a[:, 2], a[:, 3]).with_double_numa_threshold(threshold)


@pytest.fixture
def tiny_csv(tmp_path):
    p = tmp_path / "tiny.csv"
    p.write_text("vmid,cpu,mem,at,lt\n0,4,16,0,100\n1,1,2,5,50\n2,16,64,7,30\n3,2,4,7,10\n")
    return p
