"""Chemistry of posed complexes: atom interaction roles, per-atom contact features, ligand-only features
(Morgan counts and descriptors) and the checks of prediction inputs that a reader accepts but a model must not
be given (flat ligands, clashes, a protein passed as ligand)."""
