#!/usr/bin/env bash
# Build the environment a user gets from `pip install molsepnorm`: the package (editable,
# so it runs this checkout's code) and its dependencies, without the test extras
# (pytest, hypothesis, transformers, ...). scripts/compare_chemprop.py times molsepnorm
# in it (--ours-python), as it times chemprop in chemprop's own environment: PyTorch
# Geometric imports transformers whenever it is installed, about half a second of every
# start-up that a user's environment does not pay (docs/accuracy.md).
#
#   bash scripts/setup_user_env.sh [VENV_DIR]   (default: <repo>/.user-venv)
#
# Safe to run again: an existing venv is reused.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${1:-$REPO_ROOT/.user-venv}"
PYTHON_BIN="${PYTHON_BIN:-python3.11}"
TORCH_PIN="torch==2.13.0"  # first and pinned: an unpinned torch resolves to CUDA wheels

# shellcheck source=scripts/venv_lib.sh
. "$REPO_ROOT/scripts/venv_lib.sh"
make_venv user-env "$VENV_DIR" "$PYTHON_BIN"

quiet_pip "$TORCH_PIN"
quiet_pip "$TORCH_PIN" -e "$REPO_ROOT"

"$VENV_DIR/bin/molsepnorm" --help >/dev/null
print_versions user-env torch torch_geometric rdkit ogb numpy scikit-learn transformers
echo "[user-env] ready: $VENV_DIR/bin/python"
