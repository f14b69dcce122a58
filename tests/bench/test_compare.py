"""``dcplace compare``: policies on the same episodes, each against a baseline with paired intervals."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dcplace.bench.compare import compare, compare_numa
from dcplace.bench.stats import interval
from dcplace.cli.main import app
from dcplace.errors import InputError
from dcplace.sim.numa import Scenario

runner = CliRunner()


def test_the_paired_statistics_are_those_of_the_differences() -> None:
    t = compare({"base": [10, 20, 30, 40], "better": [11, 22, 33, 44], "same": [10, 20, 30, 40],
                 "worse": [5, 10, 15, 20]})  # fmt: skip
    rows = {r.policy: r for r in t.rows}
    assert t.baseline == "base" and rows["base"].verdict == "baseline" and rows["base"].margin is None
    better = rows["better"]
    assert better.margin is not None and better.difference is not None
    assert math.isclose(better.margin.mean, 0.10) and math.isclose(better.margin.lo, 0.10)  # +10 % every episode
    assert better.difference == interval([1, 2, 3, 4]) and (better.wins, better.ties, better.losses) == (4, 0, 0)
    # each alone is called (p = 0.031 on 4 episodes) ...
    assert compare({"base": [10, 20, 30, 40], "better": [11, 22, 33, 44]}).rows[1].verdict == "ahead"
    assert compare({"base": [10, 20, 30, 40], "worse": [5, 10, 15, 20]}).rows[1].verdict == "behind"
    # ... but not as a family of three: Holm multiplies the smallest of 3 p-values by 3 (0.091)
    assert math.isclose(better.p, 0.0305, abs_tol=1e-4) and math.isclose(better.p_holm, 3 * better.p)
    assert better.verdict == "level" and rows["worse"].verdict == "level" and rows["same"].verdict == "level"
    assert rows["same"].p == 1.0 and math.isnan(rows["base"].p) and math.isnan(rows["base"].p_holm)
    assert (rows["same"].wins, rows["same"].ties) == (0, 4)
    zero = compare({"a": [0, 2], "b": [1, 3]})  # a baseline episode at 0: no relative margin, a difference still
    assert zero.rows[1].margin is None and zero.rows[1].difference is not None
    one = compare({"a": [3], "b": [4]})
    assert one.rows[1].verdict == "n/a"  # one episode: no interval
    with pytest.raises(InputError, match="must be one of the policies compared"):
        compare({"a": [1], "b": [2]}, baseline="c")


def test_verdicts_a_reviewer_found_misleading() -> None:
    """The same gap on every episode gave an interval of zero width and a confident verdict from 2 episodes; a
    lower-is-better metric must flip the verdict; a metric every policy ties on says nothing (a researcher's
    review of the command)."""
    two = compare({"a": [10, 12], "b": [11, 13]}).rows[1]
    assert two.difference is not None and two.difference.lo == two.difference.hi and two.verdict == "no spread"
    six = compare({"a": [10, 12, 14, 9, 8, 30], "b": [11, 13, 15, 10, 9, 31]}).rows[1]
    assert six.verdict == "ahead"  # all 6 one way: the sign test decides (p = 0.031)
    fewer = compare({"a": [10, 12, 14, 3], "b": [9, 11, 13, 1]}, better=-1).rows[1]  # machines in use: lower wins
    assert fewer.verdict == "ahead" and fewer.wins == 4
    tied = compare({"a": [5, 6], "b": [5, 6], "c": [5, 6]})
    assert tied.saturated and not compare({"a": [5, 6], "b": [5, 7]}).saturated
    share = compare({"a": [0.5, 0.9], "b": [0.1, 0.98]}, within=(0.0, 1.0)).rows[1]
    assert 0 <= share.mean.lo and share.mean.hi <= 1 and share.difference is not None
    assert -1 <= share.difference.lo and share.difference.hi <= 1


def test_the_verdicts_hold_for_the_table_not_each_row() -> None:
    """Five policies that are the baseline in disguise (the same distribution, seeded): with each row tested at 5 %,
    a fifth of the tables call one of them ahead or behind; Holm keeps that at 5 %. Seeded, so not a flaky
    test: the counts are fixed numbers, and the point is which side of 5 % each lands on."""
    rng = np.random.default_rng(7)
    tables, fluke, fluke_alone = 400, 0, 0
    for _ in range(tables):
        base = rng.normal(100, 10, 10)
        values = {"base": base, **{f"p{i}": base + rng.normal(0, 3, 10) for i in range(5)}}
        table = compare(values)
        fluke += any(r.verdict in ("ahead", "behind") for r in table.rows)
        fluke_alone += any(r.difference is not None and (r.difference.lo > 0 or r.difference.hi < 0)
                           for r in table.rows)  # fmt: skip
    assert fluke / tables <= 0.06 and fluke_alone / tables >= 0.15, (fluke, fluke_alone)


def test_what_a_review_of_the_holm_change_found() -> None:
    """A constant gap with rounding noise got p = 0 and a verdict from 2 episodes (it now goes to the sign test,
    as an exactly constant one does); a nan value crashed the p-value (the row is n/a, as before)."""
    for base, other in (([0.5, 0.7], [0.7, 0.9]), ([0.3, 0.5, 0.6], [0.4, 0.6, 0.7])):
        row = compare({"b": base, "x": other}).rows[1]
        assert row.no_spread and row.verdict == "no spread" and row.p == 2 * 0.5 ** len(base), (row.p, row.verdict)
    assert compare({"b": [1.0, 2, 3], "x": [1, math.nan, 2]}).rows[1].verdict == "n/a"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=2, max_size=8), st.lists(st.floats(-3, 3), min_size=8, max_size=8))
def test_a_lone_comparison_is_judged_by_its_interval_alone(base: list[float], gap: list[float]) -> None:
    """Holm changes nothing for one comparison: the verdict is the interval's, even where the t table's 3 decimals
    and the exact p-value disagree at the edge."""
    other = [b + g for b, g in zip(base, gap, strict=False)]
    row = compare({"b": base, "x": other}).rows[1]
    d = row.difference
    assert d is not None and row.family == 1
    if row.no_spread:
        return
    want = "ahead" if d.lo > 0 else "behind" if d.hi < 0 else "level"
    assert row.verdict == want


def test_at_the_edge_one_comparison_keeps_the_intervals_verdict() -> None:
    """n = 4, the interval's lower end 6e-5 above zero, the exact p-value 0.050009: ahead, as before Holm."""
    other = [11 + 0.5443, 11 - 0.5443, 11 + 0.5443, 11 - 0.5443]
    row = compare({"b": [10.0] * 4, "x": other}).rows[1]
    assert row.difference is not None and row.difference.lo > 0 and 0.05 < row.p < 0.0501, (row.difference, row.p)
    assert row.verdict == "ahead"


def test_a_bound_row_is_shown_but_not_tested() -> None:
    """A descriptive row (compare netalloc's bound) has no p-value and does not enlarge the family: the policy's
    adjusted p-value is its own."""
    t = compare({"a": [1.0, 2, 3, 4, 5], "b": [1.5, 2.4, 3.6, 4.4, 5.7], "bound": [2.0, 3, 4, 5, 6]},
                descriptive=["bound"])  # fmt: skip
    b, bound = t.rows[1], t.rows[2]
    assert b.p_holm == b.p and math.isnan(bound.p) and bound.verdict == "no spread"
    assert t.as_dict()["rows"][2]["p"] is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 1000), min_size=2, max_size=12), st.lists(st.integers(-50, 50), min_size=12,
                                                                           max_size=12))  # fmt: skip
def test_a_policy_ahead_on_every_episode_is_never_called_behind(base: list[int], shift: list[int]) -> None:
    other = [b + abs(s) + 1 for b, s in zip(base, shift, strict=False)]
    row = compare({"base": base, "other": other}).rows[1]
    assert row.wins == len(base) and row.verdict in ("ahead", "level", "no spread")
    assert row.difference is not None and row.difference.mean > 0


def test_compare_numa_plays_the_same_episodes_as_simulate(tmp_path: Path) -> None:
    """The values are what ``simulate numa`` gives each policy alone with the same seed (the same episodes)."""
    sc = Scenario(pms=5)
    t = compare_numa(["first-fit", "random"], "synthetic", sc, episodes=3, seed=4)
    for policy in ("first-fit", "random"):
        alone = runner.invoke(app, ["simulate", "numa", "--policy", policy, "--pms", "5", "--episodes", "3",
                                    "--seed", "4", "--out", str(tmp_path / f"{policy}.csv")])  # fmt: skip
        assert alone.exit_code == 0, alone.output
        with open(tmp_path / f"{policy}.csv", encoding="utf-8") as fh:
            lengths = [float(r["length"]) for r in csv.DictReader(fh)]
        assert next(r for r in t.rows if r.policy == policy).values == lengths


def test_the_command_prints_writes_and_refuses(tmp_path: Path) -> None:
    args = ["compare", "numa", "--policies", "first-fit", "--policies", "random", "--pms", "5", "--episodes", "3"]
    res = runner.invoke(app, [*args, "--json", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    record = json.loads(res.stdout)
    assert record["baseline"] == "first-fit" and [r["policy"] for r in record["rows"]] == ["first-fit", "random"]
    assert json.loads((tmp_path / "o" / "result.json").read_text()) == record
    with open(tmp_path / "o" / "episodes.csv", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 6
    table = runner.invoke(app, [*args, "--baseline", "random"])
    assert table.exit_code == 0 and "baseline random" in table.stdout.replace("\n", " ")
    for bad, said in ((["--policies", "first-fit"], "needs at least two policies to compare, got 1 (repeat --policies"),
                      (["--policies", "best-fit", "--policies", "schedrl"], "schedrl: this SchedRL checkpoint"),
                      (["--policies", "best-fit", "--policies", "cvd-rl=nope.pt"], "cvd-rl=nope.pt:"),
                      (["--policies", "random", "--policies", "random"], "--policies: names 'random' twice"),
                      (["--policies", "random", "--policies", "nope"], "--policies: nope: must be one of"),
                      (["--policies", "random", "--policies", "no_pkg.x:Y"],  # the name once (a review)
                       "--policies: policy 'no_pkg.x:Y': cannot import module"),
                      (["--policies", "random", "--policies", "first-fit", "--baseline", "x"],
                       "--baseline must be one of --policies")):  # fmt: skip
        r = runner.invoke(app, ["compare", "numa", *bad, "--pms", "5"])
        assert r.exit_code == 2 and said in r.output and "Traceback" not in r.output, r.output
        assert ": 10 episodes" not in r.output  # refused before any policy's episodes ran
    expansion = runner.invoke(app, ["compare", "numa", "--policies", "best-fit", "--policies", "random", "--pms", "5",
                                    "--mode", "expansion", "--max-pms", "40", "--max-requests", "300", "--episodes",
                                    "2", "--json"])  # fmt: skip
    assert expansion.exit_code == 0 and "cannot tell them apart here" in expansion.stderr, expansion.output
    by_machines = runner.invoke(app, ["compare", "numa", "--policies", "best-fit", "--policies", "random", "--pms", "5",
                                      "--mode", "expansion", "--max-pms", "40", "--max-requests", "300", "--episodes",
                                      "2", "--metric", "pms_in_use", "--json"])  # fmt: skip
    record = json.loads(by_machines.stdout)
    assert record["metric"] == "pms_in_use" and record["better"] == "lower"


def test_compare_netalloc_runs_on_the_same_request_sequences() -> None:
    res = runner.invoke(app, ["compare", "netalloc", "--policies", "tetris", "--policies", "random",
                              "--requests", "16", "--episodes", "2", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    record = json.loads(res.stdout)
    assert record["metric"] == "acceptance" and len(record["rows"][1]["values"]) == 2


@pytest.mark.parametrize("topology", ["alpha", "beta"])
def test_the_bound_row_is_above_every_policy_on_every_episode(topology: str, tmp_path: Path) -> None:
    """``--bound`` adds each episode's clairvoyant acceptance bound: no policy accepts more of that episode, which
    holds only if the bound was computed on the episodes the policies played (a bound of other requests would
    cross them)."""
    from dcplace.bench.compare import BOUND_ROW, compare_netalloc

    policies = ["random", "tetris", "nalb-strict"]
    table = compare_netalloc(policies, topology, "azure", episodes=3, requests=48, setting="paper-reject", bound=True)
    rows = {r.policy: r for r in table.rows}
    assert list(rows) == [*policies, BOUND_ROW] and rows[BOUND_ROW].extra == {"acceptance": rows[BOUND_ROW].mean.mean}
    for p in policies:
        assert all(b >= a for a, b in zip(rows[p].values, rows[BOUND_ROW].values, strict=True)), p
    res = runner.invoke(app, ["compare", "netalloc", "--policies", "tetris", "--policies", "random", "--requests",
                              "16", "--episodes", "2", "--setting", "paper-reject", "--bound", "--json", "--out",
                              str(tmp_path / "o")])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"][-1]["policy"] == BOUND_ROW
    with open(tmp_path / "o" / "episodes.csv", encoding="utf-8") as fh:
        last = list(csv.DictReader(fh))[-1]
    assert last["policy"] == BOUND_ROW and last["acceptance"] and last["cpu_util"] == ""


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ([], "--bound: needs a setting that rejects what does not fit"),
        (["--setting", "paper-reject", "--metric", "cpu_util"], "--bound: bounds the acceptance only, not cpu_util"),
    ],
)
def test_a_bound_where_there_is_none_is_refused(flags: list[str], said: str) -> None:
    res = runner.invoke(app, ["compare", "netalloc", "--policies", "tetris", "--policies", "random", "--episodes",
                              "2", "--bound", *flags])  # fmt: skip
    assert res.exit_code == 2 and said in res.output, res.output


def test_a_request_file_is_compared_once_and_its_errors_name_the_file(tmp_path: Path) -> None:
    """A review: a request file is one sequence replayed as it is, yet ``compare netalloc`` ran it 10 times and
    called a 2-request gap "ahead, p = 0.008" over the copies; and a bad topology or request file lost its file and
    line, blamed on the first policy (``--policies: tetris: missing``)."""
    reqs = tmp_path / "reqs.csv"
    reqs.write_text("cpu,mem,bw,hold\n" + "".join(f"{5 + i % 30},{i % 17},0.3,{1 + i % 9}\n" for i in range(60)))
    res = runner.invoke(app, ["compare", "netalloc", "--dataset", str(reqs), "--setting", "paper-reject", "--policies",
                              "tetris", "--policies", "nalb-strict", "--episodes", "8", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    record = json.loads(res.stdout)
    assert record["episodes"] == 1 and record["one_sequence"] is True
    assert {r["verdict"] for r in record["rows"]} <= {"baseline", "n/a"}
    assert "is one request sequence, replayed as it is: compared once" in res.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("cpu,mem,bw,hold\n5,5,0.3,2\n5,x,0.3,2\n")
    res = runner.invoke(app, ["compare", "netalloc", "--dataset", str(bad), "--policies", "tetris",
                              "--policies", "nalb"])  # fmt: skip
    assert res.exit_code == 2 and f"{bad}, line 3, field 'mem'" in res.output and "tetris" not in res.output
    topo = tmp_path / "t.json"
    topo.write_text(
        json.dumps(
            {
                "nodes": [{"name": "a", "cpu": 10, "mem": 10}, {"name": "b", "cpu": 10, "mem": 10}, {"name": "s"}],
                "links": [{"source": "a", "target": "s", "capacity": 1}],
            }
        )
    )  # b has no path
    res = runner.invoke(app, ["compare", "netalloc", "--topology", str(topo), "--policies", "tetris",
                              "--policies", "nalb"])  # fmt: skip
    assert res.exit_code == 2 and f"{topo}: server 'b' has no path" in res.output, res.output
    assert "tetris" not in res.output, res.output
