"""Whether a data set can be trained on, said before any training: it has targets, and a
training and a validation split (validation picks ``best.pt``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from molsepnorm.errors import DatasetFormatError, MolsepnormError
from molsepnorm.formats import format_suffix


def refuse_unlabelled_file(dataset: Optional[Any]) -> None:
    """A ``.smi`` file has no targets: say so before reading it (and listing its invalid rows).

    Raises:
        MolsepnormError: naming the file and what to give instead.
    """
    from molsepnorm.data.registry import is_smi

    if dataset is not None and is_smi(str(dataset)):
        raise MolsepnormError(f"{dataset} is a SMILES file, without targets, and training fits targets: a .smi file "
                              "holds SMILES and names only: give the targets in a CSV or SD file (a .smi file serves "
                              "pretraining, prediction and analysis)")


def check_trainable(splits: Any) -> None:
    """Refuse a data set without targets, or whose training or validation split is empty:
    validation picks ``best.pt`` (and the companion's blend), so a run without it would end
    with no model.  An empty test split only means no test metrics (logged by the trainer).

    Raises:
        MolsepnormError: an unlabelled data set, with what a file's targets would be.
        DatasetFormatError: an empty split, naming the source, the three sizes and what to do.
    """
    if not splits.labelled:
        hint = ""
        if splits.info.get("format") == "smi":
            hint = (f"; a {format_suffix(splits.source)} file holds SMILES and names only: give the targets in a "
                    "CSV or SD file")
        elif splits.source and Path(splits.source).is_file():
            hint = ("; a file's targets are its other columns (CSV) or the data fields named by --target-columns "
                    "(target_columns=[...] in Python)")
        raise MolsepnormError(f"data set {splits.name!r} is unlabelled (it has no targets): training fits "
                              f"targets; an unlabelled corpus serves pretraining and prediction{hint}")
    sizes = dict(splits.sizes)
    empty = [part for part in ("train", "val") if sizes[part] == 0]
    if not empty:
        return
    total = sum(sizes.values())
    method, fractions = str(splits.info.get("split", "")), splits.info.get("sizes")
    if method.startswith("column"):
        how = f"its split column {method[len('column:'):]!r} gives"
    else:
        how = f"a {method or 'random'} split" + (f" at sizes {tuple(fractions)}" if fractions else "") + " leaves"
    raise DatasetFormatError(
        f"{splits.source}: the {' and '.join(empty)} split{'s are' if len(empty) > 1 else ' is'} empty "
        f"(train {sizes['train']}, val {sizes['val']}, test {sizes['test']} of {total} molecules: {how} no "
        f"{' or '.join(empty)} molecule); training needs both, validation to pick the best epoch. Give more "
        f"molecules, or a split column with train and val rows (--split-by column:NAME)")
