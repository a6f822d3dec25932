"""Protein clusters consistent across corpus sources, from receptor sequences and source names.

Two receptors are in one cluster when they are linked, transitively (single linkage), by

* **sequence**: their ligand-contact chains align with identity ≥ ``min_identity`` (0.9) over the
  shorter chain, the shorter being at least ``min_length_ratio`` (0.5) of the longer; or
* **name**: they share a canonical protein name from their sources (plb target, FEP protein, the
  manifests' ``target_group``, which the uni_fep and ddg_bindingdb curators computed jointly).

The alignment is global with free end gaps (BLOSUM62, gap open -10, extend -0.5): crystallised
constructs of one protein differ mostly at their termini (truncations, tags), which must cost
nothing, while an internal gap is a real difference. Identity = identical aligned pairs / length
of the shorter chain, so a short chain matching only part of a long one scores low.

All-vs-all alignment of the corpus' 733 distinct chains (268,000 pairs, ~10 ms each) would take
most of an hour; three shortcuts make it seconds: identical sequences are aligned once, a pair is
aligned only when the shorter chain shares at least ``kmer_fraction`` of its distinct 3-mers with
the other (90 % identity keeps about 70 % of 3-mers even with evenly spread mismatches; unrelated
proteins share about 10 %; on the Uni-FEP chains, the pairs just under the threshold, sharing
15-40 %, align at 68 % identity at most), and a pair already joined through other links is not
aligned again. Results are cached as JSON in the
processed-data directory, keyed by the receptor files' content hashes, chains, names and parameters.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from Bio.Align import PairwiseAligner, substitution_matrices
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from geomol.data.store.cache import FileHasher, atomic_write_text
from geomol.data.datasets.corpus_items import CorpusReceptor
from geomol.data.datasets.processed import default_cache_dir
from geomol.data.io.sequences import chain_sequences
from geomol.data.splits.grouped import connected_groups
from geomol.errors import DatasetError
from geomol.terminal import text_column

__all__ = ["ClusterParams", "ProteinClusters", "receptor_sequence", "identity_of_shorter", "kmer_candidates",
           "cluster_receptors", "load_protein_clusters"]

CLUSTER_FORMAT = 2


@dataclass(frozen=True)
class ClusterParams:
    """The clustering rule (see the module notes); part of the cache key."""

    min_identity: float = 0.9
    min_length_ratio: float = 0.5
    kmer: int = 3
    kmer_fraction: float = 0.4


@dataclass
class ProteinClusters:
    """Cluster of each receptor file.

    Attributes:
        cluster_of: receptor path → cluster name (the most common source name among its members).
        stats: counts and seconds of the construction (``receptors``, ``unique_sequences``,
            ``candidate_pairs``, ``aligned_pairs``, ``sequence_links``, ``seconds``).
    """

    cluster_of: dict[str, str]
    stats: dict[str, float]

    def of(self, receptor: str) -> str:
        try:
            return self.cluster_of[receptor]
        except KeyError:
            raise DatasetError("receptor has no protein cluster (not in the clustered set)", receptor) from None


def receptor_sequence(receptor: CorpusReceptor) -> str:
    """The sequence of the receptor's ligand-contact chain."""
    chains = chain_sequences(receptor.path)
    if receptor.chain not in chains:
        raise DatasetError(f"contact chain {receptor.chain!r} not in the file (chains {sorted(chains)})", receptor.path)
    return chains[receptor.chain]


def make_aligner() -> PairwiseAligner:
    """Global alignment with free end gaps, BLOSUM62, gap open -10 / extend -0.5."""
    aligner = PairwiseAligner(mode="global", substitution_matrix=substitution_matrices.load("BLOSUM62"))
    aligner.open_gap_score, aligner.extend_gap_score = -10.0, -0.5
    aligner.end_gap_score = 0.0
    return aligner


def identity_of_shorter(a: str, b: str, aligner: PairwiseAligner | None = None) -> float:
    """Identical aligned residues / length of the shorter sequence (0 for an empty one)."""
    if not a or not b:
        return 0.0
    alignment = (aligner or make_aligner()).align(a, b)[0]
    return alignment.counts().identities / min(len(a), len(b))


def _kmers(sequence: str, k: int) -> set[str]:
    return {sequence[i:i + k] for i in range(len(sequence) - k + 1)}


def kmer_candidates(sequences: Sequence[str], params: ClusterParams = ClusterParams()) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``, i < j, worth aligning: length ratio and shared distinct k-mers above the thresholds."""
    kmers = [_kmers(s, params.kmer) for s in sequences]
    pairs = []
    for i in range(len(sequences)):
        for j in range(i + 1, len(sequences)):
            short, long_ = sorted((len(sequences[i]), len(sequences[j])))
            if short < params.min_length_ratio * long_:
                continue
            fewer = min(len(kmers[i]), len(kmers[j]))
            if fewer and len(kmers[i] & kmers[j]) >= params.kmer_fraction * fewer:
                pairs.append((i, j))
    return pairs


class _UnionFind:
    def __init__(self, size: int):
        self.parent = list(range(size))

    def root(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _progress(enabled: bool) -> Progress:
    return Progress(text_column("{task.description}", style="bold"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), disable=not enabled)


def _read_sequences(receptors: Sequence[CorpusReceptor], progress: Progress) -> list[str]:
    task = progress.add_task("reading receptor sequences", total=len(receptors))
    sequences = []
    for receptor in receptors:
        sequences.append(receptor_sequence(receptor))
        progress.advance(task)
    return sequences


def cluster_receptors(receptors: Sequence[CorpusReceptor], params: ClusterParams = ClusterParams(), *,
                      progress: bool = False) -> ProteinClusters:
    """Cluster receptors by sequence and source names (module notes); no cache."""
    start = time.perf_counter()
    with _progress(progress) as bar:
        sequences = _read_sequences(receptors, bar)
        unique = sorted(set(sequences))
        index_of = {sequence: n for n, sequence in enumerate(unique)}
        # Name links first (they are free), on the unique sequences the receptors carry.
        links = _name_linked(unique, receptors, sequences, index_of)
        candidates = kmer_candidates(unique, params)
        task = bar.add_task("aligning candidate pairs", total=len(candidates))
        aligner, aligned, joined = make_aligner(), 0, 0
        for i, j in candidates:
            if links.root(i) != links.root(j):
                aligned += 1
                if identity_of_shorter(unique[i], unique[j], aligner) >= params.min_identity:
                    links.join(i, j)
                    joined += 1
            bar.advance(task)
    numbers = [links.root(index_of[s]) for s in sequences]
    names = _cluster_names(receptors, numbers)
    stats = {"receptors": len(receptors), "unique_sequences": len(unique), "candidate_pairs": len(candidates),
             "aligned_pairs": aligned, "sequence_links": joined, "clusters": len(set(numbers)),
             "seconds": round(time.perf_counter() - start, 2)}
    return ProteinClusters({r.path: names[n] for r, n in zip(receptors, numbers)}, stats)


def _name_linked(unique: Sequence[str], receptors: Sequence[CorpusReceptor], sequences: Sequence[str],
                 index_of: dict[str, int]) -> _UnionFind:
    """A union-find over unique sequences with every pair sharing a source name already joined."""
    links = _UnionFind(len(unique))
    by_name = connected_groups([[("name", n) for n in r.names] + [("seq", index_of[s])]
                                for r, s in zip(receptors, sequences)])
    first: dict[int, int] = {}
    for group, sequence in zip(by_name, sequences):
        links.join(first.setdefault(group, index_of[sequence]), index_of[sequence])
    return links


def _cluster_names(receptors: Sequence[CorpusReceptor], numbers: Sequence[int]) -> dict[int, str]:
    """Per cluster number, its most common source name (ties: alphabetical), made unique."""
    counts: dict[int, Counter] = {}
    for receptor, number in zip(receptors, numbers):
        counts.setdefault(number, Counter()).update(receptor.names or (Path(receptor.path).parent.name.lower(),))
    names: dict[int, str] = {}
    used: set[str] = set()
    for number in counts:  # insertion order: clusters in order of their first receptor
        best = min(counts[number].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        name, suffix = best, 2
        while name in used:
            name, suffix = f"{best}_{suffix}", suffix + 1
        used.add(name)
        names[number] = name
    return names


def clusters_cache_key(receptors: Sequence[CorpusReceptor], params: ClusterParams) -> str:
    """blake2b of the receptor files' contents (not their paths: ``../shared/data`` and its absolute
    spelling share one cache file), chains and names, in order, with the parameters and the format."""
    hasher = FileHasher()
    payload = {"format": CLUSTER_FORMAT, "params": asdict(params),
               "receptors": [[hasher.digest(r.path), r.chain, list(r.names)] for r in receptors]}
    return hashlib.blake2b(json.dumps(payload, sort_keys=True).encode(), digest_size=12).hexdigest()


def _read_cached(path: Path, receptors: Sequence[CorpusReceptor]) -> ProteinClusters | None:
    """The cached clusters mapped onto these receptors' paths (in order), ``None`` if unreadable."""
    try:
        data = json.loads(path.read_text())
        names = [entry["cluster"] for entry in data["receptors"]]
        if len(names) != len(receptors):
            return None
        return ProteinClusters({r.path: name for r, name in zip(receptors, names)}, data["stats"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a damaged cache file is rebuilt


def load_protein_clusters(receptors: Sequence[CorpusReceptor], params: ClusterParams = ClusterParams(), *,
                          cache_dir: str | os.PathLike | None = None, progress: bool = False
                          ) -> tuple[ProteinClusters, Path]:
    """Clusters from ``<cache_dir>/protein_clusters/<key>.json``, built (and written) when missing.

    Returns:
        The clusters and the JSON file's path.
    """
    key = clusters_cache_key(receptors, params)
    path = Path(cache_dir if cache_dir is not None else default_cache_dir()) / "protein_clusters" / f"{key}.json"
    cached = _read_cached(path, receptors) if path.exists() else None
    if cached is not None:
        return cached, path
    clusters = cluster_receptors(receptors, params, progress=progress)
    entries = [{"path": r.path, "source": r.source, "chain": r.chain, "cluster": clusters.cluster_of[r.path]}
               for r in receptors]
    atomic_write_text(path, json.dumps({"format": CLUSTER_FORMAT, "params": asdict(params), "stats": clusters.stats,
                                        "receptors": entries}, indent=1))
    return clusters, path
