#!/usr/bin/env bash
# Train the six Nara agents shipped in src/dcplace/data/nara/ (alpha and beta x uniform, azure, alibaba; 150 PPO
# iterations each, the paper's budget) and copy each run's best-validating policy.pt into the package. Azure starts
# from the same topology's uniform agent (--init): from scratch it stays at random-policy acceptance (docs/nara.md).
# Two runs at a time, one torch thread each. Usage: scripts/train_shipped_nara.sh [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
ITER=${1:-150}
export OMP_NUM_THREADS=1
mkdir -p results/train src/dcplace/data/nara
train() {  # topology dataset [init checkpoint]
  local out="results/train/nara-$1-$2"
  rm -rf "$out"
  .venv/bin/dcplace train nara --topology "$1" --dataset "$2" --iterations "$ITER" --seed 0 --out "$out" \
    ${3:+--init "$3"} > "$out.log" 2>&1
  cp "$out/policy.pt" "src/dcplace/data/nara/$1-$2.pt"
}
train alpha uniform & train alpha alibaba & wait
train alpha azure results/train/nara-alpha-uniform/policy.pt & train beta uniform & wait
train beta azure results/train/nara-beta-uniform/policy.pt & train beta alibaba & wait
ls -l src/dcplace/data/nara
