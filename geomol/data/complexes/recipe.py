"""How a receptor–ligand complex becomes a graph, as one typed, serialisable object.

A :class:`ComplexRecipe` owns every choice that shapes an affinity model's input graphs: the
pocket cutoff, whether hydrogens are kept and the ligand fragment vocabulary. Datasets and
data modules hold one, training stores ``recipe.to_dict()`` in every checkpoint, shipped models
carry it in their manifest, and prediction rebuilds graphs with ``ComplexRecipe.from_dict(...)``.
So each default is written once, here (the cutoff in :data:`geomol.data.complexes.pocket.DEFAULT_CUTOFF`)::

    recipe = ComplexRecipe(pocket_cutoff=8.0, fragments=FragmentVocab.load("ligand_fragments.json"))
    receptor = recipe.read_receptor("protein.pdb")
    graph = recipe.build(receptor, "ligands.sdf", ligand_index=3)
    model = GETAffinity(num_block_types=recipe.num_block_types)

Serialised form (``to_dict``), version 1::

    {"version": 1, "pocket_cutoff": 10.0, "keep_hydrogens": false, "fragments": null | {FragmentVocab dict}}

Records written before the version field (checkpoints' ``geomol_preprocessing``, shipped
manifests' ``preprocessing``) have the same keys without ``version`` and read as version 1.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Any, Mapping, Sequence

from geomol.data.blocks import BlockGraph
from geomol.data.complexes.fragment import FragmentVocab
from geomol.data.complexes.pocket import DEFAULT_CUTOFF
from geomol.data.vocab import VOCAB, BlockVocab
from geomol.errors import ConfigError, DatasetError, ModelLoadError

__all__ = ["ComplexRecipe", "RECIPE_VERSION", "RECIPE_FIELDS", "fragment_files"]

RECIPE_VERSION = 1
RECIPE_FIELDS = ("pocket_cutoff", "keep_hydrogens", "fragments")
"""What every recorded recipe states (``version`` may be absent: records written before it are version 1)."""


def fragment_files(fragments: FragmentVocab | str | PathLike | None, cache_dir: str | PathLike) -> dict[str, str]:
    """``{'fragments': path}`` for a dataset builder: a saved vocabulary file as it is, a vocabulary
    object saved under ``cache_dir/fragment_vocabs/`` by content; ``{}`` for None."""
    if fragments is None:
        return {}
    if not isinstance(fragments, FragmentVocab):
        if not Path(fragments).is_file():
            raise ConfigError("fragment vocabulary file not found", fragments)
        return {"fragments": str(fragments)}
    digest = hashlib.blake2b("\n".join(fragments.merges).encode(), digest_size=8).hexdigest()
    path = Path(cache_dir) / "fragment_vocabs" / f"{digest}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fragments.save(path)
    return {"fragments": str(path)}


@dataclass(frozen=True)
class ComplexRecipe:
    """How complexes are turned into BlockGraphs (segment 0 pocket, segment 1 ligand).

    Attributes:
        pocket_cutoff: Å; receptor blocks with a heavy atom this close to a ligand heavy atom
            (the interface distance for protein–protein and LEP complexes).
        keep_hydrogens: keep hydrogen atoms in receptor and ligand blocks (default: heavy atoms
            only, as the reference GET data).
        fragments: ligand fragment vocabulary; ``None`` makes one block per ligand atom.
    """

    pocket_cutoff: float = DEFAULT_CUTOFF
    keep_hydrogens: bool = False
    fragments: FragmentVocab | None = None

    def __post_init__(self):
        cutoff = self.pocket_cutoff
        if isinstance(cutoff, bool) or not isinstance(cutoff, (int, float)) or not math.isfinite(cutoff) \
                or cutoff <= 0:
            raise ConfigError(f"pocket_cutoff must be a positive number of Å, got {cutoff!r}")
        object.__setattr__(self, "pocket_cutoff", float(cutoff))
        object.__setattr__(self, "keep_hydrogens", bool(self.keep_hydrogens))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_options(cls, pocket_cutoff: float = DEFAULT_CUTOFF, keep_hydrogens: bool = False,
                     fragments: FragmentVocab | str | PathLike | None = None) -> "ComplexRecipe":
        """From configuration values; ``fragments`` may be the path of a saved vocabulary."""
        if fragments is not None and not isinstance(fragments, FragmentVocab):
            fragments = FragmentVocab.load(fragments)
        return cls(pocket_cutoff, keep_hydrogens, fragments)

    def with_cutoff(self, pocket_cutoff: float | None) -> "ComplexRecipe":
        """The same recipe with another pocket cutoff (``None``: unchanged)."""
        return self if pocket_cutoff is None else replace(self, pocket_cutoff=pocket_cutoff)

    # ------------------------------------------------------------------ vocabulary
    def block_vocab(self) -> BlockVocab:
        """The block vocabulary of the graphs: the official one, extended by the fragments if any."""
        return VOCAB if self.fragments is None else self.fragments.block_vocab()

    @property
    def num_block_types(self) -> int:
        """Rows a model's block embedding needs for these graphs."""
        return len(self.block_vocab())

    # ------------------------------------------------------------------ building
    def read_receptor(self, path: str | PathLike, model: int = 0):
        """The receptor :class:`~geomol.data.io.Structure`, read with this recipe's hydrogen setting."""
        from geomol.data.io import read_structure

        return read_structure(path, keep_hydrogens=self.keep_hydrogens, model=model)

    def build(self, receptor, ligand, *, ligand_index: int | str = 0, y: float | None = None,
              name: str | None = None) -> BlockGraph:
        """Pocket of an already-read receptor + a ligand (SDF/MOL2/PDB path, RDKit Mol or Blocks).

        See :func:`geomol.data.complexes.build.complex_from_structure` for the accepted inputs and errors.
        """
        from geomol.data.complexes.build import complex_from_structure

        return complex_from_structure(receptor, ligand, pocket_cutoff=self.pocket_cutoff,
                                      keep_hydrogens=self.keep_hydrogens, fragments=self.fragments,
                                      ligand_index=ligand_index, y=y, name=name)

    def build_in_file(self, path: str | PathLike, *, ligand_resname: str | None = None,
                      ligand_chains: Sequence[str] | None = None, receptor_chains: Sequence[str] | None = None,
                      y: float | None = None, name: str | None = None) -> BlockGraph:
        """A complex whose ligand (a residue) or partner (chains) is inside one PDB/mmCIF file: the file read with
        :meth:`read_receptor`, then :meth:`build_in_structure`."""
        self._check_residue_ligand(ligand_resname, f"{path} [{ligand_resname}]")
        return self.build_in_structure(self.read_receptor(path), ligand_resname=ligand_resname,
                                       ligand_chains=ligand_chains, receptor_chains=receptor_chains, y=y, name=name)

    def build_in_structure(self, structure, *, ligand_resname: str | None = None,
                           ligand_chains: Sequence[str] | None = None, receptor_chains: Sequence[str] | None = None,
                           y: float | None = None, name: str | None = None) -> BlockGraph:
        """:meth:`build_in_file` on the whole file already read (:meth:`read_receptor`: every chain), so that one
        read serves every ligand named inside it.

        Raises:
            ConfigError: a residue ligand with a fragment recipe (fragments need bond orders).
        """
        from geomol.data.complexes.build import complex_in_structure

        self._check_residue_ligand(ligand_resname, f"{structure.source} [{ligand_resname}]")
        return complex_in_structure(structure, ligand_resname=ligand_resname, ligand_chains=ligand_chains,
                                    receptor_chains=receptor_chains, pocket_cutoff=self.pocket_cutoff,
                                    keep_hydrogens=self.keep_hydrogens, y=y, name=name)

    def _check_residue_ligand(self, ligand_resname: str | None, source: str) -> None:
        if ligand_resname is not None and self.fragments is not None:
            raise ConfigError("this model uses ligand fragments, which need bond orders: give the ligand as SDF "
                              "or MOL2 instead of a residue name", source=source)

    # ------------------------------------------------------------------ processed-data store
    def builder_params(self) -> dict[str, Any]:
        """Keyword arguments of the dataset builders (they enter the processed-store keys)."""
        return {"pocket_cutoff": self.pocket_cutoff, "keep_hydrogens": self.keep_hydrogens}

    def builder_files(self, cache_dir: str | PathLike) -> dict[str, str]:
        """``{'fragments': path}`` of the vocabulary saved under ``cache_dir`` (its content enters the
        store keys and worker processes read it from there); ``{}`` without fragments."""
        return fragment_files(self.fragments, cache_dir)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        return {"version": RECIPE_VERSION, "pocket_cutoff": self.pocket_cutoff, "keep_hydrogens": self.keep_hydrogens,
                "fragments": None if self.fragments is None else self.fragments.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, source: str | PathLike | None = None) -> "ComplexRecipe":
        """From a checkpoint's ``geomol_preprocessing`` or a manifest's ``preprocessing`` (any version).

        Every field must be recorded: how a model's complexes were built is never guessed.

        Raises:
            ModelLoadError: no record or a field missing (a model trained without a geomol data module: build it
                with one, or export it with its recipe), an unknown version, a bad cutoff or a bad fragment
                vocabulary.
        """
        missing = [key for key in RECIPE_FIELDS if key not in (data or {})]
        if missing:
            raise ModelLoadError(f"the model records no complete graph recipe (preprocessing: {', '.join(missing)} "
                                 "missing): how its complexes were built (pocket cutoff, hydrogens, ligand fragments) "
                                 "cannot be known; train it with a geomol data module, which records the recipe",
                                 source=source)
        version = data.get("version", 1)
        if version != RECIPE_VERSION:
            raise ModelLoadError(f"graph recipe version {version!r} is not supported (this geomol reads version "
                                 f"{RECIPE_VERSION})", source=source)
        try:
            fragments = None if data["fragments"] is None else FragmentVocab.from_dict(data["fragments"], source)
        except DatasetError as exc:
            raise ModelLoadError(f"bad fragment vocabulary in the preprocessing record: {exc.reason}",
                                 source=source) from None
        try:
            return cls(data["pocket_cutoff"], bool(data["keep_hydrogens"]), fragments)
        except ConfigError as exc:
            raise ModelLoadError(f"preprocessing {exc.reason}", source=source) from None
