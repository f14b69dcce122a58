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


def digest() -> str:
    """A digest of the compiled modules' sizes and modification times (numba's own staleness stamp, over all of
    them at once)."""
    h = hashlib.sha256()
    for rel in JIT_MODULES:
        st = (PACKAGE / rel).stat()
        h.update(f"{rel}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def configure() -> Path | None:
    """Set ``NUMBA_CACHE_DIR`` for this version of the compiled sources (unless already set); returns it.

    The directory lives in the package's ``__pycache__`` when that is writable (as numba's default does), else in
    ``~/.cache/dcplace``. Directories of older versions in the same place are removed when a new one is made."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return None
    try:
        tag = f"numba-{digest()}"
    except OSError:  # a module missing (a partial install): leave numba's default
        return None
    for root in (PACKAGE / "__pycache__", Path.home() / ".cache" / "dcplace"):
        target = root / tag
        try:
            fresh = not target.is_dir()
            target.mkdir(parents=True, exist_ok=True)
            if not os.access(target, os.W_OK):
                continue
        except OSError:
            continue
        if fresh:
            for old in root.glob("numba-*"):
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
        os.environ["NUMBA_CACHE_DIR"] = str(target)
        return target
    return None
