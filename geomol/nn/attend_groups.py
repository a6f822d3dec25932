"""Driver of ``attend_groups.cpp``: the group and block level of GET's bilevel attention for one chunk, compiled.

:func:`attend_groups` and :func:`attend_groups_backward` compute what :func:`geomol.nn.bilevel_attention._attend`
and :func:`~geomol.nn.bilevel_attention.attend_backward` compute in PyTorch after (before) the per-pair stage and
around the group MLPs: the block softmax β, the coordinate coefficients and the scatter of the updates onto the
receiving atoms, as one pass each instead of some thirty small operations. No autograd; CPU tensors of one float
dtype (see :func:`geomol.nn.native.native_ready`).
"""
from __future__ import annotations

import torch

from geomol.nn import native
from geomol.nn.atom_pairs import PairIndex

__all__ = ["attend_groups", "attend_groups_backward"]

_INDEX_FIELDS = ("group_edge", "group_atom", "edge_block", "edge_pairs", "pair_group", "pair_atom")


def _call(name: str, index: PairIndex, n_head: int, width: int, n_channel: int, tensors: list) -> None:
    """Compiled ``name`` on the chunk ``index`` with ``tensors`` (None: a null pointer) after its sizes and indices;
    ValueError naming the function if it finds an index out of range."""
    dtype = next(t.dtype for t in tensors if t is not None)
    sizes = (index.group_atom.numel(), index.edge_block.numel(), index.n_blocks, index.pair_group.numel(),
             index.n_atoms, n_head, width // n_head, n_channel)
    indices = [getattr(index, field).contiguous() for field in _INDEX_FIELDS]
    pointers = [0 if t is None else t.data_ptr() for t in indices + tensors]
    if native.timed_call(name, native._function(f"{name}_{native._SUFFIX[dtype]}"), *sizes, *pointers):
        raise ValueError(f"{name}: an index of the chunk is out of range")


def attend_groups(index: PairIndex, block_sum: torch.Tensor, b_block: torch.Tensor, update: torch.Tensor,
                  kappa: torch.Tensor, alpha_weight: torch.Tensor, x: torch.Tensor, n_head: int,
                  outputs: bool = True) -> dict[str, torch.Tensor]:
    """The block and group level of the forward pass of one chunk.

    Args:
        index: the chunk (g groups, e edges, p pairs, n receiving atoms).
        block_sum: [g, h] sums of the pairs' block logits; b_block: [1] block-logit bias.
        update: [g, d] node-MLP outputs (h heads of d / h); kappa: [g, h·C] coordinate-MLP outputs.
        alpha_weight: [p, h, C] α · w_c of each pair; x: [p, C, 3] pair vectors.
        outputs: also compute G and ΔZ (without: what the backward pass needs only).

    Returns:
        beta_edge [e, h], beta [g, h] (β of each group's edge), group_coef [g, h, C] (β κ), coef [p, C]
        (Σ_heads α w_c β κ) and, with ``outputs``, G [n, d] (Σ β · update per receiving atom) and dZ [n, C, 3]
        (Σ coef · x).
    """
    (n_groups, h), (p, C) = block_sum.shape, x.shape[:2]
    new = block_sum.new_empty
    out = dict(beta_edge=new(index.edge_block.numel(), h), beta=new(n_groups, h), group_coef=new(n_groups, h, C),
               coef=new(p, C))
    if outputs:
        out.update(G=new(index.n_atoms, update.size(1)), dZ=new(index.n_atoms, C, 3))
    inputs = [t.contiguous() for t in (block_sum, b_block, update, kappa, alpha_weight, x)]
    _call("geomol_attend_groups", index, n_head, update.size(1), C,
          inputs + [out["beta_edge"], out["beta"], out["group_coef"], out["coef"], out.get("G"), out.get("dZ")])
    return out


def attend_groups_backward(index: PairIndex, grad_G: torch.Tensor | None, grad_dZ: torch.Tensor | None,
                           kept: dict[str, torch.Tensor], update: torch.Tensor, kappa: torch.Tensor,
                           alpha_weight: torch.Tensor, x: torch.Tensor, n_head: int) -> dict[str, torch.Tensor | None]:
    """Gradients through :func:`attend_groups`, given grad_G [n, d] and grad_dZ [n, C, 3] (either may be None) and
    ``kept``, its outputs beta_edge, beta, group_coef and coef.

    Returns: x [p, C, 3] (the part through coef), alpha_weight [p, h, C] and kappa [g, h·C] (None without
    grad_dZ), update [g, d] (None without grad_G), block_sum [g, h] and b_block [1]: the gradients, by input name.
    """
    (p, C), (n_groups, d) = x.shape[:2], update.shape
    h = n_head
    new = x.new_empty
    coordinates, features = grad_dZ is not None, grad_G is not None
    grads = dict(x=new(p, C, 3), alpha_weight=new(p, h, C) if coordinates else None,
                 kappa=new(n_groups, h * C) if coordinates else None, update=new(n_groups, d) if features else None,
                 block_sum=new(n_groups, h), b_block=new(1))
    inputs = [None if t is None else t.contiguous() for t in (grad_G, grad_dZ, update, kappa, alpha_weight, x)]
    inputs += [kept[name].contiguous() for name in ("beta_edge", "beta", "group_coef", "coef")]
    _call("geomol_attend_groups_backward", index, h, d, C,
          inputs + [grads[name] for name in ("x", "alpha_weight", "kappa", "update", "block_sum", "b_block")])
    return grads
