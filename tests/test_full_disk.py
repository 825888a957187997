"""A full disk never tears a grade file: a refused write is cut back and nothing acknowledged.

The disk is filled for real: each test runs relgrade in a process whose file-size limit
(``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored) makes a write past the limit fail with ``EFBIG``
after writing what fits, exactly as a full disk cuts a write short with ``ENOSPC``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from relgrade.graders.store import bank_path, read_bank
from relgrade.io import files as io
from relgrade.protocol.sidecar import pair_rows
from tests.graders import experiment as ex

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}")


def run_limited(args, *, limit: int, cwd=None, timeout=120):
    """Run ``args`` with files limited to ``limit`` bytes (``EFBIG`` past it)."""

    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(args, env=ENV, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=cap)


def in_step(path: Path) -> list[dict]:
    """The grade file's rows, after checking every line is whole and paired with its record."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "a torn last line"
    rows = list(io.iter_jsonl(path))
    pair_rows(rows, read_bank(path) or [], source=path, bank_source=bank_path(path))
    assert len(read_bank(path)) == len(rows)
    return [r for _, r in rows]


STORE = textwrap.dedent("""
    import json, resource, sys
    from relgrade.errors import StorageError
    from relgrade.graders.store import GradeStore, bank_path

    path = sys.argv[1]
    made = {"content_sha256": "c" * 64, "intent_sha256": "i" * 64, "rubric_version": "v1",
            "rubric_sha256": "r" * 64}
    row = lambda c, reason: {"query_id": "q1", "chunk_id": c, "reason": reason, "grade": 1}
    out = {}
    with GradeStore(path, made_on=lambda r: made).open() as store:
        store.append([row("c1", "first")])
        with open(path, "rb") as f:
            out["before"] = f.read().decode()
        # the bank lines of the next batch fit; its grade rows do not
        limit = bank_path(path).stat().st_size + 3 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        try:
            store.append([row("c2", "x" * 2000), row("c3", "y" * 2000)])
            out["error"] = None
        except StorageError as e:
            out["error"] = str(e)
        with open(path, "rb") as f:
            out["after"] = f.read().decode()
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        store.append([row("c4", "after space was freed")])
    print(json.dumps(out))
""")


def test_a_grade_write_cut_short_by_a_full_disk_is_cut_back_and_refused(tmp_path):
    path = tmp_path / "round-1.jsonl"
    proc = subprocess.run([sys.executable, "-c", STORE, str(path)], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["error"] == (
        f"{path.as_posix()}: the write was refused by the disk (File too large): no space "
        "left on the device or the file-size limit reached. Nothing of this batch was saved "
        "and the file is cut back to its last whole line; free space, then save again")
    assert out["after"] == out["before"]  # not one byte of the refused batch is left
    # the next batch starts on a whole line, and the bank holds no line of the refused one
    assert [r["chunk_id"] for r in in_step(path)] == ["c1", "c4"]


def test_grade_run_on_a_full_disk_exits_with_an_error_and_leaves_whole_lines(tmp_path):
    graders = {"grader-a": {"role": "grader", "kind": "model", "family": "test",
                            "command": ex.command("ok"), "timeout": 20, "retries": 0,
                            "workers": 1}}
    packets = ex.build(tmp_path, queries=6, chunks=10, graders=graders)
    cmd = [sys.executable, "-c", "from relgrade.cli import main; main()", "grade", "run",
           "--grader", "grader-a", "--params", str(tmp_path / "params.yaml"), "--no-progress"]
    proc = run_limited(cmd, limit=4096)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("Error: ")
    assert "no space left on the device" in proc.stderr
    grades = tmp_path / "data/grades/grader-a/round-1.jsonl"
    before = in_step(grades) if grades.exists() else []
    assert 0 < len(before) < 60
    # with space again, a plain rerun grades exactly what is missing, each pair once
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = in_step(grades)
    assert rows[:len(before)] == before
    assert sorted((r["query_id"], r["chunk_id"]) for r in rows) == sorted(
        (q, c["chunk_id"]) for q, p in packets.items() for b in p["batches"] for c in b)


WEB = textwrap.dedent("""
    import json, re, resource, sys
    from fastapi.testclient import TestClient
    from relgrade.cli.serve import build_site
    from relgrade.graders.store import bank_path
    from relgrade.web.app import create_app

    params, grades = sys.argv[1], sys.argv[2]
    site, stores = build_site(params, graders=["alice"])
    client = TestClient(create_app(site))
    client.get(f"/login?token={site.graders['alice'].token}")

    def save(qid, b, n, reason):
        page = client.get(f"/g/alice/q/{qid}/{b}").text
        token = re.search(r'name="csrf" value="([^"]*)"', page).group(1)
        data = {"csrf": token}
        for i in range(n):
            data[f"grade-{i}"], data[f"reason-{i}"] = "1", reason
        return client.post(f"/g/alice/q/{qid}/{b}", data=data, follow_redirects=False,
                           headers={"origin": "http://testserver"})

    out = {"first": save("q01", 0, 5, "points to it").status_code}
    size = max(len(open(grades, "rb").read()), bank_path(grades).stat().st_size)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 512, resource.RLIM_INFINITY))
    r = save("q01", 1, 5, "an extraordinarily long reason " * 9)
    out["full"] = [r.status_code, r.text]
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
    out["again"] = save("q01", 1, 5, "points to it").status_code
    site.writer.close()
    for s in stores:
        s.close()
    print(json.dumps(out))
""")


def test_a_save_on_a_full_disk_is_refused_on_the_page_and_the_next_save_is_whole(tmp_path):
    graders = {"alice": {"role": "grader", "kind": "human", "family": "person"}}
    ex.build(tmp_path, queries=1, chunks=10, audit=0, graders=graders)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["grading"]["max_reason_words"] = 40
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    grades = tmp_path / "data/grades/alice/round-1.jsonl"
    proc = subprocess.run([sys.executable, "-c", WEB, str(tmp_path / "params.yaml"),
                           str(grades)], env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["first"] == 303
    status, page = out["full"]
    assert status == 503
    assert "no space left on the device" in page and "Nothing was saved" in page
    assert out["again"] == 303
    rows = in_step(grades)
    assert [r["chunk_id"] for r in rows] == [f"q01-c{j}" for j in range(10)]
    assert {r["reason"] for r in rows} == {"points to it"}

