"""The main job: the CVD-RL heuristics on Huawei-East-1 (synthetic when the data is absent) and the shipped CVD-RL /
SchedRL schedulers beside them (`reproduce cvd-rl --quick`), Nara's shipped agents against the baselines on
alpha..delta (`reproduce nara --quick`) and the batch-placement tables (`reproduce hmip --quick`), each beside the
papers' numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dcplace.cli.options import handle_input_errors

app = typer.Typer(add_completion=False)


@app.command("demo", help=__doc__)
@handle_input_errors
def demo(
    episodes: Annotated[int, typer.Option(help="episodes per cell")] = 5,
) -> None:
    from dcplace.bench import cvd_reproduction, nara_reproduction
    from dcplace.bench.cvd_heuristics import run_reproduction
    from dcplace.bench.hmip import run_reproduction as run_hmip

    typer.echo(run_reproduction(trace="auto", episodes=episodes, seed=0, out=Path("results/demo"), quick=True))
    typer.echo(cvd_reproduction.run_reproduction("auto", 3, 0, Path("results/demo/cvd-rl"), quick=True))
    typer.echo(nara_reproduction.run_reproduction(Path("results/demo/nara"), seed=0, quick=True))
    typer.echo(run_hmip(Path("results/demo/hmip"), quick=True))
