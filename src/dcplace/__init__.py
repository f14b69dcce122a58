"""dcplace: decide where datacenter workloads run.

Layers (imports go one way, top to bottom): ``cluster`` (static machines) -> ``workload`` (request tables and
trace readers) -> ``sim`` (array state, events, ledger) -> ``envs`` (Gymnasium adapters) and ``policies``
(heuristics by name) -> ``bench`` (reproductions) -> ``cli``.
"""

from dcplace import jitcache as _jitcache

__version__ = "0.1.0"

_jitcache.configure()  # before numba is imported: one numba cache per version of the compiled modules
