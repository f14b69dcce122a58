"""Where numba keeps dcplace's compiled functions: a cache directory per version of the compiled sources.

numba caches a compiled function next to its source and invalidates it when *that file* changes, but "cache
invalidation fails to recognize changes in functions defined in other files" (numba's documentation, caching
limitations): a function compiled into its caller (every jitted call is, and
:data:`dcplace.sim.numa_kernel.jit_inline` inlines the hot ones on purpose) stays in the caller's cache after its own
file changes. Changing ``numa_kernel.fits`` left ``numa_scores``' cached heuristics on the old rule, so the policies
and the simulator disagreed about feasibility (found while adding :data:`~dcplace.sim.numa_kernel.FIT_TOL`).
:func:`configure` therefore points ``NUMBA_CACHE_DIR`` at a directory named by a digest of every compiled module's
size and modification time: a change to any of them starts a fresh cache, and nothing else does. A
``NUMBA_CACHE_DIR`` the user set is left alone.

Called once from ``dcplace/__init__.py`` (before numba is imported: numba reads the variable at import). Costs one
``stat`` per module in :data:`JIT_MODULES`; ``tests/test_jitcache.py`` checks that list names every module that
imports numba.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

#: Every module (relative to the package) that defines numba-compiled functions.
JIT_MODULES = (
    "engine/cluster_state.py",
    "engine/explain.py",
    "envs/net_alloc.py",
    "learn/cvd_features.py",
    "learn/nara_fast.py",
    "policies/numa_index.py",
    "policies/numa_scores.py",
    "policies/numa_search.py",
    "sim/netalloc.py",
    "sim/numa_kernel.py",
    "sim/path_kernels.py",
)
PACKAGE = Path(__file__).resolve().parent
PRUNE_AFTER_S = 3600.0
"""A cache directory of an older version is removed once untouched this long (seconds)."""


def digest() -> str:
    """A digest of the compiled modules' sizes and modification times (numba's own staleness stamp, over all of
    them at once)."""
    h = hashlib.sha256()
    for rel in JIT_MODULES:
        st = (PACKAGE / rel).stat()
        h.update(f"{rel}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def _roots() -> Iterator[tuple[Path, bool]]:
    """Where a cache directory may go, with whether older versions there may be pruned: the package's
    ``__pycache__`` (this install's own), then ``~/.cache/dcplace`` under a tag of this install's path (shared by
    every install of the user: never pruned). No home directory (a container with an arbitrary uid): no fallback."""
    yield PACKAGE / "__pycache__", True
    try:
        home = Path.home()
    except (RuntimeError, KeyError):
        return
    yield home / ".cache" / "dcplace" / hashlib.sha256(str(PACKAGE).encode()).hexdigest()[:12], False


def configure() -> Path | None:
    """Set ``NUMBA_CACHE_DIR`` for this version of the compiled sources (unless already set); returns it.

    The directory lives in the package's ``__pycache__`` when that is writable (as numba's default does), else in
    ``~/.cache/dcplace``. In the package's own ``__pycache__``, directories of older versions untouched for
    :data:`PRUNE_AFTER_S` are removed when a new one is made (a process still running an older version keeps its
    directory meanwhile). If numba was imported before dcplace, its configuration is reloaded so that functions
    decorated from now on cache here."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return None
    try:
        tag = f"numba-{digest()}"
    except OSError:  # a module missing (a partial install): leave numba's default
        return None
    for root, prune in _roots():
        target = root / tag
        try:
            fresh = not target.is_dir()
            target.mkdir(parents=True, exist_ok=True)
            if not os.access(target, os.W_OK):
                continue
        except OSError:
            continue
        if fresh and prune:
            now = time.time()
            for old in root.glob("numba-*"):
                try:
                    stale = old != target and now - old.stat().st_mtime > PRUNE_AFTER_S
                except OSError:
                    continue
                if stale:
                    shutil.rmtree(old, ignore_errors=True)
        os.environ["NUMBA_CACHE_DIR"] = str(target)
        if "numba" in sys.modules:
            sys.modules["numba"].core.config.reload_config()
        return target
    return None
