"""Data layer: vocabularies, the graph of sets, readers and datasets."""
from geomol.data.blocks import Block, BlockGraph
from geomol.data.vocab import VOCAB, BlockVocab

__all__ = ["Block", "BlockGraph", "BlockVocab", "VOCAB"]
