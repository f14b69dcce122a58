"""An index over free capacity: compiled heuristics' decisions without scanning the cluster, the scan's bit for bit.

Every compiled heuristic but ``random`` scores an action from its own machine alone: the key of placing request
``d`` at machine ``m`` node ``k`` (:func:`dcplace.policies.numa_heuristics.score_key`) reads ``free[m]``, ``cap[m]``,
``vm_count[m]``, the weights and ``d``, nothing of the other machines. The scan's answer is the feasible action with
the least ``(key, action)`` (lexicographic; the scan keeps the first of equal keys, which is the lowest action). Two
structures answer the same question from fewer machines; both are fed by the state's change log:

* **The frontier** (answers while at most ``FRONTIER_MAX`` machines are in play). A *pristine* machine is usable,
  hosts nothing and has ``free == cap`` exactly; all pristine machines of one capacity class score alike for every
  request and heuristic, so the scan's tie rule picks the lowest-indexed one. The answer is therefore among the
  machines *in play* (usable, not pristine) and the first pristine machine of each class (the first ``k`` for
  top-k): O(in play + classes) per decision with the scan's own loop (its Best-Fit pruning kept), O(1) per change.
  A Huawei-East-1 replay keeps about 40 machines in play whatever the cluster's size.
* **Per-type tournament trees** (when more machines are in play, e.g. after a warm start, or for VMAgent's
  near-worst-fit rule, which spreads). For one request *type* ``(cpu, mem, multi)`` the answer is the minimum over
  machines of each machine's own best ``(key, action)``: a segment tree over machines holds it at its root; a
  change costs one leaf and a walk up its ancestors that stops where a winner does not change. Real traces have few
  types (15 in Huawei-East-1); types beyond ``max_types`` fall back to the scan.

Why no single order of the machines (a tree keyed by free CPU, buckets) would do: feasibility is multi-resource (CPU
and memory of a node, or of every node for a multi-NUMA VM), so a walk in free-CPU order must skip machines that lack
memory (no bound on how many), and the keys are floating-point expressions of the request (Best-Fit's
``machine CPU - d``, the industrial fractions, VMAgent's rates): ``fl(a - d) == fl(b - d)`` for ``a < b`` turns a
strict order into a tie that a later key component decides. Both structures here compute the very keys the scan
computes, so they agree for any data (``tests/policies/test_numa_index.py``: every heuristic, top-k, departures,
drains, prefixes, 2 and 3 NUMA nodes, demands in tenths). ``random`` has no index: its draws follow the scan order
(one random number per feasible action). First-Fit has one but keeps the scan in the compiled episodes: the scan
stops at the first feasible machine, which the index does not beat (measured).

Keeping current: the kernel's ``place`` and ``release`` (and the engine's machine edits) note each changed machine
in the state's change log (``chg``, :func:`dcplace.sim.numa_kernel.note_change`), O(1) each. Each structure replays
the log since it last looked, lazily, when asked; one that fell more than the log's length behind (or after
:func:`~dcplace.sim.numa_kernel.note_reset`) rebuilds, O(machines), no more than the replay would cost.

Tree arrays (``T`` types, ``P`` leaves = the next power of two >= machines; node 1 is the root, leaf of machine ``m``
is node ``P + m``): ``tkey`` ``(T, 2P, 3)`` float64, the winning key of each subtree (``+inf``: nothing feasible);
``tact`` ``(T, 2P)`` int64, the winning action (-1: none); ``tdem`` ``(T, 2)`` float64 and ``tmulti`` ``(T,)`` bool,
each type's request; ``tseen`` ``(T,)`` int64, the change-log count each tree has absorbed. Memory: ``T x 2P x 32``
bytes for the trees built (about 8 MB a type at 100,000 machines; untouched trees cost nothing). Frontier arrays:
``fr``, ``frc``, ``frm`` below. ``top_k`` from a tree takes the ``k`` best machines and scores only their actions:
the ``k`` best actions lie on at most the ``k`` best machines (a machine's actions all rank after its best).
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.limits import human_bytes
from dcplace.policies.numa_scores import (
    BEST_FIT,
    FIRST_FIT,
    RANDOM,
    _machine_free,
    choose,
    score_key,
    top_k,
    topk_insert,
)
from dcplace.sim import numa_kernel as K
from dcplace.sim.numa import NumaView

_jit = nb.njit(cache=True, nogil=True)
_inline = K.jit_inline  # the per-decision path, inlined (why: :data:`dcplace.sim.numa_kernel.jit_inline`)

#: From this many machines the heuristics decide with the index (``Heuristic.run`` / ``choose`` / ``rank``, CVD-RL's
#: filter, the engine), below with the scan; the same decisions either way (crossover for Best-Fit between 100 and
#: 500 machines, docs/benchmarks.md, "Scale").
INDEX_MIN_MACHINES = 512
#: Default cap on request types with a tree of their own (the rest use the scan).
MAX_TYPES = 32
#: The frontier answers while at most this many machines are in play, the trees above (``frm[2]`` holds it per
#: index). Chosen, not tuned: the frontier scores every machine in play, a tree walk costs about types x depth
#: steps per change; the crossover was not measured.
FRONTIER_MAX = 256


@_jit
def _leaf(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    d: np.ndarray,
    multi: bool,
    m: int,
    key: np.ndarray,
) -> int:
    """Machine ``m``'s best feasible action for ``d`` and its key (into ``key`` (3,)), or -1 (key ``+inf``):
    the scan's loop over one machine's nodes."""
    key[0] = np.inf
    key[1] = np.inf
    key[2] = np.inf
    if not usable[m]:
        return -1
    KN = free.shape[1]
    best = -1
    for k in range(1 if multi else KN):
        if not K.fits(free, d, multi, m, k):
            continue
        if code == FIRST_FIT:
            s0, s1, s2 = 0.0, 0.0, 0.0
        else:
            s0, s1, s2 = score_key(code, w, free, cap, vm_count, d, multi, m, k)
        if best < 0 or s0 < key[0] or (s0 == key[0] and (s1 < key[1] or (s1 == key[1] and s2 < key[2]))):
            best = m * KN + k
            key[0] = s0
            key[1] = s1
            key[2] = s2
        if code == FIRST_FIT:
            break
    return best


@_jit
def _less(tkey: np.ndarray, tact: np.ndarray, i: int, j: int) -> bool:
    """Whether tree node ``i``'s winner beats node ``j``'s: (key, action) lexicographically; none loses."""
    if tact[j] < 0:
        return bool(tact[i] >= 0)
    if tact[i] < 0:
        return False
    a0, a1, a2 = tkey[i, 0], tkey[i, 1], tkey[i, 2]
    b0, b1, b2 = tkey[j, 0], tkey[j, 1], tkey[j, 2]
    if a0 != b0:
        return bool(a0 < b0)
    if a1 != b1:
        return bool(a1 < b1)
    if a2 != b2:
        return bool(a2 < b2)
    return bool(tact[i] < tact[j])


@_jit
def _pull(tkey: np.ndarray, tact: np.ndarray, node: int) -> bool:
    """Set ``node`` to the better of its children; return whether it changed."""
    c = 2 * node if not _less(tkey, tact, 2 * node + 1, 2 * node) else 2 * node + 1
    if tact[node] == tact[c] and tkey[node, 0] == tkey[c, 0] and tkey[node, 1] == tkey[c, 1]:
        if tkey[node, 2] == tkey[c, 2]:
            return False
    tact[node] = tact[c]
    tkey[node, 0] = tkey[c, 0]
    tkey[node, 1] = tkey[c, 1]
    tkey[node, 2] = tkey[c, 2]
    return True


@_jit
def _update(
    tkey: np.ndarray,
    tact: np.ndarray,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    d: np.ndarray,
    multi: bool,
    m: int,
    scratch: np.ndarray,
) -> None:
    """Recompute machine ``m``'s leaf and walk up while winners change."""
    P = tact.shape[0] // 2
    node = P + m
    a = _leaf(code, w, free, cap, vm_count, usable, d, multi, m, scratch)
    if a == tact[node] and scratch[0] == tkey[node, 0] and scratch[1] == tkey[node, 1] and scratch[2] == tkey[node, 2]:
        return
    tact[node] = a
    tkey[node, 0] = scratch[0]
    tkey[node, 1] = scratch[1]
    tkey[node, 2] = scratch[2]
    node //= 2
    while node >= 1 and _pull(tkey, tact, node):
        node //= 2


@_jit
def _build(
    tkey: np.ndarray,
    tact: np.ndarray,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    d: np.ndarray,
    multi: bool,
    fr: np.ndarray,
) -> None:
    """Every leaf from the state (machines beyond ``free``'s length: none), then every inner node bottom-up. A
    pristine machine's leaf is its class's (computed once a class), shifted to its own action: the frontier ``fr``
    must be current."""
    P = tact.shape[0] // 2
    M = free.shape[0]
    KN = free.shape[1]
    C = 0
    for m in range(M):
        C = max(C, fr[FR_CLS, m] + 1)
    class_node = np.full(C, -2, np.int64)  # per class: the node offset of its leaf's action (-1 none), -2 unknown
    class_leaf = np.full(C, -1, np.int64)  # a pristine machine of the class whose leaf is computed
    for m in range(P):
        leaf = P + m
        if m >= M:
            tact[leaf] = -1
            tkey[leaf, :] = np.inf
            continue
        c = fr[FR_CLS, m]
        if fr[FR_PRISTINE, m] == 1 and class_node[c] != -2:
            src = P + class_leaf[c]
            tkey[leaf, 0] = tkey[src, 0]
            tkey[leaf, 1] = tkey[src, 1]
            tkey[leaf, 2] = tkey[src, 2]
            tact[leaf] = -1 if class_node[c] < 0 else m * KN + class_node[c]
            continue
        tact[leaf] = _leaf(code, w, free, cap, vm_count, usable, d, multi, m, tkey[leaf])
        if fr[FR_PRISTINE, m] == 1:
            class_leaf[c] = m
            class_node[c] = -1 if tact[leaf] < 0 else tact[leaf] % KN
    for node in range(P - 1, 0, -1):
        _pull(tkey, tact, node)


@_jit
def refresh(
    tkey: np.ndarray,
    tact: np.ndarray,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    tseen: np.ndarray,
    t: int,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    chg: np.ndarray,
    fr: np.ndarray,
) -> None:
    """Bring type ``t``'s tree up to the state: replay the change log since it last looked, or rebuild (the frontier
    ``fr`` must be current: a rebuild reads it)."""
    L = chg.shape[0] - 1
    now = chg[0]
    if now == tseen[t]:
        return
    d = tdem[t]
    if now - tseen[t] > L or now < tseen[t]:
        _build(tkey[t], tact[t], code, w, free, cap, vm_count, usable, d, tmulti[t], fr)
    else:
        _replay(tkey[t], tact[t], code, w, free, cap, vm_count, usable, d, tmulti[t], chg, tseen[t], now)
    tseen[t] = now


@_jit
def _replay(
    tkey: np.ndarray,
    tact: np.ndarray,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    d: np.ndarray,
    multi: bool,
    chg: np.ndarray,
    lo: int,
    hi: int,
) -> None:
    """Apply changes ``lo .. hi-1`` of the log: recompute each changed leaf once, then re-pull their ancestors level
    by level, each once, only above nodes whose winner changed: O(c log(P / c)) for ``c`` changes."""
    L = chg.shape[0] - 1
    P = tact.shape[0] // 2
    c = hi - lo
    if c == 1:
        _update(tkey, tact, code, w, free, cap, vm_count, usable, d, multi, chg[1 + lo % L], np.empty(3))
        return
    nodes = np.empty(c, np.int64)
    n = 0
    key = np.empty(3)
    for q in range(lo, hi):
        node = P + chg[1 + q % L]
        a = _leaf(code, w, free, cap, vm_count, usable, d, multi, node - P, key)
        if a == tact[node] and key[0] == tkey[node, 0] and key[1] == tkey[node, 1] and key[2] == tkey[node, 2]:
            continue
        tact[node] = a
        tkey[node, 0] = key[0]
        tkey[node, 1] = key[1]
        tkey[node, 2] = key[2]
        nodes[n] = node
        n += 1
    while n > 0 and nodes[0] > 1:
        for i in range(n):
            nodes[i] //= 2
        if n > 1:
            nodes[:n].sort()
        kept = 0
        prev = -1
        for i in range(n):
            node = nodes[i]
            if node == prev:
                continue
            prev = node
            if _pull(tkey, tact, node):
                nodes[kept] = node
                kept += 1
        n = kept


@_jit
def _best_below(tkey: np.ndarray, tact: np.ndarray, n: int) -> int:
    """The tree node holding the winner among machines ``0 .. n-1`` (-1 when none): the root when ``n`` covers
    every leaf, else the best of the O(log P) nodes covering the prefix."""
    P = tact.shape[0] // 2
    if n >= P:
        return 1
    best = -1
    lo = P
    hi = P + n
    while lo < hi:
        if lo & 1:
            if best < 0 or _less(tkey, tact, lo, best):
                best = lo
            lo += 1
        if hi & 1:
            hi -= 1
            if best < 0 or _less(tkey, tact, hi, best):
                best = hi
        lo //= 2
        hi //= 2
    return best


# -- the frontier: machines in play, and the first untouched machine of each capacity class ---------------------
# An untouched ("pristine") machine is usable, hosts nothing and has free == cap exactly: every key reads only the
# machine's own state, so all pristine machines of one capacity class score alike for any request, and the scan's
# tie rule picks the lowest-indexed of them. The answer is therefore among the machines in play (usable, touched)
# and one pristine machine per class (the first k for top-k): O(in play + classes) per decision, O(1) per change.
# Rows of ``fr`` ((6, M) int64):
FR_CLS = 0  # capacity class of each machine
FR_RANK = 1  # position of machine m in FR_MEMBERS
FR_MEMBERS = 2  # machines sorted by (class, index); class c occupies frc[0, c] .. frc[0, c + 1] - 1
FR_PRISTINE = 3  # 1 when pristine
FR_INPLAY = 4  # the machines in play, unordered, fr_meta[0] of them
FR_WHERE = 5  # position of m in FR_INPLAY, -1 when absent
FR_SCRATCH = 6  # room for a decision's candidates (in play + pristine picks: distinct machines, at most M)
FR_ROWS = 7
# ``frc`` ((2, C + 1) int64): row 0 class offsets into FR_MEMBERS, row 1 each class's first position that may be
# pristine (nothing before it is). ``frm`` ((3,) int64): machines in play, change-log count absorbed, and the most
# machines in play for which the frontier answers (above: the trees).


@_inline
def _frontier_note(fr: np.ndarray, frc: np.ndarray, frm: np.ndarray, free: np.ndarray, cap: np.ndarray,
                   vm_count: np.ndarray, usable: np.ndarray, m: int) -> None:  # fmt: skip
    """Re-file machine ``m`` as pristine, in play, or neither (unusable)."""
    pristine = usable[m] and vm_count[m] == 0
    if pristine:
        for j in range(free.shape[1]):
            for r in range(free.shape[2]):
                if free[m, j, r] != cap[m, j, r]:
                    pristine = False
    fr[FR_PRISTINE, m] = 1 if pristine else 0
    if pristine:
        c = fr[FR_CLS, m]
        if fr[FR_RANK, m] < frc[1, c]:
            frc[1, c] = fr[FR_RANK, m]
    inplay = usable[m] and not pristine
    at = fr[FR_WHERE, m]
    if inplay and at < 0:
        fr[FR_INPLAY, frm[0]] = m
        fr[FR_WHERE, m] = frm[0]
        frm[0] += 1
    elif not inplay and at >= 0:
        last = fr[FR_INPLAY, frm[0] - 1]
        fr[FR_INPLAY, at] = last
        fr[FR_WHERE, last] = at
        fr[FR_WHERE, m] = -1
        frm[0] -= 1


@_inline
def frontier_refresh(fr: np.ndarray, frc: np.ndarray, frm: np.ndarray, free: np.ndarray, cap: np.ndarray,
                     vm_count: np.ndarray, usable: np.ndarray, chg: np.ndarray) -> None:  # fmt: skip
    """Bring the frontier up to the state from the change log (or rebuild when too far behind)."""
    L = chg.shape[0] - 1
    now = chg[0]
    if now == frm[1]:
        return
    if now - frm[1] > L or now < frm[1]:
        frm[0] = 0
        fr[FR_WHERE, :] = -1
        frc[1, :] = frc[0, :]
        for m in range(free.shape[0]):
            _frontier_note(fr, frc, frm, free, cap, vm_count, usable, m)
    else:
        for q in range(frm[1], now):
            _frontier_note(fr, frc, frm, free, cap, vm_count, usable, chg[1 + q % L])
    frm[1] = now


@_jit
def _pristine_from(fr: np.ndarray, frc: np.ndarray, c: int, pos: int) -> int:
    """The first position >= ``pos`` in class ``c``'s members that is pristine, or the class's end."""
    end = frc[0, c + 1]
    while pos < end and fr[FR_PRISTINE, fr[FR_MEMBERS, pos]] == 0:
        pos += 1
    return pos


@_jit
def _frontier_candidates(fr: np.ndarray, frc: np.ndarray, frm: np.ndarray, n_active: int, k: int) -> np.ndarray:
    """The machines that can hold the ``k`` best actions, in no order: those in play and the first ``k`` pristine
    machines of each class (machines ``>= n_active`` left out). A view of ``fr[FR_SCRATCH]``."""
    return fr[FR_SCRATCH, : _frontier_fill(fr, frc, frm, n_active, k)]


@_inline
def _frontier_fill(fr: np.ndarray, frc: np.ndarray, frm: np.ndarray, n_active: int, k: int) -> int:
    """:func:`_frontier_candidates` into ``fr[FR_SCRATCH, :n]``, returning ``n`` (no view: making one costs two
    atomic reference-count updates)."""
    C = frc.shape[1] - 1
    n = 0
    for i in range(frm[0]):
        m = fr[FR_INPLAY, i]
        if m < n_active:
            fr[FR_SCRATCH, n] = m
            n += 1
    for c in range(C):
        pos = _pristine_from(fr, frc, c, frc[1, c])
        frc[1, c] = pos  # nothing before it is pristine: later searches start here
        got = 0
        end = frc[0, c + 1]
        while pos < end and got < k:
            m = fr[FR_MEMBERS, pos]
            if m >= n_active:
                break
            fr[FR_SCRATCH, n] = m
            n += 1
            got += 1
            pos = _pristine_from(fr, frc, c, pos + 1)
    return n


@_inline
def choose_among(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    d: np.ndarray,
    multi: bool,
    fr: np.ndarray,
    n: int,
) -> int:
    """:func:`~dcplace.policies.numa_heuristics.choose`'s rule over the machines ``fr[FR_SCRATCH, :n]`` (any order;
    :func:`_frontier_fill`) instead of all: the least (key, action), with the same Best-Fit pruning (``random``
    excluded). A loop of its own: ``choose`` keeps its ``range`` loop, whose shape its speed depends on
    (docs/benchmarks.md, "The layered core")."""
    KN = free.shape[1]
    kmax = 1 if multi else KN
    best = -1
    b0 = 0.0
    b1 = 0.0
    b2 = 0.0
    for i in range(n):
        m = fr[FR_SCRATCH, i]
        if code == BEST_FIT and best >= 0 and _machine_free(free, m, 0) - d[0] > b0:
            continue
        if not usable[m]:
            continue
        for k in range(kmax):
            if not K.fits(free, d, multi, m, k):
                continue
            a: int = m * KN + k
            if code == FIRST_FIT:
                if best < 0 or a < best:
                    best = a
                break
            s0, s1, s2 = score_key(code, w, free, cap, vm_count, d, multi, m, k)
            if best < 0 or s0 < b0 or (s0 == b0 and (s1 < b1 or (s1 == b1 and (s2 < b2 or (s2 == b2 and a < best))))):
                best = a
                b0 = s0
                b1 = s1
                b2 = s2
    return best


@_inline
def index_choose(
    tkey: np.ndarray,
    tact: np.ndarray,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    tseen: np.ndarray,
    fr: np.ndarray,
    frc: np.ndarray,
    frm: np.ndarray,
    t: int,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    chg: np.ndarray,
    d: np.ndarray,
    multi: bool,
    n_active: int,
) -> int:
    """:func:`~dcplace.policies.numa_heuristics.choose` for request ``(d, multi)`` of type ``t`` (-1: no tree):
    from the frontier while few machines are in play, else from type ``t``'s tree, else by the scan."""
    frontier_refresh(fr, frc, frm, free, cap, vm_count, usable, chg)
    if frm[0] <= frm[2]:
        n = _frontier_fill(fr, frc, frm, n_active, 1)
        return choose_among(code, w, free, cap, vm_count, usable, d, multi, fr, n)
    if t >= 0:
        return tree_choose(tkey, tact, tdem, tmulti, tseen, t, code, w, free, cap, vm_count, usable, chg, fr, n_active)
    return int(choose(code, w, free, cap, vm_count, usable, d, multi, n_active))


@_jit
def index_top_k(
    tkey: np.ndarray,
    tact: np.ndarray,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    tseen: np.ndarray,
    fr: np.ndarray,
    frc: np.ndarray,
    frm: np.ndarray,
    t: int,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    chg: np.ndarray,
    d: np.ndarray,
    multi: bool,
    n_active: int,
    k: int,
    out: np.ndarray,
    out_keys: np.ndarray,
) -> int:
    """:func:`~dcplace.policies.numa_heuristics.top_k` for request ``(d, multi)`` of type ``t`` (-1: no tree),
    chosen as in :func:`index_choose`."""
    frontier_refresh(fr, frc, frm, free, cap, vm_count, usable, chg)
    if frm[0] <= frm[2]:
        ms = _frontier_candidates(fr, frc, frm, n_active, k)
        ms.sort()
        return _top_k_among(code, w, free, cap, vm_count, d, multi, ms, k, out, out_keys)
    if t >= 0:
        return tree_top_k(
            tkey, tact, tdem, tmulti, tseen, t, code, w, free, cap, vm_count, usable, chg, fr, n_active, k, out,
            out_keys,
        )  # fmt: skip
    return int(top_k(code, w, free, cap, vm_count, usable, d, multi, n_active, k, out, out_keys))


@_jit
def _top_k_among(code: int, w: np.ndarray, free: np.ndarray, cap: np.ndarray, vm_count: np.ndarray, d: np.ndarray,
                 multi: bool, ms: np.ndarray, k: int, out: np.ndarray, out_keys: np.ndarray) -> int:  # fmt: skip
    """The top-``k`` feasible actions on machines ``ms`` (ascending), inserted in action order as the scan does."""
    KN = free.shape[1]
    n = 0
    for i in range(ms.shape[0]):
        m = ms[i]
        for j in range(1 if multi else KN):
            if not K.fits(free, d, multi, m, j):
                continue
            s0, s1, s2 = score_key(code, w, free, cap, vm_count, d, multi, m, j)
            n = topk_insert(out_keys, out, n, k, s0, s1, s2, m * KN + j)
    return n


@_jit
def tree_choose(
    tkey: np.ndarray,
    tact: np.ndarray,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    tseen: np.ndarray,
    t: int,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    chg: np.ndarray,
    fr: np.ndarray,
    n_active: int,
) -> int:
    """:func:`~dcplace.policies.numa_heuristics.choose` for a request of type ``t``, from its tree (the frontier
    ``fr`` current)."""
    refresh(tkey, tact, tdem, tmulti, tseen, t, code, w, free, cap, vm_count, usable, chg, fr)
    node = _best_below(tkey[t], tact[t], n_active)
    return -1 if node < 0 else int(tact[t, node])


@_jit
def tree_top_k(
    tkey: np.ndarray,
    tact: np.ndarray,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    tseen: np.ndarray,
    t: int,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    chg: np.ndarray,
    fr: np.ndarray,
    n_active: int,
    k: int,
    out: np.ndarray,
    out_keys: np.ndarray,
) -> int:
    """:func:`~dcplace.policies.numa_heuristics.top_k` for a request of type ``t`` (the frontier ``fr`` current):
    the ``k`` best machines from the tree (each taken out of it in turn, then put back from the state), their
    actions scored in action order."""
    refresh(tkey, tact, tdem, tmulti, tseen, t, code, w, free, cap, vm_count, usable, chg, fr)
    tk = tkey[t]
    ta = tact[t]
    KN = free.shape[1]
    P = ta.shape[0] // 2
    ms = np.empty(k, np.int64)
    got = 0
    saved = np.empty(3)
    while got < k:
        node = _best_below(tk, ta, n_active)
        if node < 0 or ta[node] < 0:
            break
        m = ta[node] // KN
        ms[got] = m
        got += 1
        leaf = P + m  # take the machine out: its leaf loses, ancestors re-pull
        ta[leaf] = -1
        tk[leaf, :] = np.inf
        up = leaf // 2
        while up >= 1 and _pull(tk, ta, up):
            up //= 2
    d = tdem[t]
    multi = tmulti[t]
    for i in range(got):  # put them back from the state
        _update(tk, ta, code, w, free, cap, vm_count, usable, d, multi, ms[i], saved)
    ms = ms[:got]
    ms.sort()
    return _top_k_among(code, w, free, cap, vm_count, d, multi, ms, k, out, out_keys)


@_jit
def run_episode_indexed(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    cap_prefix: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    acc: np.ndarray,
    chg: np.ndarray,
    ip: np.ndarray,
    fp: np.ndarray,
    demand: np.ndarray,
    multi: np.ndarray,
    oversize: np.ndarray,
    price: np.ndarray,
    ev_req: np.ndarray,
    ev_dep: np.ndarray,
    req_type: np.ndarray,
    tkey: np.ndarray,
    tact: np.ndarray,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    tseen: np.ndarray,
    fr: np.ndarray,
    frc: np.ndarray,
    frm: np.ndarray,
) -> int:
    """:func:`~dcplace.policies.numa_heuristics.run_episode` with the index answering both "does anything fit"
    and the decision (``req_type[r]``: request ``r``'s tree, -1 for the scan). Same transitions, same decisions."""
    dr = np.empty(demand.shape[1])
    while True:
        status = K.advance(
            free, cap_prefix, vm_count, used, pm_of, node_of, ctr, acc, chg, ip, fp, demand, multi, oversize, ev_req,
            ev_dep,
        )  # fmt: skip
        if status != K.DECIDE:
            return status
        r = ctr[K.C_PENDING]
        t = req_type[r]
        for q in range(dr.shape[0]):
            dr[q] = demand[r, q]
        while True:
            a = index_choose(
                tkey, tact, tdem, tmulti, tseen, fr, frc, frm, t, code, w, free, cap, vm_count, usable, chg, dr,
                multi[r], ctr[K.C_ACTIVE],
            )  # fmt: skip
            if a >= 0:
                break
            if not K.expand_or_end(ctr, ip):
                return K.TERMINATED
        ctr[K.C_REQ] = r
        ctr[K.C_STATUS] = K.DECIDE
        K.apply_action(free, cap_prefix, vm_count, used, pm_of, node_of, ctr, acc, chg, demand, multi, price, a)


F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def _root(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory (a read-only view handed to a policy names its state's own log)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _distinct_rows(rows: npt.NDArray[np.float64]) -> tuple[F64, I64, I64]:
    """``np.unique(rows, axis=0, return_inverse=True, return_counts=True)`` (rows in lexicographic order) by a
    numeric lexsort of the columns: the same answer, about 10x faster than unique's structured sort here."""
    n = len(rows)
    if n == 0:
        return rows[:0], np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort(rows.T[::-1])
    sr = rows[order]
    new = np.ones(n, np.bool_)
    new[1:] = np.any(sr[1:] != sr[:-1], axis=1)
    group = np.cumsum(new) - 1
    inverse = np.empty(n, np.int64)
    inverse[order] = group
    return sr[new], inverse, np.bincount(group).astype(np.int64)


class HeuristicIndex:
    """The index of one compiled heuristic (``code``, weights ``w``) over one state's arrays: the frontier, and a
    tree per request type.

    Bind it to a state with :meth:`bind` (the simulator's or the engine's ``free``, ``cap``, ``vm_count``,
    ``usable`` and change log ``chg``); a different state (other arrays, or grown ones) empties it. Types get a tree
    the first time they are asked for, up to ``max_types`` (beyond: the scan, when the frontier does not answer).
    """

    def __init__(self, code: int, w: npt.NDArray[np.float64], max_types: int = MAX_TYPES) -> None:
        if code == RANDOM:
            raise ValueError("random has no index: its draws follow the scan order")
        self.code = code
        self.w = w
        self.max_types = max_types
        self._state: tuple[np.ndarray, ...] = ()
        self._types: dict[tuple[float, float, bool], int] = {}
        self._trace: tuple[object, npt.NDArray[np.int64]] | None = None
        self._empty_trees(0)
        self.fr = np.zeros((FR_ROWS, 0), np.int64)
        self.frc = np.zeros((2, 1), np.int64)
        self.frm = np.zeros(3, np.int64)

    def _empty_trees(self, machines: int) -> None:
        # Room for max_types trees at once: np.zeros maps untouched pages lazily, so only the trees built cost memory.
        P = 1
        while P < machines:
            P *= 2
        T = self.max_types
        try:
            self.tkey = np.zeros((T, 2 * P, 3))  # (T, 2P, 3)
            self.tact = np.zeros((T, 2 * P), np.int64)  # (T, 2P)
        except MemoryError:  # address space, not memory: the system refuses to map it at all (it was a traceback)
            raise InputError(
                f"the best-fit capacity index for {machines:,} machines reserves {human_bytes(T * 2 * P * 32)} of "
                "address space (filled only as VM types appear), more than this system maps: use fewer machines",
                field="pms",
            ) from None
        self.tdem = np.zeros((T, 2))  # (T, 2)
        self.tmulti = np.zeros(T, np.bool_)  # (T,)
        self.tseen = np.zeros(T, np.int64)  # (T,)

    def bind(
        self,
        free: npt.NDArray[np.float64],
        cap: npt.NDArray[np.float64],
        vm_count: npt.NDArray[np.int64],
        usable: npt.NDArray[np.bool_],
        chg: npt.NDArray[np.int64],
    ) -> None:
        """Point the index at a state. The change log names the state: the same log (by identity) and shape keep
        the trees (the other arrays may be fresh views of the same memory, as views handed to a policy are); another
        log empties the index. The capacity classes are read here: ``cap`` must not change while bound (the
        simulator never changes it; the engine starts a new log when it adds or removes a machine)."""
        state = (free, cap, vm_count, usable, chg)
        if self._state and _root(self._state[4]) is _root(chg) and self._state[0].shape == free.shape:
            self._state = state
            return
        self._state = state
        self._types = {}
        self._trace = None
        M = free.shape[0]
        self._empty_trees(M)
        _, cls = np.unique(cap.reshape(M, -1), axis=0, return_inverse=True)
        cls = cls.ravel().astype(np.int64)
        members = np.argsort(cls, kind="stable").astype(np.int64)
        C = int(cls.max()) + 1 if M else 0
        self.fr = np.zeros((FR_ROWS, M), np.int64)
        self.fr[FR_CLS] = cls
        self.fr[FR_MEMBERS] = members
        self.fr[FR_RANK, members] = np.arange(M)
        self.fr[FR_WHERE] = -1
        self.frc = np.zeros((2, C + 1), np.int64)
        self.frc[0, 1:] = np.cumsum(np.bincount(cls, minlength=C))
        # behind by more than the log: rebuilt when first asked
        self.frm = np.array([0, chg[0] - len(chg), FRONTIER_MAX], np.int64)

    def type_of(self, d: npt.NDArray[np.float64], multi: bool) -> int:
        """The tree for request ``(d, multi)``, made on first use (built when first asked); -1 past the cap."""
        key = (float(d[0]), float(d[1]), bool(multi))
        t = self._types.get(key)
        if t is not None:
            return t
        t = len(self._types)
        if t >= self.max_types:
            return -1
        self._types[key] = t
        self.tdem[t] = key[0], key[1]
        self.tmulti[t] = key[2]
        chg = self._state[4]
        self.tseen[t] = chg[0] - len(chg)  # behind by more than the log: built when first asked
        return t

    def usable_for(self, view: NumaView) -> bool:
        """Bind to ``view``'s state and say whether the index should answer for it: the state keeps a change log
        and has at least :data:`INDEX_MIN_MACHINES` machines (below, the scan is
        as fast)."""
        if view.changes is None or view.free.shape[0] < INDEX_MIN_MACHINES:
            return False
        self.bind(view.free, view.capacity, view.vm_count, view.usable, view.changes)
        return True

    def types_for(self, demand: npt.NDArray[np.float64], multi: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """``(n,)`` the tree of each request of a trace (-1: none), the most frequent types first."""
        if self._trace is not None and self._trace[0] is demand:
            return self._trace[1]
        kinds, inverse, counts = _distinct_rows(np.c_[demand, multi.astype(np.float64)])
        out = np.full(len(kinds), -1, np.int64)
        for i in np.argsort(-counts, kind="stable"):
            out[i] = self.type_of(kinds[i, :2], bool(kinds[i, 2]))
        got = np.ascontiguousarray(out[inverse])
        self._trace = (demand, got)
        return got

    def arrays(self) -> tuple[F64, I64, F64, npt.NDArray[np.bool_], I64, I64, I64, I64]:
        """``(tkey, tact, tdem, tmulti, tseen, fr, frc, frm)`` for the compiled functions."""
        return self.tkey, self.tact, self.tdem, self.tmulti, self.tseen, self.fr, self.frc, self.frm

    def choose(self, d: npt.NDArray[np.float64], multi: bool, n_active: int) -> int:
        """The heuristic's action for ``(d, multi)`` on the bound state (-1: nothing fits)."""
        t = self.type_of(d, multi)
        free, cap, vm_count, usable, chg = self._state
        return int(
            index_choose(*self.arrays(), t, self.code, self.w, free, cap, vm_count, usable, chg, d, multi, n_active)
        )

    def top_k(
        self,
        d: npt.NDArray[np.float64],
        multi: bool,
        n_active: int,
        k: int,
        out: npt.NDArray[np.int64],
        out_keys: npt.NDArray[np.float64],
    ) -> int:
        """The heuristic's ``k`` best actions for ``(d, multi)`` into ``out`` / ``out_keys``; returns how many."""
        t = self.type_of(d, multi)
        free, cap, vm_count, usable, chg = self._state
        return int(
            index_top_k(
                *self.arrays(), t, self.code, self.w, free, cap, vm_count, usable, chg, d, multi, n_active, k, out,
                out_keys,
            )
        )  # fmt: skip
