"""Every ``geomol ...`` command in a ```bash block of README.md and docs/*.md runs as written.

The blocks of one document run in order in one fresh folder laid out like the repository (``configs``,
``data``, ``models``; ``../shared/data`` as the shared data), so a block can use what an earlier one
wrote (``runs/<name>/version_0/checkpoints/last.ckpt``). Budgets are small: the folder's configs are
the repository's with small data selections and Trainer limits (2 steps, 1 batch per evaluation), the
command lines themselves are unchanged. Lines that are not ``geomol`` commands (``pip install``) are
not run, except ``NAME=$(...)`` assignments, whose values the later commands use. A block preceded by
``<!-- docs-check: skip REASON -->`` needs data that is neither bundled nor shared, and is skipped.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import torch
import yaml

from geomol.cli import main
from tests.conftest import REPO, SHARED_DATA

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"(?:<!--\s*docs-check:\s*skip\s+(?P<skip>.*?)\s*-->\s*\n)?```bash\n(?P<body>.*?)```", re.S)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

# data selections that keep each config's data small (what tests/tasks/test_configs.py trains on)
CORPUS_SLICE = {"series": ["uni_fep/ChEMBL__PNP__CHEMBL951777", "ddg_bindingdb/11GS", "ddg_bindingdb/1PXN",
                           "ddg_bindingdb/1ETS"],
                "n_folds": 4, "valid_fraction": 0.4, "max_blocks": 400, "preprocess_workers": 0}
SMALL_DATA = {
    "get_plb.yaml": {"targets": ["cdk2", "cmet", "ptp1b"], "n_folds": 3, "max_blocks": 400, "preprocess_workers": 0},
    "get_affinity_default.yaml": {"targets": ["cmet", "ptp1b"], "series": ["jacs_set/cdk2"], "n_folds": 3,
                                  "max_blocks": 400, "preprocess_workers": 0},
    "get_affinity_corpus.yaml": CORPUS_SLICE,
    "get_affinity_corpus_long.yaml": CORPUS_SLICE,
    "get_protein_affinity.yaml": {"ids": ["3Q8D", "3UIH", "3UII", "1KNE", "1M27", "5TAR", "2KSO", "1KTZ", "3LNZ",
                                          "2B12", "4M76", "5VNW"], "n_folds": 3, "valid_fraction": 0.3,
                                  "max_blocks": 400, "preprocess_workers": 0},
    "egno_nbody.yaml": {"num_train": 60, "num_valid": 20, "num_test": 20, "max_train": 60, "batch_size": 20},
    "egno_md.yaml": {"batch_size": 2},
}
SMALL_MODEL = {"egno_md.yaml": {"hidden": 32}}  # 855 AdK backbone atoms: a full-size step takes a minute
SMALL_TRAINER = {"max_steps": 2, "limit_train_batches": 2, "limit_val_batches": 1, "limit_test_batches": 1,
                 "limit_predict_batches": 1, "num_sanity_val_steps": 0, "log_every_n_steps": 1}


def doc_blocks() -> list[tuple[Path, int, str, str | None]]:
    """(document, line, block text, skip reason) of every bash block with a geomol command."""
    blocks = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            if any(part.strip().startswith("geomol ") for part in _segments(match["body"])):
                blocks.append((doc, text[:match.start("body")].count("\n") + 1, match["body"], match["skip"]))
    return blocks


def _logical_lines(body: str) -> list[str]:
    return [line.strip() for line in body.replace("\\\n", " ").splitlines() if line.strip()]


def _segments(body: str) -> list[str]:
    """The commands of a block: logical lines split at ``&&``, comments removed."""
    out = []
    for line in _logical_lines(body):
        words = " ".join(shlex.split(line, comments=True, posix=False))
        out.extend(part.strip() for part in words.split("&&") if part.strip())
    return out


def _needs_shared(body: str) -> bool:
    configs = re.findall(r"configs/([\w.]+\.yaml)", body)
    return "../shared" in body or any(marker in (REPO / "configs" / c).read_text() for c in configs
                                      for marker in ("../shared", "GEOMOL_SHARED_DATA"))


def _small_configs(folder: Path, cache: Path) -> None:
    folder.mkdir()
    for path in sorted((REPO / "configs").glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        config["trainer"].update(SMALL_TRAINER)
        config["data"]["init_args"].update(SMALL_DATA.get(path.name, {}))
        config["model"]["init_args"].update(SMALL_MODEL.get(path.name, {}))
        if path.name == "egno_nbody.yaml":
            config["data"]["init_args"]["cache_dir"] = str(cache / "nbody")
        (folder / path.name).write_text(yaml.safe_dump(config))
    for overlay in sorted((REPO / "configs").glob("*/*.yaml")):  # per-data-set overlays (configs/md17/...): as they are
        (folder / overlay.parent.name).mkdir(exist_ok=True)
        (folder / overlay.parent.name / overlay.name).write_text(overlay.read_text())


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One processed-data store for all documents (they preprocess the same small selections)."""
    return tmp_path_factory.mktemp("docs_cache")


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory, cache):
    """One folder per document, laid out like the repository beside a ``shared`` folder."""
    made = {}

    def get(doc: Path) -> Path:
        if doc not in made:
            root = tmp_path_factory.mktemp(doc.stem)
            work = root / "repo"
            work.mkdir()
            _small_configs(work / "configs", cache)
            for name in ("data", "models"):
                (work / name).symlink_to(REPO / name)
            if SHARED_DATA.exists():
                (root / "shared").mkdir()
                (root / "shared" / "data").symlink_to(SHARED_DATA.resolve())
            made[doc] = work
        return made[doc]

    return get


def _assign(segment: str, env: dict[str, str]) -> None:
    """Run ``NAME=$(...)`` in bash and keep NAME's value in ``env``."""
    name = segment.split("=", 1)[0]
    done = subprocess.run(["bash", "-c", f'{segment}; printf %s "${name}"'], capture_output=True, text=True,
                          env={**os.environ, **env}, check=True)
    env[name] = done.stdout


def _run(segment: str, env: dict[str, str]) -> int:
    saved = os.environ.copy()
    os.environ.update(env)
    try:
        args = shlex.split(os.path.expandvars(segment))[1:]
        return main(args)
    except SystemExit as exit_:  # argparse errors
        return int(exit_.code or 0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        torch.set_num_threads(1)


BLOCKS = doc_blocks()


@pytest.mark.parametrize("doc, line, body, skip", BLOCKS,
                         ids=[f"{doc.relative_to(REPO)}:{line}" for doc, line, _, _ in BLOCKS])
@pytest.mark.filterwarnings("ignore")
def test_documented_commands_run(doc, line, body, skip, workspaces, cache, monkeypatch):
    if skip:
        pytest.skip(skip)
    if _needs_shared(body) and not SHARED_DATA.exists():
        pytest.skip(f"needs the shared data ({SHARED_DATA}; set GEOMOL_SHARED_DATA)")
    work = workspaces(doc)
    monkeypatch.chdir(work)
    env = {"GEOMOL_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    for segment in _segments(body):
        if _ASSIGNMENT.match(segment):
            _assign(segment, env)
        elif segment.startswith("geomol "):
            assert _run(segment, env) == 0, f"{doc.name}:{line}: {segment}"


def test_every_document_with_commands_is_checked():
    documents = {doc.name for doc, *_ in BLOCKS}
    assert {"README.md", "training.md", "rollout.md", "predict.md"} <= documents
