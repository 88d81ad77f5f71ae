#!/usr/bin/env bash
# Build the *peer* environment for the speed comparison against HuggingFace
# transformers' (deprecated) Graphormer. This venv is separate from ours on
# purpose: nothing in it is a dependency of molsepnorm.
#
#   bash scripts/peer/setup_hf_env.sh [VENV_DIR]      (default: <repo>/.peer-venv)
#
# Safe to run again: an existing venv is reused, pinned packages that are already
# installed are left alone, and the Cython build is only redone when missing.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV_DIR="${1:-$REPO_ROOT/.peer-venv}"
PYTHON_BIN="${PYTHON_BIN:-python3.11}"

# Pins. torch must come first and pinned: an unpinned torch (or one pulled in as a
# dependency of transformers) would fetch the multi-GB CUDA build.
TORCH_PIN="torch==2.13.0"
TRANSFORMERS_PIN="transformers==4.57.6"
# algos_graphormer.pyx sets no language_level; Cython 0.29.x compiles it as is.
CYTHON_PIN="Cython==0.29.37"
# Cython 0.29.37 builds it against numpy 2 headers too (checked: 2.2.6, 2.4.6, and
# 1.26.4); we pin the numpy our own venv uses, so both sides run the same numpy.
NUMPY_PIN="numpy==2.4.6"
OGB_PIN="ogb==1.3.6"
RDKIT_PIN="rdkit==2026.9.1"   # the RDKit our own venv uses

# shellcheck source=scripts/venv_lib.sh
. "$REPO_ROOT/scripts/venv_lib.sh"
make_venv peer-setup "$VENV_DIR" "$PYTHON_BIN"

# 1) torch alone, first (the CPU wheel on disk satisfies the pin).
quiet_pip "$TORCH_PIN"
# 2) the rest, with torch and numpy pinned again so no resolver step swaps them.
# (setuptools: pyximport builds through it; python>=3.12 venvs no longer ship it)
quiet_pip "$TORCH_PIN" "$NUMPY_PIN" "$CYTHON_PIN" "$TRANSFORMERS_PIN" "$OGB_PIN" "$RDKIT_PIN" setuptools

# 3) Build the Cython extension once, so no timing ever includes compilation.
#    The collator module runs pyximport at import time; the bench script points
#    pyximport's build folder into the venv, and later imports reuse the .so.
echo "[peer-setup] building/loading algos_graphormer (pyximport, build dir $VENV_DIR/pyxbld)"
mkdir -p "$VENV_DIR/pyxbld"
LOG="$VENV_DIR/pyxbld/prepare.log"
if ! "$PY" "$REPO_ROOT/scripts/peer/hf_graphormer_bench.py" --prepare >"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "[peer-setup] Cython build / smoke test FAILED (log: $LOG)" >&2
    exit 1
fi
grep "^\[peer-setup\]" "$LOG"

"$PY" - <<'PYEOF'
import sys, importlib.metadata as md
import torch, numpy, transformers, Cython, ogb, rdkit
print("[peer-setup] versions:")
print(f"  python       {sys.version.split()[0]}")
for name, mod in [("torch", torch), ("transformers", transformers), ("Cython", Cython),
                  ("numpy", numpy), ("ogb", ogb), ("rdkit", rdkit)]:
    print(f"  {name:<12} {getattr(mod, '__version__', md.version(name))}")
PYEOF
