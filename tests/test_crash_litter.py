"""`kill -9` of `relgrade grade run` leaves no grader process running and no litter behind.

Grader processes run in their own sessions, so nothing but the run itself stops them; a
killed run must not leave them going (a paid model command would finish unobserved).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from relgrade.graders.command import RUN_MARKER, kill_stragglers
from tests.graders import experiment as ex

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}")


def with_arg(marker):
    """Pids of live processes whose command line holds ``marker``."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        if marker.encode() in cmd and stat.rsplit(")", 1)[1].split()[0] != "Z":
            pids.append(int(name))
    return pids


def wait_until(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def run_cmd(root):
    return [sys.executable, "-c", "from relgrade.cli import main; main()", "grade", "run",
            "--grader", "grader-a", "--params", str(root / "params.yaml"), "--no-progress"]


def litter(root):
    """Empty files and temporary files anywhere under the grades folder."""
    folder = root / "data/grades"
    return sorted(str(p.relative_to(root)) for p in folder.rglob("*")
                  if p.is_file() and (p.stat().st_size == 0 or p.name.endswith(".tmp")))


@pytest.mark.slow
def test_kill_9_of_grade_run_leaves_no_grader_process_and_no_litter(tmp_path):
    marker = f"relgrade-test-marker-{uuid.uuid4().hex}"

    def build(mode):
        return ex.build(tmp_path, queries=4, chunks=5, graders={
            "grader-a": {"role": "grader", "kind": "model", "family": "test",
                         "command": ex.command(mode) + [marker], "timeout": 60,
                         "retries": 0, "workers": 2}})

    build("sleep:30")  # a slow model call: it would go on long after the run is gone
    for _ in range(3):
        proc = subprocess.Popen(run_cmd(tmp_path), env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        assert wait_until(lambda: len(with_arg(marker)) >= 1, 20), "no grader started"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert wait_until(lambda: not with_arg(marker), 2.0), \
            f"grader processes outlived the killed run: {with_arg(marker)}"
    packets = build("ok")
    final = subprocess.run(run_cmd(tmp_path), env=ENV, capture_output=True, text=True,
                           timeout=120)
    assert final.returncode == 0, final.stderr
    assert "0 of 20 pairs still lack a grade" in final.stdout
    assert with_arg(marker) == []
    assert litter(tmp_path) == []
    folder = tmp_path / "data/grades/grader-a"
    assert sorted(p.name for p in folder.iterdir()) == ["round-1.bank.jsonl", "round-1.jsonl",
                                                           "round-1.meta.json"]
    assert len(ex.read_rows(folder / "round-1.jsonl")) == sum(
        len(b) for p in packets.values() for b in p["batches"])


def test_a_straggler_carrying_the_runs_marker_is_killed_on_the_next_start(tmp_path):
    marker = str(tmp_path / "round-1.jsonl")
    env = dict(os.environ, **{RUN_MARKER: marker})
    straggler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 env=dict(os.environ, **{RUN_MARKER: marker + ".other"}))
    try:
        assert kill_stragglers(marker) == [straggler.pid]
        assert straggler.wait(timeout=5) == -signal.SIGKILL
        assert bystander.poll() is None
    finally:
        for p in (straggler, bystander):
            p.kill()
            p.wait()


def test_a_failed_grade_import_leaves_no_empty_grade_file(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from relgrade.cli import main

    ex.build(tmp_path, queries=1, chunks=3, graders={
        "grader-a": {"role": "grader", "kind": "model", "family": "test",
                     "command": ex.command("ok")}})
    pool = tmp_path / "data/pool/pool.parquet"
    pool.parent.mkdir(parents=True)
    import pandas as pd

    pd.DataFrame({"query_id": ["q01"], "chunk_id": ["q01-c0"]}).to_parquet(pool, index=False)
    src = tmp_path / "new.jsonl"
    src.write_text('{"query_id": "q01", "chunk_id": "q01-c0", "reason": "x", "grade": 2}\n')
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data/grades/grader-a").mkdir(parents=True)
    (tmp_path / "data/grades/grader-a/.round-1.jsonl.inflight").write_bytes(
        b"relgrade-inflight 1 2\n")
    res = CliRunner().invoke(main, ["grade", "import", str(src), "--grader", "grader-a",
                                    "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 1, res.output
    assert not (tmp_path / "data/grades/grader-a/round-1.jsonl").exists()
    assert litter(tmp_path) == []
