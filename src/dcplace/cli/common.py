"""What the command modules share: the console, the ``--json`` help, writing a result beside its settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from dcplace.atomic import write_text
from dcplace.cli.options import write_config

console = Console()
JSON_HELP = "print exactly one JSON object"


def save_result(result: dict[str, Any], cfg: object, out: Path, command: str) -> None:
    """Write ``out/result.json`` (the JSON the command prints with ``--json``) and ``out/config.toml`` (the resolved
    settings, so ``command --config out/config.toml`` repeats the run), each atomically (:mod:`dcplace.atomic`)."""
    write_config(cfg, out, command)
    write_text(out / "result.json", json.dumps(result, indent=2) + "\n")
