"""Every command's usage errors - a missing required option or argument, a bad choice, an
unknown option - are one ``Error:`` line naming the option, the rule and the command's
``--help``, exit status 2 (click's for usage errors), and nothing else printed."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from tests.test_no_traceback import commands


def _one_line(result) -> str:
    assert "Traceback" not in result.output and "Usage:" not in result.output, result.output
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_grade_run_without_grader_names_the_option_and_its_help(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_line(CliRunner().invoke(main, ["grade", "run", "--dry-run"]))
    assert line == ("Error: Missing option '--grader': relgrade grade run requires it. "
                    "See relgrade grade run --help")
    assert list(tmp_path.iterdir()) == []


def test_reconcile_without_ab_names_the_option_and_its_help(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_line(CliRunner().invoke(main, ["reconcile"]))
    assert line == ("Error: Missing option '--ab': relgrade reconcile requires it. "
                    "See relgrade reconcile --help")


def test_an_unknown_command_and_a_top_level_unknown_option_are_one_line():
    assert _one_line(CliRunner().invoke(main, ["evalute"])) == (
        "Error: No such command 'evalute'. Did you mean 'evaluate'? See relgrade --help")
    assert _one_line(CliRunner().invoke(main, ["--bogus"])) == (
        "Error: No such option '--bogus': relgrade has no such option. See relgrade --help")


def test_a_mistyped_option_names_the_close_ones_in_the_same_line():
    assert _one_line(CliRunner().invoke(main, ["evaluate", "--threads", "0", "a", "b"])) == (
        "Error: No such option '--threads': relgrade evaluate has no such option (did you "
        "mean --ties?). See relgrade evaluate --help")


def test_a_commands_own_usage_rule_is_one_line():
    assert _one_line(CliRunner().invoke(main, ["status", "--experiment", "a", "--params",
                                               "b.yaml"])) == (
        "Error: give --experiment or --params, not both. See relgrade status --help")


ALL = [pytest.param(path, command, id=" ".join(path)) for path, command in commands()]


@pytest.mark.parametrize("path, command", ALL)
def test_every_command_refuses_an_unknown_option_in_one_line(path, command):
    line = _one_line(CliRunner().invoke(main, [*path, "--no-such-option-x"]))
    where = " ".join(("relgrade", *path))
    assert line == (f"Error: No such option '--no-such-option-x': {where} has no such option. "
                    f"See {where} --help")


@pytest.mark.parametrize("path, command",
                         [p for p in ALL if any(q.required for q in p.values[1].params)])
def test_every_command_refuses_a_missing_required_parameter_in_one_line(path, command):
    line = _one_line(CliRunner().invoke(main, [*path]))
    where = " ".join(("relgrade", *path))
    assert line.startswith("Error: Missing ") and line.endswith(
        f": {where} requires it. See {where} --help"), line
    named = [q for q in command.params if q.required
             and (f"'{q.opts[0]}'" in line or f"'{q.human_readable_name}'" in line)]
    assert named, line


CHOICES = [pytest.param(path, command, p, id=f"{' '.join(path)} {p.opts[0]}")
           for path, command in commands() for p in command.params
           if isinstance(p, click.Option) and isinstance(p.type, click.Choice)]


@pytest.mark.parametrize("path, command, param", CHOICES)
def test_every_choice_option_refuses_a_bad_choice_in_one_line(path, command, param):
    line = _one_line(CliRunner().invoke(main, [*path, param.opts[0], "no-such-choice"]))
    where = " ".join(("relgrade", *path))
    assert line.startswith(f"Error: Invalid value for '{param.opts[0]}': 'no-such-choice' is "
                           "not one of ") and line.endswith(f". See {where} --help"), line
    for choice in param.type.choices:
        assert f"'{choice}'" in line


def test_the_walk_finds_choices_and_required_parameters_to_check():
    assert len(CHOICES) >= 5
    assert sum(any(q.required for q in c.params) for _, c in commands()) >= 10
