"""The CUDA path: the same model on a GPU as on a CPU, bf16 training whose checkpoints
reload on a CPU-only machine (with the companion models blended in), resume with the GPU's
dropout stream, pretraining; the regression blend monitored on the GPU's predictions.

Every test here needs a CUDA GPU and is skipped without one (CI has none); they were
run on a lent GPU machine (docs/benchmarks.md, "GPU").
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from molsepnorm.checkpoint import Checkpoint
from molsepnorm.chem import featurize
from molsepnorm.data.collate import collate_graphs
from molsepnorm.encodings import GraphormerEncoding
from molsepnorm.nn.graphormer import Graphormer, GraphormerConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
MOLECULES = ["CC(=O)Oc1ccccc1C(=O)O", "CC(=O)[O-].[Na+]", "C", "c1ccc2ccccc2c1", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C",
             "N" + "C(=O)c1ccc(cc1)N" * 12]


def batch_of(smiles: list[str]):
    encode = GraphormerEncoding()
    return collate_graphs([encode(featurize(s, vocab="ogb")) for s in smiles], multi_hop_max_dist=5)


@pytest.mark.parametrize("norm", ["sep", "share"])
def test_the_model_on_cuda_computes_what_it_computes_on_a_cpu(norm):
    """fp32 eval outputs agree to float tolerance; under bf16 autocast they stay close; a
    training step on the GPU gives every parameter a finite gradient."""
    torch.manual_seed(0)
    model = Graphormer(GraphormerConfig(vocab="ogb", norm=norm, num_layers=4, hidden_dim=64, ffn_dim=64,
                                        num_heads=8, num_tasks=2))
    batch = batch_of(MOLECULES)
    model.train()
    with torch.no_grad():  # running statistics away from their defaults
        for _ in range(3):
            model(batch)
    model.eval()
    with torch.no_grad():
        on_cpu = model(batch)
        gpu = model.to("cuda")
        on_gpu = gpu(batch.to("cuda")).cpu()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            in_bf16 = gpu(batch.to("cuda")).float().cpu()
    torch.testing.assert_close(on_gpu, on_cpu, rtol=1e-4, atol=1e-4)
    assert torch.isfinite(in_bf16).all()
    scale = on_cpu.abs().max()
    assert (in_bf16 - on_cpu).abs().max() < 0.05 * scale

    gpu.train()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = gpu(batch.to("cuda")).float().pow(2).mean()
    loss.backward()
    for name, p in gpu.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def _train_args(csv: Path, out: Path, epochs: int = 2) -> dict:
    return {"data.dataset": str(csv), "train.epochs": epochs, "train.batch_size": 32, "train.seed": 5,
            "train.device": "cuda", "train.checkpoint_every_steps": 3, "train.checkpoint_every_seconds": 0,
            "train.progress": False, "train.threads": 1}


def test_a_bf16_gpu_run_reloads_and_predicts_on_a_cpu(tmp_path, write_tpsa_csv):
    from molsepnorm.inference import evaluate_checkpoint
    from molsepnorm.predict import Predictor
    from molsepnorm.train.api import train
    from molsepnorm.train.config import load_experiment_config

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    run = tmp_path / "run"
    result = train(load_experiment_config(TINY, _train_args(csv, run, epochs=4)), out=run, console=False)
    assert "cuda" in (run / "train.log").read_text()
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    # the blend is scored after every epoch on the GPU's predictions and picks the epoch kept
    blend = [row["val_blend_mae"] for row in result.history]
    assert all(np.isfinite(blend)) and blend[result.best_epoch - 1] == min(blend)

    for name in ("best.pt", "last.pt"):  # weights, optimizer state, RNG streams: all saved as CPU tensors
        tensors = list(_tensors(torch.load(run / name, weights_only=True)))  # no map_location
        assert len(tensors) > 20 and all(t.device.type == "cpu" for t in tensors), name

    # the test split scored on a CPU in fp32 against the GPU's bf16 figure from the same run
    report = evaluate_checkpoint(run / "best.pt", split="test", device="cpu")
    results = json.loads((run / "results.json").read_text())
    assert results["companion"]["counts"] == "raw" and "tpsa" in results["companion"]["weights"]  # group contributions
    assert report["metrics"]["mae"] == pytest.approx(results["test"]["mae"], rel=0.03)

    smiles = MOLECULES[:5]
    on_cpu = Predictor.load(run / "best.pt", device="cpu").predict(smiles)
    on_gpu = Predictor.load(run / "best.pt", device="cuda").predict(smiles)
    a, b = on_cpu["tpsa"].to_numpy(float), on_gpu["tpsa"].to_numpy(float)
    assert np.isfinite(b).all()
    np.testing.assert_allclose(b, a, rtol=0.02, atol=0.02 * np.abs(a).max())

    # evaluate on the GPU scores what predict writes there: both fp32, not a bf16 variant of it
    from molsepnorm.checkpoint import checkpoint_data
    from molsepnorm.inference import Runner

    assert Runner.from_checkpoint(Checkpoint.load(run / "best.pt"), "cuda").bf16 is False
    on_gpu_report = evaluate_checkpoint(run / "best.pt", split="test", device="cuda")
    _, splits = checkpoint_data(Checkpoint.load(run / "best.pt"), None, "test")
    test_smiles = [splits.smiles[int(i)] for i in splits.split_indices["test"]]
    truth = torch.cat([g.y for g in splits.test]).view(-1).numpy()
    predicted = Predictor.load(run / "best.pt", device="cuda").predict(test_smiles)["tpsa"].to_numpy(float)
    assert on_gpu_report["metrics"]["mae"] == pytest.approx(float(np.abs(predicted - truth).mean()), rel=1e-5)


def test_resume_on_cuda_continues_the_gpu_dropout_stream(tmp_path, interrupt_training, write_tpsa_csv):
    """Interrupted at step 7 (last.pt at step 6) and resumed: the same losses and metrics as
    an uninterrupted run, up to the GPU's non-deterministic summation order.  A resume
    that lost the CUDA generator's state would draw other dropout masks and move the
    losses by far more than that."""
    from molsepnorm.train.api import resume, train
    from molsepnorm.train.config import load_experiment_config

    csv = write_tpsa_csv(tmp_path / "tpsa300.csv")
    full = train(load_experiment_config(TINY, _train_args(csv, tmp_path / "full")), out=tmp_path / "full",
                 console=False)
    with interrupt_training(7):
        train(load_experiment_config(TINY, _train_args(csv, tmp_path / "cut")), out=tmp_path / "cut", console=False)
    last = Checkpoint.load(tmp_path / "cut" / "last.pt").training_state
    assert last["progress"]["step"] == 6 and "cuda" in last["rng"][0]

    resumed = resume(tmp_path / "cut", console=False)
    assert resumed.steps == full.steps
    for a, b in zip(full.history, resumed.history):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-3)
        assert b["val_mae"] == pytest.approx(a["val_mae"], rel=1e-3)
    assert resumed.test["mae"] == pytest.approx(full.test["mae"], rel=1e-3)


def test_pretraining_on_cuda_writes_an_encoder_that_loads_on_a_cpu(tmp_path):
    from molsepnorm.pretrain import load_pretrain_config, pretrain

    config = load_pretrain_config(TINY, {
        "corpus.corpus": "nci", "corpus.limit": 600, "corpus.chunk_size": 300, "pretrain.threads": 1,
        "pretrain.progress": False, "pretrain.log_every": 10, "pretrain.max_steps": 30, "pretrain.device": "cuda",
        "pretrain.motif_environments": 64})
    result = pretrain(config, out=tmp_path / "pre", console=False)
    assert result.steps == 30
    assert result.history[-1]["loss"] < result.history[0]["loss"]
    encoder = Checkpoint.load(tmp_path / "pre" / "encoder.pt")
    assert all(t.device.type == "cpu" for t in encoder.state_dict.values())
    assert all(torch.isfinite(t).all() for t in encoder.state_dict.values() if t.is_floating_point())


def test_a_classification_gpu_run_blends_its_companion_and_predicts_the_same_on_a_cpu(tmp_path, write_tpsa_csv):
    """The default classification path on a GPU: the fingerprint companion is fitted (on the
    CPU, from the training split) and blended into ``best.pt``; that checkpoint's
    probabilities on a CPU agree with the GPU's, and the regression run of the test above
    records its group-contribution weights too."""
    from molsepnorm.predict import Predictor
    from molsepnorm.train.api import train
    from molsepnorm.train.config import load_experiment_config

    csv = write_tpsa_csv(tmp_path / "polar300.csv", binary=True)
    run = tmp_path / "run"
    train(load_experiment_config(TINY, _train_args(csv, run, epochs=3)), out=run, console=False)
    results = json.loads((run / "results.json").read_text())
    assert results["companion"]["molecules"] > 100
    assert 0 < results["companion"]["weights"]["polar"] < 1
    state = Checkpoint.load(run / "best.pt").state_dict
    assert any(key.startswith("companion.") for key in state)

    smiles = MOLECULES[:5]
    on_cpu = Predictor.load(run / "best.pt", device="cpu").predict(smiles)
    on_gpu = Predictor.load(run / "best.pt", device="cuda").predict(smiles)
    a, b = on_cpu["polar"].to_numpy(float), on_gpu["polar"].to_numpy(float)
    assert ((b >= 0) & (b <= 1)).all()
    np.testing.assert_allclose(b, a, atol=0.02)
