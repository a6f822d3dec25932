"""Affinity prediction records, and the loop that builds complexes and predicts them in batches.

The receptor file is parsed once for all ligands (with the model's hydrogen setting; ligands named inside it, a
residue or a chain group, are cut from that same reading, and a caller that posed SMILES in it passes the structure
it read: :func:`read_receptor`); each
ligand's pocket and graph are built with the model's graph recipe
(:class:`~geomol.data.complexes.recipe.ComplexRecipe`, its cutoff optionally overridden); graphs are predicted in
batches of up to ``batch_size`` complexes and ``max_blocks`` blocks. A ligand whose complex
cannot be built (unreadable record, empty pocket, ...) gets a record with the error message;
the others are predicted. Records come back in input order.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from os import PathLike
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from geomol.data.blocks import BlockGraph
from geomol.data.chemistry.checks import ERROR, Finding, errors_of, warnings_of
from geomol.units import dg_from_pk
from geomol.data.io import Structure
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.errors import ConfigError, GeomolError
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.domain import ApplicabilityDomain
from geomol.inference.findings import exception_findings
from geomol.inference.input_checks import ReceptorContext, checked_complex
from geomol.inference.ligand_inputs import LigandInput

__all__ = ["COLUMNS", "AffinityPrediction", "predict_inputs", "build_complexes", "measured_complexes", "pocket_block_count", "read_receptor"]

COLUMNS = ("name", "pK", "dG_kcal_mol", "Kd_M", "pK_std", "n_pocket_blocks", "error", "warnings")
"""Columns of a prediction table, in order."""


@dataclass
class AffinityPrediction:
    """The prediction for one ligand (or one complex).

    Attributes:
        name: ligand name (molecule title, else ``#<index>``; residue name; chain group).
        pK: predicted −log10(K / M), mean over the ensemble members.
        dG_kcal_mol: ΔG = −R T ln(10) pK in kcal/mol at 298.15 K.
        Kd_M: K = 10^−pK in mol/L.
        pK_std: standard deviation of the members' pK (NaN for a single-member model).
        n_pocket_blocks: receptor blocks in the pocket used (residues, nucleotides; one per atom of
            cofactors and ions).
        error: why this ligand could not be predicted ('' when it was; then the numbers are NaN).
        warnings: what makes the number doubtful (input or prediction outside the model's applicability
            domain, see ``docs/predict.md``); empty for an input like the training complexes.
        receptor: the receptor file (or description).
        source: where the ligand came from (``"file [molecule i 'title']"``, ``"file [line n 'name']"``).
        extra: additional columns (e.g. the pose report of a ligand posed from SMILES), written after
            :data:`COLUMNS`.
        findings: the error and warnings as :class:`~geomol.data.chemistry.checks.Finding` s (severity,
            stable ``code`` such as ``'clash'`` or ``'size_outside_training'``, message), for programs and
            for grouping them (:mod:`geomol.inference.findings`).
    """

    name: str
    pK: float = math.nan
    dG_kcal_mol: float = math.nan
    Kd_M: float = math.nan
    pK_std: float = math.nan
    n_pocket_blocks: int | None = None
    error: str = ""
    warnings: list[str] = field(default_factory=list)
    receptor: str = ""
    source: str = ""
    extra: dict = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.error

    def add_findings(self, found: Sequence[Finding]) -> None:
        """Record findings: warnings join ``warnings``, errors set ``error`` (unless one is set already)."""
        self.findings += list(found)
        self.warnings += [str(f) for f in warnings_of(found)]
        errors = errors_of(found)
        if errors and not self.error:
            self.error = "; ".join(str(f) for f in errors)

    def set_pk(self, pk: float, std: float, domain: ApplicabilityDomain | None = None) -> None:
        """Record the ensemble's pK and spread, unless ``domain`` finds them unphysical (then an error)."""
        if not math.isfinite(pk):
            self.add_findings([Finding(ERROR, "pk_not_finite", "the model returned a non-finite pK")])
            return
        findings = domain.prediction_findings(pk, std) if domain is not None else []
        self.add_findings(findings)
        if errors_of(findings):
            return
        self.pK, self.pK_std = pk, std
        self.dG_kcal_mol = dg_from_pk(pk)
        self.Kd_M = 10.0 ** -pk

    def to_dict(self) -> dict:
        return asdict(self)


def pocket_block_count(graph: BlockGraph) -> int:
    """Real (non-global) blocks of segment 0, the receptor side."""
    return int(((graph.segment == 0) & ~graph.is_global).sum())


class _Receptor:
    """The receptor of a prediction run: a file (read at most once, with the recipe's hydrogen setting), an
    already-read Structure, or none. The whole structure serves ligands named inside it (a residue, a chain group);
    the rest of the run sees it restricted to ``chains``."""

    def __init__(self, receptor: str | PathLike | Structure | None, chains: Sequence[str] | None,
                 recipe: ComplexRecipe, side_chains_required: bool = False):
        if receptor is not None and not isinstance(receptor, (str, PathLike, Structure)):
            raise ConfigError(f"the receptor must be a PDB/mmCIF path or a Structure, not {type(receptor).__name__}")
        self.whole = receptor if isinstance(receptor, Structure) else None
        self.path = Path(receptor) if isinstance(receptor, (str, PathLike)) else None
        self.label = receptor.source if isinstance(receptor, Structure) else str(receptor or "")
        self.chains = list(chains) if chains else None
        self.recipe = recipe
        self.side_chains_required = side_chains_required
        self._selected: Structure | None = None
        self._check_context: ReceptorContext | None = None

    def read_whole(self) -> Structure:
        """The whole receptor structure, every chain (the file parsed at the first call); read errors propagate."""
        if self.whole is None:
            if self.path is None:
                raise ConfigError("no receptor given")
            self.whole = self.recipe.read_receptor(self.path)
        return self.whole

    def read(self) -> Structure:
        """The receptor structure restricted to ``chains``."""
        if self._selected is None:
            whole = self.read_whole()
            self._selected = whole.select_chains(self.chains) if self.chains else whole
        return self._selected

    def check_context(self) -> ReceptorContext:
        """What the input checks need of the receptor, made at the first call (reads the receptor)."""
        if self._check_context is None:
            self._check_context = ReceptorContext.of(self.read(), self.side_chains_required)
        return self._check_context


def read_receptor(receptor: str | PathLike | Structure, model: AffinityModel) -> Structure:
    """The whole receptor as ``model`` reads it: a file parsed with its recipe (hydrogens), a Structure as it is.

    For a caller that needs the receptor before predicting (posing SMILES in it): it passes the structure on to
    :func:`predict_inputs`, so that the file is read once.
    """
    return receptor if isinstance(receptor, Structure) else model.recipe.read_receptor(receptor)


def _receptor_of_run(receptor, chains, model: AffinityModel, recipe: ComplexRecipe) -> _Receptor:
    # a member that reads what ligand atoms touch (the contact scorer) needs side chains: without them, no prediction
    return _Receptor(receptor, chains, recipe, side_chains_required=model.members[0].needs_side_chains)


def _graph(item: LigandInput, receptor: _Receptor) -> BlockGraph:
    """The complex of one ligand input, built with the run's recipe."""
    if item.graph is not None:
        return item.graph
    if item.in_receptor_file:
        return receptor.recipe.build_in_structure(receptor.read_whole(), ligand_resname=item.resname,
                                                  ligand_chains=item.chains, receptor_chains=receptor.chains,
                                                  name=item.name)
    ligand = item.molecule if item.molecule is not None else item.ligand_file
    return receptor.recipe.build(receptor.read(), ligand, name=item.name)


def _budget_groups(sizes: Sequence[int], max_blocks: int) -> Iterator[list[int]]:
    """Consecutive index groups whose sizes sum to ≤ max_blocks (a larger item goes alone)."""
    group, total = [], 0
    for i, size in enumerate(sizes):
        if group and total + size > max_blocks:
            yield group
            group, total = [], 0
        group.append(i)
        total += size
    if group:
        yield group


def _build_chunk(items: Sequence[LigandInput], receptor: _Receptor, model: AffinityModel
                 ) -> tuple[list[AffinityPrediction], dict[int, BlockGraph]]:
    records, graphs = [], {}
    for i, item in enumerate(items):
        record = AffinityPrediction(item.name, receptor=receptor.label, source=item.source, error=item.error,
                                    extra=dict(item.extra))
        record.add_findings(item.findings)
        if item.error and not errors_of(record.findings):
            record.findings.append(Finding(ERROR, "unreadable", item.error))
        if not item.error:
            try:
                graph, found = checked_complex(item, receptor.check_context, lambda: _graph(item, receptor),
                                               model.domain, receptor.recipe.keep_hydrogens)
                model.check_graph(graph, item.source)
                record.add_findings(found)
                graphs[i] = graph
                record.n_pocket_blocks = pocket_block_count(graph)
            except GeomolError as exc:
                record.error = str(exc)
                record.findings += exception_findings(exc)
        records.append(record)
    return records, graphs


def build_complexes(receptor: str | PathLike | Structure | None, inputs: Sequence[LigandInput], model: AffinityModel,
                    *, receptor_chains: Sequence[str] | None = None
                    ) -> tuple[list[AffinityPrediction], list[BlockGraph | None]]:
    """The checked complex of every input, built as :func:`predict_inputs` builds them (the model's
    recipe and input checks), without predicting: per input its record (``error`` set when it failed)
    and its graph (``None`` then)."""
    records, graphs = _build_chunk(inputs, _receptor_of_run(receptor, receptor_chains, model, model.recipe), model)
    return records, [graphs.get(i) for i in range(len(inputs))]


def measured_complexes(receptor: str | PathLike | Structure | None, inputs: Sequence[LigandInput],
                       model: AffinityModel, measured: Mapping[str, float], use: str, *,
                       receptor_chains: Sequence[str] | None = None) -> list[tuple[str, BlockGraph]]:
    """(name, complex) of every input with a measured pK (by name), built and checked as for prediction; a measured
    ligand that is missing from ``inputs`` or fails its checks is left out with one warning naming it and ``use``
    (what it would have been used for)."""
    records, graphs = build_complexes(receptor, inputs, model, receptor_chains=receptor_chains)
    used = [(r.name, g) for r, g in zip(records, graphs) if g is not None and r.name in measured]
    failed = [f"{r.name} ({r.error})" for r in records if r.error and r.name in measured]
    absent = sorted(set(measured) - {r.name for r in records})
    if failed or absent:
        warnings.warn(f"measured ligand(s) left out of {use}: {', '.join(failed + absent)}"
                      + (" (not among the ligands)" if absent else ""), stacklevel=3)
    return used


def predict_inputs(receptor: str | PathLike | Structure | None, inputs: Sequence[LigandInput], model: AffinityModel,
                   *, pocket_cutoff: float | None = None, batch_size: int = 32, max_blocks: int = 4000,
                   receptor_chains: Sequence[str] | None = None) -> Iterator[AffinityPrediction]:
    """Predict every input against one receptor; yields one record per input, in order.

    Args:
        receptor: receptor file or Structure (None only when every input carries a graph).
        pocket_cutoff: Å; None uses the model's training value.
        batch_size: complexes per forward pass; max_blocks: blocks per forward pass.
        receptor_chains: restrict the receptor to these chains.

    Raises:
        GeomolError: the receptor itself cannot be read (nothing could be predicted against it).
    """
    if batch_size < 1 or max_blocks < 1:
        raise ConfigError(f"batch_size and max_blocks must be ≥ 1, got {batch_size} and {max_blocks}")
    context = _receptor_of_run(receptor, receptor_chains, model, model.recipe.with_cutoff(pocket_cutoff))
    if any(not i.error and i.graph is None for i in inputs):
        context.read()  # parse once, up front: an unreadable receptor is one clear error, not one per ligand
    for start in range(0, len(inputs), batch_size):
        records, graphs = _build_chunk(inputs[start:start + batch_size], context, model)
        order = sorted(graphs)
        for group in _budget_groups([graphs[i].num_blocks for i in order], max_blocks):
            chosen = [order[g] for g in group]
            mean, std = model.predict([graphs[i] for i in chosen])
            for i, pk, spread in zip(chosen, mean.tolist(), std.tolist()):
                records[i].set_pk(pk, spread, model.domain)
                if model.anchors is not None:  # relative to the series' measured ligands
                    model.anchors.apply(records[i], graphs[i])
        yield from records

