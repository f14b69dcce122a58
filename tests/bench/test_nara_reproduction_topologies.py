"""``nara_reproduction.run_reproduction`` plays each topology's own episode count, on the topologies it is given:
alpha's count for Table 7, beta's for Table 6, and the margins' gamma and delta columns empty where those were not
run. The shipped agents play (one or two 128-request episodes per cell)."""

from __future__ import annotations

import json

import pytest

from dcplace.bench import nara_reproduction as nr
from dcplace.errors import InputError


def test_each_topology_plays_its_own_count_and_only_those_named(tmp_path):
    md = nr.run_reproduction(tmp_path, episodes=5, episodes_by_topology={"alpha": 2, "beta": 1}, progress=False)
    records = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    count = {(r["topology"], r["dataset"], r["policy"]): r["episodes"] for r in records}
    assert {t for t, _d, _p in count} == {"alpha", "beta"}
    assert {n for (t, _d, _p), n in count.items() if t == "alpha"} == {2}
    assert {n for (t, _d, _p), n in count.items() if t == "beta"} == {1}
    assert ("alpha", "azure", "nara") in count and ("beta", "alibaba", "tetris") in count
    cross = [json.loads(x) for x in (tmp_path / "records_cross.jsonl").read_text().splitlines()]
    assert {(r["table"], r["topology"], r["episodes"]) for r in cross} == {(6, "beta", 1), (7, "alpha", 2)}
    margins = md[md.index("## Nara's margins") :].split("\n\n")[1]
    for row in margins.splitlines()[2:]:  # the gamma and delta columns: "-" with the paper's number beside
        assert row.split(" | ")[3].startswith("- (paper") and row.split(" | ")[4].startswith("- (paper")
    assert "## Table 6" in md and "## Table 7" in md


def test_without_beta_there_is_no_table_6(tmp_path):
    md = nr.run_reproduction(tmp_path, episodes_by_topology={"alpha": 1}, progress=False)
    assert "## Table 6" not in md and "## Table 7" in md
    cross = [json.loads(x) for x in (tmp_path / "records_cross.jsonl").read_text().splitlines()]
    assert {r["table"] for r in cross} == {7}


@pytest.mark.parametrize("by_topology", [{"beta": 1}, {"alpha": 1, "epsilon": 1}])
def test_alpha_is_needed_and_unknown_topologies_are_refused(tmp_path, by_topology):
    with pytest.raises(InputError, match="episodes_by_topology"):
        nr.run_reproduction(tmp_path, episodes_by_topology=by_topology, progress=False)
    assert not (tmp_path / "records.jsonl").exists()
