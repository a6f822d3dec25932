"""Batches for training: deterministic, sharded, resumable batch samplers and the loader that Lightning
checkpoints mid-epoch."""
