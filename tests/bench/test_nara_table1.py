"""Table 1's agreement with the paper as the Nara reports count it: cells within 0.05, the orderings, the widest
interval, and the paper's 5 rollouts beside all of ours."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from dcplace.bench import nara_baselines as nb
from dcplace.bench.reproduce_all import AllSettings
from dcplace.cli.reproduce import AllRun, NaraBaselinesRun, NaraRun

SMALL = ("alpha", "beta")


def paper() -> dict[tuple[str, str, str], float]:
    acc = {}
    for t in SMALL:
        for d in nb.DATASETS:
            for p in nb.POLICIES:
                v = nb._paper_acc(d, p, t)
                assert v is not None
                acc[(t, d, p)] = v
    return acc


def test_the_papers_own_numbers_agree_everywhere():
    assert nb.table1_agreement(paper()) == (24, 24, [])


def test_a_cell_off_by_more_than_005_is_out_and_one_within_is_in():
    acc = paper()
    acc[("alpha", "uniform", "tetris")] += 0.051
    acc[("beta", "azure", "nalb")] -= 0.049
    n_in, n, failed = nb.table1_agreement(acc)
    assert (n_in, n, failed) == (23, 24, [])


def test_the_orderings_are_checked_per_set_and_topology():
    acc = paper()
    acc[("alpha", "alibaba", "nulb")] = acc[("alpha", "alibaba", "random")] + 0.01
    acc[("beta", "azure", "nulb")] = acc[("beta", "azure", "random")] - 0.01
    acc[("beta", "uniform", "nalb")] = acc[("beta", "uniform", "tetris")] + 0.01
    _, _, failed = nb.table1_agreement(acc)
    assert failed == ["Tetris best (uniform beta)", "NULB >= Random (azure beta)", "NULB <= Random (alibaba alpha)"]


@dataclass
class Run:
    """A cell's episodes as the reports read them: each result's ``acceptance`` and utilisation (CPU = the
    acceptance, memory half of it, unless given)."""

    per_episode: list[float]
    mem: list[float] | None = None
    cpu: list[float] | None = None

    @property
    def results(self) -> list[SimpleNamespace]:
        mem = self.mem or [a / 2 for a in self.per_episode]
        cpu = self.cpu or self.per_episode
        return [SimpleNamespace(acceptance=a, cpu_util=c, mem_util=m)
                for a, c, m in zip(self.per_episode, cpu, mem, strict=True)]  # fmt: skip


def runs(n: int) -> dict[tuple[str, str, str], Run]:
    """The paper's value on the first 5 episodes, 0.1 more on the rest: in on 5, out on all once n >> 5."""
    return {k: Run([v + (0.001 * (i % 2) if i < 5 else v + 0.1) for i in range(n)]) for k, v in paper().items()}


def test_the_report_counts_all_episodes_and_the_first_five():
    lines = nb._paper_rollouts(runs(100), SMALL)  # type: ignore[arg-type]
    assert lines[-2].startswith("- all 100 episodes: 0 of 24 within 0.05")
    assert lines[-1] == "- the first 5 (the paper's count): 24 of 24 within 0.05; orderings failing: none"
    assert nb._paper_rollouts(runs(5), SMALL) == []  # nothing to compare with 5 or fewer


def test_the_precision_line_names_the_widest_interval():
    line, util = [x for x in nb._precision(runs(2), SMALL, nb.POLICIES) if x]  # type: ignore[arg-type]
    # two episodes 0.001 apart on the smallest value (0.20): t(1) x 0.000707 / sqrt(2) / 0.2005 = 3.2 %
    assert line.startswith("Precision: the widest 95 % interval") and "alpha 3.2 %" in line
    # CPU as acceptance (beta's smallest value is 0.31: 2.0 %); memory, half of each value and of the spread, the same
    want = "CPU: alpha 3.2 %, beta 2.0 %; memory: alpha 3.2 %, beta 2.0 %."
    assert util == "The same for Tables 2-5's utilisation cells, " + want


def test_the_utilisation_precision_is_its_own_measure():
    wide = runs(3)
    # memory of one beta cell spread much wider than its acceptance: only the memory share moves
    k = ("beta", "alibaba", "nulb")
    wide[k] = Run(wide[k].per_episode, mem=[0.05, 0.15, 0.10])
    lines = nb._precision(wide, SMALL, nb.POLICIES)  # type: ignore[arg-type]
    cpu, mem = lines[3].split("; memory: ")
    assert "beta 124.2 %" in mem and "124.2" not in cpu and "124.2" not in lines[1]
    # and CPU of another cell: only the CPU share moves
    j = ("alpha", "azure", "tetris")
    wide[j] = Run(wide[j].per_episode, cpu=[0.05, 0.15, 0.10])
    lines = nb._precision(wide, SMALL, nb.POLICIES)  # type: ignore[arg-type]
    cpu, mem = lines[3].split("; memory: ")
    assert "alpha 124.2 %" in cpu and "alpha 124.2" not in mem and "124.2" not in lines[1]


def test_the_cli_defaults_are_the_libraries():
    assert NaraRun().alpha_beta_episodes == NaraBaselinesRun().alpha_beta_episodes == nb.ALPHA_BETA_EPISODES
    assert AllRun().nara_alpha_beta_episodes == AllSettings().nara_alpha_beta_episodes == nb.ALPHA_BETA_EPISODES
    assert NaraRun().episodes == NaraBaselinesRun().episodes == nb.GAMMA_DELTA_EPISODES == 20  # gamma and delta
    assert AllRun().nara_episodes == AllSettings().nara_episodes == nb.GAMMA_DELTA_EPISODES
    assert "7 on alpha and beta" in AllSettings(nara_alpha_beta_episodes=7).describe()
    assert nb.episodes_per_topology(5) == {"alpha": 100, "beta": 100, "gamma": 5, "delta": 5}


@pytest.mark.parametrize(("cls", "field"), [(NaraRun, "alpha_beta_episodes"), (NaraBaselinesRun, "alpha_beta_episodes"),
                                            (AllRun, "nara_alpha_beta_episodes")])  # fmt: skip
def test_no_episodes_is_an_input_error(cls, field):
    from dcplace.errors import InputError

    with pytest.raises(InputError, match=field):
        cls(**{field: 0})


def test_precision_says_why_a_share_is_missing():
    one = {k: Run([v]) for k, v in paper().items()}
    assert "alpha - (one episode)" in nb._precision(one, SMALL, nb.POLICIES)[1]  # type: ignore[arg-type]
    none = runs(3)
    none[("beta", "azure", "nulb")] = Run([0.0, 0.0, 0.0])
    line = nb._precision(none, SMALL, nb.POLICIES)[1]  # type: ignore[arg-type]
    assert "beta - (a cell accepts nothing)" in line and "alpha " in line and "alpha -" not in line
