"""Run a row-wise computation chunk by chunk, recomputing each chunk in the backward pass.

Why: GET's pair-level tensors are large (hundreds of thousands of pairs × heads × channels).
Materialising them whole costs far more in fresh memory (page faults) and cache misses than in
arithmetic; computing them in small chunks that fit in cache, and keeping nothing of them for
the backward pass (each chunk is recomputed there, as in activation checkpointing), is several
times faster on CPU and makes the memory of a layer independent of the number of pairs.

``chunked_recompute(fn, inputs, chunks, outputs)`` evaluates, for every chunk c,
``fn(c.context, *selected_inputs) -> tuple of tensors`` and writes each result into rows
``c.outputs[i]`` of output i (rows no chunk writes stay zero). Each input is selected per chunk
by ``c.inputs[i]``: ``None`` (the whole tensor, e.g. a weight), a ``(start, end)`` row range, or
a LongTensor of rows (a gather). Gradients flow back to every input: row ranges are written,
gathers accumulated with ``index_add_``, whole tensors summed over chunks.

The backward pass is not itself differentiable (no second derivatives through a chunked call).
Where ``fn`` has a hand-written backward (``backward=``), each chunk's gradients come from it instead of
from a recomputation of ``fn`` under autograd; ``forward=`` can then give, per chunk, small results of the
forward pass (``saved``) that this backward reads instead of recomputing them.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import torch

__all__ = ["Chunk", "chunked_recompute"]

Selector = None | tuple[int, int] | torch.Tensor


class Chunk(NamedTuple):
    """One chunk: ``context`` for ``fn``, one selector per input, one row range per output."""

    context: Any
    inputs: tuple[Selector, ...]
    outputs: tuple[tuple[int, int], ...]


def _select(tensor: torch.Tensor, selector: Selector) -> torch.Tensor:
    if selector is None:
        return tensor
    if isinstance(selector, tuple):
        return tensor[selector[0]:selector[1]]
    return tensor.index_select(0, selector)


def _accumulate(grad: torch.Tensor, part: torch.Tensor | None, selector: Selector) -> None:
    if part is None:
        return
    if selector is None:
        grad.add_(part)
    elif isinstance(selector, tuple):
        grad[selector[0]:selector[1]].add_(part)
    else:
        grad.index_add_(0, selector, part)


def _rng_state(device: torch.device):
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def _set_rng_state(device: torch.device, state) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


class _ChunkedRecompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fn, backward, chunks, output_shapes, preserve_rng, saving, *inputs):
        outputs = [inputs[0].new_zeros(shape) for shape in output_shapes]
        rng_states, saved = [], []
        for chunk in chunks:
            if preserve_rng:
                rng_states.append(_rng_state(inputs[0].device))
            parts = fn(chunk.context, *(_select(t, s) for t, s in zip(inputs, chunk.inputs)))
            if saving:
                parts, kept = parts
                saved.append(kept)
            for out, part, (start, end) in zip(outputs, parts, chunk.outputs):
                out[start:end] = part
        ctx.fn, ctx.backward, ctx.chunks, ctx.rng_states = fn, backward, chunks, rng_states
        ctx.saved = saved if saving else [None] * len(chunks)
        ctx.save_for_backward(*inputs)
        return tuple(outputs)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grad_outputs):
        inputs = ctx.saved_tensors
        wanted = ctx.needs_input_grad[6:]
        grads = [torch.zeros_like(t) if need else None for t, need in zip(inputs, wanted)]
        if ctx.backward is not None:
            for chunk, saved in zip(ctx.chunks, ctx.saved):
                selected = [_select(t, s) for t, s in zip(inputs, chunk.inputs)]
                parts = [None if g is None else g[s:e] for g, (s, e) in zip(grad_outputs, chunk.outputs)]
                found = ctx.backward(chunk.context, selected, parts, **({} if saved is None else {"saved": saved}))
                for k, need in enumerate(wanted):
                    if need:
                        _accumulate(grads[k], found[k], chunk.inputs[k])
            return (None, None, None, None, None, None, *grads)
        # Whole-tensor inputs become one leaf each, shared by all chunks.
        shared = [t.detach().requires_grad_(need) if need else t.detach() for t, need in zip(inputs, wanted)]
        for i, chunk in enumerate(ctx.chunks):
            leaves = [shared[k] if s is None else _select(t.detach(), s).requires_grad_(need)
                      for k, (t, s, need) in enumerate(zip(inputs, chunk.inputs, wanted))]
            device = inputs[0].device
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else [],
                                       enabled=bool(ctx.rng_states)), torch.enable_grad():
                if ctx.rng_states:
                    _set_rng_state(device, ctx.rng_states[i])
                parts = ctx.fn(chunk.context, *leaves)
            pairs = [(p, g[s:e]) for p, g, (s, e) in zip(parts, grad_outputs, chunk.outputs)
                     if g is not None and p.requires_grad]
            targets = [leaf for leaf, need in zip(leaves, wanted) if need]
            if not pairs or not targets:
                continue
            found = torch.autograd.grad([p for p, _ in pairs], targets, [g for _, g in pairs], allow_unused=True)
            found = iter(found)
            for k, need in enumerate(wanted):
                if need:
                    _accumulate(grads[k], next(found), chunk.inputs[k])
        return (None, None, None, None, None, None, *grads)


def chunked_recompute(fn: Callable[..., Sequence[torch.Tensor]], inputs: Sequence[torch.Tensor],
                      chunks: Sequence[Chunk], output_shapes: Sequence[tuple[int, ...]],
                      preserve_rng: bool = False, backward: Callable[..., Sequence[torch.Tensor | None]] | None = None,
                      forward: Callable[..., tuple[Sequence[torch.Tensor], Any]] | None = None
                      ) -> tuple[torch.Tensor, ...]:
    """Evaluate ``fn`` chunk by chunk (see the module docstring).

    Args:
        fn: ``fn(context, *selected_inputs)`` → tuple of tensors, one per output.
        inputs: the tensors ``fn`` reads (gradients are returned for those that require them).
        chunks: the chunks, each with its selectors and output row ranges.
        output_shapes: full shape of each output (rows first).
        preserve_rng: replay the random state of each chunk in the backward pass (dropout).
        backward: ``backward(context, selected_inputs, output_grads)`` → one gradient (or None) per input of a
            chunk, written by hand; the backward pass then calls it instead of recomputing ``fn`` under autograd
            (``output_grads``: the chunk's rows of each output's gradient, None where an output has none).
        forward: with ``backward``, ``forward(context, *selected_inputs)`` → (outputs, saved) replaces ``fn`` in
            the forward pass, and each chunk's ``saved`` (anything but None) reaches ``backward(..., saved=saved)``.

    Returns: the outputs, with the dtype and device of ``inputs[0]``.
    """
    if backward is not None and preserve_rng:
        raise ValueError("chunked_recompute: a hand-written backward does not replay random states")
    if forward is not None and backward is None:
        raise ValueError("chunked_recompute: forward= needs a hand-written backward= that reads what it saves")
    return _ChunkedRecompute.apply(forward or fn, backward, list(chunks), [tuple(s) for s in output_shapes],
                                   preserve_rng, forward is not None, *inputs)
