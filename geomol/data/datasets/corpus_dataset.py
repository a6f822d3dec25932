"""The affinity corpus (:mod:`geomol.data.datasets.corpus`) as one dataset of complex graphs.

Every :class:`~geomol.data.datasets.corpus_items.CorpusItem` becomes one recipe of the processed
store:

* an item with a pose (``plb``, ``fep_benchmark``, ``ddg_bindingdb``: receptor PDB or MOL2, pose
  file and index) is built by :func:`~geomol.data.datasets.ligand_complex.build_ligand_complex`,
  the builder of the single-source datasets, so their stored graphs are shared;
* an item given as SMILES (``uni_fep``) is built by :func:`build_smiles_complex`: the SMILES is
  posed on its series' reference ligand (:class:`~geomol.data.posing.poses.PoseTemplate`) and the complex
  built around that pose. The recipe's parameters hold the SMILES and the
  :class:`~geomol.data.posing.poses.PoseParameters`, its files the receptor and the reference, so the
  store key is a content hash of all four: each SMILES is posed once, and found again afterwards.

A ligand that cannot be posed (invalid SMILES, no common core, no embedding) or a docked pose RDKit
cannot sanitise (:data:`STRICT_SANITISATION_SOURCES`) raises a :class:`~geomol.errors.GeomolError`
in its builder, so it is a skipped item in the preprocessing report (``<cache>/reports/<name>.json``
and ``.skipped.csv``) with its reason, never silently dropped.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any, Sequence

from geomol.data.blocks import BlockGraph
from geomol.data.store.cache import Recipe
from geomol.data.complexes.build import complex_from_structure
from geomol.data.datasets.corpus_items import Corpus, CorpusItem
from geomol.data.datasets.ligand_complex import (
    assign_groups,
    build_ligand_complex,
    cached_receptor,
    ligand_identity,
    load_fragment_vocab,
    recipe_inputs,
)
from geomol.data.datasets.processed import ItemInfo, ProcessedDataset, replace_info
from geomol.data.io import read_ligand
from geomol.data.posing.poses import POSE_COLUMNS, PoseParameters, PoseTemplate
from geomol.data.splits.protein_clusters import ProteinClusters
from geomol.data.complexes.recipe import ComplexRecipe

__all__ = ["STRICT_SANITISATION_SOURCES", "STORE_POSE_PARAMETERS", "build_smiles_complex", "corpus_recipes", "corpus_info_from_meta",
           "CorpusDataset"]

STRICT_SANITISATION_SOURCES = ("ddg_bindingdb",)
"""Sources whose poses RDKit cannot sanitise are skipped (and reported): docked MOL2 poses whose chemistry
RDKit cannot perceive. Expert-prepared poses (plb, fep_benchmark) are used unsanitised with a warning, as in
their single-source datasets, whose stored graphs they share."""


STORE_POSE_PARAMETERS = PoseParameters(refinement=None)
"""The store's posing of SMILES: as embedded, without refinement in the pocket (the posing its items were
built with; refinement would change every item's cache key, so it is asked for explicitly)."""


def _stamp(path: str) -> tuple[str, int, int]:
    """(real path, size, mtime) of a file: an edited file gets a new cache entry."""
    stat = os.stat(path)
    return os.path.realpath(path), stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=2)
def _template(reference: tuple, receptor: tuple, keep_hydrogens: bool, parameters: str) -> PoseTemplate:
    structure = cached_receptor(receptor[0], keep_hydrogens)
    return PoseTemplate(read_ligand(reference[0], 0), structure, PoseParameters.from_dict(json.loads(parameters)))


def cached_template(reference: str, receptor: str, keep_hydrogens: bool, parameters: PoseParameters) -> PoseTemplate:
    """The pose template of (reference, receptor, parameters), prepared once per worker process.

    Items are handed to workers grouped by receptor file, so a series' ligands share one template.
    """
    return _template(_stamp(reference), _stamp(receptor), keep_hydrogens,
                     json.dumps(parameters.to_dict(), sort_keys=True))


def build_smiles_complex(files: dict[str, str], *, smiles: str, pose: dict[str, Any], pocket_cutoff: float,
                         keep_hydrogens: bool) -> tuple[BlockGraph, dict[str, Any]]:
    """Pose a SMILES on a reference ligand in its receptor, then build the pocket + ligand graph.

    Args:
        files: ``receptor`` (PDB/mmCIF/MOL2), ``reference`` (SDF/MOL2, first molecule: the reference
            ligand in its binding pose), optionally ``fragments`` (a saved FragmentVocab).
        smiles: the ligand.
        pose: :meth:`PoseParameters.to_dict` of the posing.
        pocket_cutoff: Å, receptor blocks with a heavy atom this close to a ligand heavy atom.
        keep_hydrogens: keep hydrogens in receptor and ligand blocks.

    Returns:
        The graph (y is nan) and ``{'inchikey', 'core_atoms', 'core_rmsd' (Å), 'min_receptor_distance' (Å),
        'clashes'}``.

    Raises:
        PoseError: the SMILES cannot be posed (the item is skipped and reported).
    """
    template = cached_template(files["reference"], files["receptor"], keep_hydrogens, PoseParameters.from_dict(pose))
    posed = template.pose(smiles, source=f"SMILES {smiles!r} on {files['reference']}")
    receptor = cached_receptor(files["receptor"], keep_hydrogens)
    fragments = load_fragment_vocab(files["fragments"]) if "fragments" in files else None
    graph = complex_from_structure(receptor, posed.molecule, pocket_cutoff=pocket_cutoff,
                                   keep_hydrogens=keep_hydrogens, fragments=fragments)
    return graph, {"inchikey": ligand_identity(posed.molecule), **posed.report()}


def _info(item: CorpusItem, cluster: str) -> ItemInfo:
    return ItemInfo(id=item.id, source=item.source, protein=cluster, series=item.series, ligand=item.ligand,
                    y=item.label, extra={"smiles": item.smiles, "protein_group": item.protein_group})


def corpus_recipes(items: Sequence[CorpusItem], clusters: ProteinClusters, *, recipe: ComplexRecipe | None = None,
                   pose_parameters: PoseParameters | None = None, cache_dir=None) -> list[tuple[Recipe, ItemInfo]]:
    """One ``(recipe, info)`` per corpus item, in order; ``info.protein`` is the item's protein cluster."""
    extra, params = recipe_inputs(recipe, cache_dir)
    pose = (pose_parameters or STORE_POSE_PARAMETERS).to_dict()
    out = []
    for item in items:
        if item.pose:
            files = {"receptor": item.receptor, "ligands": item.pose, **extra}
            strict = {"require_sanitised": True} if item.source in STRICT_SANITISATION_SOURCES else {}
            built = Recipe(item.id, build_ligand_complex, files, {"ligand": item.pose_index, **params, **strict},
                           group=item.receptor)
        else:
            files = {"receptor": item.receptor, "reference": item.reference, **extra}
            built = Recipe(item.id, build_smiles_complex, files, {"smiles": item.smiles, "pose": pose, **params},
                           group=item.receptor)
        out.append((built, _info(item, clusters.of(item.receptor))))
    return out


def corpus_info_from_meta(info: ItemInfo, meta: dict) -> ItemInfo:
    """``info_from_meta`` hook: the ligand identity, and for a posed SMILES its pose report."""
    extra = {key: meta[key] for key in ("inchikey", *POSE_COLUMNS) if meta.get(key) not in (None, "")}
    return replace_info(info, extra=extra) if extra else info


class CorpusDataset(ProcessedDataset):
    """Complex graphs of corpus items (any mix of the four sources), labelled with pK.

    Metadata: ``id`` (the item's), ``source``, ``protein`` = the cross-source protein cluster,
    ``series`` (``'<source>/<series>'``), ``ligand``, ``group`` (one compound on one cluster, by
    canonical SMILES or InChIKey connectivity, across sources: such items always share a split),
    ``y`` = pK, ``extra``: ``smiles``, ``protein_group`` (the source's own protein name),
    ``inchikey`` and, for posed SMILES, ``core_atoms``, ``core_rmsd``, ``min_receptor_distance``, ``clashes``.

    Args:
        corpus: the items (and receptors) to build, e.g. from :func:`~geomol.data.datasets.corpus.read_corpus`.
        clusters: protein clusters covering every item's receptor
            (:func:`~geomol.data.splits.protein_clusters.load_protein_clusters`).
        recipe: graph construction (default :class:`~geomol.data.complexes.recipe.ComplexRecipe`).
        pose_parameters: how SMILES are posed (default :data:`STORE_POSE_PARAMETERS`, unrefined).
        **kwargs: :class:`ProcessedDataset` options (``cache_dir``, ``num_workers``, ``progress``, ``name``).

    Attributes:
        corpus_items: the :class:`CorpusItem` of each dataset item (skipped ones left out), in order.
    """

    def __init__(self, corpus: Corpus, clusters: ProteinClusters, *, recipe: ComplexRecipe | None = None,
                 pose_parameters: PoseParameters | None = None, **kwargs):
        items = corpus_recipes(corpus.items, clusters, recipe=recipe, pose_parameters=pose_parameters,
                               cache_dir=kwargs.get("cache_dir"))
        kwargs.setdefault("name", "corpus")
        super().__init__(items, info_from_meta=corpus_info_from_meta, **kwargs)
        self.corpus_items = [item for item, key in zip(corpus.items, self.report.keys) if key is not None]
        self._infos = assign_groups(self._infos, [[("pair", info.protein, info.extra["smiles"] or info.id)]
                                                  for info in self._infos])

    def subset(self, indices: Sequence[int]) -> "CorpusDataset":
        view = super().subset(indices)
        view.corpus_items = [self.corpus_items[i] for i in indices]
        return view
