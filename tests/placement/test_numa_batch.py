"""Topology-aware batch placement (the Huawei dataset's layout): every answer passes the independent checker, the
checker catches each kind of violation, the bound never exceeds what the packing uses, bad files are one sentence."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dcplace.cli.main import app
from dcplace.errors import InputError
from dcplace.placement import Deadline, solve
from dcplace.placement.numa_batch import check, lower_bound, read_huawei, summary_of
from dcplace.placement.numa_instances import load_numa_batch
from dcplace.workload.traces import shared_data_dir

FLAVOURS = [(2, 4, 1), (4, 8, 1), (2, 8, 1), (8, 32, 1), (16, 32, 2), (32, 64, 2)]


def write_dataset(folder: Path, seed: int, servers: int = 16, racks: int = 4, vms: int = 40) -> Path:
    """A small dataset in the real one's layout: servers with random free nodes, racks, VMs with constraints."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "PM_res.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["CPU1", "RAM1", "CPU2", "RAM2"])
        for _ in range(servers):
            w.writerow([int(rng.integers(16, 49)), int(rng.integers(32, 129)),
                        int(rng.integers(16, 49)), int(rng.integers(32, 129))])  # fmt: skip
    with open(folder / "topology.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["host_id", "rack_id"])
        for i in range(servers + 3):
            w.writerow([f"host-{i}", i * racks // (servers + 3)])
    with open(folder / "VM_data_C1.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["flavor_vcpus", "flavor_ram", "numa", "strategy", "group", "domain"])
        i = 0
        while i < vms:
            c, r, n = FLAVOURS[int(rng.integers(len(FLAVOURS)))]
            kind = int(rng.integers(4))
            size = int(rng.integers(2, 4))
            for k in range(size if kind else 1):
                if kind == 0:
                    w.writerow([c, r, n, "", "", ""])
                elif kind == 1:
                    w.writerow([2, 4, 1, "affinity", f"{i}.0", ""])
                elif kind == 2:
                    w.writerow([c, r, n, "anti-affinity", f"{i}.0", ""])
                else:
                    w.writerow([c, r, n, "fault_domain", f"{i}.0", f"{k % 2}.0"])
            i += size if kind else 1
    return folder / "VM_data_C1.csv"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000))
@example(seed=1369)  # the exact-assignment fallback once said optimal without saying its bound was proven
def test_every_answer_passes_the_checker_and_respects_the_bound(tmp_path_factory, seed):
    path = write_dataset(tmp_path_factory.mktemp("d"), seed)
    batch = load_numa_batch(str(path))
    try:
        res = summary_of(solve(batch, "auto", Deadline(20)))
    except InputError as exc:  # a random batch may not fit: then it must say so, not crash
        assert "infeasible" in str(exc) or "fits no" in str(exc)
        return
    assert res["verified"] and res["status"] in ("feasible", "optimal") and not res["violations"]
    assert res["bound"] <= res["pms_used"] <= batch.servers
    assert (res["status"] == "optimal") == (res["pms_used"] == res["bound"] and res["bound_proven"])
    assert res["vms"] == batch.vms


def test_checker_catches_each_violation(tmp_path):
    path = tmp_path / "d"
    write_dataset(path, 0, servers=6, racks=3, vms=0)
    with open(path / "VM_data_C1.csv", "a", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerows([
            [2, 4, 1, "affinity", "a", ""], [2, 4, 1, "affinity", "a", ""],
            [2, 4, 1, "anti-affinity", "b", ""], [2, 4, 1, "anti-affinity", "b", ""],
            [2, 4, 1, "fault_domain", "c", "1"], [2, 4, 1, "fault_domain", "c", "2"],
            [4, 8, 2, "", "", ""],
        ])  # fmt: skip
    b = read_huawei(path, 1)
    rack = b.rack.tolist()
    other = next(s for s in range(b.servers) if rack[s] != rack[0])
    good_server = [0, 0, 0, other, 0, other, 0]
    good_node = [0, 0, 0, 0, 0, 0, -1]
    assert check(b, good_server, good_node) == []
    cases = {
        "spans racks": ([0, other, 0, other, 0, other, 0], good_node),
        "two VMs on one server": ([0, 0, 0, 0, 0, other, 0], good_node),
        "has domains": ([0, 0, 0, other, 0, 0, 0], good_node),
        "double-NUMA but placed on node": (good_server, [0, 0, 0, 0, 0, 0, 1]),
        "does not exist": ([0, 0, 0, other, 0, other, 99], good_node),
        "covers": (good_server[:-1], good_node[:-1]),
    }
    for needle, (server, node) in cases.items():
        errs = check(b, server, node)
        assert any(needle in e for e in errs), (needle, errs)
    big = [1000.0, 1000.0]
    b2 = read_huawei(path, 1)
    object.__setattr__(b2, "cpu", np.array([*b2.cpu[:-1], big[0]]))
    assert any("holds" in e for e in check(b2, good_server, good_node))


def test_bound_counts_node_fit_not_just_totals(tmp_path):
    """Two servers with 8 CPU free per node and plenty of RAM: two 10-core single-NUMA VMs fit nowhere (no node has 10
    cores), though the totals (32 cores) would cover them."""
    path = tmp_path / "d"
    write_dataset(path, 0, servers=2, racks=1, vms=0)
    with open(path / "PM_res.csv", "w", encoding="utf-8") as fh:
        fh.write("CPU1,RAM1,CPU2,RAM2\n8,64,8,64\n8,64,8,64\n")
    with open(path / "VM_data_C1.csv", "a", encoding="utf-8") as fh:
        fh.write("10,8,1,,,\n10,8,1,,,\n")
    with pytest.raises(InputError, match="fits no server"):
        lower_bound(read_huawei(path, 1), Deadline(60))


@pytest.mark.parametrize(
    ("column", "value", "needle"),
    [
        ("numa", "3", "numa must be 1 or 2"),
        ("strategy", "friends", "strategy must be"),
        ("flavor_vcpus", "x", "field 'flavor_vcpus': not a number"),
        ("group", "", "needs a group"),
    ],
)
def test_bad_files_are_one_sentence_with_file_line_field(tmp_path, column, value, needle):
    path = write_dataset(tmp_path / "d", 1, vms=4)
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    rows[1]["strategy"] = "anti-affinity"
    rows[1]["group"] = "g"
    rows[1][column] = value
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(InputError) as err:
        load_numa_batch(str(path))
    msg = str(err.value)
    assert needle in msg and "line 3" in msg and str(path) in msg
    res = CliRunner().invoke(app, ["solve", "--instance", str(path), "--json"])
    assert res.exit_code == 2 and needle in res.output


def test_a_host_listed_twice_in_the_topology_is_refused(tmp_path):
    """The last of two rows for one host won silently (found by a CLI walkthrough, 2026-11-27)."""
    path = write_dataset(tmp_path / "d", 1, vms=4)
    with open(path.parent / "topology.csv", "a", encoding="utf-8") as fh:
        fh.write("host-0,3\n")
    with pytest.raises(InputError, match=r"host 'host-0' is listed twice \(first on line 2\)") as err:
        load_numa_batch(str(path))
    assert "topology.csv" in str(err.value) and "field 'host_id'" in str(err.value)


def test_cli_solves_a_batch_file(tmp_path):
    path = write_dataset(tmp_path / "d", 3)
    res = CliRunner().invoke(app, ["solve", "--instance", str(path), "--time-limit", "20", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    for key in ("instance", "method", "status", "cost", "bound", "gap", "wall_s", "pms_used", "vms", "verified"):
        assert key in out
    assert out["verified"] is True
    res = CliRunner().invoke(app, ["solve", "--instance", str(path), "--method", "flat"])  # a batch problem's method
    assert res.exit_code == 2 and "must be one of relaxation-guided, pattern, auto, consolidate" in res.output
    res = CliRunner().invoke(app, ["solve", "--instance", str(path), "--method", "pattern", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["method"] == "pattern", res.output
    res = CliRunner().invoke(app, ["solve", "--instance", str(path), "--workers", "4"])  # it was silently ignored
    assert res.exit_code == 2 and "--workers: applies to exp/mix instances only" in res.output, res.output


REAL = shared_data_dir()


@pytest.mark.skipif(
    REAL is None or not (REAL / "huawei-numa-placement").is_dir(), reason="needs ../shared/data/huawei-numa-placement"
)
def test_real_dataset_reads_and_bounds():
    b = load_numa_batch("huawei-c1")
    assert b.vms == 4998 and b.servers == 1710 and len(set(b.rack.tolist())) == 100
    assert {s for s in b.strategy} == {"", "affinity", "anti-affinity", "fault_domain"}
    bound, proven, chosen = lower_bound(b, Deadline(60))
    assert proven and bound == len(chosen) and 600 < bound < 900


@pytest.mark.parametrize("method", ["auto", "relaxation-guided", "pattern"])
def test_a_tiny_stop_is_honoured_and_the_result_has_the_common_shape(tmp_path, method):
    """Through the one ``solve``: a 0.2 s deadline still gives a verified packing soon after (the relaxation's
    solver takes at least 1 s, the integer master at least 0.5 s), and the result is the common immutable shape with
    the NUMA node of every VM."""
    batch = load_numa_batch(str(write_dataset(tmp_path / "d", 3)))
    res = solve(batch, method, Deadline(0.2))
    assert res.method == method and res.verified and res.wall_s <= 3.0
    assert res.vm_pm is not None and res.vm_node is not None and len(res.vm_node) == batch.vms
    assert set(res.vm_node.tolist()) <= {-1, 0, 1} and not res.vm_node.flags.writeable
    assert res.cost == res.pms_used and res.bound <= res.cost
