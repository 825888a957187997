"""Chunking: exact pieces, headers and line ranges for small Python, RST, Markdown and text."""

from __future__ import annotations

import hashlib
import textwrap

import pandas as pd
import pytest

from relgrade import schema
from relgrade.protocol import chunking
from relgrade.protocol.corpus import table_sha256


def rows_of(path, text):
    return chunking.pieces_to_rows(path, chunking.chunk_text(path, text))


def summary(rows):
    return [(r["header"], r["line_start"], r["line_end"]) for r in rows]


PY = '''\
"""Tiny module."""
import os

X = 1


@decorate
def top(a):
    return a


class Box:
    """A box."""

    size = 3

    def open(self):
        return True

    @property
    def label(self):
        return "box"
'''


def test_python_module_gives_module_function_class_outline_and_method_chunks():
    rows = rows_of("pkg/m.py", PY)
    assert summary(rows) == [
        ("pkg/m.py › module", 1, 4),
        ("pkg/m.py › def top", 7, 9),
        ("pkg/m.py › class Box", 12, 22),
        ("pkg/m.py › class Box › def open", 17, 18),
        ("pkg/m.py › class Box › def label", 20, 22),
    ]
    texts = {r["header"]: r["text"] for r in rows}
    assert texts["pkg/m.py › module"] == '"""Tiny module."""\nimport os\n\nX = 1'
    assert texts["pkg/m.py › def top"] == "@decorate\ndef top(a):\n    return a"
    assert texts["pkg/m.py › class Box"] == (
        'class Box:\n    """A box."""\n\n    size = 3\n\n    def open(self):\n        ...\n\n'
        '    @property\n    def label(self):\n        ...'
    )
    assert texts["pkg/m.py › class Box › def label"] == (
        '    @property\n    def label(self):\n        return "box"')


def test_chunk_id_is_c_plus_12_hex_of_sha256_of_source_symbol_and_occurrence():
    rows = rows_of("pkg/m.py", PY)
    label = next(r for r in rows if r["header"].endswith("def label"))
    expected = "c" + hashlib.sha256("pkg/m.py\0class Box › def label\0" "0".encode()).hexdigest()[:12]
    assert label["chunk_id"] == expected
    assert all(len(r["chunk_id"]) == 13 and not any(ch.isspace() for ch in r["chunk_id"])
               for r in rows)


def test_small_module_part_is_skipped_and_decorators_stay_with_their_function():
    text = "import os\n\n\n@a\n@b(1)\ndef f():\n    pass\n"
    assert summary(rows_of("t.py", text)) == [("t.py › def f", 4, 7)]


def test_same_name_in_two_branches_gets_two_ids_and_overloads_join_the_implementation():
    text = textwrap.dedent('''\
        import sys
        import os
        import re

        if sys.platform == "win32":
            def enc():
                return "mbcs"
        else:
            def enc():
                return "utf-8"


        @t.overload
        def g(x: int) -> int: ...
        @t.overload
        def g(x: str) -> str: ...
        def g(x):
            return x
        ''')
    rows = rows_of("c.py", text)
    assert summary(rows) == [
        ("c.py › module", 1, 10),
        ("c.py › def enc", 6, 7),
        ("c.py › def enc", 9, 10),
        ("c.py › def g", 13, 18),
    ]
    assert rows[1]["chunk_id"] != rows[2]["chunk_id"]
    module = rows[0]["text"]
    assert 'if sys.platform == "win32":\n    def enc():\n        ...\nelse:' in module
    assert "def g" not in module


def test_comment_trailing_a_function_body_stays_with_the_function():
    text = "import a\nimport b\nimport c\n\n\ndef f():\n    try:\n        pass\n    except OSError:\n        pass\n        # closed already\n\n\nY = 2\n"
    rows = rows_of("k.py", text)
    assert summary(rows) == [("k.py › module", 1, 14), ("k.py › def f", 6, 11)]
    assert "closed already" not in rows[0]["text"]
    assert rows[1]["text"].endswith("        # closed already")


def test_function_longer_than_150_lines_splits_into_numbered_parts():
    body = "".join(f"    x{i} = {i}\n" for i in range(320))
    rows = rows_of("long.py", "def big():\n" + body)
    # 321 lines, 3 parts of 107 (no blank line or unindented line to move a cut to)
    assert summary(rows) == [
        ("long.py › def big (part 1 of 3)", 1, 107),
        ("long.py › def big (part 2 of 3)", 108, 214),
        ("long.py › def big (part 3 of 3)", 215, 321),
    ]
    assert rows[1]["text"].startswith("    x106 = 106")


def test_unparsable_python_falls_back_to_plain_text():
    rows = rows_of("py2.py", "print 'hi'\nprint 'there'\n")
    assert summary(rows) == [("py2.py", 1, 2)]


RST = """\
.. _top:

Title
=====

Intro text here.

Section A
---------

Body of A.

.. _b-label:

Section B
---------

Body of B.

Sub B1
~~~~~~

Deep text.

::

    not a title
    -----------

Other Top
=========

Last.
"""


def test_rst_sections_nest_by_underline_style_and_labels_move_to_their_section():
    rows = rows_of("docs/doc.rst", RST)
    assert summary(rows) == [
        ("docs/doc.rst › Title", 1, 6),
        ("docs/doc.rst › Title › Section A", 8, 11),
        ("docs/doc.rst › Title › Section B", 13, 18),
        ("docs/doc.rst › Title › Section B › Sub B1", 20, 28),
        ("docs/doc.rst › Other Top", 30, 33),
    ]
    assert rows[0]["text"] == ".. _top:\n\nTitle\n=====\n\nIntro text here."
    assert rows[2]["text"].startswith(".. _b-label:\n\nSection B\n")


def test_rst_overlined_titles_and_title_only_sections_and_changelog_versions():
    text = textwrap.dedent("""\
        .. currentmodule:: click

        =========
         Manual
        =========

        Version 2.0
        -----------

        -   Added a thing.

        Version 1.0
        -----------

        -   First release.
        """)
    rows = rows_of("CHANGES.rst", text)
    # "Manual" holds nothing but its title; the one-line preamble is too small
    assert summary(rows) == [
        ("CHANGES.rst › Manual › Version 2.0", 7, 10),
        ("CHANGES.rst › Manual › Version 1.0", 12, 15),
    ]


def test_markdown_sections_by_heading_ignore_hashes_in_fenced_code():
    text = "# Tool\n\nIntro.\n\n## Usage\n\n```sh\n# not a heading\nrun it\n```\n\n## Donate\n\nThanks.\n"
    rows = rows_of("README.md", text)
    assert summary(rows) == [
        ("README.md › Tool", 1, 3),
        ("README.md › Tool › Usage", 5, 10),
        ("README.md › Tool › Donate", 12, 14),
    ]


def test_plain_text_is_one_chunk_when_small_and_80_line_windows_when_long():
    assert summary(rows_of("tox.ini", "[tox]\nenvlist = py3\n")) == [("tox.ini", 1, 2)]
    long = "".join(f"line {i}\n" for i in range(1, 171))
    assert summary(rows_of("notes.cfg", long)) == [
        ("notes.cfg (part 1 of 3)", 1, 80),
        ("notes.cfg (part 2 of 3)", 81, 160),
        ("notes.cfg (part 3 of 3)", 161, 170),
    ]


def test_license_text_without_sections_is_one_plain_chunk():
    text = "Copyright 2014 Someone\n\nRedistribution is permitted.\n"
    assert summary(rows_of("LICENSE.txt", text)) == [("LICENSE.txt", 1, 3)]


def test_binary_empty_and_generated_files_are_skipped_with_a_reason():
    files = [
        ("src/p/mod.py", PY.encode()),
        ("docs/logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
        ("src/p/py.typed", b""),
        ("PKG-INFO", b"Metadata-Version: 2.3\nName: p\n"),
        ("requirements/dev.txt", b"#\n# This file is autogenerated by pip-compile\n#\nx==1\n"),
        ("latin1.txt", "caf\xe9".encode("latin-1")),
    ]
    table, report = chunking.chunk_files(files)
    assert report["skipped"] == [
        {"path": "PKG-INFO", "reason": "generated"},
        {"path": "docs/logo.png", "reason": "binary"},
        {"path": "latin1.txt", "reason": "binary"},
        {"path": "requirements/dev.txt", "reason": "generated"},
        {"path": "src/p/py.typed", "reason": "empty"},
    ]
    assert report["files"] == 1
    assert report["lines"] == 22
    assert list(table.columns) == schema.CHUNKS
    assert table["line_start"].dtype == "int64"
    assert set(table["source"]) == {"src/p/mod.py"}


def test_crlf_and_bom_do_not_change_chunks():
    unix = chunking.chunk_files([("m.py", PY.encode())])[0]
    dos = chunking.chunk_files([("m.py", b"\xef\xbb\xbf" + PY.replace("\n", "\r\n").encode())])[0]
    pd.testing.assert_frame_equal(unix, dos)


def test_chunking_twice_and_in_another_file_order_gives_the_same_table_hash():
    files = [("src/p/mod.py", PY.encode()), ("docs/doc.rst", RST.encode()),
             ("README.md", b"# T\n\nText one.\nText two.\n")]
    first, _ = chunking.chunk_files(files)
    second, _ = chunking.chunk_files(list(reversed(files)))
    assert table_sha256(first) == table_sha256(second)
    assert first["chunk_id"].is_unique
    assert list(first["source"].drop_duplicates()) == ["README.md", "docs/doc.rst", "src/p/mod.py"]


@pytest.mark.parametrize("symbol, header", [
    (("class A", "def f", "part 2 of 3"), "f.py › class A › def f (part 2 of 3)"),
    (("Options", "Multiple Options"), "f.py › Options › Multiple Options"),
    ((), "f.py"),
])
def test_header_names_file_and_symbol_path(symbol, header):
    assert chunking.render_header("f.py", symbol) == header
