"""Errors a user can cause. The CLI turns each into one sentence on stderr and exit code 2."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad user input: a malformed file, an impossible request, a bad flag value.

    The message is one sentence naming the file, line and field where they are known.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        self.detail = message
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


def users_code(module: str) -> bool:
    """Whether code defined in ``module`` is a user's (outside dcplace): what it raises or returns wrongly is a
    :class:`PolicyError` naming it, where the same from dcplace's own code is a bug and keeps its traceback."""
    return not module.startswith("dcplace.")


class PolicyError(InputError):
    """A user's policy misbehaved: it raised, or returned something that is not an action. Its own code is at fault,
    not dcplace's, so it is reported as one sentence (exit 2, a 422 over HTTP), not as a dcplace traceback; the
    original exception is chained (``__cause__``) for whoever debugs the policy."""


class Terminated(BaseException):
    """The process got SIGTERM. Raised by the CLI's signal handler so that, like ``KeyboardInterrupt`` for SIGINT, it
    unwinds the work (atomic outputs discard their temporary files) and the command exits with 143 (128 + 15).

    A ``BaseException``, like ``KeyboardInterrupt``: ``except Exception`` blocks do not swallow it.
    """

    def __init__(self, signum: int = 15) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum
