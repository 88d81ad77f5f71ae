"""How many molecules of each split of a data set also occur in a pretraining corpus.

Pretraining reads no labels, but a test molecule the encoder has already seen (unlabelled)
is worth knowing about when a fine-tuned figure is read.  Molecules are compared by
RDKit's canonical SMILES.

    python scripts/corpus_overlap.py --data runs/cmp/zinc-subset/data.csv --corpus moses
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Optional


def canonical(smiles: str) -> Optional[str]:
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles)
    return Chem.MolToSmiles(mol) if mol is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="CSV with smiles and split columns (compare_chemprop's data.csv)")
    parser.add_argument("--smiles-column", default="smiles")
    parser.add_argument("--split-column", default="split")
    parser.add_argument("--corpus", required=True,
                        help="the pretraining corpus as `molsepnorm pretrain --corpus` reads it: moses, molhiv, "
                             "nci or a file")
    parser.add_argument("--predictions", nargs="*", default=[],
                        help="predict outputs (CSV with smiles and --target columns) of the test split: their MAE on "
                             "the molecules in the corpus and on the others")
    parser.add_argument("--target", help="the target column of --data and of the predictions")
    parser.add_argument("--out", help="JSON file to write")
    args = parser.parse_args(argv)

    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")
    splits: dict[str, set[str]] = {}
    truth: dict[str, float] = {}
    with open(args.data, newline="") as fh:
        for row in csv.DictReader(fh):
            key = canonical(row[args.smiles_column])
            if key is not None:
                splits.setdefault(row[args.split_column], set()).add(key)
                if args.target and row[args.split_column] == "test":
                    truth[key] = float(row[args.target])
    wanted = set().union(*splits.values())
    found: set[str] = set()
    total = 0
    from molsepnorm.pretrain.config import CorpusConfig
    from molsepnorm.pretrain.corpus import open_corpus

    for record in open_corpus(CorpusConfig(corpus=args.corpus)).records():
        total += 1
        key = canonical(record.smiles)
        if key in wanted:
            found.add(key)
    result = {"command": " ".join(["python", *sys.argv]), "corpus_molecules": total,
              "splits": {name: {"molecules": len(keys), "in_corpus": len(keys & found)}
                         for name, keys in splits.items()}}
    for name, counts in result["splits"].items():
        print(f"{name}: {counts['in_corpus']:,} of {counts['molecules']:,} molecules are in the corpus")
    result["test_mae"] = []
    for path in args.predictions:
        errors: dict[bool, list[float]] = {True: [], False: []}
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                key = canonical(row[args.smiles_column])
                if key in truth and row[args.target] != "":
                    errors[key in found].append(abs(float(row[args.target]) - truth[key]))
        mae = {("in_corpus" if seen else "not_in_corpus"): {"molecules": len(e), "mae": sum(e) / len(e) if e else None}
               for seen, e in errors.items()}
        result["test_mae"].append({"predictions": path, **mae})
        print(f"{path}: test MAE {mae['in_corpus']['mae']} on the {mae['in_corpus']['molecules']} molecules in the "
              f"corpus, {mae['not_in_corpus']['mae']} on the {mae['not_in_corpus']['molecules']} others")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
