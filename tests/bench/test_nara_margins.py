"""The margins table of ``reproduce nara``: the bound column only where the setting has a bound (a full cluster
rejects), and each margin computed from the cells it names."""

from __future__ import annotations

from dataclasses import dataclass

from dcplace.bench import nara_baselines as nb
from dcplace.bench.nara_reproduction import _margins


@dataclass
class Cell:
    acceptance: float

    def summary(self) -> dict[str, float]:
        return {"acceptance_mean": self.acceptance}


def runs() -> dict[tuple[str, str, str], Cell]:
    acc = {"tetris": 0.6, "nalb": 0.5, "nulb": 0.3, "random": 0.4, "nalb-strict": 0.55, "nara": 0.66}
    return {(t, d, p): Cell(a * (1.2 if t == "delta" else 1.0)) for t in nb.TOPOLOGIES for d in nb.DATASETS
            for p, a in acc.items()}  # fmt: skip


def rows(md: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines() if line.startswith("|")]


def test_no_bound_column_where_requests_wait():
    table = rows(_margins(runs(), {}))  # type: ignore[arg-type]
    assert len(table[0]) == 5 and not any("bound" in c for c in table[0])
    uniform = table[2]
    assert uniform[0] == "uniform" and uniform[1].startswith("+10% over tetris") and uniform[2] == "+20%"
    assert uniform[4].startswith("+20%")  # delta over alpha


def test_bound_column_where_requests_are_rejected():
    bounds = {("alpha", d): 0.9 for d in nb.DATASETS}
    table = rows(_margins(runs(), bounds))  # type: ignore[arg-type]
    assert len(table[0]) == 6 and "bound" in table[0][5]
    assert all(len(r) == 6 for r in table) and table[2][5] == "0.90 (0.70)"  # 0.6 x (1 + 16 %) = 0.70


def test_the_papers_margins_carry_its_stated_precision():
    from dcplace.bench.nara_reproduction import paper_margin_interval

    # alibaba: 0.72 / 0.63 = 1.143; half-width 1.143 x sqrt(2) x 5 % = 0.081
    lo, hi = paper_margin_interval("alibaba")
    assert abs(lo - 0.0621) < 5e-4 and abs(hi - 0.2237) < 5e-4
    line = _margins(runs(), {}).splitlines()[-1]  # type: ignore[arg-type]
    assert line.startswith("The paper's alpha margins at its stated precision") and "alibaba [+6%, +22%]" in line
