"""The compiled loops' cached constants stay usable by autograd after a first use under inference mode (a rollout
before training in one process once made EGNO's temporal convolution fail: "Inference tensors cannot be saved for
backward")."""
from __future__ import annotations

import torch

from geomol.nn import native


def test_a_constant_first_made_in_inference_mode_can_be_saved_for_backward():
    with torch.inference_mode():
        slope = native.constant(0.0123, torch.float64)
    assert not slope.is_inference()

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(slope)
            return x * slope

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.saved_tensors[0]

    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    Scale.apply(x).sum().backward()
    assert torch.allclose(x.grad, torch.full((3,), 0.0123, dtype=torch.float64))
