#!/bin/bash
# The checks that need a CUDA GPU, in one run: the CUDA tests, training-step throughput in
# bf16, a default molhiv training epoch, and a refused second process on one GPU.
#
#   MOLSEPNORM_DATA=/path/to/data bash scripts/gpu_check.sh [OUTDIR]
#
# Writes OUTDIR (default runs/gpu-check): benchmark-cuda.json, molhiv-epoch.log,
# molhiv-epoch.jsonl; run directories go to a temporary folder.  PYTHON picks the
# interpreter (default python3).  Figures from it are in docs/benchmarks.md, "GPU".
set -u
out=${1:-runs/gpu-check}
py=${PYTHON:-python3}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$py" -c "import sys, torch, torch_geometric, rdkit; print('python', sys.version.split()[0], '| torch', torch.__version__,
'| CUDA', torch.version.cuda, '|', torch.cuda.get_device_name(0), '| PyG', torch_geometric.__version__, '| RDKit', rdkit.__version__)"

echo "== CUDA tests"
"$py" -m pytest -q -p no:cacheprovider -rs tests/integration/test_cuda.py tests/unit/inference/test_device.py

echo "== training steps and epochs on CUDA (bf16), zinc-subset and molhiv"
"$py" scripts/benchmark.py --parts train --device cuda --threads 4 --peer-python none --batches 4 --repeats 5 \
    --warmup 3 --out "$out/benchmark-cuda.json"

echo "== a default molhiv epoch on CUDA"
"$py" -m molsepnorm train --dataset molhiv --device cuda --epochs 1 --no-progress --out "$work/molhiv"
cp "$work/molhiv/train.log" "$out/molhiv-epoch.log"
cp "$work/molhiv/metrics.jsonl" "$out/molhiv-epoch.jsonl"

echo "== two processes on one GPU: refused with a clear message"
"$py" -m molsepnorm train --nproc 2 --device cuda --config configs/tiny.yaml --dataset nci-tpsa --epochs 1 \
    --no-progress --out "$work/nproc2" 2>&1 | grep -E "needs a GPU of its own|Error|error" | sort | uniq -c | head -5
echo "== done"
