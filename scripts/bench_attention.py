"""Time forward + backward of a Graphormer-slim layer stack with several attention kernels.

    python scripts/bench_attention.py [--batch 256 --nodes 40 --layers 12 --repeats 5 --compile]
    python scripts/bench_attention.py --short-rows [--batch 26 --threads 1]

The stack is molsepnorm's own :class:`~molsepnorm.nn.graphormer.GraphormerLayer` (SepNorm,
pre-LN, dropout 0.1 everywhere, training mode) with only the attention kernel swapped;
the attention bias (B, H, N+1, N+1) requires a gradient, as in the model, where the
spatial and edge encodings are learned.  Padding is realistic: graph sizes are drawn
uniformly from [N/2, N] and padded keys carry -inf.

Variants:
  math        softmax(Q K^T / sqrt(d) + bias) V written out, softmax in float32 (model "math")
  sdpa        F.scaled_dot_product_attention(q, k, v, attn_mask=bias)          (model "sdpa")
  baddbmm     the math variant with the scale and the bias add fused into one baddbmm
  sdpa-nograd sdpa with a bias that needs no gradient: shows what a learned bias costs
  compile     torch.compile of the math stack (with --compile; cold compile time excluded)

``--short-rows`` times only the softmax over the last dimension, forward + backward on
(B, H, L, L) scores for L = 4..32: ``torch.softmax`` against
:func:`molsepnorm.nn.attention.softmax_last`, which pads rows shorter than one SIMD vector.

Variants run round robin; wall-clock min / median and the process CPU time are printed.
On a machine shared with other jobs, prefer ``--threads 1`` and the CPU-time column:
two OpenMP threads stall whenever another process holds one of the two cores.
"""
from __future__ import annotations

import argparse
import math
import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from molsepnorm.nn.attention import CPU_SOFTMAX_MIN_WIDTH, BiasedSelfAttention, softmax_last
from molsepnorm.nn.graphormer import GraphormerConfig, GraphormerLayer

Kernel = Callable[[Tensor, Tensor, Tensor, Tensor, float], Tensor]  # q, k, v (B, H, L, d), bias, p -> (B, H, L, d)


def _baddbmm(q: Tensor, k: Tensor, v: Tensor, bias: Tensor, p: float) -> Tensor:
    B, H, L, d = q.shape
    scores = torch.baddbmm(bias.reshape(B * H, L, L), q.reshape(B * H, L, d), k.reshape(B * H, L, d).transpose(1, 2),
                           alpha=1.0 / math.sqrt(d))  # (B*H, L, L)
    att = F.dropout(torch.softmax(scores, -1), p, training=p > 0)
    return (att @ v.reshape(B * H, L, d)).view(B, H, L, d)


class _KernelAttention(BiasedSelfAttention):
    """BiasedSelfAttention whose kernel is a free function (benchmark only)."""

    def __init__(self, base: BiasedSelfAttention, kernel: Kernel):
        super().__init__(base.qkv.in_features, base.num_heads, base.dropout)
        self.kernel = kernel

    def forward(self, x: Tensor, bias: Tensor) -> Tensor:
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = self.kernel(q, k, v, bias, self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(B, L, D))


class Stack(nn.Module):
    def __init__(self, cfg: GraphormerConfig, kernel: Kernel | None = None):
        super().__init__()
        self.layers = nn.ModuleList(GraphormerLayer(cfg) for _ in range(cfg.num_layers))
        if kernel is not None:
            for layer in self.layers:
                layer.attn = _KernelAttention(layer.attn, kernel)
        for layer in self.layers:
            layer.reset_parameters()

    def forward(self, x: Tensor, bias: Tensor, mask: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, bias, mask)
        return x


def make_inputs(B: int, N: int, H: int, D: int, seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(N // 2, N + 1, (B,), generator=g)
    sizes[0] = N
    node_mask = torch.arange(N).view(1, N) < sizes.view(B, 1)  # (B, N)
    mask = torch.cat([torch.ones(B, 1, dtype=torch.bool), node_mask], 1)  # (B, L)
    x = torch.randn(B, N + 1, D, generator=g)
    bias = torch.randn(B, H, N + 1, N + 1, generator=g).masked_fill(~mask.view(B, 1, 1, N + 1), float("-inf"))
    return x, bias, mask


def step(stack: nn.Module, x: Tensor, bias: Tensor, mask: Tensor) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one forward + backward."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = stack(x, bias * 1.0 if bias.requires_grad else bias, mask)  # non-leaf bias, as in the model
    out.float().square().mean().backward()
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    stack.zero_grad(set_to_none=True)
    return dt, dc


def short_rows(batch: int, heads: int, repeats: int) -> None:
    """Softmax forward + backward on (batch, heads, L, L) for small L: torch's kernel against softmax_last."""
    print(f"softmax over the last dim, forward + backward, B={batch}, H={heads}, {torch.get_num_threads()} "
          f"threads, CPU capability {torch.backends.cpu.get_cpu_capability()}, rows padded below "
          f"{CPU_SOFTMAX_MIN_WIDTH}, torch {torch.__version__}")
    print(f"{'L':>3} {'torch.softmax us':>16} {'softmax_last us':>15} {'ratio':>6}")
    for L in (4, 6, 8, 10, 12, 14, 15, 16, 20, 24, 32):
        x = torch.randn(batch, heads, L, L)
        x[..., L - L // 4:] = float("-inf")  # padded keys, as in a batch
        x.requires_grad_(True)
        g = torch.randn(batch, heads, L, L)
        best = {}
        for name, f in (("torch", lambda s: torch.softmax(s, dim=-1)), ("ours", softmax_last)):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(50):
                    f(x).backward(g)
                times.append((time.perf_counter() - t0) / 50)
            best[name] = min(times)
        print(f"{L:>3} {best['torch'] * 1e6:>16.0f} {best['ours'] * 1e6:>15.0f} {best['torch'] / best['ours']:>5.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--nodes", type=int, default=40, help="padded atoms per graph, N (L = N + 1)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=80)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile (cold compile ~40 s)")
    ap.add_argument("--short-rows", action="store_true", help="time only the softmax of short rows (see above)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.short_rows:
        short_rows(args.batch, args.heads, args.repeats)
        return

    cfg = GraphormerConfig(vocab="zinc", atom_dims=[28], bond_dims=[4], num_layers=args.layers,
                           hidden_dim=args.hidden, ffn_dim=args.hidden, num_heads=args.heads)
    x, bias, mask = make_inputs(args.batch, args.nodes, args.heads, args.hidden)
    bias_grad = bias.clone().requires_grad_(True)

    variants: list[tuple[str, nn.Module, Tensor]] = [
        ("math", Stack(cfg), bias_grad),
        ("sdpa", Stack(GraphormerConfig(**{**cfg.to_dict(), "attention": "sdpa"})), bias_grad),
        ("baddbmm", Stack(cfg, _baddbmm), bias_grad),
        ("sdpa-nograd", Stack(GraphormerConfig(**{**cfg.to_dict(), "attention": "sdpa"})), bias),
    ]
    if args.compile:
        compiled = torch.compile(Stack(cfg))
        t0 = time.perf_counter()
        compiled(x, bias_grad * 1.0, mask).sum().backward()
        print(f"(torch.compile cold start: {time.perf_counter() - t0:.1f} s)")
        variants.append(("compile", compiled, bias_grad))

    print(f"forward+backward, {args.layers} layers, B={args.batch}, L={args.nodes + 1}, H={args.heads}, "
          f"D={args.hidden}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"{'variant':<12} {'wall min ms':>11} {'wall med ms':>11} {'cpu min ms':>10} {'wall vs math':>12}")
    # round robin, so that load from other processes hits every variant alike; the CPU
    # time of the process is reported too: on a shared machine it is the steadier figure
    walls: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    for r in range(args.warmup + args.repeats):
        for name, stack, b in variants:
            dt, dc = step(stack.train(), x, b, mask)
            if r >= args.warmup:
                walls[name].append(dt)
                cpus[name].append(dc)
    ref = min(walls["math"])
    for name in walls:
        w = sorted(walls[name])
        print(f"{name:<12} {w[0] * 1e3:>11.1f} {w[len(w) // 2] * 1e3:>11.1f} {min(cpus[name]) * 1e3:>10.1f} "
              f"{w[0] / ref:>11.2f}x")


if __name__ == "__main__":
    main()
