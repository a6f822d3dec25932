"""Equivariant building blocks: tensors in, tensors out (no other geomol imports, no Lightning)."""
