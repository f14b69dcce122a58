"""docs/cli.md's tables of what each command's ``--json`` prints, held to the commands' output: a key added,
renamed or dropped in the code and not in the doc (or the other way round) fails here. Scripts read these objects;
the CLI review of 2026-11-28 found their shapes documented nowhere."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dcplace.cli.main import app
from dcplace.engine import PlacementEngine, VmRequest

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
runner = CliRunner()


def documented(heading: str) -> tuple[set[str], set[str]]:
    """The keys in the first column of the table under ``### heading``, and those named in its "Optional keys"
    paragraph."""
    part = DOC.read_text().split(f"### {heading}\n", 1)[1].split("\n#", 1)[0]
    keys: set[str] = set()
    optional: set[str] = set()
    for line in part.splitlines():
        if line.startswith("| `"):
            keys |= set(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
        elif line.startswith("Optional keys") or optional:
            optional |= set(re.findall(r"`([a-z_]+)`", line))
    return keys, optional


def printed(*args: str) -> dict[str, object]:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert isinstance(out, dict)
    return out


@pytest.mark.parametrize(
    ("heading", "args"),
    [
        ("`simulate numa --json`", ("simulate", "numa", "--pms", "5", "--episodes", "1")),
        ("`simulate netalloc --json`", ("simulate", "netalloc", "--episodes", "1", "--requests", "16")),
        ("`simulate stream --json`", ("simulate", "stream", "--pms", "5", "--max-requests", "200")),
    ],
    ids=["numa", "netalloc", "stream"],
)
def test_simulate_prints_the_documented_keys(heading: str, args: tuple[str, ...]) -> None:
    keys, _ = documented(heading)
    assert set(printed(*args)) == keys


CONTEXT = {"trace", "pms", "mode", "warm_start", "release", "double_threshold", "topology", "dataset", "requests",
           "split", "setting", "seed", "one_sequence", "windows", "starts", "disjoint", "machines", "vms",
           "oversize"}  # fmt: skip
"""Every key a compare command's JSON may name what was run by."""


def _snapshot(tmp_path: Path) -> str:
    e = PlacementEngine(2)
    for m in range(4):
        e.add_machine(f"pm{m}", [24, 24], [64, 64])
    path = tmp_path / "state.json"
    path.write_text(json.dumps(e.snapshot()))
    return str(path)


@pytest.mark.parametrize(
    ("args", "context"),
    [
        (("compare", "numa", "--policies", "first-fit", "--policies", "random", "--pms", "5", "--episodes", "2"),
         {"trace", "pms", "mode", "warm_start", "release", "double_threshold", "seed", "oversize"}),
        (("compare", "netalloc", "--policies", "tetris", "--policies", "random", "--requests", "16", "--episodes",
          "2"), {"topology", "dataset", "requests", "split", "setting", "seed", "one_sequence"}),
        (("compare", "cluster", "--policies", "best-fit", "--policies", "random", "--requests", "50", "--windows",
          "2"), {"trace", "double_threshold", "requests", "seed", "windows", "starts", "disjoint", "machines",
                 "vms"}),
    ],
    ids=["numa", "netalloc", "cluster"],
)  # fmt: skip
def test_compare_prints_the_documented_keys(args: tuple[str, ...], context: set[str], tmp_path: Path) -> None:
    keys, _ = documented("`compare numa --json`, `compare netalloc --json`, `compare cluster --json`")
    if args[1] == "cluster":
        args = (*args, "--snapshot", _snapshot(tmp_path))
    out = printed(*args)
    assert CONTEXT <= keys and context <= CONTEXT and set(out) == keys - (CONTEXT - context)
    row = out["rows"][1]  # type: ignore[index]
    assert {"policy", "mean", "margin", "difference", "verdict", "wins", "ties", "losses", "values"} <= set(row)


def test_cluster_plan_prints_the_documented_keys(tmp_path: Path) -> None:
    keys, _ = documented("`cluster plan --json`")
    out = printed("cluster", "plan", "--snapshot", _snapshot(tmp_path), "--add", "0", "--add", "2", "--requests",
                  "50", "--windows", "2")  # fmt: skip
    assert set(out) == keys and out["simulator"] == "capacity" and out["added"] == [0, 2]
    assert [r["policy"] for r in out["rows"]] == ["+0 machines", "+2 machines"]  # type: ignore[index]


def test_policies_prints_the_documented_keys() -> None:
    keys, _ = documented("`policies --json`")
    out = printed("policies")
    assert set(out) == keys and "best-fit" in out["numa"] and "nara" in out["netalloc"]  # type: ignore[operator]


def test_solve_prints_the_documented_keys(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "placement"))
    from test_numa_batch import write_dataset

    keys, optional = documented("`solve --json`")
    numa_batch = str(write_dataset(tmp_path / "batch", seed=0))
    for args in (("--instance", "exp1", "--method", "greedy"), ("--instance", numa_batch, "--time-limit", "20")):
        got = set(printed("solve", *args))
        assert keys <= got and got <= keys | optional, sorted(got - keys - optional)


def test_cluster_reports_print_the_documented_keys(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db, policy="first-fit")
    for m in range(4):
        e.add_machine(f"pm{m}", 16, 32)
    for i in range(20):
        e.place(VmRequest(f"v{i}", 2.0, 4.0))
    for i in range(1, 20, 2):
        e.release(f"v{i}")
    e.close()
    keys, _ = documented("`cluster reoptimise --json`, `cluster evacuate --json`")
    moved = printed("cluster", "reoptimise", "--db", str(db), "--migration-weight", "0")
    assert set(moved) == keys and moved["applied"]
    assert {k for m in moved["moves"] for k in m} == {"vm", "source", "machine", "node", "staging", "gb"}  # type: ignore[attr-defined]
    assert set(printed("cluster", "evacuate", "pm0", "--db", str(db))) == keys


def test_cluster_reconcile_prints_the_documented_keys(tmp_path: Path) -> None:
    keys, _ = documented("`cluster reconcile --json`")
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 8, 16)
    e.assign("a", "m0", 0, 1, 1)
    e.close()
    inv = tmp_path / "inv.csv"
    inv.write_text("vm,machine,node,cpu,mem\na,m0,1,1,1\n", encoding="utf-8")
    out = printed("cluster", "reconcile", str(inv), "--db", str(db), "--dry-run")
    assert set(out) == keys and out["moved"] == [{"vm": "a", "from_machine": "m0", "from_node": 0, "machine": "m0",
                                                  "node": 1}]  # fmt: skip
