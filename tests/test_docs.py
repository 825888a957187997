"""The documentation covers the command line: every command has help and a section in docs/cli.md."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from relgrade.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _commands(group: click.Group, prefix=()):
    for name, cmd in sorted(group.commands.items()):
        path = (*prefix, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path)
        else:
            yield path, cmd


def test_every_command_has_a_help_text():
    runner = CliRunner()
    for path, cmd in _commands(main):
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, path
        assert (cmd.help or "").strip(), f"relgrade {' '.join(path)} has no help text"


def test_every_command_has_a_section_in_the_cli_docs():
    text = DOCS.read_text()
    headings = [line for line in text.splitlines() if line.startswith("### `relgrade ")]
    for path, _ in _commands(main):
        name = "relgrade " + " ".join(path)
        assert any(h.startswith(f"### `{name}") and h[len(f"### `{name}"):][:1] in (" ", "`")
                   for h in headings), f"{name} is not documented in docs/cli.md"


def test_every_option_of_every_command_is_mentioned_in_the_cli_docs():
    text = DOCS.read_text()
    for path, cmd in _commands(main):
        for param in cmd.params:
            if isinstance(param, click.Option) and param.name not in ("help", "params"):
                assert any(opt in text for opt in param.opts), \
                    f"relgrade {' '.join(path)}: option {param.opts[0]} is not documented"
