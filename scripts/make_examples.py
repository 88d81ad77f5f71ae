"""Write data/examples/molecules.csv and molecules.sdf from data/examples/molecules.smi.

    python scripts/make_examples.py

The CSV holds every record of the .smi (columns ``id,smiles``, the invalid ones too). The
SDF holds the molecules RDKit can read, with 2D coordinates and the name as the title
line, plus one deliberately broken record (an atom line cut short), so that every input
format of ``molsepnorm predict`` has a small example with good and bad records.
"""
from __future__ import annotations

import csv
from pathlib import Path

from rdkit import Chem, rdBase
from rdkit.Chem import AllChem

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "examples"
BROKEN = ("broken_record\n  hand-made: the first atom line is cut short\n\n"
          "  2  1  0  0  0  0  0  0  0  0999 V2000\n    0.0 0.0 0.0 C   0  0\n"
          "    1.2990    0.7500    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n  1  2  1  0\nM  END\n$$$$\n")


def read_smi(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            smiles, _, name = line.strip().partition(" ")
            rows.append((name.strip(), smiles))
    return rows


def main() -> None:
    rows = read_smi(EXAMPLES / "molecules.smi")
    with open(EXAMPLES / "molecules.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["id", "smiles"])
        writer.writerows(rows)
    with open(EXAMPLES / "molecules.sdf", "w", encoding="utf-8") as fh:
        for i, (name, smiles) in enumerate(rows):
            with rdBase.BlockLogs():
                mol = Chem.MolFromSmiles(smiles)
                valid = mol is not None
                if not valid:
                    mol = Chem.MolFromSmiles(smiles, sanitize=False)
            if mol is None:  # a syntax error: no graph to write
                continue
            mol.UpdatePropertyCache(strict=False)
            AllChem.Compute2DCoords(mol)
            mol.SetProp("_Name", name)
            fh.write(Chem.MolToMolBlock(mol, kekulize=valid) + "$$$$\n")
            if i == 2:
                fh.write(BROKEN)
    print(f"wrote {EXAMPLES / 'molecules.csv'} and {EXAMPLES / 'molecules.sdf'}")


if __name__ == "__main__":
    main()
