"""A sub-experiment's stage error names its file from the repository's top, in its fix too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from relgrade.errors import InputError
from relgrade.experiment.stage import run_stage
from relgrade.protocol.audit import check_lock

REPO = Path(__file__).resolve().parents[1]
LOCK = {"round": 1, "pool_version": "p-0", "sha256": "0" * 64,
        "queries": [{"query_id": "q1", "group": "g", "unique_share": 0.5, "reason": "r"}]}


@pytest.fixture
def sub(tmp_path, monkeypatch):
    """A repository's top (``stages/`` and ``dvc.yaml``) with experiments/x below it, the
    working folder, as DVC runs x's stages."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    folder = tmp_path / "experiments" / "x"
    folder.mkdir(parents=True)
    shutil.copy(REPO / "params.yaml", folder / "params.yaml")
    monkeypatch.chdir(folder)
    return folder


def _error(capsys, main) -> str:
    with pytest.raises(SystemExit) as done:
        run_stage(main)
    assert done.value.code == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    return lines[0]


def test_the_lock_named_in_a_fix_is_the_one_named_first_both_from_the_top(sub, capsys):
    def main(ex):
        check_lock(LOCK, path=ex.path("audit_lock"))

    line = _error(capsys, main)
    assert line.startswith("Error: experiments/x/data/audit/lock.json: ")
    assert "does not match its sha256" in line
    # typed at the top, the fix restores this experiment's lock, not the top experiment's
    assert ("Restore the lock from git (`git checkout -- experiments/x/data/audit/lock.json`)"
            in line)
    assert line.count("data/audit/lock.json") == 2


def test_only_the_errors_own_path_as_a_whole_word_is_renamed(sub, capsys):
    def main(ex):
        raise InputError("a.json is older than data/a.json.bak and b/a.json", path="a.json",
                         found="a.json.", fix="Remove a.json, keep x/a.json and a.json2")

    assert _error(capsys, main) == (
        "Error: experiments/x/a.json: experiments/x/a.json is older than data/a.json.bak and "
        "b/a.json (found experiments/x/a.json.). Remove experiments/x/a.json, keep x/a.json "
        "and a.json2")


def test_a_sidecar_beside_the_file_is_named_from_the_top_with_it(sub, capsys):
    # as the grade store words a grade file and its bank sidecar that disagree
    from relgrade.protocol.sidecar import repair_hint

    grades = "data/grades/grader-a/round-1.jsonl"

    def main(ex):
        raise InputError("the grade file and its bank sidecar disagree", path=grades, line=3,
                         fix=repair_hint(grades, "data/grades/grader-a/round-1.bank.jsonl")
                         + "; data/key/record.json is not read")

    line = _error(capsys, main)
    assert line.startswith("Error: experiments/x/data/grades/grader-a/round-1.jsonl:3: ")
    assert ("(`git checkout -- experiments/x/data/grades/grader-a/round-1.jsonl "
            "experiments/x/data/grades/grader-a/round-1.bank.jsonl`)") in line
    # a file in another folder is not known to be a path from the stage's folder
    assert line.endswith("; data/key/record.json is not read")


def test_a_relgrade_command_in_a_fix_names_the_experiment_it_acts_on(sub, capsys):
    def main(ex):
        check_lock(LOCK, path=ex.path("audit_lock"))

    line = _error(capsys, main)
    # typed at the top as printed, the redraw acts on experiments/x, not the top experiment
    assert "or draw a new sample for the round with " \
        "`relgrade audit redraw --experiment experiments/x`" in line


def test_a_command_already_naming_an_experiment_and_one_without_a_path_keep_their_words(
        sub, capsys):
    def main(ex):
        raise InputError("no human sample", fix="run `relgrade status --experiment other`, "
                         "then `relgrade audit redraw`; not relgrade status")

    assert _error(capsys, main) == (
        "Error: no human sample. run `relgrade status --experiment other`, then "
        "`relgrade audit redraw --experiment experiments/x`; not relgrade status")


def _parses(command: str, tmp_path) -> None:
    """Parse a printed relgrade command with relgrade's own CLI, as typed (FILE an existing
    file): click raises UsageError on a missing option or argument."""
    import shlex
    import warnings

    import click

    from relgrade.cli import main as cli

    (tmp_path / "FILE").write_text("")
    args = [str(tmp_path / "FILE") if a == "FILE" else a for a in shlex.split(command)][1:]
    ctx, group = cli.make_context("relgrade", list(args)), cli
    while isinstance(group, click.Group):
        with warnings.catch_warnings():  # the subcommand's words, under either click 8 name
            warnings.simplefilter("ignore", DeprecationWarning)
            rest = [*ctx.protected_args, *ctx.args]
        name, group, args = group.resolve_command(ctx, rest)
        ctx = group.make_context(name, list(args), parent=ctx)


def test_a_grade_file_and_sidecar_that_disagree_name_complete_regrade_commands(
        sub, capsys, tmp_path):
    from relgrade.protocol.sidecar import repair_hint

    grades = "data/grades/grader-a/round-1.jsonl"

    def main(ex):
        raise InputError("the grade file and its bank sidecar disagree", path=grades, line=3,
                         fix=repair_hint(grades, "data/grades/grader-a/round-1.bank.jsonl"))

    import re

    commands = re.findall(r"`(relgrade [^`]*)`", _error(capsys, main))
    assert commands == [
        "relgrade grade run --grader grader-a --experiment experiments/x",
        "relgrade serve --experiment experiments/x",
        "relgrade grade import FILE --grader grader-a --experiment experiments/x"]
    for command in commands:
        _parses(command, tmp_path)
