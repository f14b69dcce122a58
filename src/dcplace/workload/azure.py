"""Reader for the Azure public dataset V1 in its flavour + binned-lifetime form.

Source: Cortez et al., "Resource Central", SOSP 2017 (vmtable, CC BY 4.0), re-encoded by Bergsma et al.,
SOSP 2021 (see ``../shared/data/azure-v1/INPUT.md`` and ``TRACES-NOTICE.txt``).

Files (one folder):

* ``v1.<split>.txt``: ``<timestamp_s> <flavour>,<flavour>,|,...``, the flavours that arrived in the 300 s bin
  ending at the timestamp; ``|`` closes a same-tenant batch.
* ``v1.<split>.c<T>.txt``: the lifetimes, token-aligned: ``U<bin>`` (finished before ``T``) or ``C<bin>``
  (still running at the censoring time ``T``; the bin bounds how long it had run).
* ``flav_map.txt``: ``<vCPU>,<GB> <letter>``; ``v1.interval_map.txt``: ``<duration_s> <bin>``.

Documented choices:

* **Arrival inside a bin**: the ``c`` VMs of the bin ending at ``t`` arrive at ``t - 300 + 300 * (i + 1) / (c + 1)``,
  ``i = 0..c-1``, evenly spread and in trace order (the trace keeps only the bin).
* **Lifetime of a bin**: the midpoint of the bin, whose edges come from ``v1.interval_map.txt``: bin ``b`` spans
  from the smallest duration mapped to ``b`` to the smallest duration mapped to ``b + 1`` (the last bin: to its
  largest listed duration + 300 s). E.g. bin 0 = [0, 300) s -> 150 s; bin 13 = [3900, 7500) s -> 5700 s.
* **Censored VMs** (``C``): ``censored="trace-end"`` (default) keeps them with ``departure = T`` and
  ``censored = True``: every arrival of the split precedes ``T``, so in a replay they never leave, which is all the
  trace says; their income uses the known lower bound ``T - arrival``. ``censored="drop"`` removes them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.inputs import MAX_QUANTITY, POSITIVE, SECONDS, Range, number, read_text
from dcplace.workload.table import RequestTable

BIN_SECONDS = 300.0


def read_flavour_map(path: Path) -> dict[str, tuple[float, float]]:
    """``letter -> (vCPU, GB)`` from ``flav_map.txt``; both numbers > 0."""
    out: dict[str, tuple[float, float]] = {}
    for ln, text in enumerate(read_text(path, "flavour map").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            res, letter = text.split()
            cpu_s, mem_s = res.split(",")
        except ValueError:
            raise InputError(f"expected '<vCPU>,<GB> <letter>', got {text!r}", path=path, line=ln) from None
        cpu = number(cpu_s, POSITIVE, path=path, line=ln, field="vCPU")
        if letter in out:  # the second line replaced the first without a word
            raise InputError(f"flavour {letter!r} is defined twice", path=path, line=ln, field="letter")
        out[letter] = (cpu, number(mem_s, POSITIVE, path=path, line=ln, field="GB"))
    return out


def lifetime_bins(path: Path) -> npt.NDArray[np.float64]:
    """Representative lifetime (seconds) of each bin: the midpoint of its edges (see the module docstring)."""
    durations: list[float] = []
    bins: list[int] = []
    for ln, text in enumerate(read_text(path, "interval map").splitlines(), start=1):
        parts = text.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise InputError(f"expected '<duration_s> <bin>', got {text!r}", path=path, line=ln)
        durations.append(number(parts[0], SECONDS, path=path, line=ln, field="duration"))
        bins.append(int(number(parts[1], Range(0, MAX_QUANTITY, integer=True), path=path, line=ln, field="bin")))
    dur, b = np.asarray(durations), np.asarray(bins, dtype=np.int64)
    nb = int(b.max()) + 1
    seen = np.unique(b)  # sorted; every bin 0..nb-1 present iff there are nb of them (no array of nb: a bin number
    if len(seen) != nb:  # of 2,147,483,647 allocated 16 GiB)
        gap = int(np.flatnonzero(seen != np.arange(len(seen)))[0])  # there is one: seen[-1] = nb - 1 > len - 1
        raise InputError(f"bin {gap} has no duration (bins must be 0..{nb - 1})", path=path, field="bin")
    lo = np.full(nb, np.inf)
    np.minimum.at(lo, b, dur)
    hi = np.empty(nb)
    hi[:-1] = lo[1:]
    hi[-1] = dur[b == nb - 1].max() + BIN_SECONDS
    return np.asarray((lo + hi) / 2.0)


def flavour_tokens(text: str) -> tuple[str, list[str]]:
    """``(timestamp, tokens)`` of one line of ``v1.<split>.txt`` (or its lifetime file), batch marks dropped."""
    parts = text.split()
    if not parts:
        return "", []
    return parts[0], [x for x in (parts[1].split(",") if len(parts) > 1 else []) if x not in ("|", "")]


def read_azure(
    folder: str | Path,
    split: str = "dev",
    censored: Literal["trace-end", "drop"] = "trace-end",
) -> RequestTable:
    """Read one split with lifetimes (only ``dev`` ships them in ``../shared/data/azure-v1``)."""
    root = Path(folder)
    flav_path = root / f"v1.{split}.txt"
    life_candidates = sorted(root.glob(f"v1.{split}.c*.txt"))
    if not flav_path.is_file():
        raise InputError(f"no flavour trace for split '{split}'", path=flav_path)
    if not life_candidates:
        raise InputError(f"split '{split}' has no lifetime file v1.{split}.c<T>.txt", path=root)
    if len(life_candidates) > 1:  # the first by name was used without a word
        names = ", ".join(c.name for c in life_candidates)
        raise InputError(f"split '{split}' has {len(life_candidates)} lifetime files ({names}); keep one", path=root)
    life_path = life_candidates[0]
    match = re.search(r"\.c(\d+)\.txt$", life_path.name)
    assert match is not None
    censor_time = float(match.group(1))
    flavours = read_flavour_map(root / "flav_map.txt")
    bins = lifetime_bins(root / "v1.interval_map.txt")

    arrival: list[float] = []
    life: list[float] = []
    cen: list[bool] = []
    cpu: list[float] = []
    mem: list[float] = []
    line: list[int] = []
    flines = read_text(flav_path, "flavour trace").splitlines()
    llines = read_text(life_path, "lifetime file").splitlines()
    # The two files are token-aligned line by line: neither may have (non-blank) lines the other lacks.
    fcount = len([x for x in flines if x.strip()])
    lcount = len([x for x in llines if x.strip()])
    if fcount != lcount:
        longer, shorter = (flav_path, life_path) if fcount > lcount else (life_path, flav_path)
        raise InputError(f"{max(fcount, lcount)} lines but {shorter.name} has {min(fcount, lcount)} (the flavour and "
                         "lifetime files must match line by line)", path=longer)  # fmt: skip
    for ln, (ftext, ltext) in enumerate(zip(flines, llines, strict=False), start=1):
        fstamp, ftoks = flavour_tokens(ftext)
        lstamp, ltoks = flavour_tokens(ltext)
        if not fstamp and not lstamp:
            continue
        t = number(fstamp, SECONDS, path=flav_path, line=ln, field="timestamp")
        if lstamp != fstamp:
            raise InputError("timestamp differs from the flavour trace", path=life_path, line=ln, field="timestamp")
        if len(ftoks) != len(ltoks):
            raise InputError(
                f"{len(ltoks)} lifetimes for {len(ftoks)} flavours",
                path=life_path,
                line=ln,
                field="lifetime",
            )
        c = len(ftoks)
        for i, (f, lt) in enumerate(zip(ftoks, ltoks, strict=True)):
            if f not in flavours:
                raise InputError(f"unknown flavour {f!r}", path=flav_path, line=ln, field="flavour")
            try:
                kind, b = lt[0], int(lt[1:])
            except (ValueError, IndexError):
                raise InputError(f"bad lifetime token {lt!r}", path=life_path, line=ln, field="lifetime") from None
            if kind not in ("U", "C") or not 0 <= b < len(bins):
                raise InputError(f"bad lifetime token {lt!r}", path=life_path, line=ln, field="lifetime")
            if kind == "C" and censored == "drop":
                continue
            a = t - BIN_SECONDS + BIN_SECONDS * (i + 1) / (c + 1)
            arrival.append(a)
            if kind == "C":
                life.append(max(censor_time - a, 0.0))
                cen.append(True)
            else:
                life.append(float(bins[b]))
                cen.append(False)
            vc, gb = flavours[f]
            cpu.append(vc)
            mem.append(gb)
            line.append(ln)
    if not arrival:
        raise InputError("the trace has no requests", path=flav_path)
    arr = np.asarray(arrival)
    if np.any(np.diff(arr) < 0):
        i = int(np.flatnonzero(np.diff(arr) < 0)[0]) + 1
        raise InputError(
            "timestamps must be non-decreasing (unsorted)", path=flav_path, line=line[i], field="timestamp"
        )
    return RequestTable.from_arrays(
        arrival=arr,
        departure=arr + np.asarray(life),
        cpu=cpu,
        mem=mem,
        censored=cen,
        line=line,
        source=str(flav_path),
    )
