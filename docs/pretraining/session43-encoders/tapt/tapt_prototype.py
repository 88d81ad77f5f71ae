"""PROTOTYPE (not committed to the package): task-adaptive pretraining (Gururangan et al. 2020):
continue moses-encoder's pretraining, heads included, on a data set's own training and validation
SMILES (no labels, no test molecules), then fine-tune from it."""
import csv, sys
from pathlib import Path
import torch
from molsepnorm.checkpoint import Checkpoint
from molsepnorm.checkpoint.run_dir import RunDir
from molsepnorm.pretrain import load_pretrain_config
from molsepnorm.pretrain.loop import Pretrainer
from molsepnorm.train.logs import setup_logger, close_logger

data, out, steps, lr = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
source = Path("runs/s43/moses-encoder-again/last.pt")
out.mkdir(parents=True, exist_ok=True)
with open(data) as f:
    smiles = [r["smiles"] for r in csv.DictReader(f) if r["split"] in ("train", "val")]
(out / "corpus.smi").write_text("\n".join(smiles) + "\n")
config = load_pretrain_config("molsepnorm/models/moses-encoder.yaml", {
    "corpus.corpus": str(out / "corpus.smi"), "corpus.chunk_size": 4096, "pretrain.max_steps": steps,
    "pretrain.lr": lr, "pretrain.threads": 2, "pretrain.progress": False, "pretrain.log_every": 50,
    "pretrain.checkpoint_every_steps": 10**6})
rd = RunDir(out / "run"); rd.create()
setup_logger(rd, True, console=True)
trainer = Pretrainer(config, run_dir=rd)
last = Checkpoint.load(source)
trainer.pretext.load_state_dict({**{f"encoder.{k}": v for k, v in last.state_dict.items()},
                                 **last.training_state["pretext_heads"]})
result = trainer.fit()
close_logger()
print(result)
