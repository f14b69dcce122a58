"""Every ```python block of README.md and docs/*.md runs as written, in an empty folder, as a newcomer would paste
it (``docs/examples`` on the path, as the docs say for the worked policy example). A block naming a real trace is
skipped where that trace is not here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dcplace.workload.traces import trace_available

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    found = []
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = f.read_text()
        for m in BLOCK.finditer(text):
            found.append((f"{f.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}", m.group(1)))
    return found


@pytest.mark.parametrize(("where", "code"), blocks(), ids=[w for w, _ in blocks()])
def test_the_block_runs_as_written(where, code, tmp_path):
    for trace in ("huawei-east-1", "azure-v1"):
        if f'"{trace}"' in code and not trace_available(trace):
            pytest.skip(f"{where} reads {trace}, which is not here")
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", PYTHONPATH=str(ROOT / "docs" / "examples"))
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)  # fmt: skip
    assert p.returncode == 0, f"{where}:\n{p.stderr[-2000:]}"


def test_the_docs_have_blocks_to_run():
    assert len(blocks()) >= 9
