"""What the service answers, shared by FastAPI's routes and the fast path (:mod:`dcplace.service.hotpath`): the
JSON shapes of decisions and records, the status code and sentence of every error a client can cause, and the two
hot calls, placing and releasing a VM."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import asdict
from json.encoder import encode_basestring_ascii
from typing import Any

from dcplace.engine import (
    Conflict,
    FailReport,
    NotFound,
    Placement,
    PlacementEngine,
    Rejection,
    StoreError,
    Unavailable,
    VmColumns,
    VmRecord,
    VmRequest,
)
from dcplace.engine.explain import Explanation
from dcplace.errors import InputError
from dcplace.service.metrics import ServiceMetrics
from dcplace.service.models import ID_PATTERN, ID_RULE, VmIn

ERROR_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (Unavailable, 503),
    (InputError, 422),
    (StoreError, 503),
)
"""The client-visible errors and their status codes (anything else is a bug: 500)."""


def error_answer(exc: Exception) -> tuple[int, dict[str, Any]] | None:
    """``(status, {"detail": sentence})`` for an error a client can cause, None for a bug."""
    for kind, status in ERROR_STATUS:
        if isinstance(exc, kind):
            return status, {"detail": str(exc)}
    return None


def _union_tag(part: Any) -> bool:
    """A part of a pydantic error location that names a union branch or a constraint, not a field
    (``constrained-float``, ``list[constrained-float]``, ``float``); a row named ``jobs[3]`` is a field."""
    if isinstance(part, str) and re.fullmatch(r"[a-z_]+\[\d+\]", part):
        return False
    return isinstance(part, str) and ("[" in part or "-" in part or part in ("float", "int", "str", "bool", "list"))


NOT_JSON_TYPE = "the request body must be JSON, sent with the header content-type: application/json"
"""The answer to a body sent as another type (``curl -d`` without ``-H``: form-encoded), on every route."""
NOT_PARSED = "the request body is not valid JSON (it could not be parsed)"
"""The answer to a body no reader could take apart (arrays nested 200,000 deep), on every route."""
TOO_LONG_NUMBER = "the request body is not valid JSON: a number has over 4300 digits"
"""Python reads no longer integer (``sys.get_int_max_str_digits``): said, where it read "at character 0"."""


def unparsed(cause: BaseException | None) -> str:
    """The sentence for a body the JSON reader refused without a position: a too long number, or anything else."""
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return TOO_LONG_NUMBER
    return NOT_PARSED


def is_json_type(content_type: str) -> bool:
    """Whether a content-type header names JSON, as FastAPI decides it (``application/json``, ``...+json``)."""
    main = content_type.split(";", 1)[0].strip().lower()
    return main == "application/json" or (main.startswith("application/") and main.endswith("+json"))


def validation_sentence(errors: Any) -> str:
    """One sentence for pydantic's (or FastAPI's) list of validation errors: the first one, with its field."""
    if not errors:
        return "the request body is not valid"
    e = errors[0]
    n = len(errors) - 1
    more = f" (and {n} more problem{'' if n == 1 else 's'})" if n else ""
    where = tuple(e.get("loc", ()))
    if e.get("type") == "json_invalid" or e.get("msg") == "JSON decode error":  # loc is (body, character offset)
        at = next((x for x in where if isinstance(x, int)), None)
        why = str((e.get("ctx") or {}).get("error") or "")  # the reader's reason ("Expecting value", ...)
        place = f" (at character {at})" if at is not None and "column" not in why else ""
        return "the request body is not valid JSON" + (f": {why}" if why else "") + place
    if where in ((), ("body",)) and e.get("type", "missing") == "missing":
        return "the request needs a JSON body" + more
    if where == ("body",) and isinstance(e.get("input"), bytes | str):  # a body FastAPI did not read as JSON
        return NOT_JSON_TYPE
    # pydantic's union branches and constraint tags are not fields: "cpu.constrained-float" is "cpu"
    loc = ".".join(str(x) for x in where if x != "body" and not _union_tag(x))
    msg = e.get("msg", "is not valid")
    if e.get("type") == "string_pattern_mismatch" and (e.get("ctx") or {}).get("pattern") == ID_PATTERN:
        msg = f"must be an id of {ID_RULE}, got {e.get('input')!r}"  # the pattern itself said nothing to a person
    return f"field '{loc}': {msg}{more}" if loc else f"{msg}{more}"


def explanation_json(x: Explanation | None) -> dict[str, Any] | None:
    return None if x is None else asdict(x)


def placement_json(p: Placement) -> dict[str, Any]:
    return {"accepted": True, "vm": p.vm, "machine": p.machine, "node": p.node,
            "explanation": explanation_json(p.explanation), "replayed": p.replayed}  # fmt: skip


def rejection_json(r: Rejection) -> dict[str, Any]:
    return {"accepted": False, "vm": r.vm, "detail": r.reason, "code": r.code,
            "explanation": explanation_json(r.explanation)}  # fmt: skip


def vm_json(r: VmRecord, pinned: bool = False, uid: str | None = None) -> dict[str, Any]:
    """The record's fields (flat: ``vars`` gives what ``asdict`` does without its recursive copy), whether
    re-optimisation may move it and its uid."""
    return {**vars(r), "pinned": pinned, "uid": uid}


_JSON_BOOL = {True: "true", False: "false"}


def _json_str(value: str | None) -> str:
    return "null" if value is None else encode_basestring_ascii(value)


def vm_rows_json(c: VmColumns) -> str:
    """The VMs as ``GET /vms`` lists them (each what :func:`vm_json` answers for it alone), as JSON text without the
    list's brackets, written directly: a dictionary per VM and ``json.dumps`` took 1.7x as long on the event loop
    (0.155 s against 0.091 s for 100,000 VMs, ``benchmarks/bench_listing_json.py``). The same bytes: strings through
    ``json``'s own escaping, numbers as ``float.__repr__``, as ``json.dumps`` writes them (a hypothesis test compares
    the two)."""
    b, j = _JSON_BOOL, _json_str
    return ", ".join(
        f'{{"id": {j(i)}, "machine": {j(m)}, "node": {"null" if k is None else int(k)}, "cpu": {float(x)!r}, '
        f'"mem": {float(g)!r}, "multi": {b[bool(z)]}, "pinned": {b[bool(p)]}, "uid": {j(u)}}}'
        for i, m, k, x, g, z, p, u in zip(*c, strict=True)
    )


def allocation_rows_json(c: VmColumns) -> str:
    """``json.dumps(allocation_rows(c))`` without the list's brackets, written directly (:func:`vm_rows_json`)."""
    b, j = _JSON_BOOL, _json_str
    return ", ".join(
        f'{{"vm": {j(i)}, "machine": {j(m)}, "node": {"null" if k is None else int(k)}, "cpu": {float(x)!r}, '
        f'"mem": {float(g)!r}, "pinned": {b[bool(p)]}, "uid": {j(u)}}}'
        for i, m, k, x, g, _, p, u in zip(*c, strict=True)
    )


def fail_json(rep: FailReport) -> dict[str, Any]:
    return {"machine": rep.machine, "replaced": [placement_json(p) for p in rep.replaced],
            "dropped": [rejection_json(r) for r in rep.dropped]}  # fmt: skip


async def place_vm(engine: PlacementEngine, metrics: ServiceMetrics, body: VmIn) -> tuple[int, dict[str, Any]]:
    """``POST /vms``: 201 and the placement (200 for a retry, ``replayed``), or 409 and the rejection (reason,
    code, explanation); raises the engine's errors (:func:`error_answer`)."""
    t0 = time.perf_counter()
    d = await engine.place_async(VmRequest(body.id, body.cpu, body.mem, body.multi_numa, body.pinned, body.uid),
                                 body.policy, body.explain)  # fmt: skip
    if isinstance(d, Placement) and d.replayed:  # decided nothing: not a placement's latency
        return 200, placement_json(d)
    metrics.place_latency.observe(time.perf_counter() - t0)
    if isinstance(d, Placement):
        return 201, placement_json(d)
    return 409, rejection_json(d)


def refuse_query(method: str, path: str, takes: Iterable[str], names: Iterable[str]) -> None:
    """InputError (422) naming the first of ``names`` (a request's query parameters) that the route ``method path``
    does not take: every route checks them (a parameter ignored made ``POST /machines/{id}/evacuate?dry_run=true``
    drain the machine)."""
    allowed = set(takes)
    unknown = sorted(set(names) - allowed)
    if unknown:
        which = f"which takes {', '.join(sorted(allowed))}" if allowed else "which takes none"
        raise InputError(f"is not a query parameter of {method} {path}, {which}", field=unknown[0][:80])


def release_uid(query: list[tuple[str, str]]) -> str | None:
    """``DELETE /vms/{id}``'s query, as ``(name, value)`` pairs: its ``uid`` (the last one given; None: none), and a
    parameter of another name refused (422). Ignoring them made ``?UID=...``, a misspelled uid, free the VM without
    the check it asked for."""
    refuse_query("DELETE", "/vms/{vm_id}", ("uid",), (k for k, _ in query))
    uids = [v for _, v in query]
    return uids[-1] if uids else None


async def release_vm(
    engine: PlacementEngine, metrics: ServiceMetrics, vm_id: str, uid: str | None = None
) -> tuple[int, dict[str, Any]]:
    """``DELETE /vms/{id}[?uid=U]``: 200 and what the VM held (``uid``: only if it was placed with that uid, else a
    409); raises the engine's errors (:func:`error_answer`)."""
    t0 = time.perf_counter()
    rec, pinned, held = await engine.release_held_async(vm_id, uid)
    metrics.release_latency.observe(time.perf_counter() - t0)
    return 200, vm_json(rec, pinned, held)
