"""torch.library registrations: ``torch.ops.tessel.matmul``, ``.linear``, ``.softmax`` and
``.flash_attention`` as custom ops, each with a fake (meta) implementation that checks the
arguments as the real one does and returns outputs of the real one's shape, dtype and strides —
what ``torch.compile(fullgraph=True)`` traces. Imported by tessel.ops once torch is there."""

from __future__ import annotations

import math
from typing import Optional

import torch

from . import ops


@torch.library.custom_op("tessel::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return ops._matmul_impl(a, b)


@matmul.register_fake
def _(a, b):
    batch, M, K, N = ops._matmul_shape(torch, a, b)
    return a.new_empty((*batch, M, N))


@torch.library.custom_op("tessel::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None) -> torch.Tensor:
    return ops._linear_impl(x, weight, bias, activation)


@linear.register_fake
def _(x, weight, bias=None, activation=None):
    lead, K, N = ops._linear_shape(torch, x, weight, bias, activation)
    return x.new_empty((*lead, N))


@torch.library.custom_op("tessel::softmax", mutates_args=())
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return ops._softmax_impl(x, dim)


@softmax.register_fake
def _(x, dim=-1):
    d = ops._softmax_dim(torch, x, dim)
    if x.dim() == 0:
        return x.new_empty(())
    moved_shape = list(x.shape)
    moved_shape.append(moved_shape.pop(d))
    y = x.new_empty(moved_shape)
    return y if d == x.dim() - 1 else y.movedim(-1, d)


@torch.library.custom_op("tessel::flash_attention", mutates_args=())
def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    scale: Optional[float] = None) -> tuple[torch.Tensor, torch.Tensor]:
    return ops._attention_impl(q, k, v, causal, scale)


@flash_attention.register_fake
def _(q, k, v, causal=False, scale=None):
    B, H, Hkv, Sq, Sk, D = ops._attention_check(torch, q, k, v, scale)
    o = q.new_empty((B, Sq, H, D)).transpose(1, 2)
    lse = q.new_empty((B, H, Sq), dtype=torch.float32)
    return o, lse


del math
