#!/usr/bin/env bash
# SepNorm vs ShareNorm, the paper's graph comparison, with two budgets.
#   bash scripts/reproduce.sh cpu    # 2-core CPU budget: zinc-subset (run for docs/results.md), molhiv
#   bash scripts/reproduce.sh full   # the published Graphormer recipes: a GPU job
# Every run is resumable: run the same command again after an interruption.
# Tables: runs/<name>/summary.md (mean ± sample std over seeds).
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-cpu}
seeds=(0 1 2)
case "$budget" in
  cpu)
    # two single-thread processes side by side use both cores
    for pair in "zinc-cpu zinc-subset" "molhiv-cpu molhiv"; do
      set -- $pair
      for norm in sep share; do
        OMP_NUM_THREADS=1 python scripts/compare_norms.py --config "configs/$1.yaml" --dataset "$2" \
          --norms "$norm" --seeds "${seeds[@]}" --out "runs/compare-$1" --no-progress &
      done
      wait
      python scripts/compare_norms.py --config "configs/$1.yaml" --dataset "$2" --seeds "${seeds[@]}" \
        --out "runs/compare-$1" --summary-only
    done
    ;;
  full)
    for pair in "zinc-slim zinc-subset" "molhiv molhiv"; do
      set -- $pair
      python scripts/compare_norms.py --config "configs/$1.yaml" --dataset "$2" --seeds "${seeds[@]}" \
        --device cuda --out "runs/compare-$1"
    done
    ;;
  *) echo "usage: $0 cpu|full" >&2; exit 2 ;;
esac
