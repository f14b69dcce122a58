#!/usr/bin/env bash
# Train the six Nara agents shipped in src/dcplace/data/nara/ (alpha and beta x uniform, azure, alibaba), two at a
# time (one torch thread each), and copy each run's best-validating policy.pt into the package.
# Azure starts from the same topology's uniform agent (--init): from scratch it stays at random-policy acceptance
# (docs/nara.md). Usage: scripts/train_shipped_nara.sh [ITERATIONS]   (default 100)
set -euo pipefail
cd "$(dirname "$0")/.."
ITER=${1:-100}
export OMP_NUM_THREADS=1
mkdir -p results/train src/dcplace/data/nara
train() {  # topology dataset [init checkpoint]
  local out="results/train/nara-$1-$2"
  rm -rf "$out"
  .venv/bin/dcplace train nara --topology "$1" --dataset "$2" --iterations "$ITER" --seed 0 --out "$out" \
    ${3:+--init "$3"} > "$out.log" 2>&1
  cp "$out/policy.pt" "src/dcplace/data/nara/$1-$2.pt"
  echo "$1-$2: $(python3 -c "import json; d=json.load(open('$out/train.json')); print(round(d['wall_s']), 's, validation', d['validation_acceptance'])")"
}
chain() {  # topology: uniform then azure (from uniform), one after the other
  train "$1" uniform
  train "$1" azure "results/train/nara-$1-uniform/policy.pt"
}
chain alpha & A=$!
train alpha alibaba && train beta alibaba & B=$!
wait $A $B
chain beta
echo "shipped: $(ls src/dcplace/data/nara)"
