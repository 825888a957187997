"""`relgrade corpus spec` pins a PyPI sdist; `relgrade corpus export` writes the chunk table from
an experiment (built or not) or straight from a corpus input, so a run can be made first."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main as cli
from relgrade.pipeline.stages.corpus import build_corpus
from tests.e2e import tiny

REPO = Path(__file__).resolve().parents[1]

MODULE = b'''"""A tiny package."""


def greet(name):
    """Say hello to ``name``."""
    return f"hello {name}"


def part(name):
    """Say goodbye to ``name``."""
    return f"bye {name}"
'''


def _sdist(folder: Path) -> Path:
    """A local sdist-file spec over a two-file archive: pkg-1.0/{README.md,pkg/__init__.py}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("pkg-1.0/README.md", b"# pkg\n\nGreets people.\n"),
                           ("pkg-1.0/pkg/__init__.py", MODULE)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = folder / "pkg-1.0.tar.gz"
    archive.write_bytes(buf.getvalue())
    spec = folder / "pkg.source.yaml"
    spec.write_text(yaml.safe_dump({"kind": "sdist-file", "path": archive.name,
                                    "sha256": hashlib.sha256(buf.getvalue()).hexdigest()}))
    return spec


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_export_from_a_source_spec_gives_the_chunks_the_corpus_stage_would_build(tmp_path):
    spec = _sdist(tmp_path)
    res = CliRunner().invoke(cli, ["corpus", "export", "--corpus", str(spec), "--out",
                                   str(tmp_path / "chunks.jsonl")])
    assert res.exit_code == 0, res.output
    rows = _rows(tmp_path / "chunks.jsonl")
    chunks, _ = build_corpus(spec)
    assert [r["chunk_id"] for r in rows] == chunks["chunk_id"].tolist()
    assert {r["source"] for r in rows} == {"README.md", "pkg/__init__.py"}
    assert res.output == (f"Wrote {len(rows)} chunks to {tmp_path / 'chunks.jsonl'}, built "
                          f"from {spec}\n")


def test_export_of_a_chunks_file_in_beir_form_renames_id_and_title(tmp_path):
    src = tmp_path / "chunks.jsonl"
    src.write_text("".join(json.dumps(c) + "\n" for c in tiny.chunks()[:3]))
    res = CliRunner().invoke(cli, ["corpus", "export", "--corpus", str(src), "--beir",
                                   "--out", str(tmp_path / "corpus.jsonl")])
    assert res.exit_code == 0, res.output
    first = tiny.chunks()[0]
    assert _rows(tmp_path / "corpus.jsonl")[0] == {"_id": first["chunk_id"],
                                                   "title": first["header"],
                                                   "text": first["text"]}


def test_export_of_an_experiment_not_yet_built_builds_its_corpus_in_memory(tmp_path, monkeypatch):
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "stages").mkdir()
    spec = _sdist(tmp_path)
    (tmp_path / "queries.tsv").write_text("query_id\tquery\tgroup\nkw01\tgreet\tkeyword\n")
    (tmp_path / "intents.tsv").write_text(
        "query_id\tquery\tintent\nkw01\tgreet\tthe function that says hello\n")
    monkeypatch.chdir(tmp_path)
    made = CliRunner().invoke(cli, ["init", "experiments/pkg", "--corpus", spec.name,
                                    "--queries", "queries.tsv", "--intents", "intents.tsv",
                                    "--arm", "bm25=bm25"])
    assert made.exit_code == 0, made.output
    res = CliRunner().invoke(cli, ["corpus", "export", "--experiment", "experiments/pkg",
                                   "--out", "chunks.jsonl"])
    assert res.exit_code == 0, res.output
    assert res.output.endswith("built from experiments/pkg/data/input/corpus.source.yaml "
                               "(the corpus stage has not run)\n")
    assert not (tmp_path / "experiments/pkg/data/corpus/chunks.parquet").exists()
    assert [r["chunk_id"] for r in _rows(tmp_path / "chunks.jsonl")] == build_corpus(
        spec)[0]["chunk_id"].tolist()


def test_export_refuses_a_beir_parquet_and_writes_nothing(tmp_path):
    src = tmp_path / "chunks.jsonl"
    src.write_text("".join(json.dumps(c) + "\n" for c in tiny.chunks()[:2]))
    res = CliRunner().invoke(cli, ["corpus", "export", "--corpus", str(src), "--beir",
                                   "--out", str(tmp_path / "c.parquet")])
    assert res.exit_code == 1
    assert "the export is written as .jsonl (or .parquet without --beir)" in res.output
    assert not (tmp_path / "c.parquet").exists()


def test_spec_refuses_a_requirement_without_one_pinned_version(tmp_path):
    res = CliRunner().invoke(cli, ["corpus", "spec", "click>=8", "--out",
                                   str(tmp_path / "c.yaml")])
    assert res.exit_code == 1
    assert res.output == ("Error: REQUIREMENT: a corpus is pinned to one version (found "
                          "'click>=8'). Write NAME==VERSION, e.g. attrs==24.2.0\n")
    assert not (tmp_path / "c.yaml").exists()


def test_spec_never_overwrites_a_spec(tmp_path):
    (tmp_path / "c.yaml").write_text("kept\n")
    res = CliRunner().invoke(cli, ["corpus", "spec", "click==8.1.8", "--out",
                                   str(tmp_path / "c.yaml")])
    assert res.exit_code == 1 and "does not overwrite" in res.output
    assert (tmp_path / "c.yaml").read_text() == "kept\n"


@pytest.mark.slow
def test_spec_of_the_default_corpus_pins_the_same_archive_and_hash(tmp_path):
    # downloads click 8.1.8's sdist from the package index, as the corpus stage does
    res = CliRunner().invoke(cli, ["corpus", "spec", "click==8.1.8", "--out",
                                   str(tmp_path / "click.source.yaml")])
    assert res.exit_code == 0, res.output
    got = yaml.safe_load((tmp_path / "click.source.yaml").read_text())
    want = yaml.safe_load((REPO / "data/input/corpus.source.yaml").read_text())
    assert got == want == {
        "kind": "pypi-sdist", "requirement": "click==8.1.8",
        "filename": "click-8.1.8.tar.gz",
        "sha256": "ed53c9d8990d83c2a27deae68e4ee337473f6330c040a31d4225c9574d16096a"}


def _pkg_experiment(tmp_path, monkeypatch) -> Path:
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "stages").mkdir()
    spec = _sdist(tmp_path)
    (tmp_path / "queries.tsv").write_text("query_id\tquery\tgroup\nkw01\tgreet\tkeyword\n")
    (tmp_path / "intents.tsv").write_text(
        "query_id\tquery\tintent\nkw01\tgreet\tthe function that says hello\n")
    monkeypatch.chdir(tmp_path)
    made = CliRunner().invoke(cli, ["init", "experiments/pkg", "--corpus", spec.name,
                                    "--queries", "queries.tsv", "--intents", "intents.tsv",
                                    "--arm", "bm25=bm25"])
    assert made.exit_code == 0, made.output
    return tmp_path / "experiments/pkg"


def test_edit_of_a_source_spec_exports_it_once_points_params_at_it_and_edits_one_chunk(
        tmp_path, monkeypatch):
    folder = _pkg_experiment(tmp_path, monkeypatch)
    spec = folder / "data/input/corpus.source.yaml"
    chunks, _ = build_corpus(spec)
    cid = chunks["chunk_id"].iloc[0]
    (tmp_path / "new.txt").write_text("def greet(name):\n    return 'hi'\n")
    res = CliRunner().invoke(cli, ["corpus", "edit", cid, "--text-file", "new.txt",
                                   "--experiment", "experiments/pkg"])
    assert res.exit_code == 0, res.output
    out = folder / "data/input/chunks.jsonl"
    rows = _rows(out)
    assert [r["chunk_id"] for r in rows] == chunks["chunk_id"].tolist()
    assert [r["text"] for r in rows][1:] == chunks["text"].tolist()[1:]
    assert rows[0]["text"] == "def greet(name):\n    return 'hi'\n"
    origin = json.loads((folder / "data/input/chunks.origin.json").read_text())
    assert origin == {"exported_from": "corpus.source.yaml",
                      "source_spec_sha256": hashlib.sha256(spec.read_bytes()).hexdigest(),
                      "archive_sha256": yaml.safe_load(spec.read_text())["sha256"]}
    params = yaml.safe_load((folder / "params.yaml").read_text())
    assert params["corpus"]["input"] == "data/input/chunks.jsonl"
    assert res.output.splitlines()[1:] == [
        f"Edited chunk {cid} in experiments/pkg/data/input/chunks.jsonl",
        f"No pool built yet, and no grade of chunk {cid}: nothing graded is affected; "
        "`dvc repro experiments/pkg/dvc.yaml` builds on the edited corpus."]
    # the design record keeps naming the pinned source the edited chunks came from
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.design import write_design

    text = write_design(Experiment.load(folder / "params.yaml")).read_text()
    assert ("- Corpus: `data/input/chunks.jsonl`, exported from `corpus.source.yaml` (archive "
            f"sha256 `{origin['archive_sha256']}`) by `relgrade corpus edit` and edited "
            "since.") in text
    # a second edit edits the chunks file in place: no second export
    (tmp_path / "again.txt").write_text("def greet(name):\n    return 'hey'\n")
    res = CliRunner().invoke(cli, ["corpus", "edit", cid, "--text-file", "again.txt",
                                   "--experiment", "experiments/pkg"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == (f"Edited chunk {cid} in "
                                          "experiments/pkg/data/input/chunks.jsonl")
    assert _rows(out)[0]["text"] == "def greet(name):\n    return 'hey'\n"
    assert build_corpus(out)[0]["text"].iloc[0] == "def greet(name):\n    return 'hey'\n"


@pytest.mark.parametrize("chunk,text,message", [
    # typed at the top, the export must name the experiment the edit was refused for
    ("no-such-chunk", "new text", "no chunk has this id. Take the id from `relgrade corpus "
                                  "export --experiment experiments/pkg` or the packets"),
    (None, "  \n", "a chunk's text cannot be empty. Write the new text to the --text-file"),
    (None, None, "the text is the chunk's text already: nothing to edit"),
])
def test_edit_refuses_an_unknown_id_an_empty_or_unchanged_text_and_writes_nothing(
        tmp_path, monkeypatch, chunk, text, message):
    folder = _pkg_experiment(tmp_path, monkeypatch)
    chunks, _ = build_corpus(folder / "data/input/corpus.source.yaml")
    cid = chunk or chunks["chunk_id"].iloc[0]
    (tmp_path / "new.txt").write_text(chunks["text"].iloc[0] if text is None else text)
    params = (folder / "params.yaml").read_text()
    res = CliRunner().invoke(cli, ["corpus", "edit", cid, "--text-file", "new.txt",
                                   "--experiment", "experiments/pkg"])
    assert res.exit_code == 1
    assert res.output == (f"Error: experiments/pkg/data/input/corpus.source.yaml: {cid}: "
                          f"{message}\n")
    assert not (folder / "data/input/chunks.jsonl").exists()
    assert (folder / "params.yaml").read_text() == params
