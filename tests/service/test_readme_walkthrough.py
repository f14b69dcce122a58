"""The README's walkthrough of ``dcplace serve`` as written: every ``curl`` of its block sent to a real service (the
``kill -9`` and restart too), and every answer the README prints compared with the service's, where ``...`` marks
what the README leaves out. Its answers had drifted from the service's (new fields, a shorter 422 sentence) with
nothing to notice it (a newcomer's walkthrough)."""

from __future__ import annotations

import json
import re
import shlex
import signal
from pathlib import Path

import httpx

from .conftest import free_port, start_serve

README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough() -> list[tuple[str, list[str]]]:
    """The block's commands (continuation lines joined, comments dropped), each with the answer lines after it."""
    text = README.read_text().split("## A live cluster: `dcplace serve`", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    pending = ""
    for line in block.splitlines():
        if pending or line.startswith(("curl ", "kill ", ".venv/")):
            joined = pending + line.strip()
            if joined.endswith("\\"):
                pending = joined[:-1] + " "
                continue
            pending = ""
            steps.append((joined, []))  # its comment kept: it may say the status ("# HTTP 409")
        else:
            steps[-1][1].append(line)
    return steps


def _request(command: str, base: str) -> tuple[int, str]:
    """A ``curl`` of the block sent with httpx: the status and the answer's text (filtered as its ``| grep`` filters
    it)."""
    pipe = re.sub(r"\s+#.*$", "", command).split(" | grep ", 1)
    args = shlex.split(pipe[0])
    method = args[args.index("-X") + 1] if "-X" in args else "GET"
    body = args[args.index("-d") + 1] if "-d" in args else None
    url = next(a for a in args if a.startswith("localhost:"))
    path = url.split("/", 1)[1] if "/" in url else ""
    answer = httpx.request(method, f"{base}/{path}", content=body,
                           headers={"content-type": "application/json"} if body else {}, timeout=30)  # fmt: skip
    if len(pipe) == 2:
        return answer.status_code, "\n".join(line for line in answer.text.splitlines() if pipe[1].strip() in line)
    return answer.status_code, answer.text


def _canonical(text: str) -> str:
    """JSON as the service writes it, keys sorted: 40 and 40.0, 1 and true stay different."""
    return json.dumps(json.loads(text), sort_keys=True)


def _matches(command: str, printed: list[str], status: int, got: str) -> None:
    said = re.search(r"#\s*(?:HTTP\s+)?(\d{3})\b", command)  # "# HTTP 409", "# 422": the status it says
    assert status == int(said.group(1)) if said else status < 300, (command, status)
    if not printed:
        return
    if printed[0].startswith(("{", "[")) and "..." not in printed[0]:
        assert len(printed) == 1 and _canonical(printed[0]) == _canonical(got), (printed, got)
        return
    if not printed[0].startswith(("{", "[")):  # plain lines (a grep of the metrics): exactly those, as the README
        assert printed == [x for x in got.splitlines() if not x.startswith("#")], (printed, got)  # leaves out # HELP
        return
    where = 0
    for piece in "\n".join(printed).split("..."):  # what the README shows, in order; "..." left out
        where = got.find(piece, where)
        assert where >= 0, (piece, got)
        where += len(piece)


def test_the_readme_walkthrough_answers_as_printed(tmp_path: Path) -> None:
    steps = walkthrough()
    assert sum(c.startswith("curl ") for c, _ in steps) >= 12 and any(c.startswith("kill -9") for c, _ in steps)
    db = tmp_path / "cluster.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = None
    try:
        for command, printed in steps:
            command = re.sub(r"\s+#.*$", "", command) if not command.startswith("curl ") else command
            if command.startswith(".venv/"):  # the service as the block starts it, on a free port
                flags = shlex.split(command.rstrip("& "))[3:]
                flags = [f for f in flags if f not in ("--db", "cluster.db", "--port", "8011")]
                serve = start_serve(db, port, *flags)
            elif command.startswith("kill -9"):
                assert serve is not None
                serve.send_signal(signal.SIGKILL)
                serve.wait(30)
                restart = shlex.split(command.split(";", 1)[1].rstrip("& "))[3:]
                serve = start_serve(db, port, *[f for f in restart if f not in ("--db", "cluster.db", "--port",
                                                                                   "8011")])  # fmt: skip
            else:
                _matches(command, printed, *_request(command, base))
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            serve.wait(30)
