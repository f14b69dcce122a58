"""Issue 19's contract for bad input: every malformed file of every kind, every bad flag ends in one sentence on
stderr naming the file (and line / field where known), exit code 2, and nothing written in ``--out``.

The files are built by hypothesis: a valid file of each kind (checked to load), then one mutation drawn from the
classes the issue lists (binary and Latin-1 bytes, a folder, an unreadable file, empty and header-only files, rows
with another number of fields, non-finite, overflowing and out-of-range numbers, non-integer ids, cross-file
mismatches). Commands run in-process (typer's CliRunner) to keep this fast.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dcplace.cli.main import app
from dcplace.errors import InputError

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stderr


def assert_contract(code: int, err: str, named: str, out: Path | None = None) -> None:
    """Exit 2, one line on stderr that names ``named`` (a file or a flag), no traceback, nothing in ``out``."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    assert named in lines[0], (named, err)
    if out is not None:
        assert not out.exists(), sorted(p.name for p in out.iterdir())


# --- mutations shared by every text file ---------------------------------------------------------------------------


def _binary(path: Path, text: str) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))


def _latin1(path: Path, text: str) -> None:
    lines = text.splitlines()
    lines[-1] = lines[-1] + ",caf\xe9" if "," in lines[-1] else lines[-1] + " caf\xe9"
    path.write_bytes("\n".join(lines).encode("latin-1"))


def _empty(path: Path, text: str) -> None:
    path.write_text("", encoding="utf-8")


def _folder(path: Path, text: str) -> None:
    path.mkdir()


GENERIC: dict[str, Callable[[Path, str], None]] = {
    "binary": _binary,
    "latin-1": _latin1,
    "empty": _empty,
    "folder": _folder,
}


# --- Huawei traces (lifetime and event forms) ----------------------------------------------------------------------

LIFETIME = "vmid,cpu,mem,at,lt\n0,2,4,0,100\n1,4,8,10,50\n2,1,2,20,30\n"
EVENTS = "vmid,cpu,memory,time,type\n0,2,4,0,0\n1,4,8,10,0\n0,2,4,50,1\n"

CSV_CELLS = ["nan", "inf", "-inf", "1e308", "1e400", "-1", "abc", "", "99999999999999999999999", "0x10"]


def _cell(text: str, row: int, col: int, value: str) -> str:
    lines = text.splitlines()
    cells = lines[row].split(",")
    cells[col] = value
    lines[row] = ",".join(cells)
    return "\n".join(lines) + "\n"


@st.composite
def bad_csv(draw: st.DrawFn, text: str, numeric_cols: list[int]) -> tuple[str, Callable[[Path, str], None]]:
    """A mutation of a CSV ``text``: generic, a cell made non-finite / out of range, a row with a field more or
    less, or a header-only file."""
    kind = draw(st.sampled_from(["generic", "cell", "fields", "header-only"]))
    if kind == "generic":
        name = draw(st.sampled_from(sorted(GENERIC)))
        return name, GENERIC[name]
    n_rows = len(text.splitlines())
    if kind == "cell":
        row = draw(st.integers(1, n_rows - 1))
        col = draw(st.sampled_from(numeric_cols))
        value = draw(st.sampled_from(CSV_CELLS))
        mutated = _cell(text, row, col, value)
        return f"cell {row},{col}={value!r}", lambda p, _t: p.write_text(mutated)
    if kind == "fields":
        row = draw(st.integers(1, n_rows - 1))
        extra = draw(st.sampled_from([",7,8", ",7", "DROP"]))
        lines = text.splitlines()
        lines[row] = lines[row].rsplit(",", 1)[0] if extra == "DROP" else lines[row] + extra
        mutated = "\n".join(lines) + "\n"
        return f"fields row {row} {extra}", lambda p, _t: p.write_text(mutated)
    header = text.splitlines()[0] + "\n"
    return "header-only", lambda p, _t: p.write_text(header)


@pytest.mark.parametrize("text", [LIFETIME, EVENTS], ids=["lifetime", "events"])
def test_valid_huawei_traces_load(tmp_path: Path, text: str) -> None:
    from dcplace.workload.traces import load_trace

    f = tmp_path / "t.csv"
    f.write_text(text)
    assert len(load_trace(str(f))) >= 2


@pytest.mark.parametrize("text", [LIFETIME, EVENTS], ids=["lifetime", "events"])
@SETTINGS
@given(data=st.data())
def test_malformed_huawei_trace(tmp_path: Path, text: str, data: st.DataObject) -> None:
    case = data.draw(bad_csv(text, [0, 1, 2, 3]))  # vmid, cpu, mem(ory), at / time
    work = tmp_path / f"case-{abs(hash(case[0]))}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    f = work / "trace.csv"
    case[1](f, text)
    out = work / "out"
    code, err = run("simulate", "numa", "--trace", str(f), "--pms", "5", "--episodes", "1", "--out", str(out))
    assert_contract(code, err, str(f), out)


def test_trace_specific_cases(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    # vmids 0.5 and 0.7 are not whole numbers (they used to be "duplicate vmid 0")
    f.write_text("vmid,cpu,mem,at,lt\n0.5,2,4,0,100\n0.7,4,8,10,50\n")
    code, err = run("simulate", "numa", "--trace", str(f))
    assert_contract(code, err, "line 2, field 'vmid'")
    assert "duplicate" not in err and "0.5" in err
    # arrival and lifetime 1e308 (an overflow warning, then exit 0, before)
    f.write_text("vmid,cpu,mem,at,lt\n0,2,4,1e308,1e308\n")
    assert_contract(*run("simulate", "numa", "--trace", str(f)), "field 'at'")
    # 8 fields under a 5-field header
    f.write_text("vmid,cpu,mem,at,lt\n0,2,4,0,100,1,2,3\n")
    assert_contract(*run("simulate", "numa", "--trace", str(f)), "line 2")


def test_unreadable_file_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dcplace.inputs

    f = tmp_path / "t.csv"
    f.write_text(LIFETIME)
    monkeypatch.setattr(dcplace.inputs.os, "access", lambda *a, **k: False)  # root reads anything: pretend
    code, err = run("simulate", "numa", "--trace", str(f))
    assert_contract(code, err, str(f))
    assert "permission denied" in err


# --- Azure V1 folders ---------------------------------------------------------------------------------------------

AZURE = {
    "flav_map.txt": "2,4 a\n4,8 b\n",
    "v1.interval_map.txt": "0 0\n300 1\n600 2\n",
    "v1.dev.txt": "300 a,b,|\n600 a,|\n",
    "v1.dev.c900.txt": "300 U0,U1,|\n600 C0,|\n",
}


def _azure(folder: Path, **changes: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {**AZURE, **changes}.items():
        (folder / name).write_text(text)
    return folder


def test_valid_azure_folder_loads(tmp_path: Path) -> None:
    from dcplace.workload.traces import load_trace

    assert len(load_trace(str(_azure(tmp_path / "az")))) == 3
    # a first bin at 0 s spreads its VMs before 0 (the review found the new RequestTable check refusing it)
    early = _azure(
        tmp_path / "early", **{"v1.dev.txt": "0 a,b,|\n600 a,|\n", "v1.dev.c900.txt": "0 U0,U1,|\n600 C0,|\n"}
    )
    assert load_trace(str(early)).arrival[0] < 0


AZURE_CASES = {
    "lifetime file shorter than the flavour file": ("v1.dev.txt", {"v1.dev.c900.txt": "300 U0,U1,|\n"}),
    "flavour with -1 CPU": ("flav_map.txt", {"flav_map.txt": "-1,4 a\n4,8 b\n"}),
    "flavour with NaN memory": ("flav_map.txt", {"flav_map.txt": "2,nan a\n4,8 b\n"}),
    "flavour defined twice": ("flav_map.txt", {"flav_map.txt": "2,4 a\n4,8 b\n9,9 b\n"}),  # the second won
    "two lifetime files": ("v1.dev.c1000.txt", {"v1.dev.c1000.txt": "300 U0,U1,|\n600 C0,|\n"}),  # first by name
    "garbage interval map": ("v1.interval_map.txt", {"v1.interval_map.txt": "hello world\n"}),
    "empty interval map": ("v1.interval_map.txt", {"v1.interval_map.txt": ""}),
    "interval map with a gap": ("v1.interval_map.txt", {"v1.interval_map.txt": "0 0\n600 2\n"}),
    "timestamp 1e308": (
        "v1.dev.txt",
        {"v1.dev.txt": "1e308 a,b,|\n600 a,|\n", "v1.dev.c900.txt": "1e308 U0,U1,|\n600 C0,|\n"},
    ),
}


@pytest.mark.parametrize("case", sorted(AZURE_CASES))
def test_malformed_azure_folder(tmp_path: Path, case: str) -> None:
    named, changes = AZURE_CASES[case]
    folder = _azure(tmp_path / "az", **changes)
    assert_contract(*run("simulate", "numa", "--trace", str(folder)), named)


@SETTINGS
@given(name=st.sampled_from(sorted(AZURE)), how=st.sampled_from(sorted(GENERIC)))
def test_azure_files_generic(tmp_path: Path, name: str, how: str) -> None:
    folder = tmp_path / f"az-{name}-{how}"
    shutil.rmtree(folder, ignore_errors=True)
    _azure(folder)
    (folder / name).unlink()
    GENERIC[how](folder / name, AZURE[name])
    assert_contract(*run("simulate", "numa", "--trace", str(folder)), name)


# --- topologies and request sets (simulate netalloc) -------------------------------------------------------------

TOPO_CSV = "source,target,capacity,tier\ns0,r0,1,0\ns1,r0,1,0\ns2,r1,1,0\ns3,r1,1,0\nr0,sp,2,1\nr1,sp,2,1\n"
TOPO_JSON = {
    "nodes": [{"name": f"s{i}", "cpu": 10, "mem": 10} for i in range(4)] + [{"name": "r0"}],
    "links": [{"source": f"s{i}", "target": "r0", "capacity": 1.0} for i in range(4)],
}
REQUESTS = "cpu,mem,bw,hold\n3,4,0.5,2\n1,1,0.2,1\n2,5,0.3,3\n"


def test_valid_topologies_and_requests_load(tmp_path: Path) -> None:
    from dcplace.cluster.topology import load_topology
    from dcplace.workload.netreq import read_requests

    (tmp_path / "t.csv").write_text(TOPO_CSV)
    (tmp_path / "t.json").write_text(json.dumps(TOPO_JSON))
    (tmp_path / "r.csv").write_text(REQUESTS)
    assert load_topology(str(tmp_path / "t.csv")).n_servers == 4
    assert load_topology(str(tmp_path / "t.json")).n_servers == 4
    assert len(read_requests(tmp_path / "r.csv")) == 3


@SETTINGS
@given(data=st.data())
def test_malformed_topology_csv(tmp_path: Path, data: st.DataObject) -> None:
    name, mutate = data.draw(bad_csv(TOPO_CSV, [2]))  # capacity (tier -1 is valid: "unknown")
    work = tmp_path / f"case-{abs(hash(name))}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    f = work / "topo.csv"
    mutate(f, TOPO_CSV)
    out = work / "out"
    args = ["--topology", str(f), "--requests", "4", "--episodes", "1", "--out", str(out)]
    code, err = run("simulate", "netalloc", *args)
    assert_contract(code, err, str(f), out)


@SETTINGS
@given(data=st.data())
def test_malformed_request_file(tmp_path: Path, data: st.DataObject) -> None:
    name, mutate = data.draw(bad_csv(REQUESTS, [0, 1, 2, 3]))
    work = tmp_path / f"case-{abs(hash(name))}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    f = work / "req.csv"
    mutate(f, REQUESTS)
    out = work / "out"
    code, err = run("simulate", "netalloc", "--dataset", str(f), "--episodes", "1", "--out", str(out))
    assert_contract(code, err, str(f), out)


def test_a_bandwidth_below_one_micro_unit_is_refused(tmp_path: Path) -> None:
    """4e-7 was accepted (> 0), rounded to 0 micro-units and reserved nothing; the observer then divided by it."""
    f = tmp_path / "req.csv"
    f.write_text("cpu,mem,bw,hold\n3,4,0.5,2\n1,1,4e-7,1\n", encoding="utf-8")
    code, err = run("simulate", "netalloc", "--dataset", str(f), "--episodes", "1", "--out", str(tmp_path / "out"))
    assert_contract(code, err, str(f), tmp_path / "out")
    assert "line 3" in err and "bw" in err and "1e-06" in err


NOT_NUMBERS = [math.nan, math.inf, -math.inf, 1e308, 10**30, True, "10", None]
"""JSON values no numeric field accepts (NaN and Infinity are written as Python's JSON writes them)."""
BAD_JSON = {
    "whole >= 0": [*NOT_NUMBERS, -1, 0.5],
    "whole >= 1": [*NOT_NUMBERS, -1, 0, 0.5],
    "> 0": [*NOT_NUMBERS, -1, 0],
    "tier": [*NOT_NUMBERS, -2, 3, 0.5],
}


@SETTINGS
@given(data=st.data())
def test_malformed_topology_json(tmp_path: Path, data: st.DataObject) -> None:
    kind, i, key, rule = data.draw(
        st.sampled_from([("nodes", 0, "cpu", "whole >= 0"), ("nodes", 1, "mem", "whole >= 0"),
                         ("links", 0, "capacity", "> 0"), ("links", 2, "tier", "tier")])
    )  # fmt: skip
    doc = json.loads(json.dumps(TOPO_JSON))
    doc[kind][i][key] = data.draw(st.sampled_from(BAD_JSON[rule]))
    f = tmp_path / "topo.json"
    f.write_text(json.dumps(doc))
    code, err = run("simulate", "netalloc", "--topology", str(f), "--requests", "4", "--episodes", "1")
    assert_contract(code, err, f"field '{kind}[{i}].{key}'")


def test_topology_folder_and_overflow(tmp_path: Path) -> None:
    d = tmp_path / "topo.json"
    d.mkdir()
    assert_contract(*run("simulate", "netalloc", "--topology", str(d)), str(d))
    f = tmp_path / "t.csv"
    f.write_text(TOPO_CSV.replace("r0,sp,2,1", "r0,sp,1e308,1"))
    assert_contract(*run("simulate", "netalloc", "--topology", str(f)), "field 'capacity'")
    f.write_text(REQUESTS.replace("3,4,0.5,2", "1e30,4,0.5,2"))
    assert_contract(*run("simulate", "netalloc", "--dataset", str(f)), "field 'cpu'")


# --- placement instances (solve) ----------------------------------------------------------------------------------

INSTANCE = {
    "name": "tiny",
    "vms": [{"type": "a", "count": 3, "vcpu": 2, "mem_gib": 4, "disks_gb": [10]}],
    "pms": [{"type": "p", "count": 2, "vcpu": 8, "mem_gib": 16, "disks_gb": [100], "cost": 5}],
}


def test_small_instance_solves_under_default_flags(tmp_path: Path) -> None:
    """Fewer VMs and PMs than the hierarchical method's default --packs / --swads (25): its flags are not checked
    for other methods (docs/placement.md's example)."""
    f = tmp_path / "tiny.json"
    f.write_text(json.dumps(INSTANCE))
    for method in ("auto", "greedy", "compact"):
        code, err = run("solve", "--instance", str(f), "--method", method)
        assert code == 0, err


@SETTINGS
@given(data=st.data())
def test_malformed_instance_numbers(tmp_path: Path, data: st.DataObject) -> None:
    kind, key, rule = data.draw(
        st.sampled_from([("vms", "count", "whole >= 0"), ("vms", "vcpu", "whole >= 1"), ("vms", "mem_gib", "> 0"),
                         ("pms", "mem_gib", "> 0"), ("pms", "cost", "whole >= 0"), ("pms", "vcpu", "whole >= 1")])
    )  # fmt: skip
    doc = json.loads(json.dumps(INSTANCE))
    doc[kind][0][key] = data.draw(st.sampled_from([*BAD_JSON[rule], *([0.3] if key == "mem_gib" else [])]))
    f = tmp_path / "inst.json"
    f.write_text(json.dumps(doc))
    out = tmp_path / "out"
    code, err = run("solve", "--instance", str(f), "--out", str(out))
    assert_contract(code, err, f"field '{kind}[0].{key}'", out)


@SETTINGS
@given(how=st.sampled_from(sorted(GENERIC)))
def test_instance_file_generic(tmp_path: Path, how: str) -> None:
    f = tmp_path / f"inst-{how}.json"
    shutil.rmtree(f, ignore_errors=True) if f.is_dir() else f.unlink(missing_ok=True)
    GENERIC[how](f, json.dumps(INSTANCE))
    assert_contract(*run("solve", "--instance", str(f)), str(f))


def test_empty_pm_list_names_the_pms(tmp_path: Path) -> None:
    f = tmp_path / "inst.json"
    f.write_text(json.dumps({**INSTANCE, "pms": []}))
    code, err = run("solve", "--instance", str(f))
    assert_contract(code, err, "field 'pms'")
    assert "packs" not in err


# --- Huawei topology-aware batches (solve VM_data_C1.csv) ---------------------------------------------------------

NUMA_FILES = {
    "PM_res.csv": "CPU1,RAM1,CPU2,RAM2\n32,64,32,64\n32,64,32,64\n",
    "topology.csv": "host_id,rack_id\nhost-0,0\nhost-1,1\n",
    "VM_data_C1.csv": "flavor_vcpus,flavor_ram,numa,strategy,group,domain\n4,8,1,,,\n8,16,2,,,\n",
}


@SETTINGS
@given(data=st.data())
def test_malformed_numa_batch(tmp_path: Path, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(NUMA_FILES)))
    text = NUMA_FILES[name]
    cols = {"PM_res.csv": [0, 1, 2, 3], "topology.csv": [1], "VM_data_C1.csv": [0, 1]}[name]
    label, mutate = data.draw(bad_csv(text, cols))
    work = tmp_path / f"case-{abs(hash((name, label)))}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    for other, t in NUMA_FILES.items():
        if other != name:
            (work / other).write_text(t)
    mutate(work / name, text)
    out = work / "out"
    code, err = run("solve", "--instance", str(work / "VM_data_C1.csv"), "--time-limit", "5", "--out", str(out))
    assert_contract(code, err, name, out)


def test_valid_numa_batch_and_header_only_vm_file(tmp_path: Path) -> None:
    for name, t in NUMA_FILES.items():
        (tmp_path / name).write_text(t)
    code, err = run("solve", "--instance", str(tmp_path / "VM_data_C1.csv"), "--time-limit", "5")
    assert code == 0, err
    (tmp_path / "VM_data_C1.csv").write_text(NUMA_FILES["VM_data_C1.csv"].splitlines()[0] + "\n")
    assert_contract(*run("solve", "--instance", str(tmp_path / "VM_data_C1.csv")), "VM_data_C1.csv")


@pytest.mark.parametrize(
    "row, said",
    [
        ("0,0,1,,,", "line 3, field 'flavor_vcpus': must be a number > 0"),  # it ran without end, past --time-limit
        ("8,0,1,,,", "line 3, field 'flavor_ram': must be a number > 0"),
        ("1000,8,1,,,", "line 3, field 'flavor_vcpus': a VM of 1000 vCPU and 8 GB fits no server of PM_res.csv"),
        ("64,16,1,,,", "fits no server of PM_res.csv on one NUMA node"),  # 64 cores: a server, not a node
    ],
)
def test_a_vm_of_zero_size_or_larger_than_any_server_names_its_line(tmp_path: Path, row: str, said: str) -> None:
    for name, t in NUMA_FILES.items():
        (tmp_path / name).write_text(t)
    (tmp_path / "VM_data_C1.csv").write_text(NUMA_FILES["VM_data_C1.csv"].replace("8,16,2,,,", row))
    code, err = run("solve", "--instance", str(tmp_path / "VM_data_C1.csv"), "--time-limit", "5")
    assert_contract(code, err, said)


def test_any_vm_data_file_number_is_a_topology_aware_batch(tmp_path: Path) -> None:
    """``VM_data_C7.csv`` was read as JSON (only C1-C5 were recognised)."""
    for name, t in NUMA_FILES.items():
        (tmp_path / name.replace("C1", "C7")).write_text(t)
    code, err = run("solve", "--instance", str(tmp_path / "VM_data_C7.csv"), "--time-limit", "5")
    assert code == 0, err


# --- checkpoints ---------------------------------------------------------------------------------------------------


def test_checkpoint_with_nan_weights_is_refused(tmp_path: Path) -> None:
    import torch

    from dcplace.learn import checkpoint

    src = checkpoint.shipped_path("alpha", "uniform")
    blob = torch.load(src, map_location="cpu", weights_only=True)
    for t in blob["model"].values():
        if t.is_floating_point():
            t.fill_(float("nan"))
    bad = tmp_path / "nan.pt"
    torch.save(blob, bad)
    with pytest.raises(InputError, match="non-finite"):
        checkpoint.load(bad)
    code, err = run("simulate", "netalloc", "--policy", "nara", "--checkpoint", str(bad), "--episodes", "1")
    assert_contract(code, err, str(bad))


def test_checkpoint_folder_is_not_not_found(tmp_path: Path) -> None:
    code, err = run("simulate", "netalloc", "--policy", "nara", "--checkpoint", str(tmp_path), "--episodes", "1")
    assert_contract(code, err, str(tmp_path))
    assert "is a folder" in err


# --- flags ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["simulate", "numa", "--seed", "-1"], "--seed"),
        (["simulate", "netalloc", "--seed", "-1"], "--seed"),
        (["solve", "--seed", "-1"], "--seed"),
        (["solve", "--time-limit", "nan"], "--time-limit"),
        (["simulate", "numa", "--double-threshold", "nan"], "--double-threshold"),
        (["simulate", "numa", "--bogus"], "--bogus"),
        (["--bogus"], "--bogus"),
        (["simulate", "numa", "--pms", "abc"], "--pms"),
        (["simulate", "bogus"], "bogus"),
    ],
)
def test_bad_flags_are_one_sentence(args: list[str], flag: str) -> None:
    assert_contract(*run(*args), flag)


def test_out_naming_an_existing_file(tmp_path: Path) -> None:
    f = tmp_path / "results.txt"
    f.write_text("keep me")
    assert_contract(*run("simulate", "numa", "--pms", "5", "--episodes", "1", "--out", str(f)), "--out")
    assert f.read_text() == "keep me"


# --- size guards ----------------------------------------------------------------------------------------------------


def test_size_guards_refuse_with_estimate_and_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DCPLACE_MEMORY", str(10**9))  # pretend 1 GB is available
    code, err = run("simulate", "numa", "--pms", "10000000", "--episodes", "1")
    assert_contract(code, err, "--pms")
    assert "GB" in err and "--force" in err
    code, err = run("simulate", "netalloc", "--requests", "100000000", "--episodes", "1")
    assert_contract(code, err, "--requests")
    f = tmp_path / "huge.json"
    doc = json.loads(json.dumps(INSTANCE))
    doc["vms"][0]["count"] = 10**9
    f.write_text(json.dumps(doc))
    code, err = run("solve", "--instance", str(f))
    assert_contract(code, err, "1,000,000,000 VMs")
    assert "--force" in err
    monkeypatch.setenv("DCPLACE_MEMORY", "100")  # 100 bytes: even the tiny instance is refused ...
    f.write_text(json.dumps(INSTANCE))
    assert run("solve", "--instance", str(f))[0] == 2
    code, err = run("solve", "--instance", str(f), "--force")  # ... unless forced
    assert code == 0, err
    monkeypatch.setenv("DCPLACE_MEMORY", "1G")  # a unit: it was a ValueError traceback
    code, err = run("simulate", "numa", "--pms", "10000000", "--episodes", "1")
    assert_contract(code, err, "1.0 GB available")
    monkeypatch.setenv("DCPLACE_MEMORY", "lots")
    code, err = run("solve", "--instance", str(f))
    assert_contract(code, err, "$DCPLACE_MEMORY must be a number of bytes")


@pytest.mark.parametrize(("text", "value"), [("1G", 10**9), ("512MiB", 2**29), ("8e9", 8 * 10**9), ("2 kb", 2000)])
def test_memory_sizes_read_with_units(text: str, value: int) -> None:
    from dcplace.limits import parse_bytes

    assert parse_bytes(text, "x") == value


# --- envs -----------------------------------------------------------------------------------------------------------


def test_numa_env_reset_never_returns_a_finished_episode() -> None:
    """Small clusters with a high warm start used to return episodes already over (all-zero mask), e.g. 1 machine
    at warm start 0.9, seed 24."""
    import gymnasium as gym

    import dcplace.envs  # noqa: F401

    for pms, warm in ((1, 0.9), (1, 0.95), (4, 0.8)):
        env = gym.make("dcplace/NumaVM-v0", pms=pms, warm_start=warm, release=False).unwrapped
        for seed in range(40):
            try:
                _obs, info = env.reset(seed=seed)
            except InputError as exc:  # allowed: it says why no start works
                assert "warm start" in str(exc)
                continue
            assert info["action_mask"].any(), (pms, warm, seed)


@pytest.mark.parametrize("env_id", ["dcplace/NumaVM-v0", "dcplace/NetAlloc-v0"])
@pytest.mark.parametrize("action", [1.7, "3", -1, 10**6, None, np.float64(2.0), True])
def test_env_actions_outside_the_space_raise(env_id: str, action: object) -> None:
    import gymnasium as gym

    import dcplace.envs  # noqa: F401

    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must be an integer"):
        env.step(action)


def test_requests_with_a_request_file_is_refused_not_ignored(tmp_path: Path) -> None:
    """A request file is replayed as it is; ``--requests`` with another count was silently ignored."""
    (tmp_path / "r.csv").write_text(REQUESTS)
    out, reqs = tmp_path / "out", str(tmp_path / "r.csv")
    code, err = run("simulate", "netalloc", "--dataset", reqs, "--requests", "1000", "--out", str(out))
    assert_contract(code, err, "--requests", out)
    assert "3 requests" in err
    code, _ = run("simulate", "netalloc", "--dataset", reqs, "--requests", "3", "--episodes", "1")
    assert code == 0


def test_a_folder_that_is_no_azure_trace_says_what_a_folder_means(tmp_path: Path) -> None:
    """A folder is read as Azure V1; one without its v1.dev.txt said only "no flavour trace for split 'dev'"."""
    code, err = run("simulate", "numa", "--trace", str(tmp_path), "--pms", "5")
    assert_contract(code, err, "--trace")
    assert "read as an Azure V1 trace" in err and "no v1.dev.txt" in err


def test_episodes_that_never_reach_the_warm_start_are_said_to(tmp_path: Path) -> None:
    """A trace too short for the warm start scored nothing, and the table's zeros looked like a result."""
    f = tmp_path / "t.csv"
    f.write_text(LIFETIME)
    r = CliRunner().invoke(app, ["simulate", "numa", "--trace", str(f), "--pms", "5", "--warm-start", "0.9"])
    assert r.exit_code == 0, r.stderr
    assert "warning: 10 of 10 episodes ran out of trace before their first scored request" in r.stderr
    r = CliRunner().invoke(app, ["simulate", "numa", "--trace", str(f), "--pms", "5", "--warm-start", "0"])
    assert r.exit_code == 0 and "ran out of trace" not in r.stderr


@pytest.mark.parametrize(
    ("rows", "args", "said"),
    [
        ("vmid,cpu,mem,at,lt\n0,40,90,0,100\n1,40,100,5,50\n2,2,2,6,50\n",
         ("simulate", "numa", "--pms", "1", "--episodes", "2", "--warm-start", "0.5"),
         "warning: 2 of 2 episodes ended at their first scored request, which fit nowhere"),
        ("vmid,cpu,mem,at,lt\n0,400,16,0,100\n1,400,2,5,50\n", ("simulate", "stream", "--pms", "1"),
         "warning: no request was placed (by reason: cpu 2)"),
        ("cpu,mem,bw,hold\n100000,1,1,5\n100000,1,1,5\n", ("simulate", "netalloc", "--episodes", "1"),
         "warning: no request was allocated in any episode (rejected: capacity 2)"),
    ],
    ids=["numa", "stream", "netalloc"],
)  # fmt: skip
def test_a_run_that_accepts_nothing_says_so(tmp_path: Path, rows: str, args: tuple[str, ...], said: str) -> None:
    """A CLI review: a run whose every request was refused printed a table of zeros and exited 0 without a word,
    with --json too; the zeros read like a result."""
    f = tmp_path / "t.csv"
    f.write_text(rows)
    where = "--dataset" if args[1] == "netalloc" else "--trace"
    for extra in ((), ("--json",)):
        r = CliRunner().invoke(app, [*args, where, str(f), *extra])
        assert r.exit_code == 0 and said in r.stderr, r.output


def test_an_out_inside_a_file_and_a_binary_rule_file_are_one_sentence(tmp_path: Path) -> None:
    """Both were tracebacks: mkdir's NotADirectoryError, and nalb-learned reading a .pt as UTF-8 text."""
    (tmp_path / "afile").write_text("x")
    code, err = run("simulate", "numa", "--pms", "5", "--out", str(tmp_path / "afile" / "sub"))
    assert_contract(code, err, "--out")
    assert "is a file, so nothing can be made inside it" in err
    pt = Path(__file__).resolve().parents[1] / "src" / "dcplace" / "data" / "cvd" / "cvd-rl-50pm.pt"
    code, err = run("simulate", "netalloc", "--policy", "nalb-learned", "--checkpoint", str(pt), "--episodes", "1")
    assert_contract(code, err, "--checkpoint")
    assert "a binary file" in err
