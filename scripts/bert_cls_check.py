"""The SepNorm issue's reproduction: a converted BERT trained 300 steps, then the largest
|[CLS]| of the last hidden state in eval mode against train mode, on the same batch.

    python scripts/bert_cls_check.py [--batch-size 16] [--constant-bn]

``--constant-bn`` keeps a BatchNorm in the first slot (``constant_cls_norm=None``), the
conversion the first-slot rule prevents. Random weights from a config (no download), seed
0, one thread; needs transformers.
"""
from __future__ import annotations

import argparse

import torch


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--constant-bn", action="store_true")
    args = p.parse_args()
    from transformers import BertConfig, BertModel

    from molsepnorm.nn import convert_to_sepnorm

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                                 intermediate_size=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    convert_to_sepnorm(model, verbose=False, **({"constant_cls_norm": None} if args.constant_bn else {}))
    opt = torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=0)

    def batch() -> torch.Tensor:
        ids = torch.randint(0, 1000, (args.batch_size, 32))
        ids[:, 0] = 2
        return ids

    model.train()
    for _ in range(args.steps):
        out = model(input_ids=batch())
        loss = out.last_hidden_state.pow(2).mean() + (out.pooler_output - .5).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    ids = batch()
    with torch.no_grad():
        model.eval()
        in_eval = float(model(input_ids=ids).last_hidden_state[:, 0].abs().max())
        model.train()
        in_train = float(model(input_ids=ids).last_hidden_state[:, 0].abs().max())
    print(f"max |[CLS]| after {args.steps} steps: eval {in_eval:.3g}, train {in_train:.3g} "
          f"(ratio {in_eval / in_train:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
