"""The corpus library: source specs, hash checks, safe in-memory archive reading, chunks files."""

from __future__ import annotations

import hashlib
import io
import tarfile

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.protocol import corpus

HASH = "ed53c9d8990d83c2a27deae68e4ee337473f6330c040a31d4225c9574d16096a"


def make_targz(members: dict[str, bytes], *, extra=()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return buf.getvalue()


# --- source spec ---------------------------------------------------------------------

def test_pypi_spec_is_accepted_and_its_hash_lowercased():
    spec = corpus.parse_source_spec({"kind": "pypi-sdist", "requirement": "click==8.1.8",
                                     "filename": "click-8.1.8.tar.gz", "sha256": HASH.upper()})
    assert spec == {"kind": "pypi-sdist", "requirement": "click==8.1.8",
                    "filename": "click-8.1.8.tar.gz", "sha256": HASH}
    assert corpus.source_label(spec) == "pypi-sdist:click==8.1.8"


@pytest.mark.parametrize("spec, message", [
    ({"kind": "git"}, "s.yaml: unknown source kind (use pypi-sdist or sdist-file) (found 'git')"),
    ({"kind": "sdist-file", "sha256": HASH},
     "s.yaml: source spec of kind sdist-file needs a string `path` (found None)"),
    ({"kind": "sdist-file", "path": "a.tar.gz", "sha256": "abc"},
     "s.yaml: `sha256` must be 64 hex digits (found abc)"),
    (["kind"], "s.yaml: a corpus source spec must be a YAML mapping (found list)"),
])
def test_bad_source_spec_is_refused_naming_the_field(spec, message):
    with pytest.raises(InputError) as e:
        corpus.parse_source_spec(spec, path="s.yaml")
    assert str(e.value) == message


def test_hash_mismatch_names_spec_archive_expected_and_found_hash_on_one_line():
    data = b"not the pinned archive"
    found = hashlib.sha256(data).hexdigest()
    with pytest.raises(InputError) as e:
        corpus.check_sha256(data, HASH, path="corpus.source.yaml", item="click-8.1.8.tar.gz")
    msg = str(e.value)
    assert msg.startswith(f"corpus.source.yaml: click-8.1.8.tar.gz: sha256 differs from the "
                          f"pinned {HASH} (found {found})")
    assert "\n" not in msg
    assert corpus.check_sha256(data, found) == found


# --- archive reading -----------------------------------------------------------------

def test_archive_is_read_in_memory_with_its_top_folder_stripped():
    folder = tarfile.TarInfo("pkg-1.0/docs")
    folder.type = tarfile.DIRTYPE
    data = make_targz({"pkg-1.0/src/pkg/a.py": b"x = 1\n", "pkg-1.0/README.md": b"# P\n"},
                      extra=[folder])
    assert corpus.read_sdist(data) == [("src/pkg/a.py", b"x = 1\n"), ("README.md", b"# P\n")]


def test_links_are_not_followed():
    link = tarfile.TarInfo("pkg/evil")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    data = make_targz({"pkg/a.txt": b"a\n", "pkg/b.txt": b"b\n"}, extra=[link])
    assert [n for n, _ in corpus.read_sdist(data)] == ["a.txt", "b.txt"]


@pytest.mark.parametrize("name", ["/etc/passwd", "pkg/../../outside.py", "..\\x.py", "C:/x.py"])
def test_absolute_and_parent_paths_in_the_archive_are_refused(name):
    data = make_targz({"pkg/ok.py": b"", name: b"boom"})
    with pytest.raises(InputError) as e:
        corpus.read_sdist(data, path="p.tar.gz")
    assert str(e.value) == f"p.tar.gz: {name}: unsafe path in archive (absolute or with `..`)"


@pytest.mark.parametrize("data", [b"plain bytes, not gzip", b"\x1f\x8b\x08\x00garbage"])
def test_bytes_that_are_not_a_targz_are_refused_on_one_line(data):
    with pytest.raises(InputError) as e:
        corpus.read_sdist(data, path="p.tar.gz")
    assert str(e.value).startswith("p.tar.gz: not a readable .tar.gz archive (found ")
    assert "\n" not in str(e.value)


def test_truncated_archive_is_refused():
    data = make_targz({"pkg/a.py": b"x = 1\n" * 5000})
    with pytest.raises(InputError, match="not a readable .tar.gz archive"):
        corpus.read_sdist(data[: len(data) // 2])


def test_corpus_from_sdist_chunks_and_describes_the_archive():
    files = {"pkg-1.0/src/pkg/a.py": b"def f():\n    return 1\n",
             "pkg-1.0/docs/x.png": b"\x89PNG\0\0"}
    data = make_targz(files)
    spec = {"kind": "sdist-file", "path": "pkg-1.0.tar.gz",
            "sha256": hashlib.sha256(data).hexdigest()}
    chunks, manifest = corpus.corpus_from_sdist(data, spec=spec, path="s.yaml")
    assert chunks["header"].tolist() == ["src/pkg/a.py › def f"]
    assert manifest == {
        "source": "sdist-file:pkg-1.0.tar.gz", "sha256": spec["sha256"], "chunks": 1,
        "table_sha256": corpus.table_sha256(chunks), "files": 1, "lines": 2,
        "skipped": [{"path": "docs/x.png", "reason": "binary"}],
    }


# --- chunks files --------------------------------------------------------------------

def test_table_hash_is_sha256_of_canonical_jsonl_rows():
    table = pd.DataFrame({"chunk_id": ["c1"], "header": ["h é"], "text": ["t"],
                          "source": ["s"], "line_start": [1], "line_end": [2]})
    line = '{"chunk_id":"c1","header":"h é","text":"t","source":"s","line_start":1,"line_end":2}\n'
    assert corpus.table_sha256(table) == hashlib.sha256(line.encode("utf-8")).hexdigest()


def test_chunks_file_with_numeric_ids_becomes_strings_and_keeps_line_numbers_as_int64():
    df = pd.DataFrame({"chunk_id": [4411, 7], "header": ["a", "b"], "text": ["x", "y"],
                       "source": ["s", "s"], "line_start": [1, 5], "line_end": [4, 9],
                       "extra": [0, 0]})
    out = corpus.validate_chunks(df)
    assert out["chunk_id"].tolist() == ["4411", "7"]
    assert list(out.columns) == ["chunk_id", "header", "text", "source", "line_start", "line_end"]
    assert out["line_end"].dtype == "int64"
    assert df["chunk_id"].tolist() == [4411, 7]  # input untouched


def _table(**over):
    base = {"chunk_id": ["a", "b", "c"], "header": ["h"] * 3, "text": ["t"] * 3,
            "source": ["s"] * 3}
    base.update(over)
    return pd.DataFrame(base)


@pytest.mark.parametrize("table, lines, message", [
    (_table(chunk_id=["a", "b", "a"]), [1, 2, 4],
     "c.jsonl:4: a: duplicate chunk_id (first at line 1)"),
    (_table(chunk_id=["a", "b c", "d"]), [1, 2, 3],
     "c.jsonl:2: b c: chunk_id must not contain whitespace (TREC files split on it)"),
    (_table(chunk_id=["a", "", "d"]), [1, 2, 3], "c.jsonl:2: chunk_id is empty"),
    (_table(text=["t", None, "t"]), [1, 2, 3], "c.jsonl:2: b: `text` must be a string (found a missing value)"),
    (_table(header=["h", "h", 3]), None, "c.jsonl: c: `header` must be a string (found 3)"),
    (_table(chunk_id=["a", "a", "b"]), None, "c.jsonl: a: duplicate chunk_id (first at row 1)"),
    # A JSON Lines row without the key, and a Parquet/CSV cell with no value, come to the
    # check as NaN / None / pd.NA: the message says the field is missing, not "not a string".
    (_table(chunk_id=["a", float("nan"), "c"]), [1, 2, 3],
     "c.jsonl:2: chunk_id is missing: every chunk needs one"),
    (_table(chunk_id=["a", "b", None]), None,
     "c.jsonl: row 3: chunk_id is missing: every chunk needs one"),
    (_table(chunk_id=pd.array(["a", pd.NA, "c"], dtype="string")), None,
     "c.jsonl: row 2: chunk_id is missing: every chunk needs one"),
])
def test_bad_chunks_file_names_the_line_or_id_and_the_rule(table, lines, message):
    with pytest.raises(InputError) as e:
        corpus.validate_chunks(table, path="c.jsonl", lines=lines)
    assert str(e.value) == message


def test_chunks_file_missing_a_column_or_empty_is_refused():
    with pytest.raises(InputError, match="lacks column\\(s\\) source"):
        corpus.validate_chunks(_table().drop(columns="source"), path="c.parquet")
    with pytest.raises(InputError, match="chunks table is empty"):
        corpus.validate_chunks(_table().iloc[:0], path="c.parquet")
    with pytest.raises(InputError, match="`line_start` must be a non-negative integer"):
        corpus.validate_chunks(_table(line_start=[1, -2, 3]), path="c.parquet")


# --- empty chunk text ------------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "   ", "\n\t\n"], ids=["empty", "spaces", "blank-lines"])
def test_an_empty_chunk_text_is_refused_naming_the_chunk_and_line(text):
    with pytest.raises(InputError) as e:
        corpus.corpus_from_table(_table(text=["t", text, text]), sha256=HASH, path="c.jsonl",
                                 lines=[1, 2, 3])
    assert str(e.value) == (
        "c.jsonl:2: b: chunk text is empty (found 2 chunks with empty or blank text). Remove "
        "those chunks, or set corpus.allow_empty: true to keep them (they are then counted "
        "in the corpus manifest)")


def test_empty_chunk_texts_allowed_are_counted_in_the_manifest():
    chunks, manifest = corpus.corpus_from_table(_table(text=["t", "", " "]), sha256=HASH,
                                                path="c.jsonl", allow_empty=True)
    assert chunks["text"].tolist() == ["t", "", " "]
    assert manifest["empty_chunks"] == 2


def test_the_manifest_says_nothing_of_empty_chunks_unless_they_are_allowed():
    _, manifest = corpus.corpus_from_table(_table(), sha256=HASH, path="c.jsonl")
    assert list(manifest) == ["source", "sha256", "chunks", "table_sha256", "files"]
    _, allowed = corpus.corpus_from_table(_table(), sha256=HASH, path="c.jsonl",
                                          allow_empty=True)
    assert allowed == {**manifest, "empty_chunks": 0}


def test_an_archive_manifest_counts_empty_chunks_only_when_allowed():
    data = make_targz({"pkg-1.0/src/pkg/a.py": b"def f():\n    return 1\n"})
    spec = {"kind": "sdist-file", "path": "pkg-1.0.tar.gz",
            "sha256": hashlib.sha256(data).hexdigest()}
    _, manifest = corpus.corpus_from_sdist(data, spec=spec, path="s.yaml")
    assert "empty_chunks" not in manifest
    _, allowed = corpus.corpus_from_sdist(data, spec=spec, path="s.yaml", allow_empty=True)
    assert allowed["empty_chunks"] == 0
