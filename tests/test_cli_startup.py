"""The command line starts without the heavy libraries: commands are imported on demand."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from relgrade import __version__
from relgrade.cli import COMMAND_HELP, COMMANDS, main

HEAVY = ("pandas", "numpy", "scipy", "pyarrow", "pydantic", "duckdb", "statsmodels")


def _heavy_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("HEAVY:"))
    return [m for m in line.removeprefix("HEAVY:").split(",") if m]


def _all_commands(group: click.Group, prefix=()):
    for name in sorted(group.commands):
        cmd = group.commands[name]
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from _all_commands(cmd, (*prefix, name))


def test_importing_the_cli_imports_neither_pandas_nor_scipy_nor_numpy():
    assert _heavy_after("import relgrade.cli") == []


def test_version_and_top_level_help_import_no_command_module():
    code = ("from relgrade.cli import main\n"
            "for args in (['--version'], ['--help']):\n"
            "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
            "assert not [m for m in sys.modules if m.startswith('relgrade.cli.')\n"
            "            and m.split('.')[2] not in ('options', 'render')], sys.modules")
    assert _heavy_after(code) == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_help_imports_no_heavy_library(name):
    code = ("from relgrade.cli import main\n"
            f"try:\n    main([{name!r}, '--help'])\nexcept SystemExit:\n    pass")
    assert _heavy_after(code) == []


def test_every_command_and_subcommand_has_working_help():
    runner = CliRunner()
    seen = []
    for path, cmd in _all_commands(main):
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage: " in result.output and (cmd.help or "").strip(), path
        seen.append(" ".join(path))
    assert {"compare", "grade run", "grade import", "clicks pairs", "packets export"} <= set(seen)


def test_top_level_help_lists_each_command_with_the_start_of_its_own_help():
    assert set(COMMAND_HELP) == set(COMMANDS)
    for name, line in COMMAND_HELP.items():
        own = " ".join(main.commands[name].help.split())
        assert own.startswith(line.rstrip(".")), name
    out = CliRunner().invoke(main, ["--help"]).output
    for name in COMMANDS:
        assert f"  {name} " in out


def test_version_prints_the_package_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"relgrade, version {__version__}\n"


def test_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(main, ["evalute"])
    assert result.exit_code == 2
    assert "No such command 'evalute'" in result.output


def test_choices_spelled_in_command_modules_equal_the_librarys():
    from relgrade.cli import aggregate, clicks, packets
    from relgrade.clicks import pairs, propensity
    from relgrade.raters.aggregate import MAX_ITER, TOL
    from relgrade.raters.report import METHODS
    from relgrade.schema import ROLES

    assert tuple(aggregate.METHOD_NAMES) == tuple(METHODS)
    defaults = {p.name: p.default for p in aggregate.aggregate_cmd.params}
    assert (defaults["tol"], defaults["max_iter"]) == (TOL, MAX_ITER)
    assert tuple(packets.ROLE_NAMES) == tuple(ROLES)
    assert tuple(clicks.PROPENSITY_METHODS) == tuple(propensity.METHODS)
    assert clicks.DEFAULT_CLIP == pairs.DEFAULT_CLIP
    from relgrade.clicks import engine

    assert tuple(clicks.ENGINES) == tuple(engine.ENGINES)
    from relgrade.clicks.log import DEFAULT_THREADS

    assert clicks.DEFAULT_THREADS == DEFAULT_THREADS
    for spec in packets.EXPORT_FORMATS.values():
        module, _, attr = spec.partition(":")
        assert callable(getattr(__import__(module, fromlist=[attr]), attr))


@pytest.mark.parametrize("method", ["randomization", "harvesting"])
def test_clicks_propensity_estimates_prints_and_writes_a_curve_without_importing_pandas(
        tmp_path, method):
    from tests.test_clicks_propensity import SEED, simulate_log

    log, out = tmp_path / "log.parquet", tmp_path / "curve.json"
    simulate_log(SEED, sessions=400, randomized_share=0.2)[0].to_parquet(log, index=False)
    code = ("from relgrade.cli import main\n"
            f"main(['clicks', 'propensity', {str(log)!r}, '--method', {method!r}, "
            f"'--bootstrap', '50', '--out', {str(out)!r}], standalone_mode=False)")
    heavy = _heavy_after(code)
    assert out.exists()
    assert "duckdb" in heavy and "numpy" in heavy
    assert "pandas" not in heavy and "pyarrow" not in heavy


def test_clicks_pairs_writes_its_pairs_without_importing_pandas_or_pyarrow(tmp_path):
    from tests.test_clicks_propensity import SEED, simulate_log

    log, curve, out = (tmp_path / "log.parquet", tmp_path / "curve.json",
                       tmp_path / "pairs.parquet")
    simulate_log(SEED, sessions=400, randomized_share=0.2)[0].to_parquet(log, index=False)
    main(["clicks", "propensity", str(log), "--bootstrap", "20", "--out", str(curve)],
         standalone_mode=False)
    code = ("from relgrade.cli import main\n"
            f"main(['clicks', 'pairs', {str(log)!r}, '--propensity', {str(curve)!r}, "
            f"'--out', {str(out)!r}], standalone_mode=False)")
    heavy = _heavy_after(code)
    assert out.exists()
    assert "duckdb" in heavy and "numpy" in heavy
    assert "pandas" not in heavy and "pyarrow" not in heavy


def test_the_program_collects_its_garbage_then_freezes_what_is_left_at_exit():
    # the program's process (main called as the console script calls it) registers, at
    # exit, a collection and then gc.freeze: a cycle the command left unreachable is still
    # finalized, and the interpreter's shutdown walks none of what is left. The probe's own
    # exit hook, registered first, runs after relgrade's (atexit runs the last registered
    # first).
    probe = ("import atexit, gc, sys\n"
             "gc.disable()\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
             "class Cycle:\n"
             "    def __del__(self):\n"
             "        print('finalized')\n"
             "c = Cycle(); c.me = c; del c\n"
             "from relgrade.cli import main\n"
             "sys.argv = ['relgrade', '--version']\n"
             "main()\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"relgrade, version {__version__}", "finalized",
                                       "frozen True"]


def test_the_cli_called_in_process_leaves_the_collector_alone():
    # click's test runner calls main.main, as a longer-lived process would: nothing is
    # frozen at that process's exit
    probe = ("import atexit, gc\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
             "from click.testing import CliRunner\n"
             "from relgrade.cli import main\n"
             "print(CliRunner().invoke(main, ['--version']).exit_code)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["0", "frozen False"]
