"""The house's conventions that import-linter cannot see, each checked over the source tree.

The layers themselves (who may import whom) are import-linter's `layers` contract in
pyproject.toml, run by tools/test.sh; these tests cover the rest of the rules of the house.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "relgrade"

# Packages and modules that compute on tables and arrays: they never open a file.
LIBRARY = ["protocol", "evaluation", "raters", "ranking.py", "rng.py", "schema.py", "canonical.py"]
FILE_CALLS = {"open", "read_bytes", "write_bytes", "read_text", "write_text"}


def _modules(*parts: str) -> list[Path]:
    out = []
    for part in parts:
        path = SRC / part
        out.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else [])
    return out


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _strings(tree: ast.AST) -> list[ast.Constant]:
    """String constants that are not docstrings."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [n for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


@pytest.mark.parametrize("script", sorted((REPO / "stages").glob("*.py")), ids=lambda p: p.name)
def test_stage_script_imports_neither_cli_nor_web(script):
    imported = _imported(ast.parse(script.read_text("utf-8")))
    faces = sorted(n for n in imported if n.split(".")[:2] in (["relgrade", "cli"], ["relgrade", "web"]))
    assert faces == [], f"{script.name} imports a face of relgrade: {faces}"


@pytest.mark.parametrize("script", sorted((REPO / "stages").glob("*.py")), ids=lambda p: p.name)
def test_a_stage_script_is_an_entry_point_holding_no_logic(script):
    tree = ast.parse(script.read_text("utf-8"))
    # no function or class of its own: the stage's code is relgrade.pipeline.stages.NAME
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    relgrade = sorted(n for n in _imported(tree) if n.startswith("relgrade"))
    assert relgrade == ["relgrade.pipeline.runner", "relgrade.pipeline.runner.run_stage",
                        f"relgrade.pipeline.stages.{script.stem}",
                        f"relgrade.pipeline.stages.{script.stem}.run"]


def test_only_experiment_names_the_params_file():
    offenders = []
    for module in _modules("."):
        if "experiment" in module.relative_to(SRC).parts:
            continue
        for node in _strings(ast.parse(module.read_text("utf-8"))):
            if node.value.endswith("params.yaml"):
                offenders.append(f"{module.relative_to(SRC)}:{node.lineno}")
    assert offenders == []


def test_library_functions_take_no_params_dict():
    offenders = []
    for module in _modules(*LIBRARY, "io", "graders", "clicks", "retrieve", "query_sampling"):
        for node in ast.walk(ast.parse(module.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                if any(a.arg in {"params", "params_path"} for a in args):
                    offenders.append(f"{module.relative_to(SRC)}:{node.lineno} {node.name}")
    assert offenders == []


def test_library_packages_open_no_files():
    offenders = []
    for module in _modules(*LIBRARY):
        for node in ast.walk(ast.parse(module.read_text("utf-8"))):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
                # tarfile.open(fileobj=BytesIO(...)) reads bytes already in memory
                in_memory = any(k.arg == "fileobj" for k in node.keywords)
                if name in FILE_CALLS and not in_memory:
                    offenders.append(f"{module.relative_to(SRC)}:{node.lineno} {name}()")
    assert offenders == []


def test_judgment_files_have_one_reader_each():
    # Grade, key and qrels files are parsed in io/judgments.py and io/trec.py only.
    readers = {"read_qrels", "read_grades", "read_grade_file", "qrels_rows", "read_key"}
    defined = []
    for module in _modules("."):
        rel = module.relative_to(SRC)
        for node in ast.walk(ast.parse(module.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in readers:
                defined.append(f"{rel}:{node.name}")
    outside = [d for d in defined if not d.startswith(("io/", "experiment/"))]
    assert outside == []


def test_cli_commands_do_not_import_each_other():
    shared = {"relgrade.cli", "relgrade.cli.options", "relgrade.cli.render"}
    offenders = []
    for module in _modules("cli"):
        if module.name == "__init__.py":
            continue
        for name in _imported(ast.parse(module.read_text("utf-8"))):
            parts = name.split(".")
            if parts[:2] == ["relgrade", "cli"] and ".".join(parts[:3]) not in shared and name not in shared:
                # `from relgrade.cli import handle_errors` names the package, which is shared.
                if len(parts) >= 3 and f"relgrade.cli.{parts[2]}" not in shared and (SRC / "cli" / f"{parts[2]}.py").exists():
                    offenders.append(f"{module.name} -> {name}")
    assert offenders == []


def test_package_docstring_maps_every_subpackage():
    import relgrade

    doc = relgrade.__doc__ or ""
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").exists() and p.name != "__pycache__")
    missing = [p for p in packages if f"{p}/" not in doc and f"relgrade.{p}" not in doc]
    assert missing == []
