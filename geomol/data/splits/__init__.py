"""Splits and clusters: grouped splits with a leakage check (:mod:`~geomol.data.splits.grouped`), protein
clusters consistent across corpus sources (:mod:`~geomol.data.splits.protein_clusters`) and the corpus splits
by cluster (:mod:`~geomol.data.splits.corpus`)."""
