"""The main job: every paper's claims checked in one report (`reproduce all --quick`): the CVD-RL heuristics on
Huawei-East-1 (synthetic when the data is absent) with the shipped CVD-RL / SchedRL schedulers beside them, Nara's
shipped agents against the baselines on alpha, beta and gamma (delta in the full form) and the batch-placement
tables, each beside the papers' numbers, written to results/demo/report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dcplace.cli.options import handle_input_errors

app = typer.Typer(add_completion=False, rich_markup_mode=None)


@app.command("demo", help=__doc__)
@handle_input_errors
def demo(
    episodes: Annotated[int, typer.Option(help="episodes per cell of the CVD-RL heuristic tables")] = 5,
    out: Annotated[Path, typer.Option(help="folder for the records and the report")] = Path("results/demo"),
) -> None:
    from dcplace.bench.reproduce_all import AllSettings
    from dcplace.cli.reproduce import run_all_command
    from dcplace.errors import InputError

    if episodes < 1:
        raise InputError(f"--episodes must be at least 1, got {episodes}")
    run_all_command(AllSettings.quick_form(0, "auto", episodes), out, False, "dcplace demo")
