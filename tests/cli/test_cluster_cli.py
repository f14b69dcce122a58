"""`dcplace cluster reoptimise / evacuate` on a real database, `dcplace reproduce reopt` on a synthetic trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dcplace.engine import PlacementEngine, VmRequest


def dcplace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dcplace.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def _db(path: Path) -> Path:
    e = PlacementEngine.open(path, policy="first-fit")
    for m in range(6):
        e.add_machine(f"pm{m}", 16, 32)
    for i in range(40):
        e.place(VmRequest(f"v{i}", 2.0, 4.0, pinned=i == 0))
    for i in range(1, 40, 2):
        e.release(f"v{i}")
    e.close()
    return path


def test_reoptimise_dry_run_then_apply_then_evacuate(tmp_path: Path) -> None:
    db = _db(tmp_path / "c.db")
    before = PlacementEngine.open(db)
    snap = before.snapshot()
    before.close()
    dry = dcplace("cluster", "reoptimise", "--db", str(db), "--migration-weight", "0", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["planned"] > 0 and plan["applied"] == 0 and plan["verified"]
    assert plan["held"] == {"unusable": 0, "pinned": 1, "selection": 0, "cooling": 0}  # v0
    text = dcplace("cluster", "reoptimise", "--db", str(db), "--migration-weight", "0", "--dry-run").stdout
    assert "; held back: 1 pinned of 20 VMs" in text, text
    e = PlacementEngine.open(db)
    assert e.snapshot() == snap
    e.close()
    done = json.loads(dcplace("cluster", "reoptimise", "--db", str(db), "--migration-weight", "0", "--json").stdout)
    assert done["applied"] == plan["planned"] and done["machines_after"] < done["machines_before"]
    e = PlacementEngine.open(db)
    e.check_invariants()
    assert e.vm("v0").machine == next(v["machine"] for v in snap["vms"] if v["id"] == "v0")  # pinned
    busy = max((m for m in e.machines() if m.vms), key=lambda m: m.vms).id
    e.pin("v0", False)
    e.close()
    look = PlacementEngine.open(db)
    kept = look.snapshot()
    look.close()
    dry_ev = dcplace("cluster", "evacuate", busy, "--db", str(db), "--dry-run")
    assert dry_ev.returncode == 0 and "planned (dry run)" in dry_ev.stdout, dry_ev.stderr
    look = PlacementEngine.open(db)
    assert look.snapshot() == kept  # nothing changed
    look.close()
    ev = dcplace("cluster", "evacuate", busy, "--db", str(db))
    assert ev.returncode == 0 and "verified: yes" in ev.stdout, ev.stderr
    e = PlacementEngine.open(db)
    assert e.machine(busy).vms == 0 and e.machine(busy).status == "drained"
    e.close()


def test_an_evacuation_that_leaves_vms_behind_or_drops_some_exits_3(tmp_path: Path) -> None:
    """A review of the CLI in scripts: a drain that left VMs on the machine, and a failure that dropped VMs, exited
    0 after their report, so a maintenance cron went on. Both now exit 3 (docs/errors.md), the report still on
    stdout and one line on stderr."""
    db = tmp_path / "full.db"
    e = PlacementEngine.open(db, policy="first-fit")
    for m in ("m0", "m1"):
        e.add_machine(m, 8, 32)
    for i in range(8):  # both machines full
        e.place(VmRequest(f"v{i}", 4.0, 4.0))
    e.close()
    drain = dcplace("cluster", "evacuate", "m0", "--db", str(db), "--json")
    assert drain.returncode == 3, drain.stderr
    assert json.loads(drain.stdout)["complete"] is False and "fit nowhere else" in drain.stderr
    fail = dcplace("cluster", "evacuate", "m1", "--failed", "--db", str(db))
    assert fail.returncode == 3 and "VM(s) fit nowhere and were dropped" in fail.stderr, fail.stderr
    assert "dropped (fit nowhere)" in fail.stdout


def test_bad_input_is_one_sentence(tmp_path: Path) -> None:
    db = _db(tmp_path / "c.db")
    for args, flag in ((("reoptimise", "--db", str(db), "--max-moves", "-1"), "--max-moves"),
                       (("reoptimise", "--db", str(db), "--improve", "20"), "--improve"),  # above --time-limit 10
                       (("reoptimise", "--db", str(tmp_path / "none.db")), "--db"),
                       (("evacuate", "nope", "--db", str(db)), "nope")):  # fmt: skip
        p = dcplace("cluster", *args)
        assert p.returncode == 2 and flag in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    # the argument and the missing file are named as what they are
    assert dcplace("cluster", "evacuate", "nope", "--db", str(db)).stderr.startswith("error: MACHINE: no machine")
    missing = dcplace("cluster", "reoptimise", "--db", str(tmp_path / "none.db")).stderr
    assert "none.db does not exist" in missing and not (tmp_path / "none.db").exists()


def test_reproduce_reopt_synthetic(tmp_path: Path) -> None:
    out = tmp_path / "reopt"
    p = dcplace("reproduce", "reopt", "--traces", "synthetic", "--hours", "30", "--quick", "--out", str(out))
    assert p.returncode == 0, p.stderr
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 6  # 2 online, 4 with re-optimisation (one with the CP-SAT step)
    assert all(r["verified"] is (True if r["events"] else None) for r in records)  # None: no event to verify
    online = min(r["machine_hours"] for r in records if r["reopt"] is None)
    assert any(r["events"] > 0 and r["migrations"] > 0 for r in records)
    assert all(r["machine_hours"] > 0 for r in records) and online > 0
    table = (out / "table.md").read_text()
    assert (out / "machines.png").stat().st_size > 0 and "| variant |" in table
    assert table.startswith("# Periodic re-optimisation on the synthetic trace (the real ones are not here)")
