"""The command line, run as a newcomer would: one JSON object, one-sentence errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

KEYS = {
    "policy", "trace", "pms", "warm_start", "mode", "episodes", "length_mean", "length_std", "income_mean",
    "cpu_alloc_mean", "mem_alloc_mean", "wall_s", "decisions_per_s",
}  # fmt: skip


def dcplace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dcplace.cli.main", *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_simulate_json_is_one_object():
    p = dcplace("simulate", "numa", "--trace", "synthetic", "--pms", "10", "--episodes", "3", "--json",
                "--mode", "expansion", "--max-pms", "20", "--warm-start", "0.3", "--check")  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert KEYS <= set(out)
    assert out["episodes"] == 3 and out["mode"] == "expansion" and out["length_mean"] > 0


def test_same_seed_same_json_numbers():
    a = json.loads(dcplace("simulate", "numa", "--pms", "8", "--episodes", "2", "--json", "--policy", "random").stdout)
    b = json.loads(dcplace("simulate", "numa", "--pms", "8", "--episodes", "2", "--json", "--policy", "random").stdout)
    for k in ("length_mean", "income_mean", "cpu_alloc_mean"):
        assert a[k] == b[k]


def test_human_table():
    p = dcplace("simulate", "numa", "--pms", "5", "--episodes", "2", "--no-release")
    assert p.returncode == 0 and "mean" in p.stdout and "decisions" in p.stdout


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("vmid,cpu,mem,at,lt\n0,1,2,0,1\n1,abc,2,1,1\n", "line 3, field 'cpu'"),
        ("vmid,cpu,mem,at\n0,1,2,0\n", "line 1, field 'lt'"),
        ("vmid,cpu,mem,at,lt\n0,1,2,0,1\n1,200,2,1,1\n", "line 3, field 'cpu'"),  # larger than any machine
    ],
)
def test_bad_trace_is_one_sentence_exit_2(tmp_path, content, needle):
    f = tmp_path / "t.csv"
    f.write_text(content)
    p = dcplace("simulate", "numa", "--trace", str(f), "--pms", "2", "--episodes", "1")
    assert p.returncode == 2
    assert needle in p.stderr and str(f) in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert p.stdout == ""


def test_oversize_skip_counts(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("vmid,cpu,mem,at,lt\n0,1,2,0,1\n1,200,2,1,1\n2,1,2,2,1\n")
    p = dcplace("simulate", "numa", "--trace", str(f), "--pms", "2", "--episodes", "1", "--oversize", "skip",
                "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["oversize"] == 1 and out["length_mean"] == 2


@pytest.mark.parametrize(
    "args",
    [["--warm-start", "1.5"], ["--pms", "0"], ["--policy", "nope"], ["--mode", "sideways"], ["--episodes", "0"]],
)
def test_bad_flags_exit_2(args):
    p = dcplace("simulate", "numa", *args)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr


def test_every_command_has_help():
    for cmd in (["--help"], ["simulate", "numa", "--help"], ["reproduce", "cvd-heuristics", "--help"],
                ["demo", "--help"], ["policies", "--help"], ["train", "nara", "--help"],
                ["reproduce", "nara", "--help"], ["simulate", "netalloc", "--help"], ["solve", "--help"],
                ["reproduce", "hmip", "--help"], ["train", "--help"]):  # fmt: skip
        p = dcplace(*cmd)
        assert p.returncode == 0 and "Usage" in p.stdout


def test_reproduce_writes_records_and_table(tmp_path):
    p = dcplace("reproduce", "cvd-heuristics", "--trace", "synthetic", "--quick", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    records = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert {r["table"] for r in records} == {"table2", "table3", "table4"}
    assert "paper First-Fit" in (tmp_path / "table.md").read_text()


NET_KEYS = {
    "policy", "topology", "dataset", "requests", "episodes", "acceptance_mean", "acceptance_std", "cpu_util_mean",
    "mem_util_mean", "bw_util_by_tier", "locality", "wall_s", "decisions_per_s",
}  # fmt: skip


def test_simulate_netalloc_json():
    p = dcplace("simulate", "netalloc", "--topology", "alpha", "--dataset", "uniform", "--policy", "tetris",
                "--requests", "64", "--episodes", "2", "--seed", "0", "--json", "--check")  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert NET_KEYS <= set(out)
    assert out["episodes"] == 2 and out["requests"] == 64 and 0 < out["acceptance_mean"] <= 1
    assert set(out["bw_util_by_tier"]) == {"server-rack", "rack-fabric", "fabric-spine"}


def test_simulate_netalloc_reports_the_ticks_requests_waited(tmp_path):
    """The default setting makes a request the cluster cannot hold wait: the JSON, the per-episode file and the
    table say for how many ticks; where the setting rejects instead, nothing waits and the table has no column."""
    args = ("simulate", "netalloc", "--dataset", "alibaba", "--episodes", "2")
    wait = json.loads(dcplace(*args, "--json", "--out", str(tmp_path / "ep.csv")).stdout)
    rows = (tmp_path / "ep.csv").read_text().splitlines()
    waited = [int(v) for v in (r.split(",")[rows[0].split(",").index("waited")] for r in rows[1:])]
    assert wait["waited_mean"] > 0 and sum(waited) / 2 == wait["waited_mean"] and wait["rejected"]["capacity"] == 0
    reject = json.loads(dcplace(*args, "--setting", "paper-reject", "--json").stdout)
    assert reject["waited_mean"] == 0 and reject["rejected"]["capacity"] > 0
    assert "waited" in dcplace(*args).stdout and "waited" not in dcplace(*args, "--setting", "paper-reject").stdout


def test_simulate_netalloc_bound_is_on_the_episodes_played():
    """``--bound``: each episode's clairvoyant bound, never below what the policy accepted there, in the JSON and as
    a column of the table; only where a full cluster rejects (the default ``paper`` setting makes requests wait)."""
    args = ("simulate", "netalloc", "--dataset", "alibaba", "--policy", "tetris", "--episodes", "2", "--bound")
    p = dcplace(*args)
    assert p.returncode == 2 and "--bound" in p.stderr and "paper-reject" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not p.stdout
    args = (*args[:-1], "--setting", "paper-reject", "--bound")
    p = dcplace(*args, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert len(out["bound_per_episode"]) == 2
    assert all(a <= b <= 1 for a, b in zip(out["acceptance_per_episode"], out["bound_per_episode"], strict=True))
    assert "bound_mean" not in json.loads(dcplace(*args[:-1], "--json").stdout)  # only on request
    table = dcplace(*args)
    assert table.returncode == 0 and "bound" in table.stdout and f"{out['bound_mean']:.3f}" in table.stdout


def test_simulate_netalloc_table_and_request_file(tmp_path):
    f = tmp_path / "req.csv"
    f.write_text("cpu,mem,bw,hold\n15,12,0.5,3\n30,30,0.2,2\n5,5,1.0,1\n")
    p = dcplace("simulate", "netalloc", "--dataset", str(f), "--policy", "nalb", "--episodes", "1")
    assert p.returncode == 0, p.stderr
    assert "mean" in p.stdout and "locality" in p.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--topology", "omega"], "--topology"),
        (["--policy", "best-fit"], "--policy"),
        (["--dataset", "nope"], "--dataset"),
        (["--episodes", "0"], "--episodes"),
    ],
)
def test_netalloc_bad_flags_exit_2(args, needle):
    p = dcplace("simulate", "netalloc", *args)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_netalloc_bad_topology_file_exit_2(tmp_path):
    f = tmp_path / "topo.csv"
    f.write_text("source,target,capacity\nh1,tor,1\nh2,tor,abc\n")
    p = dcplace("simulate", "netalloc", "--topology", str(f))
    assert p.returncode == 2 and "line 3" in p.stderr and "capacity" in p.stderr and str(f) in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == ""


def test_training_into_a_log_file_prints_a_line_per_iteration(tmp_path):
    """A review of the CLI in scripts: with stderr a file (CI, cron, nohup), ``train`` printed one line when it
    ended, cut at 80 columns, so a run of hours logged nothing until then. Now each row of the curves is a line."""
    r = dcplace("train", "nara", "--topology", "alpha", "--dataset", "alibaba", "--iterations", "3", "--steps", "64",
                "--eval-every", "2", "--eval-episodes", "1", "--out", str(tmp_path / "run"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("nara alpha/alibaba ")]
    assert [x.split()[2] for x in lines] == ["1/3", "2/3", "3/3"], r.stderr
    assert "\x1b[" not in r.stderr and all(" val " in x for x in lines)


def test_an_out_folder_of_another_command_is_refused(tmp_path):
    """A review of the CLI in scripts: ``simulate --out F`` then ``solve --out F`` exited 0 and left episodes.csv
    beside assignment.csv, and simulate into a reproduction's folder replaced its config.toml. Another command's
    folder is refused now, nothing written; the same command still writes over its own."""
    out = tmp_path / "F"
    assert dcplace("simulate", "numa", "--pms", "5", "--episodes", "1", "--out", str(out)).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    r = dcplace("solve", "--instance", "exp1", "--method", "greedy", "--out", str(out))
    assert r.returncode == 2 and "holds the output of `dcplace simulate numa`" in r.stderr, r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert dcplace("simulate", "numa", "--pms", "5", "--episodes", "1", "--out", str(out)).returncode == 0


def test_compare_numa_says_how_many_oversize_vms_it_skipped(tmp_path):
    """`compare numa --oversize skip` skipped VMs no machine can host without a word (simulate numa counted them)."""
    f = tmp_path / "t.csv"
    f.write_text("vmid,cpu,mem,at,lt\n0,1,2,0,1\n1,200,2,1,1\n2,1,2,2,1\n3,300,2,3,1\n")
    p = dcplace("compare", "numa", "--trace", str(f), "--pms", "2", "--episodes", "2", "--oversize", "skip",
                "--policies", "first-fit", "--policies", "best-fit", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["oversize"] == 2 and [r["oversize"] for r in out["rows"]] == [4, 4]  # 2 per episode, 2 episodes
    assert "note: 2 VMs of the trace are larger than any machine" in p.stderr and "first-fit 4" in p.stderr
