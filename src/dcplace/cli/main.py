"""The ``dcplace`` command line: simulate, compare, train, solve, reproduce, serve, cluster, policies, demo.

This module only assembles the app. Each command group lives in its own module of :mod:`dcplace.cli` (the first line
of the module's docstring is its line in ``dcplace --help``) and is imported only when it runs or shows its help, so
``dcplace --help`` and ``dcplace policies`` stay fast while ``train`` may import torch.

User errors (bad files, bad flags, bad config files, typer's own usage errors) end with one sentence on stderr and
exit code 2; tracebacks mean a bug. SIGINT (Ctrl-C) and SIGTERM stop the work: what was being written is discarded
(outputs are atomic, :mod:`dcplace.atomic`), the previous consistent state stays, one line goes to stderr and the exit
code is 130 (SIGINT) or 143 (SIGTERM).

To add a command group, write ``dcplace/cli/NAME.py`` with a module docstring and ``app = typer.Typer()`` (a
single-command app becomes the command itself) and list it in ``COMMANDS``.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import typer
from typer._click.exceptions import BadParameter, NoArgsIsHelpError, UsageError  # typer's own copy of click's
from typer.core import TyperCommand, TyperGroup

import dcplace
from dcplace.errors import InputError, Terminated

COMMANDS = {
    "solve": "dcplace.cli.solve",
    "policies": "dcplace.cli.info",
    "demo": "dcplace.cli.demo",
    "simulate": "dcplace.cli.simulate",
    "compare": "dcplace.cli.compare",
    "train": "dcplace.cli.train",
    "reproduce": "dcplace.cli.reproduce",
    "serve": "dcplace.cli.serve",
    "cluster": "dcplace.cli.cluster",
}
"""Command (or command group) name -> the module whose ``app`` implements it, in the order of ``dcplace --help``."""


def summary(module: str) -> str:
    """The first paragraph of ``module``'s docstring, read from its source without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


class LazyGroup(TyperGroup):
    """The top-level group: a command's module is imported when the command runs or shows its help; the command
    list of ``dcplace --help`` is read from the modules' docstrings."""

    _listing = False

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> typer.core.click.Command | None:  # type: ignore[override,name-defined]
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            if self._listing:
                return TyperCommand(name=cmd_name, help=summary(COMMANDS[cmd_name]))
            cmd = typer.main.get_command(importlib.import_module(COMMANDS[cmd_name]).app)
            cmd.name = cmd_name
            self.commands[cmd_name] = cmd
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: typer.Context) -> object:  # type: ignore[override]
        """Run the command. A usage error typer finds (a flag value that is not one of a choice or not a number, an
        unknown flag, a missing argument) is one sentence on stderr and exit code 2, like every other bad input;
        SIGINT / SIGTERM end it with one line and exit code 130 / 143 (module docstring)."""
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _terminate) if main else None
        try:
            with redelivering_signals() if main else contextlib.nullcontext():
                return super().invoke(ctx)
        except UsageError as exc:
            if isinstance(exc, NoArgsIsHelpError):
                raise
            raise typer.Exit(usage_error(exc)) from None
        except KeyboardInterrupt:
            typer.echo("error: interrupted (SIGINT); unfinished outputs were discarded", err=True)
            raise typer.Exit(130) from None
        except Terminated:
            typer.echo("error: terminated (SIGTERM); unfinished outputs were discarded", err=True)
            raise typer.Exit(143) from None
        except MemoryError as exc:  # the memory guard was off (--force) or wrong: one sentence, not a traceback
            typer.echo(f"error: out of memory ({exc or 'MemoryError'}); use smaller sizes (unfinished outputs were "
                       "discarded)", err=True)  # fmt: skip
            raise typer.Exit(2) from None
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        """Usage errors before any command runs (``dcplace --bogus``) are one sentence too."""
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            if isinstance(exc, NoArgsIsHelpError):
                raise
            raise typer.Exit(usage_error(exc)) from None

    def format_help(self, ctx: typer.Context, formatter: object) -> None:  # type: ignore[override]
        self._listing = True
        try:
            super().format_help(ctx, formatter)  # type: ignore[arg-type]
        finally:
            self._listing = False


def usage_error(exc: UsageError) -> int:
    """Print a usage error as one sentence on stderr (``error: No such option: --bogus; see 'dcplace simulate
    --help'``); returns its exit code (2)."""
    message = " ".join(exc.format_message().replace("Value error, ", "").split()).rstrip(".")
    where = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None and exc.cmd is not None else ""
    if isinstance(exc, BadParameter):
        where = ""
    typer.echo(f"error: {message}{where}", err=True)
    return exc.exit_code


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


REDELIVER_S = 0.05
"""How long after a swallowed signal it is sent again (:func:`redelivering_signals`)."""


@contextlib.contextmanager
def redelivering_signals() -> Iterator[None]:
    """Within the block, a SIGINT or SIGTERM whose exception was swallowed is sent again until it lands.

    Python runs a signal handler in whatever Python code the main thread executes next. When that is a callback
    from C (numba's compiler calls llvmlite's object-cache callback through ctypes while it compiles, for seconds),
    the ``KeyboardInterrupt`` / :class:`Terminated` it raises ends that callback only: ctypes reports it as
    "Exception ignored on calling ctypes callback function" and the command went on, so ``kill`` on a starting
    ``dcplace serve`` left it serving. Such an exception reaches ``sys.unraisablehook``; here that hook signals the
    process again ``REDELIVER_S`` later (from a timer thread, so not inside the hook), and again if that one lands in
    a callback too, until the exception is raised where it unwinds the command. Main thread only."""
    previous = sys.unraisablehook
    armed: list[tuple[threading.Timer, int, list[bool]]] = []  # (timer, signal, whether it fired)

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if not isinstance(exc, KeyboardInterrupt | Terminated):
            previous(unraisable)
            return
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        for _ in range(100):  # a signal landing here, while the timer is armed, is caught and armed again
            try:
                fired: list[bool] = []

                def send(fired: list[bool] = fired, signum: int = signum) -> None:
                    fired.append(True)
                    os.kill(os.getpid(), signum)

                timer = threading.Timer(REDELIVER_S, send)
                timer.daemon = True
                armed.append((timer, signum, fired))
                timer.start()
                return
            except (KeyboardInterrupt, Terminated):
                continue

    sys.unraisablehook = hook
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        for timer, _, _ in armed:
            timer.cancel()  # nothing is sent after the block: a late SIGTERM killed the process without a word
        waiting = [signum for timer, signum, fired in armed if not fired]
        sys.unraisablehook = previous
        if waiting and not failed:  # swallowed, and the block ended before it was sent again: it still ends the run
            raise Terminated(waiting[-1]) if waiting[-1] != signal.SIGINT else KeyboardInterrupt


app = typer.Typer(cls=LazyGroup, add_completion=False, no_args_is_help=True, rich_markup_mode=None)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"dcplace {dcplace.__version__}")
        raise typer.Exit()


@app.callback(help="dcplace: decide where datacenter workloads run.")
def root(
    version: Annotated[
        bool, typer.Option("--version", help="print the version and exit", callback=_show_version, is_eager=True)
    ] = False,
) -> None:
    """The options before any command."""


def main() -> None:
    try:
        app()
    except InputError as exc:  # pragma: no cover - commands report their own (dcplace.cli.options)
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
