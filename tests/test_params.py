"""Params are typed and checked once, at load: every bad value is one `Error:` line naming the
params file actually read, the key, what was found and what is allowed; exit 1; nothing written."""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main as cli
from relgrade.errors import InputError
from relgrade.evaluation.settings import Settings
from relgrade.experiment.params import load_params, parse_params

REPO = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((REPO / "params.yaml").read_text())


def _set(path: str, value):
    """A change to the default params: set the dotted key ``path`` to ``value``."""
    def change(p):
        *parents, last = path.split(".")
        for k in parents:
            p = p[k]
        p[last] = value
    return change


def _drop(path: str):
    def change(p):
        *parents, last = path.split(".")
        for k in parents:
            p = p[k]
        del p[last]
    return change


# (change to the default params, the message after "FILE: ")
BAD = {
    "seed_negative": (_set("seed", -1), "seed: must be an integer >= 0 (found -1)"),
    "seed_not_a_number": (_set("seed", "abc"), "seed: must be an integer >= 0 (found 'abc')"),
    "seed_a_bool": (_set("seed", True), "seed: must be an integer >= 0 (found True)"),
    "gate_above_one": (_set("gates.weighted_kappa_min", 1.5),
                       "gates.weighted_kappa_min: must be a number in [0, 1] (found 1.5)"),
    "gate_negative": (_set("gates.two_step_max", -2),
                      "gates.two_step_max: must be a number in [0, 1] (found -2)"),
    "batch_size_6": (_set("grading.batch_size", 6),
                     "grading.batch_size: must be an integer from 1 to 5 (found 6)"),
    "round_not_a_number": (_set("grading.round", "one"),
                           "grading.round: must be an integer >= 1 (found 'one')"),
    "round_zero": (_set("grading.round", 0), "grading.round: must be an integer >= 1 (found 0)"),
    "unknown_arm_kind": (_set("arms.bm25.kind", "lucene"),
                         "arms.bm25.kind: unknown arm kind; must be one of bm25, bm25f, tfidf, "
                         "rrf, file, embed (found 'lucene')"),
    "cutoff_zero": (_set("metrics.cutoffs", [3, 0]),
                    "metrics.cutoffs[1]: must be an integer >= 1 (found 0)"),
    "bootstrap_999": (_set("metrics.bootstrap", 999),
                      "metrics.bootstrap: must be an integer >= 1000 (found 999)"),
    "permutations_10": (_set("metrics.permutations", 10),
                        "metrics.permutations: must be an integer >= 1000 (found 10)"),
    "level_one": (_set("metrics.level", 1), "metrics.level: must be a number in (0, 1) (found 1)"),
    "alpha_zero": (_set("metrics.alpha", 0.0),
                   "metrics.alpha: must be a number in (0, 1) (found 0.0)"),
    "power_above_one": (_set("metrics.power", 1.2),
                        "metrics.power: must be a number in (0, 1) (found 1.2)"),
    "pool_depth_zero": (_set("pool.depth", 0), "pool.depth: must be an integer >= 1 (found 0)"),
    "arm_depth_zero": (_set("arms.tfidf.depth", 0),
                       "arms.tfidf.depth: must be an integer >= 1 (found 0)"),
    "audit_fraction_zero": (_set("audit.fraction", 0),
                            "audit.fraction: must be a number in (0, 1] (found 0)"),
    "max_reason_words_zero": (_set("grading.max_reason_words", 0),
                              "grading.max_reason_words: must be an integer >= 1 (found 0)"),
    "max_reason_chars_zero": (_set("grading.max_reason_chars", 0),
                              "grading.max_reason_chars: must be an integer >= 1 (found 0)"),
    "allow_empty_not_a_bool": (_set("corpus.allow_empty", "yes"),
                               "corpus.allow_empty: must be true or false (found 'yes')"),
    "interval_unknown": (_set("metrics.interval", "bcx"),
                         "metrics.interval: must be one of auto, t, bootstrap-t, bca or "
                         "percentile (found 'bcx')"),
    "test_unknown": (_set("metrics.test", "wilcoxon"),
                     "metrics.test: must be one of mean or sign-flip (found 'wilcoxon')"),
    "power_min_nonzero_too_small": (_set("metrics.power_min_nonzero", 1),
                                    "metrics.power_min_nonzero: must be an integer >= 2 "
                                    "(found 1)"),
    "grader_kind_unknown": (_set("graders.grader-a.kind", "robot"),
                            "graders.grader-a.kind: must be one of model, human or import "
                            "(found 'robot')"),
    "grader_role_unknown": (_set("graders.auditor-b.role", "judge"),
                            "graders.auditor-b.role: must be one of grader, auditor, triage, rater or expert "
                            "(found 'judge')"),
    "fused_arm_unknown": (_set("arms.hybrid.fuse", ["bm25", "nope"]),
                          "arms.hybrid.fuse names nope, which is not an arm"),
    "pool_depth_missing": (_drop("pool.depth"), "pool.depth: is required"),
    "gate_typo": (lambda p: p.update(gate=p.pop("gates")),
                  "gate: unknown key. Known keys here: seed, paths, scale, corpus, queries, "
                  "arms, runs, pool, intents, audit, grading, graders, gates, metrics, clicks, "
                  "cost, judges, agreement, sample, drift, triage, raters, gold, aggregation, adjudication, "
                  "ppi, "
                  "holes, prices"),
    "section_key_typo": (_set("grading.batch_szie", 3),
                         "grading.batch_szie: unknown key. Known keys here: rubric, "
                         "rubric_version, round, batch_size, max_reason_words, "
                         "max_reason_chars, key_grader, auditor, post_hoc, regrade, "
                         "deviations, mode, share_from, max_cost, stop, stop_batch, stop_margin"),
}


def _write(root: Path, change, name="params.yaml") -> Path:
    p = copy.deepcopy(DEFAULT)
    change(p)
    path = root / name
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    return path


def _snapshot(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_value_is_one_error_naming_the_file_and_the_key(tmp_path, case):
    change, message = BAD[case]
    path = _write(tmp_path, change)
    with pytest.raises(InputError) as e:
        load_params(path)
    assert str(e.value) == f"{path}: {message}"


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_cli_command_refuses_bad_params_with_exit_1_and_writes_nothing(tmp_path, case):
    change, message = BAD[case]
    path = _write(tmp_path, change, name="other.yaml")
    before = _snapshot(tmp_path)
    res = CliRunner().invoke(cli, ["status", "--params", str(path)])
    assert res.exit_code == 1
    assert res.output == f"Error: {path}: {message}\n"
    assert _snapshot(tmp_path) == before


def _stage(root: Path, name: str):
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, str(REPO / "stages" / f"{name}.py")], cwd=root,
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("case", ["seed_negative", "seed_not_a_number", "gate_typo",
                                  "bootstrap_999"])
def test_a_stage_script_refuses_bad_params_before_any_work(tmp_path, case):
    change, message = BAD[case]
    _write(tmp_path, change)
    (tmp_path / "data/runs").mkdir(parents=True)
    before = _snapshot(tmp_path)
    proc = _stage(tmp_path, "pool")
    assert proc.returncode == 1
    assert proc.stderr == f"Error: params.yaml: {message}\n"
    assert _snapshot(tmp_path) == before


def test_a_missing_params_file_is_named(tmp_path):
    res = CliRunner().invoke(cli, ["status", "--params", str(tmp_path / "missing.yaml")])
    assert res.exit_code == 1
    assert res.output == (f"Error: {tmp_path / 'missing.yaml'}: params file not found. "
                          "Give the experiment's folder with --experiment or its params file "
                          "with --params\n")
    assert list(tmp_path.iterdir()) == []


def test_experiment_option_reads_the_params_file_in_that_folder(tmp_path):
    res = CliRunner().invoke(cli, ["status", "--experiment", str(tmp_path / "exp")])
    assert res.exit_code == 1
    assert res.output == (f"Error: {tmp_path / 'exp' / 'params.yaml'}: params file not found. "
                          "Give the experiment's folder with --experiment or its params file "
                          "with --params\n")


def test_experiment_and_params_options_together_are_refused(tmp_path):
    res = CliRunner().invoke(cli, ["status", "--experiment", "a", "--params", "b.yaml"])
    assert res.exit_code == 2
    assert "give --experiment or --params, not both" in res.output


def test_cost_defaults_to_30_seconds_and_refuses_a_non_positive_value():
    from relgrade.experiment.params import parse_params

    assert parse_params({"paths": {}}).cost.seconds_per_judgment == 30
    assert parse_params({"paths": {}, "cost": {"seconds_per_judgment": 12.5}}).cost \
        .seconds_per_judgment == 12.5
    with pytest.raises(InputError) as e:
        parse_params({"paths": {}, "cost": {"seconds_per_judgment": 0}})
    assert "cost.seconds_per_judgment" in str(e.value)


def test_a_missing_default_params_file_stops_a_stage(tmp_path):
    proc = _stage(tmp_path, "audit")
    assert proc.returncode == 1
    assert proc.stderr == ("Error: params.yaml: params file not found. Give the experiment's "
                           "folder with --experiment or its params file with --params\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text, found", [("- seed\n- paths\n", "list"), ("just words\n", "str"),
                                         ("7\n", "int")])
def test_a_params_file_that_is_not_a_mapping_is_refused(tmp_path, text, found):
    path = tmp_path / "other.yaml"
    path.write_text(text)
    res = CliRunner().invoke(cli, ["compare", "a", "b", "--params", str(path)])
    assert res.exit_code == 1
    assert res.output == (f"Error: {path}: params file must be a mapping of sections "
                          f"(found {found})\n")
    assert [p.name for p in tmp_path.iterdir()] == ["other.yaml"]


# "  tail_sample 0: x: y" on line 4: PyYAML stops at the second colon, the 19th character
# (two spaces, 14 for "tail_sample 0:", a space, "x").
BAD_YAML = "seed: 1\npool:\n  depth: 5\n  tail_sample 0: x: y\npaths: {}\n"
BAD_YAML_MESSAGE = ("not valid YAML (found mapping values are not allowed here: "
                    "'  tail_sample 0: x: y'). Check the indentation and the `key: value` "
                    "spacing at that line, or above it")


def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(BAD_YAML)
    with pytest.raises(InputError) as e:
        load_params(path)
    assert (e.value.line, e.value.column) == (4, 19)
    assert str(e.value) == f"{path}:4:19: {BAD_YAML_MESSAGE}"


def test_a_command_and_a_stage_print_the_yaml_errors_line_and_column(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(BAD_YAML)
    res = CliRunner().invoke(cli, ["status", "--params", str(path)])
    assert res.exit_code == 1
    assert res.output == f"Error: {path}:4:19: {BAD_YAML_MESSAGE}\n"
    proc = _stage(tmp_path, "pool")
    assert proc.returncode == 1
    assert proc.stderr == f"Error: params.yaml:4:19: {BAD_YAML_MESSAGE}\n"


def test_a_params_file_without_paths_is_refused(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text("seed: 3\n")
    with pytest.raises(InputError) as e:
        load_params(path)
    assert str(e.value) == (f"{path}: params file has no `paths` section. Add `paths:` naming "
                            "where every stage reads and writes")


def test_several_problems_are_counted_after_the_first(tmp_path):
    path = _write(tmp_path, lambda p: (p.update(seed=-1), p["grading"].update(batch_size=9),
                                       p["metrics"].update(bootstrap=5)))
    with pytest.raises(InputError) as e:
        load_params(path)
    # each further problem is named, not only counted
    assert str(e.value) == (f"{path}: seed: must be an integer >= 0 (found -1). "
                            "2 more problems in this file: grading.batch_size: must be an "
                            "integer from 1 to 5 (found 9); metrics.bootstrap: must be an "
                            "integer >= 1000 (found 5)")


def test_the_default_params_load_with_their_values_and_types_unchanged():
    p = load_params(REPO / "params.yaml")
    assert p.source == REPO / "params.yaml"
    assert p.seed == 20261130 and type(p.seed) is int
    assert p.grading.round == 1 and type(p.grading.round) is int
    assert p.grading.batch_size == 5 and p.grading.max_reason_words == 15
    assert p.audit.fraction == 0.10 and p.audit.min_queries == 10
    assert p.pool.depth == 10 and p.pool.tail_sample == 0 and p.pool.tail_depth == 100
    assert p.metrics.cutoffs == [3, 5, 10] and p.runs.ties == "score"
    assert p.arms_dict()["hybrid"] == {"kind": "rrf", "depth": 100, "k": 60,
                                       "fuse": ["bm25", "tfidf"],
                                       "source": "src/relgrade/retrieve/fusion.py"}
    assert p.graders_dict() == DEFAULT["graders"]
    assert p.gates.as_dict() == DEFAULT["gates"]


def test_new_keys_default_to_todays_behaviour():
    p = load_params(REPO / "params.yaml")
    assert p.grading.max_reason_chars == 300
    assert p.corpus.allow_empty is False
    # one key grader, as before rater panels existed
    assert p.grading.mode == "single" and p.raters is None and p.gold is None
    assert (p.aggregation.method, p.adjudication.expert) == ("majority", None)


def test_compare_settings_come_from_seed_and_metrics():
    s = load_params(REPO / "params.yaml").compare_settings()
    assert s == Settings(seed=20261130, n_resamples=10000, n_permutations=10000, level=0.95,
                         method="auto", alpha=0.05, power=0.8, min_relative_change=0.02,
                         baseline="bm25", pairs="baseline", test="mean", power_min_nonzero=10)


def test_permutations_default_to_bootstrap_and_pairs_to_all_without_a_baseline():
    s = parse_params({"seed": 1, "paths": {},
                      "metrics": {"cutoffs": [10], "bootstrap": 2000}}).compare_settings()
    assert (s.n_resamples, s.n_permutations, s.baseline, s.pairs) == (2000, 2000, None, "all")
    # the interval rule, the mean test and the power threshold are the defaults
    assert (s.method, s.test, s.power_min_nonzero) == ("auto", "mean", 10)


def test_a_section_a_command_needs_but_the_file_lacks_is_named():
    p = parse_params({"paths": {}}, source="exp/params.yaml")
    with pytest.raises(InputError) as e:
        p.need("grading.key_grader")
    assert str(e.value) == ("exp/params.yaml: grading.key_grader: is required here but not "
                            "set. Set `grading.key_grader` in the params file")
    with pytest.raises(InputError, match=r"^exp/params.yaml: metrics: is required"):
        p.compare_settings()


def test_stage_scripts_import_neither_the_cli_nor_the_web_page():
    for script in sorted((REPO / "stages").glob("*.py")):
        tree = ast.parse(script.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module]
        bad = [m for m in names if m.split(".")[:2] in (["relgrade", "cli"], ["relgrade", "web"])]
        assert bad == [], f"{script.name} imports {bad}"


def test_only_the_experiment_package_names_the_params_file():
    src = REPO / "src" / "relgrade"
    literal = 'path="params.yaml"'
    found = [p.relative_to(src).as_posix() for p in sorted(src.rglob("*.py"))
             if literal in p.read_text() and p.relative_to(src).parts[0] != "experiment"]
    assert found == []


def test_the_grader_file_layout_is_spelled_in_one_place():
    src = REPO / "src" / "relgrade"
    spelled = [p.relative_to(REPO).as_posix()
               for p in sorted([*src.rglob("*.py"), *(REPO / "stages").glob("*.py")])
               if 'f"round-{' in p.read_text()]
    assert spelled == ["src/relgrade/experiment/files.py"]


def test_an_error_found_after_loading_names_the_params_file_given(tmp_path):
    p = copy.deepcopy(DEFAULT)
    del p["metrics"]
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    res = CliRunner().invoke(cli, ["compare", "bm25", "tfidf", "--params", str(path)])
    assert res.exit_code == 1
    assert res.output == (f"Error: {path}: metrics: is required here but not set. "
                          "Set `metrics` in the params file\n")
    assert [f.name for f in tmp_path.iterdir()] == ["other.yaml"]
