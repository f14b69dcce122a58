"""The layer contract (pyproject.toml [tool.importlinter], docs/architecture.md) holds, fails on a planted wrong-way
import (hidden inside a function, where loops used to hide), and no module imports itself through a loop."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(src: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, cwd=src.parent, env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_the_layer_contract_is_kept():
    p = _lint(ROOT / "src")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Contracts: 2 kept, 0 broken." in p.stdout


def test_a_planted_wrong_way_import_breaks_the_contract(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "dcplace", src / "dcplace", ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    kernel = src / "dcplace" / "sim" / "numa.py"
    hidden = "\n\ndef _sneaky() -> None:\n    from dcplace.bench import numa_runner  # noqa\n"
    kernel.write_text(kernel.read_text() + hidden)
    p = _lint(src)
    assert p.returncode != 0
    assert "dcplace.sim.numa -> dcplace.bench.numa_runner" in p.stdout


def test_no_import_loops_between_modules():
    graph = grimp.build_graph("dcplace")
    g = nx.DiGraph()
    for m in graph.modules:
        for t in graph.find_modules_directly_imported_by(m):
            g.add_edge(m, t)
    loops = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert loops == []
