"""Training without Lightning: the contact scorer's fit (:mod:`~geomol.training.contact_scorer`) and the
ligand-only baselines (:mod:`~geomol.training.ligand_baselines`)."""
