"""The lazy SDF record splitter and the data-item reader against the straightforward line-by-line versions."""
from itertools import islice

from hypothesis import given, settings
from hypothesis import strategies as st

from geomol.data.io.molecule import _sd_properties, _sdf_records, read_ligand
from tests.conftest import shared_path


def _split_records(text: str) -> list[str]:
    """SDF records the plain way: split at '$$$$' lines, a '$$$$' with text after it stays in its record."""
    pieces = ("\n" + text).split("\n$$$$")
    records = [pieces[0][1:]]
    for piece in pieces[1:]:
        rest_of_line, _, after = piece.partition("\n")
        if rest_of_line.strip():
            records[-1] += "\n$$$$" + piece
        else:
            records.append(after)
    records = [r + "\n" for r in records]
    return records[:-1] if not records[-1].strip() else records


def _plain_sd_properties(record: str) -> dict[str, str]:
    """SDF data items the plain way: every line read, from the first one that starts with 'M  END'."""
    lines = record.splitlines()
    end = next((i for i, line in enumerate(lines) if line.startswith("M  END")), len(lines))
    props, name, values = {}, None, []
    for line in lines[end + 1:] + [""]:
        if name is None:
            if line.startswith(">") and "<" in line and ">" in line[line.index("<"):]:
                name, values = line[line.index("<") + 1:line.index(">", line.index("<"))], []
        elif line.strip():
            values.append(line)
        else:
            props[name] = "\n".join(values)
            name = None
    return props


# pieces that make the edge cases likely: end marks with and without text after them, blank and
# whitespace-only lines, Windows and old Mac line ends, other characters that end a line for str.splitlines
_PIECES = st.sampled_from(["$$$$", "\n", "\r\n", "\r", " ", "x", "M  END", "> <P>", "<", ">", "1.0", "\x0c", "\x85", "$"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_sdf_records_split_like_the_plain_version(text):
    assert list(_sdf_records(text)) == _split_records(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_sd_properties_read_like_the_plain_version(text):
    assert _sd_properties(text) == _plain_sd_properties(text)


def test_real_file_records_and_properties():
    text = shared_path("plb", "cdk2", "02_ligands", "ligands.sdf").read_text(encoding="latin-1")
    records = list(_sdf_records(text))
    assert records == _split_records(text) and len(records) == 10
    assert all(_sd_properties(r) == _plain_sd_properties(r) and _sd_properties(r) for r in records)
    assert next(islice(_sdf_records(text), 4, None)) == records[4]
    mol = read_ligand(shared_path("plb", "cdk2", "02_ligands", "ligands.sdf"), 4)
    assert mol.GetProp("s_lp_Variant") == _sd_properties(records[4])["s_lp_Variant"]
