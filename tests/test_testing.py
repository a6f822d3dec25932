"""The equivariance helper itself: its group elements are right, and it fails on functions that break the contract."""
import pytest
import torch

from geomol.testing import INVARIANT, POSITION, VECTOR, assert_equivariant, random_e3, random_orthogonal


@pytest.mark.parametrize("reflect", [False, True])
def test_random_orthogonal_is_orthogonal_with_the_asked_determinant(reflect):
    gen = torch.Generator().manual_seed(0)
    q = random_orthogonal(reflect, generator=gen)
    assert q.dtype == torch.float64
    torch.testing.assert_close(q @ q.T, torch.eye(3, dtype=torch.float64), atol=1e-12, rtol=0)
    assert torch.det(q).item() == pytest.approx(-1.0 if reflect else 1.0, abs=1e-12)
    again = random_orthogonal(reflect, generator=torch.Generator().manual_seed(0))
    assert torch.equal(q, again) and not torch.equal(q, random_orthogonal(reflect, generator=gen))


def test_random_e3_acts_on_positions_and_vectors():
    g = random_e3(True, generator=torch.Generator().manual_seed(1))
    x = torch.randn(4, 3, dtype=torch.float64)
    torch.testing.assert_close(g.act(x, POSITION), x @ g.rotation.T + g.translation)
    torch.testing.assert_close(g.act(x, VECTOR), x @ g.rotation.T)
    assert g.act(x, INVARIANT) is x and g.reflects
    q, t = g  # unpacks as (Q, t)
    assert torch.equal(q, g.rotation) and torch.equal(t, g.translation)


def _centroid_and_spread(x, v):
    return {"centre": x.mean(0), "shift": x - x.mean(0) + v, "spread": (x - x.mean(0)).norm(dim=-1)}


def test_an_equivariant_function_passes():
    x, v = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    assert_equivariant(_centroid_and_spread, {"x": (x, POSITION), "v": (v, VECTOR)},
                       {"centre": POSITION, "shift": VECTOR, "spread": INVARIANT})


@pytest.mark.parametrize("fn, outputs, message", [
    (_centroid_and_spread, {"shift": POSITION}, "shift"),  # a displacement must not translate
    (_centroid_and_spread, {"centre": INVARIANT}, "centre"),
    (lambda x, v: {"cross": torch.linalg.cross(x[0] - x[1], x[2] - x[1])}, {"cross": VECTOR}, "reflect=True"),
    (lambda x, v: {"z": x[:, 2] - x[:, 2].mean()}, {"z": INVARIANT}, "z"),  # depends on orientation
])
def test_a_broken_function_fails(fn, outputs, message):
    x, v = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    with pytest.raises(AssertionError, match=message):
        assert_equivariant(fn, {"x": (x, POSITION), "v": (v, VECTOR)}, outputs)


def test_single_precision_inputs_are_refused():
    with pytest.raises(TypeError, match="float64"):
        assert_equivariant(lambda x: {"x": x}, {"x": (torch.randn(3, 3), POSITION)}, {"x": POSITION})
