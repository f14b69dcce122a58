"""Where independent jobs run: in this process, in a local process pool (the default), or on a Ray cluster.

One abstraction serves every fan-out of dcplace (reproduction sweeps, the hierarchical decomposition's subproblems)::

    with executor(workers=2, ray_address="") as ex:
        results = ex.map(solve_one, jobs)          # results in the order of ``jobs``

``ray_address`` chooses the engine, in Ray's own words plus one:

- ``""`` (default): no Ray. ``workers == 1`` runs the jobs here, one after the other; more, a local process pool
  of ``workers`` processes.
- ``"local"``: a new Ray instance on this machine with ``workers`` CPUs (Ray must be installed: the ``ray`` extra,
  ``pip install -c constraints.txt -e '.[ray]'``).
- ``"auto"``: the Ray cluster this machine already belongs to (``ray start`` ran here).
- ``"ray://HOST:PORT"`` or ``"HOST:PORT"``: that cluster (Ray Client, or the head's GCS address). Every node must
  have the same dcplace installed. The cluster's CPUs bound the concurrency; ``workers`` is not used.

When Ray is already initialised in this process (a caller's own ``ray.init``), that instance is used and left
running. Same jobs, same results on every engine: a job's outcome must depend only on its arguments (each carries its
seed); only wall times differ. ``fn`` must be picklable (a module-level function), like its arguments and results.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any, Protocol, TypeVar

from dcplace.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

Done = Callable[[int, Any], None]
"""Called once per finished job, in the order the jobs finish: (index of the job in ``items``, its result)."""


class Executor(Protocol):
    """Runs a function over jobs; :attr:`workers` is how many run at once (for time budgets per round)."""

    workers: int
    engine: str
    """``inline``, ``processes`` or ``ray``"""

    def map(self, fn: Callable[[T], R], items: Sequence[T], done: Done | None = None) -> list[R]:
        """``[fn(x) for x in items]``, computed where this executor runs jobs; ``done`` sees each as it finishes."""
        ...


class Inline:
    """The jobs one after the other in this process."""

    engine = "inline"

    def __init__(self) -> None:
        self.workers = 1

    def map(self, fn: Callable[[T], R], items: Sequence[T], done: Done | None = None) -> list[R]:
        out = []
        for i, x in enumerate(items):
            out.append(fn(x))
            if done is not None:
                done(i, out[-1])
        return out


class Processes:
    """A local process pool of ``workers`` processes, kept for the executor's life."""

    engine = "processes"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = ProcessPoolExecutor(max_workers=workers)

    def map(self, fn: Callable[[T], R], items: Sequence[T], done: Done | None = None) -> list[R]:
        futures: dict[Future[R], int] = {self.pool.submit(fn, x): i for i, x in enumerate(items)}
        out: list[Any] = [None] * len(items)
        for fut in as_completed(futures):
            i = futures[fut]
            out[i] = fut.result()
            if done is not None:
                done(i, out[i])
        return out


class Ray:
    """Jobs as Ray tasks of one CPU each (``ray.remote(num_cpus=1)``)."""

    engine = "ray"

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote: dict[Callable[..., Any], Any] = {}

    def map(self, fn: Callable[[T], R], items: Sequence[T], done: Done | None = None) -> list[R]:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self.ray.remote(num_cpus=1)(fn)
        refs = [remote.remote(x) for x in items]
        if done is None:
            return list(self.ray.get(refs))
        index = {ref: i for i, ref in enumerate(refs)}
        out: list[Any] = [None] * len(items)
        pending = list(refs)
        while pending:
            ready, pending = self.ray.wait(pending, num_returns=1)
            for ref in ready:
                out[index[ref]] = self.ray.get(ref)
                done(index[ref], out[index[ref]])
        return out


def check_ray_address(address: str) -> None:
    """Raise :class:`InputError` (field ``ray_address``) unless ``address`` is empty, ``local``, ``auto``,
    ``ray://HOST:PORT`` or ``HOST:PORT``."""
    if address in ("", "local", "auto"):
        return
    rest = address.removeprefix("ray://")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        exc = InputError(f"ray_address must be '', 'local', 'auto', 'ray://HOST:PORT' or 'HOST:PORT', got {address!r}")
        exc.field = "ray_address"
        raise exc


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        exc = InputError(
            "ray_address is set but Ray is not installed (install the extra: pip install -c constraints.txt "
            "-e '.[ray]')"
        )
        exc.field = "ray_address"
        raise exc from None
    return ray


@contextlib.contextmanager
def executor(workers: int, ray_address: str = "") -> Iterator[Executor]:
    """The executor for ``workers`` and ``ray_address`` (module docstring), shut down on exit (a Ray instance only
    when this call started it)."""
    check_ray_address(ray_address)
    if not ray_address:
        if workers <= 1:
            yield Inline()
            return
        procs = Processes(workers)
        try:
            yield procs
        finally:
            procs.pool.shutdown(cancel_futures=True)
        return
    ray = _import_ray()
    started = not ray.is_initialized()
    if started:
        if ray_address == "local":
            # Ray runs its workers at niceness 15 (RayConfig worker_niceness, ray-project/ray#24928), so on a shared
            # machine any other process starves them (measured: two swad workers at ~8 % of a core each beside one
            # busy process); a local instance's workers compete as the process pool's do. RAY_worker_niceness set
            # by the user wins.
            os.environ.setdefault("RAY_worker_niceness", "0")
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False,
                     configure_logging=False)  # fmt: skip
        else:
            ray.init(address=ray_address, log_to_driver=False, configure_logging=False)
    try:
        yield Ray(ray)
    finally:
        if started:
            ray.shutdown()
