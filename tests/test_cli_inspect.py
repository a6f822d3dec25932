from pathlib import Path

import pytest

from geomol.cli import main
from geomol.commands.inspect import build, summarise
from geomol.commands import inspect as inspect_cmd

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "example"


def test_inspect_example_prints_segments_and_edges(capsys):
    assert main(["inspect", str(EXAMPLE / "tnks2_protein.pdb"), str(EXAMPLE / "tnks2_ligands.sdf"),
                 "--ligand-index", "lig_7"]) == 0
    out = capsys.readouterr().out
    assert "receptor (pocket)" in out and "inter-segment KNN" in out and "lig_7" in out


def test_summary_counts_are_consistent():
    import argparse
    parser = argparse.ArgumentParser()
    inspect_cmd.add_arguments(parser)
    args = parser.parse_args([str(EXAMPLE / "tnks2_protein.pdb"), str(EXAMPLE / "tnks2_ligands.sdf")])
    graph = build(args)
    s = summarise(graph)
    assert s["blocks"] == sum(seg["blocks"] for seg in s["segments"]) + s["global_blocks"]
    assert s["atoms"] == sum(seg["atoms"] for seg in s["segments"]) + s["global_blocks"]
    assert s["total_edges"] == sum(s["edges"].values())
    non_global = s["blocks"] - s["global_blocks"]
    # every block keeps min(9, candidates) intra and inter neighbours, itself included for intra
    assert s["edges"]["intra-segment KNN"] <= 9 * non_global
    assert s["edges"]["global–global"] == 4  # 2 globals: self loops and the pair, both directions


def test_inspect_reports_bad_input_without_traceback(capsys, tmp_path):
    assert main(["inspect", str(EXAMPLE / "tnks2_protein.pdb"), str(tmp_path / "missing.sdf")]) == 1
    assert "missing.sdf" in capsys.readouterr().err


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "fit" in out and "inspect" in out
