"""After a rubric revision, grading the packets made under the old rubric is refused.

Packets carry the rubric version they were made under (and their folder's manifest the
rubric file's sha256). A grade made from them would record that version beside the new
rubric's sha256 and be stale at once, so `relgrade grade run`, `relgrade grade import` and
the grading page (`relgrade serve`) refuse them with one `Error:` line naming both rubrics and the `dvc repro ...:packets` that
rebuilds them, and record nothing; the commands status prints name that rebuild first.
Run as a user types them, at the repository's top, on the tiny grading set-up of
tests/graders/experiment.py placed at experiments/sub.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from click.testing import CliRunner

import relgrade
from relgrade.cli import main
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import grade_commands
from relgrade.protocol.bank import pending_message
from tests.graders import experiment as rig

REBUILD = "dvc repro experiments/sub/dvc.yaml:packets"
RUN = "relgrade grade run --grader grader-a --experiment experiments/sub"


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    rig.build(tmp_path / "experiments" / "sub")
    return tmp_path / "experiments" / "sub"


def _revise(sub: Path) -> None:
    """Point params at rubric v2 (a new file), as the disputes guide says."""
    (sub / "rubric/v2.md").write_text((sub / "rubric/v1.md").read_text().replace(
        "version: v1", "version: v2\nrevises: v1\nchanges: preamble") + "A new rule.\n")
    params = yaml.safe_load((sub / "params.yaml").read_text())
    params["grading"].update(rubric="rubric/v2.md", rubric_version="v2")
    (sub / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _run(top: Path, monkeypatch, *args):
    monkeypatch.chdir(top)
    return CliRunner().invoke(main, list(args))


def _errors(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error:")]


def test_grade_run_after_a_revision_refuses_the_v1_packets_and_records_nothing(
        tmp_path, monkeypatch):
    sub = _repo(tmp_path)
    _revise(sub)
    result = _run(tmp_path, monkeypatch, *RUN.split()[1:])
    assert result.exit_code == 1, result.output
    (line,) = _errors(result)
    assert "made under rubric v1" in line
    v2 = hashlib.sha256((sub / "rubric/v2.md").read_bytes()).hexdigest()
    assert f"params name rubric v2 (sha256 {v2[:12]}, rubric/v2.md)" in line
    assert line.endswith(f"Rebuild the packets first: {REBUILD}")
    assert not (sub / "data/grades").exists()  # nothing recorded, no sidecar either


def test_grade_import_after_a_revision_refuses_and_records_nothing(tmp_path, monkeypatch):
    sub = _repo(tmp_path)
    _revise(sub)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"query_id": "q01", "chunk_id": "q01-c0",
                                "reason": "defines f", "grade": 2}) + "\n")
    result = _run(tmp_path, monkeypatch, "grade", "import", "--grader", "grader-a",
                  "--experiment", "experiments/sub", str(rows))
    assert result.exit_code == 1, result.output
    (line,) = _errors(result)
    assert "made under rubric v1" in line and "params name rubric v2" in line
    assert line.endswith(REBUILD)
    assert not (sub / "data/grades").exists()


def test_an_edited_rubric_file_of_the_same_version_refuses_packets_by_sha256(
        tmp_path, monkeypatch):
    sub = _repo(tmp_path)
    old = hashlib.sha256((sub / "rubric/v1.md").read_bytes()).hexdigest()
    # the packets stage records what it built for, the rubric's bytes among it
    (sub / "data/packets/manifest.json").write_text(json.dumps(
        {"round": 1, "rubric_version": "v1", "rubric_sha256": old}))
    with (sub / "rubric/v1.md").open("a") as f:
        f.write("An edit without a new version.\n")
    new = hashlib.sha256((sub / "rubric/v1.md").read_bytes()).hexdigest()
    result = _run(tmp_path, monkeypatch, *RUN.split()[1:])
    assert result.exit_code == 1, result.output
    (line,) = _errors(result)
    assert f"made under rubric v1 (sha256 {old[:12]})" in line
    assert f"params name rubric v1 (sha256 {new[:12]}, rubric/v1.md)" in line
    assert not (sub / "data/grades").exists()


def test_grade_lines_from_rebuilt_packets_carry_the_version_and_sha256_of_one_rubric(
        tmp_path, monkeypatch):
    sub = _repo(tmp_path)
    _revise(sub)
    for f in (sub / "data/packets").rglob("*.json"):  # what the rebuild writes: v2 packets
        f.write_text(f.read_text().replace('"rubric_version": "v1"', '"rubric_version": "v2"'))
    v2 = hashlib.sha256((sub / "rubric/v2.md").read_bytes()).hexdigest()
    (sub / "data/packets/manifest.json").write_text(json.dumps(
        {"round": 1, "rubric_version": "v2", "rubric_sha256": v2}))
    result = _run(tmp_path, monkeypatch, *RUN.split()[1:])
    assert result.exit_code == 0, result.output
    bank = rig.read_rows(sub / "data/grades/grader-a/round-1.bank.jsonl")
    assert len(bank) == 4 * 7  # 4 queries of 7 chunks
    assert {(b["rubric_version"], b["rubric_sha256"]) for b in bank} == {("v2", v2)}


def test_status_commands_name_the_packets_rebuild_before_grading_while_they_are_stale(
        tmp_path):
    sub = _repo(tmp_path)
    assert grade_commands(Experiment.load(sub / "params.yaml"))["grader-a"] == RUN
    _revise(sub)
    how = grade_commands(Experiment.load(sub / "params.yaml"))
    assert how["grader-a"] == f"{REBUILD}`, then `{RUN}"
    # the line status and `dvc repro` print: the rebuild once, then each grader's command
    owed = pd.DataFrame([("grader-a", "q01", "q01-c0", "stale"),
                         ("auditor-b", "q01", "q01-c0", "audit")],
                        columns=["grader", "query_id", "chunk_id", "why"])
    how["auditor-b"] = f"{REBUILD}`, then `relgrade serve --experiment experiments/sub"
    assert pending_message(owed, how=how) == (
        "grading: 1 pair needs grader-a (1 stale), 1 needs auditor-b (audit query q01); "
        f"run `{REBUILD}`, then `{RUN}` and `relgrade serve --experiment experiments/sub`")


def test_the_grading_page_refuses_to_start_on_the_v1_packets(tmp_path):
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    sub = tmp_path / "experiments" / "sub"
    rig.build(sub, graders={"carol": {"role": "grader", "kind": "human", "family": "person"}})
    _revise(sub)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(relgrade.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    # a subprocess with a timeout: a page that started anyway would serve until stopped
    proc = subprocess.run([sys.executable, "-c", "from relgrade.cli import main; main()", "serve", "--experiment",
                           "experiments/sub", "--port", "0", "--tokens",
                           str(tmp_path / "tokens.yaml")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("Error:")]
    assert "made under rubric v1" in line and "params name rubric v2" in line
    assert line.endswith(REBUILD)
    assert not (sub / "data/grades").exists()
