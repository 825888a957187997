"""tools/verdicts.sh, the main job's last step: each experiment's verdicts from its report.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from relgrade.evaluation import decision
from tests.test_decision import CAVEAT, DEEP, P, report

ROOT = Path(__file__).resolve().parents[1]


def _experiment(root: Path, report_md: str | None, primary=P, write=True, clicks=False):
    root.mkdir(parents=True, exist_ok=True)
    paths = {"comparisons": "metrics/comparisons.json"}
    if report_md:
        paths["report_md"] = report_md
    raw = {"paths": paths}
    if clicks:  # a click-log experiment: IPS estimates, no graded key and no report
        raw = {"paths": {"click_ips": "metrics/ips.json"}, "clicks": {"log": "data/log"}}
    (root / "params.yaml").write_text(yaml.safe_dump(raw))
    if report_md and write:
        (root / report_md).parent.mkdir(parents=True, exist_ok=True)
        (root / report_md).write_text(
            decision.to_markdown(decision.build_decision(report(), primary=primary)))


def _run(repo: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", str(ROOT / "tools" / "verdicts.sh"), str(repo)],
                          capture_output=True, text=True, env=env)


def test_prints_every_experiments_verdicts_on_its_primary_measure(tmp_path):
    _experiment(tmp_path, "metrics/report.md")
    _experiment(tmp_path / "experiments" / "deep", "out/report.md", primary=DEEP)
    _experiment(tmp_path / "experiments" / "fresh", "metrics/report.md", write=False)
    _experiment(tmp_path / "experiments" / "old", None)
    _experiment(tmp_path / "experiments" / "sim", None, clicks=True)
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "\nVerdicts of . (metrics/report.md):\n"
        "  - dense better than bm25 on P\n"
        "\nVerdicts of experiments/deep (experiments/deep/out/report.md):\n"
        f"  - no detectable difference on R@10; {CAVEAT}\n"
        "\nVerdicts of experiments/fresh: no report yet (the report stage has not run: "
        "dvc repro experiments/fresh/dvc.yaml)\n"
        "\nVerdicts of experiments/old: no report (params paths.report_md unset)\n"
        "\nVerdicts of experiments/sim: a click-log experiment, no graded key; its IPS "
        "estimates per arm:\n  dvc metrics show experiments/sim/metrics/ips.json\n")


def test_the_repository_report_gives_its_verdict_lines():
    done = _run(ROOT)
    assert done.returncode == 0, done.stderr
    md = (ROOT / "metrics" / "report.md").read_text()
    # the top-level experiment's block: its heading, then its lines up to the next blank line
    head, *rest = done.stdout.split("\n\n")[0].strip("\n").splitlines()
    assert head == "Verdicts of . (metrics/report.md):"
    assert rest and all(f"\n{ln.strip()}\n" in md for ln in rest)
    assert all(ln.startswith("  - ") and "nDCG(dcg='exp-log2')@10" in ln for ln in rest)


def test_a_ppi_experiment_says_ppi_decides_or_that_its_report_predates_it(tmp_path):
    import json

    for name, estimator in (("new", {"human_sample": 6, "queries": 12}), ("old", None)):
        root = tmp_path / "experiments" / name
        _experiment(root, "metrics/report.md")
        raw = yaml.safe_load((root / "params.yaml").read_text())
        raw["grading"] = {"mode": "ppi"}
        (root / "params.yaml").write_text(yaml.safe_dump(raw))
        (root / "metrics/comparisons.json").write_text(json.dumps(
            {"estimator": estimator} if estimator else {}))
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert ("\nVerdicts of experiments/new (experiments/new/metrics/report.md):\n"
            "  - dense better than bm25 on P\n"
            "  (decided by PPI++: people graded 6 of 12 queries, the model every query; "
            "model-only and human-only stand beside it in the report)\n") in done.stdout
    assert ("  (written before PPI++ decided in ppi mode: these lines are on the model "
            "grader's key; rerun the compare and report stages)\n") in done.stdout


def _ppi_experiment(tmp_path):
    """experiments/p in ppi mode with a report: its params file, the params, and where its
    comparisons file goes."""
    _experiment(tmp_path / "experiments" / "p", "metrics/report.md")
    params = tmp_path / "experiments" / "p" / "params.yaml"
    raw = yaml.safe_load(params.read_text())
    raw["grading"] = {"mode": "ppi"}
    params.write_text(yaml.safe_dump(raw))
    return params, raw, tmp_path / "experiments" / "p" / "metrics" / "comparisons.json"


def test_a_damaged_params_or_comparisons_file_is_one_error_line_not_a_traceback(tmp_path):
    params, raw, comparisons = _ppi_experiment(tmp_path)
    comparisons.write_text("{bad")
    done = _run(tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "Error: experiments/p/metrics/comparisons.json: not valid JSON (Expecting property "
        "name enclosed in double quotes: line 1 column 2 (char 1)). Restore it (git "
        "checkout, or dvc repro rewrites it)"]
    params.write_text(params.read_text() + "paths: [\n")
    done = _run(tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "Error: experiments/p/params.yaml: not a readable YAML file (while parsing a flow "
        "node). Fix or restore it (git checkout)"]


def test_records_of_another_shape_are_one_error_line_each(tmp_path):
    params, raw, comparisons = _ppi_experiment(tmp_path)
    for text in ("[1, 2]", '{"estimator": "ppi++"}', '{"estimator": {"x": 1}}',
                 '{"estimator": {"comparisons": "anytime", "stop": "s"}}'):
        comparisons.write_text(text)
        done = _run(tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr, (text, done.stderr)
        assert done.stderr.splitlines() == [
            "Error: experiments/p/metrics/comparisons.json: not of the shape the compare "
            "stage writes (its estimator). Restore it (git checkout, or dvc repro rewrites "
            "it)"], text
    comparisons.write_text("{}")
    for paths in ([1], {"report_md": 5}):
        params.write_text(yaml.safe_dump({**raw, "paths": paths}))
        done = _run(tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr, (paths, done.stderr)
        assert done.stderr.splitlines()[0].startswith(
            "Error: experiments/p/params.yaml: paths must be a mapping of names to file paths")
    params.write_text(yaml.safe_dump({**raw, "grading": "ppi"}))
    done = _run(tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
