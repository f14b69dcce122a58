"""What the command modules share: the console, the ``--json`` help, writing a result beside its settings."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, NoReturn

from rich.console import Console

from dcplace.atomic import write_text
from dcplace.cli.options import made_by, write_config
from dcplace.errors import InputError

PIPE_WIDTH = 400
"""Columns of the console when stdout is not a terminal: wide enough that no table is cut (``termin...``)."""

console = Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else PIPE_WIDTH)
"""Progress goes here, so that stdout keeps the tables or the one JSON object of ``--json``."""
JSON_HELP = "print exactly one JSON object"
NetSettingName = Literal["paper", "paper-reject", "paper-max", "v1"]
"""``--setting`` of the netalloc commands: :data:`dcplace.sim.netalloc_episodes.SettingName`, copied so that the CLI
imports no simulator before a command runs (a test keeps the two equal)."""


@contextmanager
def progress_lines(what: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while a long command runs (``what``: what it is doing); the yielded function prints one
    line of progress above it. Without a terminal on stderr, only the lines are printed."""
    with err_console.status(f"running {what}...") as status:

        def say(line: str) -> None:
            err_console.print(line, highlight=False)
            status.update(f"running {what}... (last: {line})")

        yield say


@contextmanager
def progress_bar(title: str, total: int, unit: str) -> Iterator[Callable[..., None]]:
    """A bar of ``total`` ``unit`` on stderr (transient; none where stderr is not a terminal, where it would leave
    only a blank line in a log); the yielded function advances it by one."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn(f"[bold]{title}"), BarColumn(), TextColumn("{task.completed}/{task.total} " + unit),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=True,
                  disable=not err_console.is_terminal) as bar:  # fmt: skip
        task = bar.add_task(title, total=total)
        yield lambda *_: bar.advance(task)


def print_claims(claims: list[Any]) -> None:
    """The report's claims table (:class:`dcplace.bench.report.Claim`) on stdout."""
    from rich.table import Table

    colour = {"held": "green", "beaten": "cyan", "inconclusive": "yellow", "missed": "red"}
    t = Table(title="Claims (ours vs the paper's; 95 % intervals)")
    for col in ("paper", "claim", "paper's", "ours", "outcome"):
        t.add_column(col)
    for c in claims:
        t.add_row(c.paper, c.claim, c.paper_value, c.ours, f"[{colour[c.outcome]}]{c.outcome}[/]")
    console.print(t)


def save_result(result: dict[str, Any], cfg: object, out: Path, command: str) -> None:
    """Write ``out/result.json`` (the JSON the command prints with ``--json``) and ``out/config.toml`` (the resolved
    settings, so ``command --config out/config.toml`` repeats the run), each atomically (:mod:`dcplace.atomic`). A
    folder holding another command's output is refused, nothing written (``simulate`` then ``solve`` into one folder
    left episodes.csv beside assignment.csv, and a reproduction's folder lost its config.toml)."""
    other = made_by(out) if out.is_dir() else None
    if other is not None and other != command:
        raise InputError(f"--out {out} holds the output of `{other}`; `{command}` would mix its files with them: "
                         "choose another folder or empty that one")  # fmt: skip
    write_config(cfg, out, command)
    write_text(out / "result.json", json.dumps(result, indent=2) + "\n")


OUTCOME_FAILED = 3
"""Exit code of a command that ran and reported its outcome, where the outcome is a failure an unattended caller must
see (a script, a cron job, CI): a solve without an answer, an evacuation that left VMs behind or dropped some, a
re-optimisation whose plan was not verified. 2 is bad input; 0 is success; 130 / 143 an interruption."""


def outcome_failed(why: str) -> NoReturn:
    """End the command with :data:`OUTCOME_FAILED` and one line on stderr, after its report was printed."""
    import typer

    typer.echo(f"dcplace: {why}", err=True)
    raise typer.Exit(OUTCOME_FAILED)


def unwritten(db: Path, exc: Any, what: str = "the change", then: str = "run the command again") -> InputError:
    """A commit that failed (a :class:`~dcplace.engine.store.StoreError`: a full disk) as one sentence; the
    transaction was rolled back, so the file is as it was (it was a traceback that told the operator to restart a
    service there is none of)."""
    return InputError(f"{what} could not be written to {db} ({getattr(exc, 'reason', '') or exc}); nothing of it was "
                      f"recorded: free space on its disk or make it writable, then {then}", field="db")  # fmt: skip


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to whatever ``sys.stderr`` is when a record comes (as logging's last resort does): one
    bound to the stream of its creation wrote to a closed one after a test runner had swapped it back."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass
