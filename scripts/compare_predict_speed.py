"""``predict`` speed against chemprop v2's, as a user runs both: CLIs, defaults, one input file.

    bash scripts/peer/setup_chemprop_env.sh            # once: .chemprop-venv/ (chemprop 2.3.1)
    python scripts/compare_predict_speed.py --n 20000 --out speed.json

The input is ``--n`` SMILES of ogbg-molhiv (``mapping/mol.csv.gz`` under
``$MOLSEPNORM_DATA``, else ``../shared/data``), repeated in order until there are enough,
without the ones RDKit cannot parse (chemprop stops at the first such row), written once
as a CSV with a ``smiles`` column. chemprop needs a trained model to predict: the script
trains one with chemprop's defaults but three epochs (``--epochs 3``, past its two
warm-up epochs) on molhiv's first 2,000
molecules (its architecture, hence its speed, is the default's whatever it learned). Then
each command runs in a fresh process, one after another, ``--repeats`` times, and its wall
time is recorded (start-up, model loading, featurization, the model, writing the CSV):

* ``chemprop predict -i in.csv -s smiles --model-paths RUN -o out.csv``;
* ``molsepnorm predict in.csv`` with the default model (``hiv-activity``, three members)
  and the default ``--workers auto`` (on two or more CPUs, featurization in a second process);
* the same with ``--workers 0`` (featurization in the model's process);
* ``molsepnorm predict in.csv -m <one member's .pt>``: one model, as chemprop's default is.

No thread setting is passed to either tool: each runs as it does by default (molsepnorm
one torch thread, chemprop torch's default). Every output must hold one row per input.
JSON at ``--out``: commands, wall times, molecules/s, the ratios to chemprop's time,
versions and machine. docs/benchmarks.md holds the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
from rdkit import Chem, RDLogger

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_chemprop import REPO, run, versions  # noqa: E402  (the same subprocess runner)


def molhiv_table(data_root: Path) -> pd.DataFrame:
    frame = pd.read_csv(data_root / "ogbg_molhiv" / "mapping" / "mol.csv.gz")
    RDLogger.DisableLog("rdApp.*")
    try:
        ok = frame["smiles"].map(lambda s: Chem.MolFromSmiles(s) is not None)
    finally:
        RDLogger.EnableLog("rdApp.*")
    return frame[ok].reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="SMILES to predict")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each command (the median is reported)")
    parser.add_argument("--chemprop", default=str(REPO / ".chemprop-venv" / "bin" / "chemprop"))
    parser.add_argument("--ours-python", default=sys.executable)
    parser.add_argument("--data-root", default=os.environ.get("MOLSEPNORM_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--work", default=None, help="folder for inputs, models and outputs (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="JSON report")
    args = parser.parse_args()
    if not Path(args.chemprop).exists():
        raise SystemExit(f"{args.chemprop} not found: run `bash scripts/peer/setup_chemprop_env.sh` first")

    from molsepnorm.checkpoint import resolve_models

    table = molhiv_table(Path(args.data_root))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        smiles = (table["smiles"].tolist() * (args.n // len(table) + 1))[:args.n]
        source = work / "input.csv"
        pd.DataFrame({"smiles": smiles}).to_csv(source, index=False)
        table.head(2000).rename(columns={"HIV_active": "y"})[["smiles", "y"]].to_csv(work / "train.csv", index=False)
        env = dict(os.environ)
        run([args.chemprop, "train", "-i", str(work / "train.csv"), "-s", "smiles", "--target-columns", "y",
             "-t", "classification", "--epochs", "3", "-o", str(work / "chemprop-run")], work / "chemprop-train.log", env)

        member = str(resolve_models("hiv-activity")[0])
        ours = [args.ours_python, "-m", "molsepnorm", "predict", str(source), "--no-progress", "--preview", "0"]
        outputs = {name: work / f"{name}.csv" for name in ("chemprop", "ours", "ours-w0", "ours-one")}
        commands = {  # name: (command, the CSV it writes)
            "chemprop (one model)": ([args.chemprop, "predict", "-i", str(source), "-s", "smiles", "--model-paths",
                                      str(work / "chemprop-run"), "-o", str(outputs["chemprop"])], outputs["chemprop"]),
            "molsepnorm, hiv-activity (default, 3 members)": (ours + ["--out", str(outputs["ours"])], outputs["ours"]),
            "molsepnorm, hiv-activity, --workers 0": (ours + ["--workers", "0", "--out", str(outputs["ours-w0"])],
                                                      outputs["ours-w0"]),
            "molsepnorm, one member": (ours + ["-m", member, "--out", str(outputs["ours-one"])], outputs["ours-one"]),
        }
        rows: list[dict[str, Any]] = []
        for name, (command, output) in commands.items():
            seconds = [run(command, work / "predict.log", env) for _ in range(args.repeats)]
            written = len(pd.read_csv(output))
            if written != args.n:
                raise SystemExit(f"{name}: {written} rows for {args.n} inputs")
            wall = statistics.median(seconds)
            rows.append({"tool": name, "command": command, "seconds": seconds, "wall_s": wall,
                         "mol_per_s": args.n / wall, "rows": written})
    peer = rows[0]["wall_s"]
    for row in rows:
        row["time_vs_chemprop"] = row["wall_s"] / peer
        print(f"{row['tool']:48s} {row['wall_s']:7.1f} s  {row['mol_per_s']:7.0f} mol/s  "
              f"{row['time_vs_chemprop']:.2f}x chemprop's time", flush=True)
    if args.out:
        report = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "n": args.n, "repeats": args.repeats,
                  "input": f"ogbg-molhiv SMILES RDKit parses ({len(table):,}), repeated in order",
                  "results": rows, "versions": versions(args.chemprop, args.ours_python),
                  "machine": {"platform": platform.platform(), "cores": os.cpu_count()}}
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
