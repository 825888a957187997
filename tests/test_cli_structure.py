"""The CLI's shape: commands registered in one place, modules that do not import each other,
one number format and one table, shared options."""

from __future__ import annotations

import ast
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.cli.options import format_option, parse_scale, scale_option, seed_option
from relgrade.cli.render import handle_errors, number, table
from relgrade.errors import InputError

CLI = Path(__file__).resolve().parents[1] / "src" / "relgrade" / "cli"
SHARED = {"relgrade.cli.options", "relgrade.cli.render"}
# serve still borrows the experiment-file helpers of graderun until relgrade.experiment
# owns them
BORROWED = {("serve", "relgrade.cli.graderun")}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("path", sorted(p for p in CLI.glob("*.py") if p.name != "__init__.py"),
                         ids=lambda p: p.stem)
def test_a_command_module_imports_no_other_command_module(path):
    # relgrade.cli.X: another command module, or a name of the package (main, ...)
    crossing = {m for m in _imports(path)
                if m.startswith("relgrade.cli.") and m.count(".") == 2} - SHARED
    assert {(path.stem, m) for m in crossing} <= BORROWED


def test_only_the_package_registers_commands():
    for path in CLI.glob("*.py"):
        if path.name != "__init__.py":
            assert ".add_command(" not in path.read_text(), path.name
    assert main.commands["grade"].commands.keys() == {"correct", "export", "import", "run"}
    assert set(main.commands) == {"aggregate", "agreement", "audit", "clicks", "compare", "evaluate",
                                  "grade", "intents", "packets", "queries", "serve",
                                  "status", "budget", "init", "design", "corpus", "pool", "metrics",
                                  "pipeline", "arm", "judge", "reconcile", "disputes", "drift"}


def test_number_prints_undefined_for_what_does_not_exist():
    assert number(None) == "undefined"
    assert number(float("nan")) == "undefined"
    assert number(2 / 3) == "0.6667"
    assert number(2 / 3, digits=None) == "0.6666666666666666"
    assert number(7) == "7"


def test_table_aligns_columns_two_spaces_apart():
    assert table(["a", "bb"], [["ccc", "1"], ["d", "22"]], right={1}) == [
        "a    bb", "ccc   1", "d    22"]


def test_parse_scale_sorts_and_refuses_what_is_not_a_scale():
    assert parse_scale("2, 0,1") == [0, 1, 2]
    assert parse_scale(None) is None
    with pytest.raises(InputError, match="--scale lists integer grades separated by commas"):
        parse_scale("0,one")
    with pytest.raises(InputError, match="at least two distinct grades"):
        parse_scale("1")


def test_shared_options_keep_their_names_and_defaults():
    @click.command()
    @scale_option()
    @seed_option(default=None)
    @format_option(markdown=True)
    @handle_errors
    def cmd(scale, seed, as_json, as_markdown):
        parse_scale(scale)
        click.echo(f"{scale} {seed} {as_json} {as_markdown}")

    runner = CliRunner()
    assert runner.invoke(cmd, []).output == "0,1,2 None False False\n"
    assert runner.invoke(cmd, ["--seed", "3", "--json", "--markdown"]).output == \
        "0,1,2 3 True True\n"
    assert runner.invoke(cmd, ["--seed", "-1"]).exit_code == 2
    res = runner.invoke(cmd, ["--scale", "x"])
    assert res.exit_code == 1
    assert res.output == ("Error: --scale lists integer grades separated by commas "
                          "(found 'x'). For example --scale 0,1,2\n")
