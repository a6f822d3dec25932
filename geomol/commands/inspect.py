"""``geomol inspect``: read a complex and print a summary of its graph of sets.

Shows, per segment, the number of blocks and atoms and the block types present, and the GET
block edges by type (KNN k = 9 by minimum atom distance, plus global edges), so a user can see
what a model will be given before training or predicting.
"""
from __future__ import annotations

import argparse
from collections import Counter

from geomol.data import complex_from_files, complex_from_pdb
from geomol.data.blocks import BlockGraph
from geomol.data.complexes.pocket import DEFAULT_CUTOFF
from geomol.data.vocab import VOCAB
from geomol.nn.block_edges import build_block_edges

EDGE_NAMES = ("intra-segment KNN", "inter-segment KNN", "global–block", "global–global")
SEGMENT_NAMES = {0: "receptor (pocket)", 1: "ligand / partner"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("receptor", help="receptor PDB/mmCIF file (plain or .gz)")
    parser.add_argument("ligand", nargs="?", help="ligand SDF/MOL2 (omit with --ligand-resname or --partner-chains)")
    parser.add_argument("--ligand-index", default="0", help="molecule in the ligand file: index or title (default 0)")
    parser.add_argument("--ligand-resname", help="ligand residue name inside the receptor file (e.g. UNK)")
    parser.add_argument("--receptor-chains", nargs="+", help="chains of the receptor (default: all others)")
    parser.add_argument("--partner-chains", nargs="+", help="chains of a protein partner (protein–protein)")
    parser.add_argument("--pocket-cutoff", type=float, default=DEFAULT_CUTOFF,
                        help=f"pocket / interface cutoff in Å (default {DEFAULT_CUTOFF:g})")
    parser.add_argument("--hydrogens", action="store_true", help="keep hydrogens")
    parser.add_argument("-k", "--k-neighbors", type=int, default=9, help="block KNN k of the edges (default 9)")


def build(args: argparse.Namespace) -> BlockGraph:
    if args.ligand is not None:
        index = int(args.ligand_index) if args.ligand_index.lstrip("-").isdigit() else args.ligand_index
        return complex_from_files(args.receptor, args.ligand, ligand_index=index, pocket_cutoff=args.pocket_cutoff,
                                  keep_hydrogens=args.hydrogens)
    return complex_from_pdb(args.receptor, ligand_resname=args.ligand_resname, receptor_chains=args.receptor_chains,
                            ligand_chains=args.partner_chains, pocket_cutoff=args.pocket_cutoff,
                            keep_hydrogens=args.hydrogens)


def summarise(graph: BlockGraph, k: int = 9) -> dict:
    """Counts of a single complex: blocks, atoms and block types per segment, edges per type."""
    edges, edge_type = build_block_edges(graph.X.unsqueeze(1), graph.block_id, graph.block_batch, graph.segment,
                                         graph.is_global, k)
    segments = []
    for row in graph.segment_summary():
        mask = (graph.segment == row["segment"]) & ~graph.is_global
        types = Counter(VOCAB.abbreviation(int(b)) if int(b) < len(VOCAB) else "fragment" for b in graph.B[mask])
        segments.append({**row, "types": dict(types.most_common())})
    counts = {name: int((edge_type == i).sum()) for i, name in enumerate(EDGE_NAMES)}
    return {"name": getattr(graph, "name", ""), "segments": segments, "global_blocks": int(graph.is_global.sum()),
            "blocks": graph.num_blocks, "atoms": graph.num_atoms, "edges": counts, "total_edges": int(edges.size(1))}


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from geomol.terminal import console as plain_console

    summary = summarise(build(args), args.k_neighbors)
    console = plain_console()
    table = Table(title=f"graph of sets: {summary['name']}")
    for column in ("segment", "blocks", "atoms", "most common block types"):
        table.add_column(column, justify="left" if column.startswith(("segment", "most")) else "right")
    for seg in summary["segments"]:
        common = ", ".join(f"{t}×{n}" for t, n in list(seg["types"].items())[:8])
        table.add_row(f"{seg['segment']} {SEGMENT_NAMES.get(seg['segment'], '')}", str(seg["blocks"]),
                      str(seg["atoms"]), common)
    table.add_row("global blocks", str(summary["global_blocks"]), str(summary["global_blocks"]), "one per segment")
    console.print(table)
    edges = Table(title=f"block edges (k = {args.k_neighbors})")
    edges.add_column("type")
    edges.add_column("edges", justify="right")
    for name, n in summary["edges"].items():
        edges.add_row(name, str(n))
    edges.add_row("total", str(summary["total_edges"]))
    console.print(edges)
    return 0
