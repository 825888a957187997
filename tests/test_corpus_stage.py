"""The corpus stage end to end: its outputs, and its failure modes (one line, exit 1, no output)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from relgrade.protocol.corpus import table_sha256

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / "stages" / "corpus.py"
CLICK_SHA256 = "ed53c9d8990d83c2a27deae68e4ee337473f6330c040a31d4225c9574d16096a"

MODULE = b'''"""A module."""
import os
import sys


def helper(x):
    return x + 1


class Thing:
    """A thing."""

    def run(self):
        return helper(1)
'''


def targz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def setup(root: Path, corpus_input: str, files: dict[str, bytes]) -> None:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["corpus"] = {"input": corpus_input}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def spec_yaml(**fields) -> bytes:
    return yaml.safe_dump(fields, sort_keys=False).encode()


def run_stage(root: Path, **env) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    full.update(env)
    return subprocess.run([sys.executable, str(STAGE)], cwd=root, capture_output=True,
                          text=True, env=full, stdin=subprocess.DEVNULL, timeout=300)


def outputs(root: Path) -> list[Path]:
    folder = root / "data" / "corpus"
    return sorted(folder.iterdir()) if folder.exists() else []


def assert_failed_cleanly(proc, root, *, starts: str):
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(starts), lines[0]
    assert outputs(root) == []


def test_local_sdist_gives_chunks_table_and_manifest(tmp_path):
    archive = targz({"pkg-1.0/src/pkg/mod.py": MODULE, "pkg-1.0/PKG-INFO": b"Name: pkg\n"})
    sha = hashlib.sha256(archive).hexdigest()
    setup(tmp_path, "data/input/corpus.source.yaml", {
        "data/input/corpus.source.yaml": spec_yaml(kind="sdist-file", path="pkg-1.0.tar.gz",
                                                   sha256=sha),
        "data/input/pkg-1.0.tar.gz": archive,
    })
    proc = run_stage(tmp_path)
    assert proc.returncode == 0, proc.stderr
    chunks = pd.read_parquet(tmp_path / "data/corpus/chunks.parquet")
    assert [(h, a, b) for h, a, b in zip(chunks.header, chunks.line_start, chunks.line_end)] == [
        ("src/pkg/mod.py › module", 1, 3),
        ("src/pkg/mod.py › def helper", 6, 7),
        ("src/pkg/mod.py › class Thing", 10, 14),
        ("src/pkg/mod.py › class Thing › def run", 13, 14),
    ]
    manifest = json.loads((tmp_path / "data/corpus/manifest.json").read_text())
    assert manifest == {"source": "sdist-file:pkg-1.0.tar.gz", "sha256": sha, "chunks": 4,
                        "table_sha256": table_sha256(chunks), "files": 1, "lines": 14,
                        "skipped": [{"path": "PKG-INFO", "reason": "generated"}]}


def test_wrong_hash_fails_on_one_line_naming_file_expected_and_found(tmp_path):
    archive = targz({"pkg-1.0/mod.py": MODULE})
    wrong = "0" * 64
    setup(tmp_path, "data/input/corpus.source.yaml", {
        "data/input/corpus.source.yaml": spec_yaml(kind="sdist-file", path="pkg-1.0.tar.gz",
                                                   sha256=wrong),
        "data/input/pkg-1.0.tar.gz": archive,
    })
    proc = run_stage(tmp_path)
    found = hashlib.sha256(archive).hexdigest()
    assert_failed_cleanly(proc, tmp_path, starts=(
        f"Error: data/input/corpus.source.yaml: pkg-1.0.tar.gz: sha256 differs from the "
        f"pinned {wrong} (found {found})"))


def test_failed_download_fails_on_one_line_with_pips_error(tmp_path):
    setup(tmp_path, "data/input/corpus.source.yaml", {
        "data/input/corpus.source.yaml": spec_yaml(kind="pypi-sdist", requirement="click==8.1.8",
                                                   filename="click-8.1.8.tar.gz",
                                                   sha256=CLICK_SHA256),
    })
    proc = run_stage(tmp_path, PIP_INDEX_URL="http://127.0.0.1:9/", PIP_NO_INDEX="1",
                     PIP_NO_CACHE_DIR="1", PIP_CONFIG_FILE=os.devnull, PIP_RETRIES="0",
                     PIP_TIMEOUT="1", PIP_FIND_LINKS="")
    assert_failed_cleanly(proc, tmp_path, starts=(
        "Error: data/input/corpus.source.yaml: pip could not download click==8.1.8 "
        "(found ERROR: "))
    assert "kind: sdist-file" in proc.stderr


def test_unreadable_archive_fails_on_one_line(tmp_path):
    junk = b"this is not a gzip-compressed tar archive\n"
    setup(tmp_path, "data/input/corpus.source.yaml", {
        "data/input/corpus.source.yaml": spec_yaml(kind="sdist-file", path="junk.tar.gz",
                                                   sha256=hashlib.sha256(junk).hexdigest()),
        "data/input/junk.tar.gz": junk,
    })
    proc = run_stage(tmp_path)
    assert_failed_cleanly(proc, tmp_path,
                          starts="Error: junk.tar.gz: not a readable .tar.gz archive (found ")


def test_missing_local_archive_fails_naming_it(tmp_path):
    setup(tmp_path, "data/input/corpus.source.yaml", {
        "data/input/corpus.source.yaml": spec_yaml(kind="sdist-file", path="gone.tar.gz",
                                                   sha256="a" * 64),
    })
    proc = run_stage(tmp_path)
    assert_failed_cleanly(proc, tmp_path, starts=(
        "Error: data/input/corpus.source.yaml: data/input/gone.tar.gz: source archive not found"))


def test_chunks_jsonl_is_validated_and_written_with_string_ids(tmp_path):
    rows = [{"chunk_id": 4411, "header": "a.py › def f", "text": "def f(): pass", "source": "a.py"},
            {"chunk_id": "x-2", "header": "b.md › T", "text": "text", "source": "b.md"}]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    setup(tmp_path, "data/input/chunks.jsonl", {"data/input/chunks.jsonl": data})
    proc = run_stage(tmp_path)
    assert proc.returncode == 0, proc.stderr
    chunks = pd.read_parquet(tmp_path / "data/corpus/chunks.parquet")
    assert chunks["chunk_id"].tolist() == ["4411", "x-2"]
    manifest = json.loads((tmp_path / "data/corpus/manifest.json").read_text())
    assert manifest == {"source": "chunks-file:data/input/chunks.jsonl",
                        "sha256": hashlib.sha256(data).hexdigest(), "chunks": 2,
                        "table_sha256": table_sha256(chunks), "files": 2}


def test_duplicate_chunk_id_in_jsonl_names_the_line(tmp_path):
    data = (b'{"chunk_id": "a", "header": "h", "text": "t", "source": "s"}\n\n'
            b'{"chunk_id": "a", "header": "h", "text": "u", "source": "s"}\n')
    setup(tmp_path, "data/input/chunks.jsonl", {"data/input/chunks.jsonl": data})
    proc = run_stage(tmp_path)
    assert_failed_cleanly(proc, tmp_path, starts=(
        "Error: data/input/chunks.jsonl:3: a: duplicate chunk_id (first at line 1)"))


def test_a_jsonl_line_without_chunk_id_is_refused_as_missing_naming_the_line(tmp_path):
    data = (b'{"chunk_id": "a", "header": "h", "text": "t", "source": "s"}\n\n'
            b'{"header": "h", "text": "u", "source": "s"}\n')
    setup(tmp_path, "data/input/chunks.jsonl", {"data/input/chunks.jsonl": data})
    proc = run_stage(tmp_path)
    assert_failed_cleanly(proc, tmp_path, starts=(
        "Error: data/input/chunks.jsonl:3: chunk_id is missing: every chunk needs one"))


def test_a_tsv_row_with_an_empty_chunk_id_names_its_line_and_a_parquet_null_its_row(tmp_path):
    # header on line 1, a blank line 3: the row with no chunk_id sits on line 4
    data = b"chunk_id\theader\ttext\tsource\na\th\tt\ts\n\n\th\tu\ts\n"
    setup(tmp_path, "data/input/chunks.tsv", {"data/input/chunks.tsv": data})
    assert_failed_cleanly(run_stage(tmp_path), tmp_path,
                          starts="Error: data/input/chunks.tsv:4: chunk_id is empty")
    buf = io.BytesIO()
    pd.DataFrame({"chunk_id": ["a", None], "header": ["h", "h"], "text": ["t", "u"],
                  "source": ["s", "s"]}).to_parquet(buf, index=False)
    other = tmp_path / "pq"
    other.mkdir()
    setup(other, "data/input/chunks.parquet", {"data/input/chunks.parquet": buf.getvalue()})
    assert_failed_cleanly(run_stage(other), other, starts=(
        "Error: data/input/chunks.parquet: row 2: chunk_id is missing: every chunk needs one"))


@pytest.mark.slow
def test_real_click_sdist_downloads_verifies_and_chunks(tmp_path):
    setup(tmp_path, "data/input/corpus.source.yaml", {
        "data/input/corpus.source.yaml": (REPO / "data/input/corpus.source.yaml").read_bytes()})
    proc = run_stage(tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "data/corpus/manifest.json").read_text())
    chunks = pd.read_parquet(tmp_path / "data/corpus/chunks.parquet")
    assert manifest["sha256"] == CLICK_SHA256
    assert manifest["source"] == "pypi-sdist:click==8.1.8"
    # counts measured on click 8.1.8's sdist; a change means the chunker changed
    assert (manifest["files"], manifest["lines"], manifest["chunks"]) == (83, 23328, 1136)
    assert manifest["table_sha256"] == table_sha256(chunks)
    assert chunks["chunk_id"].is_unique
    headers = set(chunks["header"])
    assert "src/click/core.py › class Command › def invoke" in headers
    assert "docs/options.rst › Options › Multiple Options" in headers
    assert "CHANGES.rst › Version 8.1.8" in headers
