"""Direct policy search for an online NUMA rule in CVD-RL's paper regime (issue 15): the weights of the
``searched-rule`` family (:mod:`dcplace.policies.numa_search`: Best-Fit's key plus terms for memory, NUMA imbalance,
consolidation, slots lost and the room lost for the large request types) found by the cross-entropy method (CEM)
maximising the mean episode length relative to Best-Fit on TRAINING starts (rows [10000, 15000) of seed 0's trace),
checked on validation starts (the same rows, other seeds), reported on held-out starts (VMAgent's rows
[1000, 10000), the episodes of ``benchmarks/eval_cvd_regime.py``) with paired differences and standard errors.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/cvd_policy_search.py --seed 0 --out rule.json

One seeded command: the starts of every generation and the CEM draws follow ``--seed``; episodes are deterministic.
The objective of a weight vector on a generation's starts is ``mean_i (L_i + 50) / (BF_i + 50)`` (L its episode
length, BF Best-Fit's on the same start; the 50 keeps a start where Best-Fit places almost nothing from dominating).
CEM: Gaussian over the weights, mean starting at Best-Fit's (``cpu`` = 1), ``--pop`` draws per generation (the mean
itself among them), the ``--elite`` best refit the mean and standard deviation (smoothed 0.7 / 0.3). After the last
generation, every generation's mean and the best draw seen are scored on ``--val-episodes`` validation starts; the
best there is written to ``--out`` (the rule file ``searched-rule`` loads) and evaluated held out.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.learn.cem import CEM
from dcplace.policies import get_policy
from dcplace.policies.base import NumaPolicy
from dcplace.policies.numa_search import RuleSpec, SearchedRule
from dcplace.sim.episodes import run_episodes
from dcplace.sim.numa import NumaCluster, PreparedTrace, Scenario

TRAIN_ROWS = (10000, 15000)
FLOOR = 50.0


def lengths(
    pol: NumaPolicy, cluster: NumaCluster, p: PreparedTrace, sc: Scenario, n: int, seed: int
) -> npt.NDArray[np.float64]:
    return np.array([r.length for r in run_episodes(pol, cluster, p, sc, n, seed)[0]], float)


def paired(x: npt.NDArray[np.float64], ref: npt.NDArray[np.float64]) -> tuple[float, float]:
    """Mean and standard error of the per-episode relative difference ``x / ref - 1``."""
    d = x / ref - 1
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--pop", type=int, default=16)
    ap.add_argument("--elite", type=int, default=4)
    ap.add_argument("--episodes", type=int, default=16, help="training starts per generation")
    ap.add_argument("--val-episodes", type=int, default=40)
    ap.add_argument("--test-episodes", type=int, default=40)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    t0 = time.perf_counter()
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    cluster = PAPER_REGIME.cluster(50)
    held = PAPER_REGIME.scenario(args.warm)
    train = replace(held, start_range=TRAIN_ROWS)
    spec = RuleSpec.for_trace(p)
    names = spec.feature_names
    rng = np.random.default_rng(args.seed)
    bf, ind = get_policy("best-fit"), get_policy("industrial")
    cem = CEM(np.asarray(spec.weights, float), np.full(len(spec.weights), args.sigma), args.pop, args.elite)
    means = [cem.mean.copy()]
    print(f"# features: {', '.join(names)}")
    for g in range(args.generations):
        seed = 1000 * (args.seed + 1) + g  # this generation's training starts
        ref = lengths(bf, cluster, p, train, args.episodes, seed)
        draws = cem.ask(rng)
        fit = np.empty(len(draws))
        for i, w in enumerate(draws):
            L = lengths(SearchedRule(spec.with_weights(w)), cluster, p, train, args.episodes, seed)
            fit[i] = float(np.mean((L + FLOOR) / (ref + FLOOR)))
        order = cem.tell(draws, fit)
        means.append(cem.mean.copy())
        top = fit[order[: args.elite]].mean()
        print(f"gen {g}: mean-weights {fit[0]:.4f}, best {fit[order[0]]:.4f}, elite mean {top:.4f}"
              f" ({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    # Validation: the same rows, starts no generation used.
    val = replace(train)
    vseed = 999_999 + args.seed
    vref = lengths(bf, cluster, p, val, args.val_episodes, vseed)
    vind = lengths(ind, cluster, p, val, args.val_episodes, vseed)
    cands = {f"mean {g}": w for g, w in enumerate(means)} | {"best draw": cem.best_w}
    vscore = {}
    for label, w in cands.items():
        L = lengths(SearchedRule(spec.with_weights(w)), cluster, p, val, args.val_episodes, vseed)
        vscore[label] = (L.mean(), *paired(L, vref))
        print(f"validation {label}: {L.mean():.1f} ({vscore[label][1]:+.2%} ± {vscore[label][2]:.2%} vs best-fit "
              f"{vref.mean():.1f}; industrial {vind.mean():.1f})")  # fmt: skip
    pick = max(vscore, key=lambda k: vscore[k][1])
    w = cands[pick]
    rule = SearchedRule(spec.with_weights(w))
    # Held out: VMAgent's rows, seed 0 (benchmarks/eval_cvd_regime.py's episodes, extended to --test-episodes).
    test = {h: lengths(get_policy(h), cluster, p, held, args.test_episodes, 0) for h in ("best-fit", "industrial")}
    test["searched-rule"] = lengths(rule, cluster, p, held, args.test_episodes, 0)
    out = {
        "command": "python benchmarks/cvd_policy_search.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()),
        "picked": pick, "wall_s": round(time.perf_counter() - t0, 1),
        "validation": {k: {"mean": v[0], "vs_best_fit": v[1], "se": v[2]} for k, v in vscore.items()},
        "validation_best_fit": float(vref.mean()), "validation_industrial": float(vind.mean()),
        "held_out": {k: float(v.mean()) for k, v in test.items()},
        "held_out_vs_best_fit": paired(test["searched-rule"], test["best-fit"]),
        "held_out_vs_industrial": paired(test["searched-rule"], test["industrial"]),
        "held_out_episodes": args.test_episodes,
    }  # fmt: skip
    args.out.write_text(spec.with_weights(w).to_json(search=out), encoding="utf-8")
    print(f"picked {pick}: " + ", ".join(f"{n}={x:.3f}" for n, x in zip(names, w, strict=True)))
    for k, v in test.items():
        print(f"held out {k}: {v.mean():.1f}")
    print("held out searched-rule vs best-fit {:+.2%} ± {:.2%}, vs industrial {:+.2%} ± {:.2%}".format(
        *out["held_out_vs_best_fit"], *out["held_out_vs_industrial"]))  # fmt: skip
    print(json.dumps({"wall_s": out["wall_s"]}))


if __name__ == "__main__":
    main()
