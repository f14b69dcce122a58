#!/usr/bin/env bash
# Trains the CVD-RL and SchedRL checkpoints shipped in src/dcplace/data/cvd (50 PMs, 50 % warm start,
# Non-Expansion, releases off, Huawei-East-1; starts from rows [10,000, 220,000) so evaluation rows stay held out).
# Needs ../shared/data/huawei-east-1. Wall times and validation are in each run's train.json (docs/cvd-rl.md).
set -euo pipefail
export OMP_NUM_THREADS=1
DC=${DC:-.venv/bin/dcplace}
OUT=${OUT:-results/train}
$DC train cvd-rl --trace huawei-east-1 --pms 50 --warm-start 0.5 --epochs 200 --seed 0 --out "$OUT/cvd-rl-50pm"
$DC train schedrl --trace huawei-east-1 --pms 50 --warm-start 0.5 --epochs 200 --seed 0 --out "$OUT/schedrl-50pm"
mkdir -p src/dcplace/data/cvd
cp "$OUT/cvd-rl-50pm/policy.pt" src/dcplace/data/cvd/cvd-rl-50pm.pt
cp "$OUT/schedrl-50pm/policy.pt" src/dcplace/data/cvd/schedrl-50pm.pt
# Ours, beyond the paper: the per-machine TD target (docs/cvd-rl.md); batches of 1,024 single-machine rows.
$DC train cvd-rl --trace huawei-east-1 --pms 50 --warm-start 0.5 --epochs 150 --seed 0 --loss machine --batch 1024 \
    --out "$OUT/cvd-rl-machine-50pm"
cp "$OUT/cvd-rl-machine-50pm/policy.pt" src/dcplace/data/cvd/cvd-rl-machine-50pm.pt
