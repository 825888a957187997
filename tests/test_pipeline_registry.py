"""The pipeline is declared once: every committed dvc.yaml equals its rendering from the stage
registry, every stage's code deps are exactly the files its code imports, and the protocol's
order is an edge of DVC's graph."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import experiment_folders
from relgrade.pipeline import registry

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
FOLDERS = experiment_folders(REPO)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.relative_to(REPO).as_posix() or ".")
def test_every_committed_dvc_yaml_equals_its_rendering(folder):
    found = registry.check(folder)
    assert found is None, "\n".join(found.diff[:40])


def test_the_check_command_exits_1_and_names_the_command_when_a_dvc_yaml_drifts(tmp_path):
    from click.testing import CliRunner

    from relgrade.cli import main

    folder = tmp_path / "repo"
    (folder / "stages").mkdir(parents=True)
    (folder / "params.yaml").write_text((REPO / "params.yaml").read_text())
    text = registry.render(Experiment.load(folder / "params.yaml"), repo=folder)
    (folder / "dvc.yaml").write_text(text.replace("    - seed\n", "", 1))
    res = CliRunner().invoke(main, ["pipeline", "check", "--experiment", str(folder)])
    assert res.exit_code == 1
    assert "+    - seed" in res.output
    assert "run: relgrade pipeline render" in res.output
    (folder / "dvc.yaml").write_text(text)
    res = CliRunner().invoke(main, ["pipeline", "check", "--experiment", str(folder)])
    assert res.exit_code == 0, res.output


def _imports_of(path: Path) -> set[str]:
    """Every relgrade module an import statement of ``path`` names (function bodies too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("relgrade")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("relgrade"):
            out.add(node.module)
            for a in node.names:  # `from relgrade.x import y`: y may be a module
                sub = SRC.joinpath(*node.module.split("."), a.name)
                if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file():
                    out.add(f"{node.module}.{a.name}")
    return out


def _file(module: str) -> str:
    base = SRC.joinpath(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    return path.relative_to(REPO).as_posix()


def _closure_by_ast(module: str) -> set[str]:
    """The import closure found by reading the source, independently of grimp."""
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += sorted(_imports_of(REPO / _file(m)))
        if "." in m:
            todo.append(m.rpartition(".")[0])
    return seen


@pytest.mark.parametrize("stage", registry.stages(), ids=lambda s: s.name)
def test_a_stages_deps_list_every_module_its_code_imports_and_no_folder(stage):
    ex = Experiment.load(REPO / "params.yaml")
    deps = registry.code_deps(stage, registry.import_graph(), src=SRC, root_rel="")
    assert deps[0] == f"stages/{stage.module}.py"
    want = _closure_by_ast(f"relgrade.pipeline.stages.{stage.module}") | \
        _closure_by_ast("relgrade.pipeline.runner")
    listed = set(deps)
    missing = sorted(_file(m) for m in want if _file(m) not in listed)
    assert missing == []
    assert not [d for d in deps if (REPO / d).is_dir()]
    # nothing the stage does not run: the status and the CLI never rerun a stage
    assert not [d for d in deps if d.startswith(("src/relgrade/cli/", "src/relgrade/web/"))]
    assert "src/relgrade/pipeline/status.py" not in deps
    del ex


def _dry_order(root: Path, pipeline: str) -> list[str]:
    proc = subprocess.run([str(Path(sys.executable).parent / "dvc"), "dag", "--md",
                           pipeline], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("folder", [f for f in FOLDERS if "clicks" not in f.name],
                         ids=lambda p: p.relative_to(REPO).as_posix() or ".")
def test_grades_depends_on_what_packets_writes_in_every_grading_experiment(folder):
    text = (folder / "dvc.yaml").read_text()
    stages = yaml.safe_load(text)["stages"]
    assert "${paths.packets}" in stages["packets"]["outs"]
    assert "${paths.packets}" in stages["grades"]["deps"]
    # and dvc sees the edge: packets is an ancestor of grades in its graph
    rel = (folder / "dvc.yaml").relative_to(REPO).as_posix()
    lines = _dry_order(REPO, f"{rel}:grades")
    assert any("packets" in line for line in lines)


def test_every_output_kept_in_git_persists_so_a_refused_stage_deletes_none():
    # DVC deletes a stage's outputs before running it unless they persist, and a stage refuses
    # bad params only once it runs: an output kept in git (cache: false) must persist
    for stage in registry.stages():
        for kind in ("outs", "metrics", "plots"):
            for entry in getattr(stage, kind):
                if isinstance(entry, registry.Entry) and not entry.cache:
                    assert entry.persist, (stage.name, kind, entry.path)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.relative_to(REPO).as_posix() or ".")
def test_every_committed_dvc_yaml_lets_its_git_kept_outputs_persist(folder):
    stages = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        body = stage.get("do", stage)
        for kind in ("outs", "metrics", "plots"):
            for entry in body.get(kind) or []:
                if isinstance(entry, dict):
                    ((path, opts),) = entry.items()
                    if opts.get("cache") is False:
                        assert opts.get("persist") is True, (name, path)


def test_a_stage_that_loads_the_compiled_scan_depends_on_its_c_source():
    # the C module is no node of the import graph: its source is listed with the module
    # that loads it (registry.DATA_FILES), for the pool stage, which scans TREC runs
    graph = registry.import_graph()
    by_name = {s.name: s for s in registry.stages()}
    pool = registry.code_deps(by_name["pool"], graph, src=SRC, root_rel="")
    assert "src/relgrade/io/_trec_scan.c" in pool and "src/relgrade/io/trec_scan.py" in pool
    metrics = registry.code_deps(by_name["metrics"], graph, src=SRC, root_rel="")
    assert "src/relgrade/io/trec_scan.py" not in metrics
    assert "src/relgrade/io/_trec_scan.c" not in metrics
