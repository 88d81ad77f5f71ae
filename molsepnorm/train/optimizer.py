"""AdamW (Loshchilov & Hutter, ICLR 2019) for training and pretraining: PyTorch's fused
kernel, with its per-step bookkeeping done once on CPU.

``make_adamw(params, ...)`` is ``torch.optim.AdamW(params, ..., fused=True)`` on CPU and
CUDA (one kernel updates every parameter, instead of about ten small operations per
tensor).  On CPU it is a :class:`CachedFusedAdamW`.  Before each fused update, PyTorch's
step walks the parameters in Python to collect their gradients and states, groups the
tensors by device and dtype, and adds one to each parameter's step counter, one tensor at
a time (its for-each addition has no CPU kernel).  On the 77 small tensors of the default
model that costs as much as the update itself (figures in ``docs/benchmarks.md``).
:class:`CachedFusedAdamW` keeps those lists between steps and holds the step counters in
one tensor, so that a step is one addition and the fused kernel.  The arithmetic is
PyTorch's own; the tests compare parameters and states bit for bit.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

import torch
from torch import Tensor

__all__ = ["CachedFusedAdamW", "make_adamw"]


class CachedFusedAdamW(torch.optim.AdamW):
    """``torch.optim.AdamW(fused=True)`` with a cheaper step on CPU (see the module docstring).

    The cached path runs when there is one parameter group of CPU tensors of one floating
    dtype, with the options :func:`make_adamw` sets (no amsgrad, maximize, capturable or
    differentiable) and a float learning rate, and every parameter with a gradient has
    its state (PyTorch's step creates it on the first step).  Anything else takes
    PyTorch's step.  Each ``state["step"]`` becomes a view of one counter tensor of the
    parameters with gradients: the state dict holds the same values under the same
    keys, and loads into a stock AdamW.
    """

    def __init__(self, params: Iterable[Any], **kwargs: Any) -> None:
        super().__init__(params, fused=True, **kwargs)
        self._cache: Optional[dict[str, Any]] = None

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._cache = None

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        self._cache = None

    def _cached_lists(self, params: list[Tensor]) -> Optional[dict[str, Any]]:
        """The lists of the cached path for ``params`` (those with gradients), or None
        where it does not apply."""
        group = self.param_groups[0]
        if (group["amsgrad"] or group["maximize"] or group["capturable"] or group["differentiable"]
                or isinstance(group["lr"], Tensor)):
            return None
        if any(p.device.type != "cpu" or p.dtype != params[0].dtype or p.grad.is_sparse for p in params):
            return None
        states = [self.state.get(p) for p in params]
        if any(not s or "exp_avg" not in s for s in states):
            return None  # PyTorch's step creates them
        steps = torch.stack([s["step"].reshape(()) for s in states])  # (P,) float32
        views = [steps[i] for i in range(len(params))]
        for s, view in zip(states, views):
            s["step"] = view
        return {"ids": tuple(map(id, params)), "params": params, "steps": steps, "step_views": views,
                "exp_avgs": [s["exp_avg"] for s in states], "exp_avg_sqs": [s["exp_avg_sq"] for s in states]}

    @torch.no_grad()
    def step(self, closure: Any = None) -> Optional[Tensor]:  # type: ignore[override]
        if closure is not None or len(self.param_groups) != 1:
            self._cache = None
            return super().step(closure)
        group = self.param_groups[0]
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return None
        cache = self._cache
        if cache is None or cache["ids"] != tuple(map(id, params)) \
                or self.state[params[0]].get("step") is not cache["step_views"][0]:
            cache = self._cache = self._cached_lists(params)
            if cache is None:
                return super().step()
        beta1, beta2 = group["betas"]
        cache["steps"].add_(1)  # every counter at once; PyTorch adds to each in turn
        torch._fused_adamw_(cache["params"], [p.grad for p in params], cache["exp_avgs"], cache["exp_avg_sqs"], [],
                            cache["step_views"], amsgrad=False, lr=group["lr"], beta1=beta1, beta2=beta2,
                            weight_decay=group["weight_decay"], eps=group["eps"], maximize=False,
                            grad_scale=None, found_inf=None)
        return None


def make_adamw(params: Iterable[Any], device: torch.device, **kwargs: Any) -> torch.optim.AdamW:
    """AdamW for ``params`` on ``device``: fused on CPU (:class:`CachedFusedAdamW`) and CUDA."""
    if device.type == "cpu":
        return CachedFusedAdamW(params, **kwargs)
    return torch.optim.AdamW(params, fused=device.type == "cuda", **kwargs)
