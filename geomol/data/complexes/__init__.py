"""Receptor–ligand complexes as graphs of sets: pocket and interface selection, ligand fragments, building the
:class:`~geomol.data.blocks.BlockGraph` (:mod:`~geomol.data.complexes.build`) and the typed recipe that owns every
choice of how a complex becomes a graph (:class:`~geomol.data.complexes.recipe.ComplexRecipe`)."""
