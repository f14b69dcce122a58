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
    import subprocess
    import sys
    import tempfile

    from dcplace.bench import cvd_reproduction
    from dcplace.bench.cvd_heuristics import run_reproduction
    from dcplace.bench.hmip import run_reproduction as run_hmip

    # Two cores: Nara's reproduction (the longest) runs in a second process beside the other three; the output keeps
    # the order of the sections. Same records and text as running them one after the other.
    nara_code = ("from pathlib import Path; from dcplace.bench import nara_reproduction as n; "
                 "print(n.run_reproduction(Path('results/demo/nara'), seed=0, quick=True))")  # fmt: skip
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:  # files: a full pipe would stall it
        nara = subprocess.Popen([sys.executable, "-c", nara_code], stdout=out, stderr=err, text=True)
        typer.echo(run_reproduction(trace="auto", episodes=episodes, seed=0, out=Path("results/demo"), quick=True))
        typer.echo(cvd_reproduction.run_reproduction("auto", 3, 0, Path("results/demo/cvd-rl"), quick=True))
        hmip = run_hmip(Path("results/demo/hmip"), quick=True)
        nara.wait()
        out.seek(0)
        err.seek(0)
        if nara.returncode != 0:
            typer.echo(err.read(), err=True)
            raise typer.Exit(nara.returncode)
        typer.echo(out.read().rstrip("\n"))
    typer.echo(hmip)
