"""What ``geomol predict-affinity`` prints: a table that fits the terminal, the problems found, one summary line.

The table has one line per ligand — name, pK, its ensemble spread (±) and the codes of its error or
warnings in words (``error: clash``, ``close contact``) — so that it fits 80 columns whatever the
messages; every other column (ΔG, Kd, pocket size, pose report, the full messages) is in the CSV/JSON
(``--out``). Below it, each kind of problem found is explained once, with how many ligands it
concerns and which, and the last line sums the run up.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from rich import box
from rich.markup import escape
from rich.table import Table

from geomol.data.chemistry.checks import ERROR, Finding
from geomol.inference.findings import code_label

if TYPE_CHECKING:
    from geomol.api import AffinityPrediction

__all__ = ["results_table", "complex_table", "problem_lines", "summary_line", "target_label"]

_RECEPTOR_SUFFIXES = re.compile(r"([_\-.]?(protein|receptor|rec|prot|clean|prepared|fixed|apo|pocket))+$", re.I)
_SHOWN_NAMES = 4


def target_label(receptor: str) -> str:
    """A short name of the target from its receptor file: the file name without suffixes such as ``_protein``
    (``tnks2_protein.pdb`` → ``tnks2``), else the PDB code of its HEADER line, else the file name."""
    path = Path(receptor)
    stem = path.name.split(".")[0]
    label = _RECEPTOR_SUFFIXES.sub("", stem)
    if label:
        return label
    try:
        with open(path, encoding="latin-1") as handle:
            first = handle.readline()
    except OSError:
        first = ""
    code = first[62:66].strip() if first.startswith("HEADER") else ""
    return code or path.name


def _number(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "–"


def _shown_findings(record: "AffinityPrediction") -> list[Finding]:
    """The findings that explain the row: its errors (a failed ligand), else its warnings."""
    if record.error:
        return [f for f in record.findings if f.severity == ERROR] or [Finding(ERROR, "error", record.error)]
    return list(record.findings)


def _codes(record: "AffinityPrediction") -> list[str]:
    return list(dict.fromkeys(f.code for f in _shown_findings(record)))


def _notes(record: "AffinityPrediction") -> str:
    labels = ", ".join(code_label(c) for c in _codes(record))
    if record.error:
        return f"[red]error:[/red] {labels}"
    return f"[yellow]{labels}[/yellow]" if labels else ""


def results_table(records: Sequence["AffinityPrediction"], *, with_receptor: bool = False, max_rows: int = 40,
                  out: str | None = None) -> Table:
    """One line per ligand (the first ``max_rows``): [receptor,] name, pK, ±, error or warnings in words."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    if with_receptor:
        table.add_column("receptor", no_wrap=True, overflow="ellipsis", max_width=20)
    table.add_column("name", no_wrap=True, overflow="ellipsis", max_width=30)
    table.add_column("pK", justify="right", no_wrap=True)
    table.add_column("±", justify="right", no_wrap=True)
    table.add_column("warnings", no_wrap=True, overflow="ellipsis")
    for record in records[:max_rows]:
        cells = [escape(record.name), _number(record.pK), _number(record.pK_std), _notes(record)]
        table.add_row(*([escape(Path(record.receptor).name)] if with_receptor else []), *cells)
    if len(records) > max_rows:
        table.caption = f"first {max_rows} of {len(records)} rows" + (f"; all in {out}" if out else "")
    return table


def _kd_range(record: "AffinityPrediction") -> str:
    """``'2e-09 (9e-10–5e-09)'``: Kd in mol/L and its range over ± one ensemble spread (the centre alone without)."""
    if not math.isfinite(record.Kd_M):
        return "–"
    if not math.isfinite(record.pK_std):
        return f"{record.Kd_M:.1e}"
    low, high = 10.0 ** -(record.pK + record.pK_std), 10.0 ** -(record.pK - record.pK_std)
    return f"{record.Kd_M:.0e} ({low:.0e}–{high:.0e})"


_COMPLEX_COLUMNS = ("name", "partners", "ΔG", "±", "Kd (range)", "warnings")


def complex_table(records: Sequence["AffinityPrediction"], *, max_rows: int = 40, out: str | None = None) -> Table:
    """One line per protein–protein complex: name, partners, ΔG ± spread (kcal/mol), Kd (M) and its range over the
    spread, problems."""
    from geomol.units import KCAL_PER_PK

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                  caption="ΔG and ± in kcal/mol (298 K), Kd in mol/L")
    rows = [[escape(r.name), escape(str(r.extra.get("partners", ""))), _number(r.dG_kcal_mol),
             _number(KCAL_PER_PK * r.pK_std), _kd_range(r), _notes(r)] for r in records[:max_rows]]
    widths = [max([len(row[i]) for row in rows] + [len(head)]) for i, head in enumerate(_COMPLEX_COLUMNS[:5])]
    for i, column in enumerate(_COMPLEX_COLUMNS):  # the numbers keep their width; the notes give way
        table.add_column(column, justify="right" if 2 <= i <= 4 else "left", no_wrap=True, overflow="ellipsis",
                         min_width=(min(widths[i], 18) if i == 0 else widths[i]) if i < 5 else None)
    for row in rows:
        table.add_row(*row)
    if len(records) > max_rows:
        table.caption += f"; first {max_rows} of {len(records)} rows" + (f", all in {out}" if out else "")
    return table


def _plain_message(finding: Finding, record: "AffinityPrediction") -> str:
    """The message without the ligand's own source (its name is on the line already), but with the source of
    anything else (e.g. the receptor file)."""
    message = finding.message.removeprefix(f"{record.source}: ") if record.source else finding.message
    if not finding.source or finding.source == record.source:
        return message
    return f"{finding.source}: {message}"


def problem_lines(records: Sequence["AffinityPrediction"]) -> list[str]:
    """Each kind of error or warning once (errors first): how many ligands, which, and one message in full."""
    by_code: dict[tuple[bool, str], list[tuple["AffinityPrediction", Finding]]] = {}
    for record in records:
        for finding in {f.code: f for f in reversed(_shown_findings(record))}.values():
            by_code.setdefault((finding.severity != ERROR, finding.code), []).append((record, finding))
    lines = []
    for (is_warning, code), hits in sorted(by_code.items(), key=lambda item: item[0][0]):
        names = [record.name for record, _ in hits]
        which = ", ".join(names) if len(names) <= _SHOWN_NAMES else \
            f"{len(names)} ligands ({', '.join(names[:_SHOWN_NAMES])}, …)"
        kind = "[yellow]warning[/yellow]" if is_warning else "[red]error[/red]"
        first_record, first = hits[0]
        lines.append(f"{kind}: {code_label(code)} — {escape(which)}: {escape(_plain_message(first, first_record))}")
    return lines


def _counted(records: Sequence["AffinityPrediction"]) -> str:
    counts = Counter(code for r in records for code in _codes(r))
    return ", ".join(f"{code_label(code)} ×{n}" for code, n in counts.most_common())


def summary_line(records: Sequence["AffinityPrediction"], out: str | None = None, noun: str = "ligand(s)") -> str:
    """``27 ligand(s): 25 predicted (3 with warnings: close contact ×3), 2 failed (clash ×2); every column in r.csv``."""
    failed = [r for r in records if not r.ok]
    flagged = [r for r in records if r.ok and r.warnings]
    text = f"{len(records)} {noun}: {len(records) - len(failed)} predicted"
    if flagged:
        text += f" ({len(flagged)} with warnings: {_counted(flagged)})"
    text += f", {len(failed)} failed" + (f" ({_counted(failed)})" if failed else "")
    return text + (f"; every column in {out}" if out else "")
