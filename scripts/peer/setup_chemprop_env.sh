#!/usr/bin/env bash
# Build the *peer* environment for the accuracy comparison against chemprop v2
# (scripts/compare_chemprop.py). Separate from ours on purpose: nothing in it is a
# dependency of molsepnorm.
#
#   bash scripts/peer/setup_chemprop_env.sh [VENV_DIR]   (default: <repo>/.chemprop-venv)
#
# Safe to run again: an existing venv is reused and pinned packages already there are
# left alone.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV_DIR="${1:-$REPO_ROOT/.chemprop-venv}"
PYTHON_BIN="${PYTHON_BIN:-python3.11}"

# torch first and pinned: chemprop and lightning ask for an unpinned torch, which would
# otherwise resolve to the newest release and its gigabytes of CUDA packages.
TORCH_PIN="torch==2.13.0"
CHEMPROP_PIN="chemprop==2.3.1"

# shellcheck source=scripts/venv_lib.sh
. "$REPO_ROOT/scripts/venv_lib.sh"
make_venv chemprop-setup "$VENV_DIR" "$PYTHON_BIN"

# 1) torch alone, first (the CPU wheel on disk satisfies the pin).
quiet_pip "$TORCH_PIN"
# 2) chemprop, with torch pinned again in the same resolve so nothing swaps it.
quiet_pip "$TORCH_PIN" "$CHEMPROP_PIN"

# 3) Smoke test: the CLI imports (chemprop imports its C++ featurizer, cuik_molmaker,
#    at import time; a mismatched RDKit fails here rather than in the comparison).
"$VENV_DIR/bin/chemprop" --help >/dev/null

print_versions chemprop-setup torch chemprop lightning rdkit numpy scikit-learn
echo "[chemprop-setup] ready: $VENV_DIR/bin/chemprop"
