#!/usr/bin/env bash
# Trains the five learned schedulers of the paper regime's Table 2 (cvd-rl, cvd-rl-machine, schedrl, padrl,
# hindsight) at 50 PMs / 50 % warm start with the commands that made the shipped `*-50pm-paper.pt` files
# (docs/cvd-rl.md, "Tables 2-4 in the paper's regime"), for other training seeds, so that the learned methods'
# numbers come with a spread over training runs, not only over evaluation episodes. Evaluate the results with
#   python benchmarks/eval_cvd_seeds.py --runs results/train/cvd-paper-seeds
# Needs ../shared/data/huawei-east-1. Usage: scripts/train_cvd_regime_seeds.sh SEED [SEED ...]
# (one process per seed at a time; run two seeds in two shells on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1
PY=${PY:-.venv/bin/python}
DC=${DC:-.venv/bin/dcplace}
OUT=${OUT:-results/train/cvd-paper-seeds}
ROWS="10000 15000"
for SEED in "$@"; do
  D="$OUT/seed$SEED"
  mkdir -p "$D"
  cat > "$D/padrl.toml" <<TOML
[dqn]
loss = "machine"
batch = 1024
zero_init = true
eval_every = 2
lr = 1e-4
train_start_range = [10000, 15000]
TOML
  cat > "$D/hindsight.toml" <<TOML
[dqn]
batch = 128
learning_starts = 64
updates_per_epoch = 32
episodes_per_epoch = 2
lr = 1e-3
zero_init = true
eval_every = 2
train_start_range = [10000, 15000]
TOML
  $PY benchmarks/train_cvd_regime.py --loss cluster --rows $ROWS --epochs 10 --eval-every 2 --skip-eval \
    --seed "$SEED" --out "$D/cvd-rl" > "$D/cvd-rl.log" 2>&1
  $PY benchmarks/train_cvd_regime.py --loss machine --zero-init --lr 1e-4 --rows $ROWS --epochs 12 --eval-every 2 \
    --skip-eval --seed "$SEED" --out "$D/cvd-rl-machine" > "$D/cvd-rl-machine.log" 2>&1
  $PY benchmarks/train_cvd_regime.py --kind schedrl --rows $ROWS --epochs 10 --eval-every 2 --skip-eval \
    --seed "$SEED" --out "$D/schedrl" > "$D/schedrl.log" 2>&1
  $DC train padrl --regime paper --epochs 6 --config "$D/padrl.toml" --seed "$SEED" --out "$D/padrl" \
    > "$D/padrl.log" 2>&1
  $DC train hindsight --regime paper --epochs 4 --config "$D/hindsight.toml" --seed "$SEED" --out "$D/hindsight" \
    > "$D/hindsight.log" 2>&1
done
