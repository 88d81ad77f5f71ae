"""Self-supervised objectives on a Graphormer encoder: masked atoms and graph-token InfoNCE.

* **Masked-atom prediction** (Hu et al., "Strategies for Pre-training Graph Neural
  Networks", ICLR 2020, attribute masking): in each molecule ``mask_rate`` of the atoms
  (at least one) have their atom-feature embedding replaced by a learned mask vector
  (their degree and every structural encoding stay); a linear head on the final atom
  states predicts the masked atoms' type (the first atom column) or every atom column,
  with a cross-entropy loss per column (``mask_targets="context"`` adds one more: the
  atom's environment with its bonded neighbours as a hashed class, after GROVER; and
  ``atom_head="mlp"`` puts a small decoder between the atom states and the logits).
  With ``atom_loss="all"`` the visible atoms are predicted too (reconstructed), their
  loss averaged with the masked atoms': without it the final states of visible atoms need
  not keep their own chemistry, and a readout of the atom states (``cls+sum``) fine-tunes
  from a worse start than from random weights.
* **Contrastive** (InfoNCE, van den Oord et al. 2018; as in SimCSE, Gao et al. 2021, and
  GraphCL, You et al. 2020): each molecule of the batch appears in two views, which differ
  by their random masks (``mask``), atoms left out (``drop_nodes``) and the model's
  dropout; the graph tokens go through a two-layer projection head, are L2-normalized,
  and view 1 of molecule i must pick view 2 of molecule i among the batch's view-2
  embeddings (and the other way round):

      L = 1/2 [CE(Z1 Z2^T / tau, I) + CE(Z2 Z1^T / tau, I)].

* ``both``: ``masked_weight * L_masked + contrastive_weight * L_contrastive``, the masked
  atoms of both views being predicted.
* **Motifs** (GROVER's graph-level task, Rong et al. 2020), added to any of the above with
  ``motif_weight`` > 0: a linear head on the readout the fine-tuning head reads (the graph
  token, with the atom sum under ``readout="cls+sum"``) predicts how often each of RDKit's
  functional-group patterns occurs (:mod:`molsepnorm.chem.motifs`), as ``log(1 + count)``
  with a squared error, from the same (masked) forward pass; with ``motif_environments``
  > 0 it also predicts the counts of the molecule's hashed radius-0/1 atom environments.
* **Descriptors** (ChemBERTa-2's multitask regression, Ahmad et al. 2022; MolBERT's
  PhysChemPred), added with ``descriptor_weight`` > 0: another linear head on the same
  readout predicts RDKit's 2D descriptors (:mod:`molsepnorm.chem.descriptors`), each
  standardized by the mean and spread of a reference sample of the corpus
  (:meth:`PretextModel.set_descriptor_scale`), with a squared error.

The two views are one batch of 2B molecules, so every step is one forward pass of the
encoder (:meth:`Graphormer.encode <molsepnorm.nn.graphormer.Graphormer.encode>`, the
path every prediction takes) and DDP sees a single forward per backward.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from molsepnorm.chem.descriptors import descriptor_names, descriptor_values
from molsepnorm.chem.motifs import motif_names, motif_targets
from molsepnorm.data.collate import GraphBatch
from molsepnorm.nn.graphormer import Graphormer
from molsepnorm.pretrain.config import PretrainOptions


def stack_views(batch: GraphBatch, views: int) -> GraphBatch:
    """``views`` copies of a batch as one batch of ``views * B`` molecules: copy ``v`` of
    molecule ``i`` is row ``v * B + i`` (its edge ids shifted into its own copy of ``edge_attr``)."""
    if views == 1:
        return batch
    E = batch.edge_attr.size(0)
    paths = [torch.where(batch.edge_path >= 0, batch.edge_path + v * E, batch.edge_path) for v in range(views)]
    return GraphBatch(
        x=batch.x.repeat(views, 1, 1), node_mask=batch.node_mask.repeat(views, 1),
        degree=batch.degree.repeat(views, 1), spd=batch.spd.repeat(views, 1, 1),
        edge_attr=batch.edge_attr.repeat(views, 1), edge_path=torch.cat(paths, 0),
        num_nodes=batch.num_nodes.repeat(views), y=None if batch.y is None else batch.y.repeat(views, 1),
        smiles=None if batch.smiles is None else batch.smiles * views,
    )


def graph_targets(graph: Any, options: PretrainOptions) -> np.ndarray:
    """The graph-level targets of a featurized molecule (a ``MolGraph``), from its SMILES:
    its motif targets (:func:`~molsepnorm.chem.motifs.motif_targets`) when the objective
    uses motifs, then its descriptors (:func:`~molsepnorm.chem.descriptors.descriptor_values`)
    when it uses those: (M + environments + K,) float32."""
    parts: list[np.ndarray] = []
    if options.uses_motifs:
        parts.append(motif_targets(graph.smiles, options.motif_environments))
    if options.uses_descriptors:
        parts.append(descriptor_values(graph.smiles))
    return np.concatenate(parts)


#: Smallest spread a descriptor is divided by: one that is (nearly) constant in the reference
#: sample (radicals in a corpus of neutral molecules) keeps its deviations in log units.
DESCRIPTOR_MIN_SCALE = 0.1


def choose_atoms(real: Tensor, rate: float, at_least: int, keep: int) -> Tensor:
    """A random subset of each molecule's real atoms: ``round(rate * n)`` of its ``n``,
    at least ``at_least``, leaving at least ``keep`` unchosen; real (B, N) bool -> (B, N) bool.

    Drawn from torch's global generator (its state is in ``last.pt``).
    """
    n = real.sum(1, keepdim=True)  # (B, 1)
    k = torch.clamp(torch.round(n.float() * rate).long(), min=at_least)
    k = torch.minimum(k, (n - keep).clamp(min=0))
    scores = torch.rand(real.shape, device=real.device).masked_fill(~real, 2.0)  # padding sorts last
    rank = scores.argsort(1).argsort(1)  # (B, N): 0 = smallest score of the row
    return (rank < k) & real


def info_nce(z1: Tensor, z2: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    """Symmetric InfoNCE of paired embeddings z1, z2 (B, D), L2-normalized here:
    ``(loss, accuracy)``, accuracy being the fraction of rows whose partner scores highest."""
    z1, z2 = F.normalize(z1, dim=-1), F.normalize(z2, dim=-1)
    logits = z1 @ z2.t() / temperature  # (B, B)
    labels = torch.arange(z1.size(0), device=z1.device)
    loss = 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels))
    accuracy = (logits.argmax(1) == labels).float().mean()
    return loss, accuracy


class PretextModel(nn.Module):
    """The encoder with the pretext heads of the configured objective.

    ``forward(batch)`` returns ``(loss, parts)``: the scalar training loss and a dict of
    detached scalars for the log (``masked_loss``, ``masked_acc``, ``masked_atoms``,
    ``visible_loss``, ``visible_acc``, ``contrastive_loss``, ``contrastive_acc``,
    ``motif_loss``, ``descriptor_loss``; those of the objective only).  The
    encoder's own task head takes no part and is frozen; every other encoder parameter
    enters the loss (with a zero weight where an objective does not read it), so DDP
    finds a gradient for each.

    Args:
        encoder: the Graphormer to pretrain (its weights are what a fine-tuning reads).
        options: the objective and its settings.
    """

    def __init__(self, encoder: Graphormer, options: PretrainOptions) -> None:
        super().__init__()
        self.encoder = encoder
        self.options = options
        D = encoder.config.hidden_dim
        encoder.head.requires_grad_(False)
        self.views = 2 if options.uses_contrastive else 1
        self.masks = options.uses_masked or (options.uses_contrastive and "mask" in options.augment)
        self.drops = options.uses_contrastive and "drop_nodes" in options.augment
        atom_dims = list(encoder.config.atom_dims or [])
        self.target_columns = [0] if options.mask_targets == "type" else list(range(len(atom_dims)))
        self.target_dims = [atom_dims[c] for c in self.target_columns]
        if options.mask_targets == "context":  # one more softmax: the atom's hashed environment
            self.target_columns.append(len(atom_dims))
            self.target_dims.append(CONTEXT_CLASSES)
            # fixed random codes of (neighbour element, bond type): not learned, not saved
            codes = torch.randint(0, _PRIME, (CONTEXT_TOKENS,), generator=torch.Generator().manual_seed(20200)).long()
            self.register_buffer("context_codes", codes, persistent=False)
        self.mask_token = nn.Parameter(torch.empty(D)) if self.masks else None
        out = sum(self.target_dims)
        self.atom_head = None if not options.uses_masked else (
            nn.Linear(D, out) if options.atom_head == "linear" else nn.Sequential(nn.Linear(D, D), nn.GELU(),
                                                                               nn.Linear(D, out)))
        self.projection = (nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, D))
                           if options.uses_contrastive else None)
        self.motifs = len(motif_names()) + options.motif_environments if options.uses_motifs else 0
        self.motif_head = nn.Linear(encoder.head.in_features, self.motifs) if options.uses_motifs else None
        self.descriptor_head = None
        if options.uses_descriptors:
            K = len(descriptor_names())
            self.descriptor_head = nn.Linear(encoder.head.in_features, K)
            # saved with the heads, so that a resume standardizes as the run began; NaN until set
            self.register_buffer("descriptor_center", torch.full((K,), float("nan")))
            self.register_buffer("descriptor_scale", torch.full((K,), float("nan")))
        self.reset_heads()
        self.float()  # as the encoder: float32 whatever torch's default dtype

    def set_descriptor_scale(self, values: np.ndarray) -> None:
        """Standardize the descriptor targets by the mean and standard deviation (at least
        :data:`DESCRIPTOR_MIN_SCALE`) of a reference sample: ``values`` (n, K) from
        :func:`~molsepnorm.chem.descriptors.descriptor_values`, NaN entries ignored."""
        assert self.descriptor_head is not None
        with np.errstate(all="ignore"):  # an all-NaN column gives NaN: centre 0, scale 1 below
            center, scale = np.nanmean(values, 0), np.nanstd(values, 0)
        center = np.where(np.isfinite(center), center, 0.0)
        scale = np.where(np.isfinite(scale), np.maximum(scale, DESCRIPTOR_MIN_SCALE), 1.0)
        self.descriptor_center.copy_(torch.as_tensor(center, dtype=torch.float32))
        self.descriptor_scale.copy_(torch.as_tensor(scale, dtype=torch.float32))

    def reset_heads(self) -> None:
        """N(0, 0.02) weights, zero biases, as the encoder's own initialization."""
        if self.mask_token is not None:
            nn.init.normal_(self.mask_token, std=0.02)
        for module in (self.atom_head, self.projection, self.motif_head, self.descriptor_head):
            if module is None:
                continue
            for layer in module.modules():
                if isinstance(layer, nn.Linear):
                    nn.init.normal_(layer.weight, std=0.02)
                    nn.init.zeros_(layer.bias)

    def heads_state_dict(self) -> dict[str, Tensor]:
        """The pretext heads' weights (not the encoder's): kept in ``last.pt`` for a resume."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith("encoder.")}

    def forward(self, batch: GraphBatch) -> tuple[Tensor, dict[str, Tensor]]:
        opt = self.options
        big = stack_views(batch, self.views)  # (V*B) molecules
        real = big.node_mask  # (V*B, N)
        if self.drops:
            dropped = choose_atoms(real, opt.drop_rate, at_least=0, keep=1)
            big = replace(big, node_mask=real & ~dropped)
        visible = big.node_mask
        features = self.encoder.atom_encoder(big.x)  # (V*B, N, D)
        masked = None
        if self.mask_token is not None:
            masked = choose_atoms(visible, opt.mask_rate, at_least=1, keep=0)
            features = torch.where(masked.unsqueeze(-1), self.mask_token.to(features.dtype), features)
        h = self.encoder.encode(big, atom_features=features)  # (V*B, N+1, D)
        loss = h.float().sum() * 0.0  # every encoder output in the graph (DDP), worth nothing
        parts: dict[str, Tensor] = {}
        if self.atom_head is not None and masked is not None:
            targets = self._atom_targets(big)  # (V*B, N, F) or (V*B, N, F + 1)
            masked_loss, accuracy = self._masked_atoms(h, targets, masked)
            weight = opt.masked_weight if opt.objective == "both" else 1.0
            loss = loss + weight * masked_loss
            parts.update(masked_loss=masked_loss.detach(), masked_acc=accuracy,
                         masked_atoms=masked.sum().detach().float())
            if opt.atom_loss == "all":
                visible_loss, visible_accuracy = self._masked_atoms(h, targets, visible & ~masked)
                loss = loss + weight * visible_loss
                parts.update(visible_loss=visible_loss.detach(), visible_acc=visible_accuracy)
        if self.projection is not None:
            z = self.projection(h[:, 0].float())  # (2B, D)
            B = batch.num_graphs
            contrastive, accuracy = info_nce(z[:B], z[B:], opt.temperature)
            weight = opt.contrastive_weight if opt.objective == "both" else 1.0
            loss = loss + weight * contrastive
            parts.update(contrastive_loss=contrastive.detach(), contrastive_acc=accuracy)
        # the readout a fine-tuning head reads, once for both graph-level heads: (V*B, D) or (V*B, 2D)
        graph_heads = self.motif_head is not None or self.descriptor_head is not None
        readout = self.encoder.readout(h, big).float() if graph_heads else None
        if self.motif_head is not None:
            motif_loss = self._motifs(readout, big)
            loss = loss + opt.motif_weight * motif_loss
            parts.update(motif_loss=motif_loss.detach())
        if self.descriptor_head is not None:
            descriptor_loss = self._descriptors(readout, big)
            loss = loss + opt.descriptor_weight * descriptor_loss
            parts.update(descriptor_loss=descriptor_loss.detach())
        return loss, parts

    def _motifs(self, readout: Tensor, batch: GraphBatch) -> Tensor:
        """Mean squared error of the predicted ``log(1 + count)`` (or count, ``motif_scale``) of every motif; molecules
        whose counts are NaN (unreadable SMILES) are left out."""
        assert self.motif_head is not None
        if batch.y is None:
            raise ValueError("motif pretraining needs each batch's motif counts as y (CorpusStream graph_targets)")
        predicted = self.motif_head(readout)  # (V*B, M)
        target = batch.y[:, :self.motifs].to(predicted.device).float()
        if self.options.motif_scale == "log":
            target = torch.log1p(target)
        return _known_mse(predicted, target)

    def _descriptors(self, readout: Tensor, batch: GraphBatch) -> Tensor:
        """Mean squared error of the standardized descriptors; NaN entries are left out."""
        assert self.descriptor_head is not None
        if batch.y is None:
            raise ValueError("descriptor pretraining needs each batch's descriptors as y (CorpusStream graph_targets)")
        if torch.isnan(self.descriptor_scale).any():
            raise ValueError("descriptor pretraining needs the targets' scale first (set_descriptor_scale)")
        K = self.descriptor_head.out_features
        if batch.y.size(1) != self.motifs + K:
            raise ValueError(f"the batch's graph targets have {batch.y.size(1)} columns, expected {self.motifs} motif "
                             f"targets and {K} descriptors (objectives.graph_targets)")
        predicted = self.descriptor_head(readout)  # (V*B, K)
        target = batch.y[:, self.motifs:].to(predicted.device).float()
        return _known_mse(predicted, (target - self.descriptor_center) / self.descriptor_scale)

    def _atom_targets(self, batch: GraphBatch) -> Tensor:
        """Every atom's target columns: its features (B, N, F), plus its environment class
        with ``mask_targets="context"`` (B, N, F + 1)."""
        if self.options.mask_targets != "context":
            return batch.x
        return torch.cat([batch.x, context_classes(batch, self.context_codes).unsqueeze(-1)], -1)

    def _masked_atoms(self, h: Tensor, atom_targets: Tensor, masked: Tensor) -> tuple[Tensor, Tensor]:
        """Cross-entropy of the chosen atoms' columns (``masked``: (B, N) bool; targets from
        :meth:`_atom_targets`), averaged over columns, and the accuracy on the first column
        (the atom type)."""
        assert self.atom_head is not None
        logits = self.atom_head(h[:, 1:][masked].float())  # (M, sum of the target columns' sizes)
        targets = atom_targets[masked]  # (M, F) or (M, F + 1)
        losses, accuracy = [], torch.zeros((), device=h.device)
        for i, (chunk, column) in enumerate(zip(logits.split(self.target_dims, -1), self.target_columns)):
            target = targets[:, column]
            losses.append(F.cross_entropy(chunk, target))
            if i == 0:
                accuracy = (chunk.argmax(-1) == target).float().mean().detach()
        return torch.stack(losses).mean(), accuracy


def _known_mse(predicted: Tensor, target: Tensor) -> Tensor:
    """Mean squared error over the entries whose target is not NaN (0, in the graph, if none is)."""
    known = ~torch.isnan(target)
    return F.mse_loss(predicted[known], target[known]) if known.any() else predicted.sum() * 0.0


#: Buckets of the hashed atom environments of ``mask_targets="context"``.
CONTEXT_CLASSES = 4096
CONTEXT_TOKENS = 256 * 16  # (element index + 1) * 16 + bond type + 1 stays below this
_PRIME = 2_147_483_647  # 2^31 - 1: sums of a few codes stay far inside int64


def context_classes(batch: GraphBatch, codes: Tensor) -> Tensor:
    """Each atom's environment as one of :data:`CONTEXT_CLASSES` classes: (B, N) long.

    The environment is the atom's own feature columns together with the multiset of its
    bonded neighbours' (element, bond type) pairs, as in GROVER's contextual property
    prediction (Rong et al., NeurIPS 2020), hashed instead of counted into a vocabulary:
    each neighbour pair has a fixed random code (``codes``), the codes of an atom's
    neighbours are summed (order does not matter, multiplicity does), the atom's own
    columns are mixed in, and the result is taken modulo the number of classes.  Unlike
    the columns one softmax each, one class per environment asks the final state of each
    atom for its combination: which hydrogens, charge and aromaticity *with* which neighbours.
    """
    x = batch.x  # (B, N, F)
    adjacent = (batch.spd == 1) & batch.node_mask.unsqueeze(1) & batch.node_mask.unsqueeze(2)  # (B, N, N)
    bond = batch.edge_attr[batch.edge_path[..., 0].clamp(min=0), 0]  # (B, N, N): type of the bond i-j
    token = ((x[..., 0] + 1).unsqueeze(1) * 16 + bond + 1).clamp(max=codes.numel() - 1)  # (B, N, N): j's element
    neighbours = torch.where(adjacent, codes[token], torch.zeros_like(token)).sum(-1) % _PRIME  # (B, N)
    own = torch.zeros_like(neighbours)
    for c in range(x.size(-1)):
        own = (own * 257 + x[..., c] + 1) % _PRIME
    return ((own * 65_537 + neighbours) % _PRIME) % CONTEXT_CLASSES


def describe(options: PretrainOptions) -> str:
    """One line naming the objective, for the log."""
    parts: list[Any] = []
    if options.uses_masked:
        scored = " of every atom" if options.atom_loss == "all" else ""
        parts.append(f"masked atoms ({options.mask_rate:.0%}, predict {options.mask_targets}{scored})")
    if options.uses_contrastive:
        parts.append(f"InfoNCE on the graph token (tau {options.temperature}, views: {', '.join(options.augment)})")
    if options.objective == "both":
        parts = [f"{options.masked_weight} x {parts[0]}", f"{options.contrastive_weight} x {parts[1]}"]
    if options.uses_motifs:
        environments = (f" and {options.motif_environments} buckets of atom environments"
                        if options.motif_environments else "")
        parts.append(f"{options.motif_weight} x functional-group counts{environments} from the readout")
    if options.uses_descriptors:
        parts.append(f"{options.descriptor_weight} x {len(descriptor_names())} RDKit descriptors from the readout")
    return " + ".join(parts)
