"""The corpus stream: sharding, passes, exact positions, invalid records, and the corpora."""
from __future__ import annotations

import itertools
import warnings
from functools import partial
from pathlib import Path

import pytest
import torch

from molsepnorm.errors import ConfigError, MolsepnormError
from molsepnorm.pretrain.config import CorpusConfig, load_pretrain_config
from molsepnorm.pretrain.corpus import open_corpus
from molsepnorm.pretrain.stream import CorpusStream, Position

REPO = Path(__file__).resolve().parents[3]


def nci_smiles(n: int) -> list[str]:
    return [r.smiles for r in open_corpus(CorpusConfig(corpus="nci")).records(n)]


def write_csv(path: Path, smiles: list[str]) -> Path:
    path.write_text("name,SMILES\n" + "".join(f"m{i},{s}\n" for i, s in enumerate(smiles)))
    return path


def stream(path: Path, rank: int = 0, world: int = 1, invalid=None, **kw) -> CorpusStream:
    corpus = open_corpus(CorpusConfig(corpus=str(path)))
    options = dict(chunk_size=40, batch_size=16, batching="random", seed=3, multi_hop_max_dist=3)
    options.update(kw)
    return CorpusStream(corpus, "ogb", rank=rank, world_size=world, on_invalid=invalid, **options)


def first_pass(s: CorpusStream) -> list[tuple[Position, list[str]]]:
    out = []
    for position, batch in s.batches(s.start()):
        if position.corpus_pass > 0:
            break
        out.append((position, batch.smiles))
    return out


def test_two_processes_share_a_pass_without_overlap_and_nothing_is_lost(tmp_path):
    smiles = nci_smiles(200)
    path = write_csv(tmp_path / "mols.csv", smiles)
    seen = []
    for rank in (0, 1):
        batches = first_pass(stream(path, rank, 2))
        blocks = {p.block for p, _ in batches}
        assert all(b % 2 == rank for b in blocks)
        seen.extend(s for _, batch in batches for s in batch)
    assert sorted(seen) == sorted(smiles)  # every molecule once per pass (all 200 are valid)


def test_a_resumed_stream_yields_the_same_batches(tmp_path):
    path = write_csv(tmp_path / "mols.csv", nci_smiles(120))
    s = stream(path, batching="bucket")
    run = list(itertools.islice(s.batches(s.start()), 25))  # 120 molecules: more than a pass
    assert run[-1][0].corpus_pass >= 1
    for k in (0, 7, 20):  # stopped after batch k: continue from its position
        again = list(itertools.islice(stream(path, batching="bucket").batches(run[k][0]), 25 - k - 1))
        assert [b.smiles for _, b in again] == [b.smiles for _, b in run[k + 1:]]
        for (_, x), (_, y) in zip(again, run[k + 1:]):
            assert torch.equal(x.x, y.x) and torch.equal(x.edge_path, y.edge_path)


def test_graph_targets_travel_with_their_molecules_and_survive_a_resume(tmp_path):
    from molsepnorm.chem.motifs import motif_counts
    from molsepnorm.pretrain.config import PretrainOptions
    from molsepnorm.pretrain.objectives import graph_targets

    graph_motif_counts = partial(graph_targets, options=PretrainOptions(max_steps=1))
    path = write_csv(tmp_path / "mols.csv", nci_smiles(60))
    s = stream(path, graph_targets=graph_motif_counts)
    run = list(itertools.islice(s.batches(s.start()), 6))
    for _, batch in run:
        assert batch.y.shape == (batch.num_graphs, 85)
        for smiles, row in zip(batch.smiles, batch.y):
            assert torch.equal(row, torch.from_numpy(motif_counts(smiles)))
    again = list(itertools.islice(stream(path, graph_targets=graph_motif_counts).batches(run[1][0]), 4))
    for (_, x), (_, y) in zip(again, run[2:]):
        assert torch.equal(x.y, y.y)
    assert next(stream(path).batches(Position()))[1].y is None


@pytest.mark.parametrize("budget, blocks_kept", [(None, 2), ("one block", 0), (0, 0)])
def test_graph_targets_are_computed_once_per_molecule_when_they_fit_the_cache(tmp_path, budget, blocks_kept):
    """Three passes over 80 molecules (two blocks of 40): the targets of the whole corpus fit
    the default budget and are computed in the first pass only; a budget of one block's
    (the second outgrows it: none is kept) or 0 computes them every pass; every batch carries
    its molecules' own."""
    from molsepnorm.chem.motifs import motif_counts, motif_names
    from molsepnorm.pretrain.config import PretrainOptions
    from molsepnorm.pretrain.objectives import graph_targets

    if budget == "one block":
        budget = 40 * len(motif_names()) * 4  # float32 counts

    computed: list[str] = []

    def counted(graph):
        computed.append(graph.smiles)
        return graph_targets(graph, PretrainOptions(max_steps=1))

    path = write_csv(tmp_path / "mols.csv", nci_smiles(80))
    s = stream(path, graph_targets=counted, **({} if budget is None else {"target_cache_bytes": budget}))
    batches = list(itertools.islice(s.batches(s.start()), 18))  # 2 blocks x 3 batches x 3 passes
    assert [p.corpus_pass for p, _ in batches] == [0] * 6 + [1] * 6 + [2] * 6
    for _, batch in batches:
        for smiles, row in zip(batch.smiles, batch.y):
            assert torch.equal(row, torch.from_numpy(motif_counts(smiles)))
    assert len(computed) == 80 + 2 * 40 * (2 - blocks_kept)
    assert len(set(computed)) == 80


def test_a_corpus_that_fits_is_featurized_once_and_streams_as_if_read_every_pass(tmp_path, monkeypatch):
    """120 molecules in three blocks, three passes and a resume: with the graphs kept (the
    default budget) the file is featurized in the first pass only, and every batch is the
    one a stream that keeps nothing yields; over budget, every pass featurizes it again."""
    from molsepnorm.pretrain import stream as stream_module

    featurized: list[int] = []
    real = stream_module.featurized_chunks

    def counting(records, *args, **kwargs):
        for chunk, items in real(records, *args, **kwargs):
            featurized.append(len(chunk))
            yield chunk, items

    monkeypatch.setattr(stream_module, "featurized_chunks", counting)
    path = write_csv(tmp_path / "mols.csv", nci_smiles(120))

    def run(start=None, **kw):
        featurized.clear()
        s = stream(path, batching="bucket", **kw)
        batches = list(itertools.islice(s.batches(start or s.start()), 40))
        return batches, list(featurized)

    def blocks(batches):  # the (pass, block)s the batches come from
        return len({(p.corpus_pass, p.block) for p, _ in batches})

    kept, reads = run()
    assert kept[-1][0].corpus_pass >= 2 and reads == [40, 40, 40]
    plain, plain_reads = run(graph_cache_bytes=0)
    assert plain_reads == [40] * blocks(plain) and blocks(plain) > 6
    from molsepnorm.predict.featurizing import featurize_records

    records = list(open_corpus(CorpusConfig(corpus=str(path))).records())
    total = sum(stream_module.graph_bytes(item.graph) for item in featurize_records(records, "ogb"))
    assert 120 * 1000 < total < 120 * 20_000  # a drug-sized molecule: a few kB
    small, small_reads = run(graph_cache_bytes=total // 2)  # the first block fits, the second does not
    assert small_reads == plain_reads  # then none is kept
    def same(a, b):  # the same position and batch, every tensor equal
        (p, x), (q, y) = a, b
        return p == q and x.smiles == y.smiles and all(
            torch.equal(getattr(x, name), getattr(y, name))
            for name in ("x", "node_mask", "degree", "spd", "edge_attr", "edge_path", "num_nodes"))

    for batches in (plain, small):
        assert len(batches) == len(kept) and all(same(a, b) for a, b in zip(kept, batches))
    start = next(p for p, _ in kept if p.block > 0 and p.batches > 0)  # inside pass 0's second block
    assert start.corpus_pass == 0
    resumed, resumed_reads = run(start)
    # the rest of pass 0 from the block it stopped in; pass 1 featurizes only the blocks before
    # it (the others were kept), and pass 2 comes from memory
    assert resumed[-1][0].corpus_pass >= 2 and resumed_reads == [40] * ((3 - start.block) + start.block)
    after = [i for i, (p, _) in enumerate(kept) if p == start][0] + 1
    assert all(same(a, b) for a, b in zip(resumed, kept[after:]))


def test_passes_shuffle_differently(tmp_path):
    path = write_csv(tmp_path / "mols.csv", nci_smiles(80))
    s = stream(path)
    batches = list(itertools.islice(s.batches(s.start()), 12))  # 2 chunks x 3 batches per pass
    by_pass = [[b.smiles for p, b in batches if p.corpus_pass == k] for k in (0, 1)]
    assert sorted(sum(by_pass[0], [])) == sorted(sum(by_pass[1], []))
    assert by_pass[0] != by_pass[1]


def test_invalid_records_are_reported_once_with_their_line_and_reason(tmp_path):
    smiles = nci_smiles(60)
    smiles[5] = "C1CC"  # unclosed ring
    smiles[50] = "c1cccc1"  # cannot kekulize
    path = write_csv(tmp_path / "bad.csv", smiles)
    reported = []
    s = stream(path, invalid=lambda record, reason: reported.append((record.line, record.smiles, reason)))
    batches = first_pass(s)
    assert [(line, smi) for line, smi, _ in reported] == [(7, "C1CC"), (52, "c1cccc1")]  # header is line 1
    assert all(reason for _, _, reason in reported)
    assert sum(len(b) for _, b in batches) == 58
    # a resume inside the block of record 51 does not report it again
    inside = next(p for p, _ in batches if p.block == 1)
    reported.clear()
    list(itertools.islice(stream(path, invalid=lambda r, why: reported.append(r.line)).batches(inside), 1))
    assert reported == []


def test_a_pass_without_molecules_is_an_error(tmp_path):
    path = write_csv(tmp_path / "bad.csv", ["C1CC", "not a smiles"])
    with pytest.raises(MolsepnormError, match="no molecule"):
        next(stream(path).batches(Position()))
    small = write_csv(tmp_path / "small.csv", nci_smiles(30))  # one chunk: nothing for process 1 of 2
    with pytest.raises(MolsepnormError, match="chunk_size"):
        next(stream(small, rank=1, world=2).batches(Position(0, 1, 0)))


def test_named_and_file_corpora(tmp_path, data_root):
    moses = open_corpus(CorpusConfig(corpus="moses", data_root=str(data_root)))
    first = list(moses.records(3))
    assert [r.index for r in first] == [1, 2, 3] and first[0].line == 2
    assert first[0].smiles == "CCCS(=O)c1ccc2[nH]c(=NC(=O)OC)[nH]c2c1"  # the first row of train.csv.gz
    nci = list(open_corpus(CorpusConfig(corpus="nci")).records(2))
    assert nci[0].smiles == "CC1=CC(=O)C=CC1=O"
    from rdkit import RDConfig

    sdf = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"
    records = list(open_corpus(CorpusConfig(corpus=str(sdf))).records(3))
    assert len(records) == 3 and all(r.mol is not None for r in records)
    with pytest.raises(MolsepnormError, match="named corpora: moses, molhiv, nci"):
        open_corpus(CorpusConfig(corpus="mosez"))
    table = tmp_path / "t.csv"
    table.write_text("name,value\na,1\n")
    with pytest.raises(MolsepnormError, match="no SMILES column"):
        open_corpus(CorpusConfig(corpus=str(table)))


def test_molhiv_corpus_is_its_training_split(data_root):
    from molsepnorm.data.registry import load_dataset

    corpus = open_corpus(CorpusConfig(corpus="molhiv", data_root=str(data_root)))
    records = list(corpus.records())
    splits = load_dataset("molhiv", root=data_root, progress=False)
    assert len(records) == 32_901
    train = set(int(i) for i in splits.split_indices["train"])
    assert all(r.id in train for r in records[:100]) and records[0].smiles == splits.smiles[records[0].id]


def test_a_run_saved_before_the_motif_objective_resumes_without_it():
    """The committed run of docs/pretraining (its config.yaml predates ``motif_weight``) is
    resumed as it was trained, not with today's default; a new configuration has the default."""
    from molsepnorm.pretrain.api import saved_config
    from molsepnorm.config import read_yaml

    raw = read_yaml(REPO / "docs" / "pretraining" / "run-moses-both" / "config.yaml")
    assert "motif_weight" not in raw["pretrain"]
    assert saved_config(raw, "config.yaml").pretrain.motif_weight == 0.0
    assert load_pretrain_config(None, {"corpus.corpus": "nci", "pretrain.max_steps": 5}).pretrain.motif_weight == 1.0
    with pytest.raises(ConfigError, match="pretrain.motif_weight must be >= 0"):
        load_pretrain_config(None, {"corpus.corpus": "nci", "pretrain.max_steps": 5, "pretrain.motif_weight": -1})


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="max_steps or time_budget"):
        load_pretrain_config(None, {"corpus.corpus": "nci"})
    with pytest.raises(ConfigError, match="pretrain.objective must be one of masked, contrastive, both"):
        load_pretrain_config(None, {"corpus.corpus": "nci", "pretrain.max_steps": 5, "pretrain.objective": "mlm"})
    with pytest.raises(ConfigError, match="pretrain.on_nonfinite must be one of stop, skip"):
        load_pretrain_config(None, {"corpus.corpus": "nci", "pretrain.max_steps": 5, "pretrain.on_nonfinite": "nan"})
    with pytest.raises(ConfigError, match="pretrain.augment"):
        load_pretrain_config(None, {"corpus.corpus": "nci", "pretrain.max_steps": 5, "pretrain.augment": ["crop"]})
    with pytest.raises(ConfigError, match="pretrain.lr must be a number, got 'auto'"):  # training's word, not ours
        load_pretrain_config(None, {"corpus.corpus": "nci", "pretrain.max_steps": 5, "pretrain.lr": "auto"})
    from molsepnorm.pretrain.config import PretrainOptions

    for lr in ("auto", "fast"):  # built in Python, past the loader's check of each key's kind
        with pytest.raises(ConfigError, match=f"pretrain.lr must be a number > 0, got '{lr}'"):
            PretrainOptions(max_steps=5, lr=lr).validate()
    with pytest.raises(ConfigError, match="model.vocab is 'zinc' but corpus.vocab is 'ogb'"):
        load_pretrain_config(None, {"corpus.corpus": "nci", "pretrain.max_steps": 5, "model.vocab": "zinc",
                                    "corpus.vocab": "ogb"})
    with pytest.warns(UserWarning, match=r"train: section is for `molsepnorm train`.*lr 0.001 \(pretraining: 0.0005\)"):
        config = load_pretrain_config(REPO / "configs" / "tiny.yaml", {"corpus.corpus": "nci", "pretrain.max_steps": 5})
    assert config.model["hidden_dim"] == 32 and config.vocab == "ogb"  # a training preset gives the model
    with warnings.catch_warnings():  # the options it names, set for pretraining, leave nothing to say
        warnings.simplefilter("error")
        load_pretrain_config(REPO / "configs" / "tiny.yaml", {"corpus.corpus": "nci", "pretrain.max_steps": 5,
                                                             "pretrain.lr": 0.001, "pretrain.device": "cpu",
                                                             "pretrain.warmup_fraction": 0.1})


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "pretrain").glob("*.yaml")), ids=lambda p: p.name)
def test_every_pretraining_preset_is_valid(path):
    from molsepnorm.nn.graphormer import GraphormerConfig
    from molsepnorm.pretrain.loop import resolve_model_config

    config = load_pretrain_config(path)
    assert config.corpus.corpus and (config.pretrain.max_steps or config.pretrain.time_budget)
    GraphormerConfig.from_dict(resolve_model_config(config))
