"""Chemistry of what was read: atom interaction roles, per-atom contact features and the contact scorer's recipe,
ligand-only features (Morgan counts and descriptors), the covalent graph of a molecule (bonds from a file or
perceived from distances) and the checks of prediction inputs that a reader accepts but a model must not be given
(flat ligands, clashes, a protein passed as ligand). It reads :mod:`geomol.data.io`'s structures and molecules and
builds nothing: complexes and poses (:mod:`geomol.data.complexes`, :mod:`geomol.data.posing`) sit above it."""
