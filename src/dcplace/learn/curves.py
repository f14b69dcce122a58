"""Learning-curve files shared by the trainers: one CSV row per iteration / epoch."""

from __future__ import annotations

import csv
from pathlib import Path


def write_csv(rows: list[dict[str, float]], path: Path) -> None:
    """Write ``rows`` (same keys each) to ``path``; nothing to write, nothing written."""
    if not rows:
        return
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
