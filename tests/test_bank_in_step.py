"""A grade file and its bank sidecar stay in step: row i was made on bank line i.

A ``kill -9`` between a batch's bank lines and its grade rows leaves bank lines without rows;
they were never acknowledged, so the next writer cuts them away and every reader ignores
them. What a grade was made on is read from the line paired with its row, never from the
pair's last bank line, so a pair regraded after such a kill is neither stuck (the store
thinking it current while the bank says stale) nor credited to the wrong text.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from relgrade.errors import InputError
from relgrade.graders.store import GradeStore, bank_path, read_bank
from relgrade.io import files as io
from relgrade.protocol import grades

ROOT = Path(__file__).resolve().parents[1]
GRADERS = {"grader-a": {"role": "grader", "kind": "model", "family": "f"}}
P = ("q1", "c1")


def made_on(text: str) -> dict:
    """What a grade of P is made on when the chunk reads ``text`` (content hash = sha256 of
    the text here: any function of the text will do for the store)."""
    return {"content_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "intent_sha256": "i" * 64, "rubric_version": "v1", "rubric_sha256": "r" * 64}


def row(grade: int, reason: str) -> dict:
    return {"query_id": P[0], "chunk_id": P[1], "reason": reason, "grade": grade}


def record(path: Path, text: str, rows: list[dict]) -> None:
    with GradeStore(path, made_on=lambda r: made_on(text)) as store:
        store.append(rows)


KILLER = textwrap.dedent("""
    import json, os, signal, sys
    from relgrade.graders.store import GradeStore

    path, made = sys.argv[1], json.loads(sys.argv[2])
    real_write = os.write

    def write(fd, data):
        # kill -9 the moment the grade row itself is about to be written (its bank line is
        # already on disk)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/round-1.jsonl"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real_write(fd, data)

    store = GradeStore(path, made_on=lambda r: made).open()
    os.write = write
    store.append([json.loads(sys.argv[3])])
""")


def kill_between_bank_line_and_row(path: Path, text: str, r: dict) -> None:
    """Regrade P on ``text`` in a process killed by SIGKILL between the two writes."""
    proc = subprocess.run([sys.executable, "-c", KILLER, str(path),
                           json.dumps(made_on(text)), json.dumps(r)],
                          env=dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def bank_table(path: Path):
    """The judgment bank of one grade file, as the grades stage reads it."""
    f = grades.GraderFile(rows=io.iter_jsonl(path), source=path.as_posix(), sha256="s",
                          round=1, bank=read_bank(path),
                          bank_source=bank_path(path).as_posix())
    return grades.judgment_bank({"grader-a": [f]}, graders=GRADERS, scale=[0, 1, 2],
                                max_reason_words=15)


def made_on_of_latest(path: Path) -> str:
    """The content hash the latest grade of P was made on, as the grades stage pairs them."""
    return bank_table(path)["content_sha256"].iloc[-1]


def test_a_kill_between_a_regrades_bank_line_and_its_row_leaves_the_pair_owed_not_stuck(tmp_path):
    path = tmp_path / "round-1.jsonl"
    record(path, "A", [row(2, "defines it")])
    # the chunk now reads B: P is stale; the regrade is killed after its bank line
    kill_between_bank_line_and_row(path, "B", row(0, "no longer defines it"))
    assert len(read_bank(path)) == 2 and len(io.read_jsonl(path)) == 1
    # the grades stage pairs the one row with what it was made on: A (stale for B) ...
    assert made_on_of_latest(path) == made_on("A")["content_sha256"]
    # ... and so does the next run: P is owed, not taken for current
    with GradeStore(path, made_on=lambda r: made_on("B")) as store:
        assert not store.is_current(P)
        assert store.current_keys() == frozenset()
        # opening cut the bank line that never got its row
        assert len(read_bank(path)) == 1
        store.append([row(0, "no longer defines it")])
    # the regrade is current for B: nothing is owed any more
    table = bank_table(path)
    assert table["content_sha256"].tolist() == [made_on("A")["content_sha256"],
                                                made_on("B")["content_sha256"]]
    assert table["grade"].tolist() == [2, 0]


def test_a_grade_file_checked_out_alone_behind_its_bank_is_owed_again_not_stuck(tmp_path):
    path = tmp_path / "round-1.jsonl"
    record(path, "A", [row(2, "defines it")])
    older = path.read_bytes()
    record(path, "B", [row(0, "no longer defines it")])
    path.write_bytes(older)  # `git checkout` of the grade file alone: its bank stays newer
    assert made_on_of_latest(path) == made_on("A")["content_sha256"]
    with GradeStore(path, made_on=lambda r: made_on("B")) as store:
        assert not store.is_current(P)


def test_a_grade_made_on_text_c_is_never_counted_for_text_b(tmp_path):
    path = tmp_path / "round-1.jsonl"
    record(path, "A", [row(2, "defines it")])
    kill_between_bank_line_and_row(path, "B", row(1, "on text B"))  # never acknowledged
    record(path, "C", [row(0, "on text C")])  # the chunk was edited again, to C
    table = bank_table(path)
    assert table["reason"].tolist() == ["defines it", "on text C"]
    # the grade made on C is paired with C's record, so it is current for C and not for B
    assert table["content_sha256"].tolist() == [made_on("A")["content_sha256"],
                                                made_on("C")["content_sha256"]]
    with GradeStore(path, made_on=lambda r: made_on("B")) as store:
        assert not store.is_current(P)
    with GradeStore(path, made_on=lambda r: made_on("C")) as store:
        assert store.is_current(P)


def test_a_grade_file_and_bank_that_disagree_in_their_body_are_refused_naming_both(tmp_path):
    path = tmp_path / "round-1.jsonl"
    with GradeStore(path, made_on=lambda r: made_on("A")) as store:
        store.append([row(2, "defines it"),
                      {"query_id": "q1", "chunk_id": "c2", "reason": "other", "grade": 0}])
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[::-1]) + "\n")  # rows moved: row 1 is now (q1, c2)
    bank = bank_path(path).as_posix()
    g = path.parent.name  # the grader: a grade file's folder
    expected = (f"{path.as_posix()}:1: pair (q1, c2): the grade file and its bank sidecar "
                f"{bank} disagree: the record of this row (bank line 1) is of another pair "
                f"(found record of (q1, c1)). Restore both from the same commit "
                f"(`git checkout -- {path.as_posix()} {bank}`), then grade again what is "
                f"missing with `relgrade grade run --grader {g}` (a command grader), "
                f"`relgrade serve` or `relgrade grade import FILE --grader {g}` (people's "
                "grades in FILE); relgrade never guesses which record a grade was made on")
    with pytest.raises(InputError) as e:
        GradeStore(path, made_on=lambda r: made_on("A")).open()
    assert str(e.value) == expected
    with pytest.raises(InputError) as e:
        bank_table(path)
    assert str(e.value) == expected


def test_a_grade_edited_under_its_record_is_refused_as_another_grade_of_the_pair(tmp_path):
    path = tmp_path / "round-1.jsonl"
    record(path, "A", [row(2, "defines it")])
    path.write_text(path.read_text().replace('"grade":2', '"grade":0'))
    with pytest.raises(InputError, match=r"is of another grade of the pair"):
        bank_table(path)


def test_a_new_bank_line_names_the_sha256_of_its_grade_rows_line(tmp_path):
    from relgrade.protocol.sidecar import row_sha256

    path = tmp_path / "round-1.jsonl"
    record(path, "A", [row(2, "défini ici")])
    line = path.read_bytes().rstrip(b"\n")
    (_, rec), = read_bank(path)
    assert rec["row_sha256"] == hashlib.sha256(line).hexdigest() == row_sha256(row(2, "défini ici"))


@pytest.mark.parametrize("grader", ["grader-a", "auditor-b"])
def test_the_repositorys_committed_grade_files_still_pair_row_by_row(grader):
    # written before bank lines carried row_sha256: paired by position and pair alone
    path = ROOT / "data/grades" / grader / "round-1.jsonl"
    table = bank_table(path) if grader == "grader-a" else grades.judgment_bank(
        {grader: [grades.GraderFile(rows=io.iter_jsonl(path), source=path.as_posix(),
                                    sha256="s", round=1, bank=read_bank(path),
                                    bank_source=bank_path(path).as_posix())]},
        graders={grader: {"role": "auditor", "kind": "model", "family": "f"}},
        scale=[0, 1, 2], max_reason_words=15)
    records = [r for _, r in read_bank(path)]
    assert len(table) == len(records) == len(io.read_jsonl(path))
    assert table["content_sha256"].tolist() == [r["content_sha256"] for r in records]
