"""geomol: geometric deep learning on 3D molecular systems (GET, EGNO, the graph of sets)."""
__version__ = "0.1.0"
