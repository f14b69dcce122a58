"""``reproduce all`` when its Nara child fails: the error comes at the end of the reproduction that was running
(it came only after all of them), and the reproductions that finished keep their records (a review of the change
caught it removing them: the check ran before they were marked done)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dcplace.bench import cvd_heuristics, cvd_regime, hmip, reopt
from dcplace.bench.reproduce_all import AllSettings, run_all


def test_a_failed_nara_child_stops_the_run_and_keeps_what_finished(tmp_path: Path, monkeypatch) -> None:
    def finished(*args: Any, **kw: Any) -> None:  # a reproduction that writes its records, while Nara fails
        folder = next(a for a in (*args, *kw.values()) if isinstance(a, Path))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "records.jsonl").write_text("{}\n")
        time.sleep(8)  # the child starts Python and fails within this

    later: list[str] = []
    monkeypatch.setattr(cvd_regime, "resolve_regime", lambda *a, **k: "today")
    monkeypatch.setattr(cvd_heuristics, "run_reproduction", finished)
    for module in (hmip, reopt):
        monkeypatch.setattr(module, "run_reproduction", lambda *a, **k: later.append("ran"))
    bad = AllSettings(trace="synthetic", quick=True, nara_by_topology=(("no-such-topology", 1),))
    with pytest.raises(RuntimeError, match=r"the Nara reproduction failed \(exit 1\)"):
        run_all(tmp_path / "out", bad, "test")
    assert (tmp_path / "out" / "cvd-heuristics" / "records.jsonl").is_file()  # finished: kept
    assert not (tmp_path / "out" / "nara").exists() and not later  # stopped after the first reproduction
