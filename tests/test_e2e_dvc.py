"""End to end: `dvc repro` of a small experiment in a temporary git repository.

Checks the protocol's order on the real pipeline: a failed gate stops everything before
metrics; a passed gate gives a frozen key and one metrics file per arm; a second repro is a
no-op; changing one grade after metrics were seen voids the run unless declared post-hoc
(then the post-hoc key and its metrics stand beside the frozen ones).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]


def _setup(root, template):
    """``template`` (the ``packets_built`` fixture: the tiny experiment in git + DVC, intents
    reviewed, ``dvc repro packets`` run) copied to ``root``; its pool's pairs and the audit's."""
    tiny.copy_repo(template, root)
    return _pairs(root)


def _pairs(root):
    """The pool's (query, chunk) pairs of the experiment ``root`` and those of its audit."""
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    audit = [json.loads(l)["query_id"] for l in (root / "data/audit/audit.jsonl").read_text().splitlines()]
    pairs = set(zip(pool.query_id, pool.chunk_id))
    audit_pairs = {p for p in pairs if p[0] in audit}
    return pairs, audit_pairs


@pytest.fixture(scope="module")
def passed(tmp_path_factory, packets_built):
    root = tmp_path_factory.mktemp("exp")
    pairs, audit_pairs = _setup(root, packets_built)
    tiny.write_grades(root, "grader-a", tiny.grade_rows(pairs))
    # The auditor differs from the grader by one step on exactly one pair.
    one = sorted(p for p in audit_pairs if tiny.truth(p[1]) == 2)[0]
    tiny.write_grades(root, "auditor-b", tiny.grade_rows(audit_pairs, flip={one}))
    proc = tiny.run(root, "dvc", "repro")
    return root, pairs, audit_pairs, proc


def test_full_repro_runs_every_stage_and_writes_one_metrics_file_per_arm(passed):
    root, pairs, audit_pairs, _ = passed
    for arm in tiny.ARMS:
        m = json.loads((root / f"metrics/arms/{arm}.json").read_text())
        record = json.loads((root / "data/key/record.json").read_text())
        assert m["key_sha256"] == record["key_sha256"]
        assert m["pool_version"] == record["pool_version"]
        assert m["post_hoc"] is False
        assert 0.0 <= m["nDCG(dcg='exp-log2')@10"] <= 1.0
    assert (root / "data/publish").is_dir()


def test_agreement_on_the_audit_sample_matches_the_single_planted_disagreement(passed):
    root, _, audit_pairs, _ = passed
    agreement = json.loads((root / "metrics/agreement.json").read_text())
    assert agreement["pairs"] == len(audit_pairs)
    assert agreement["disagreement"] == pytest.approx(1 / len(audit_pairs))
    assert agreement["two_step_disagreement"] == 0.0


def test_key_holds_the_grader_grades_sorted_and_hashed(passed):
    import hashlib

    root, pairs, _, _ = passed
    data = (root / "data/key/key.jsonl").read_bytes()
    record = json.loads((root / "data/key/record.json").read_text())
    assert hashlib.sha256(data).hexdigest() == record["key_sha256"]
    rows = [json.loads(l) for l in data.decode().splitlines()]
    assert [(r["query_id"], r["chunk_id"]) for r in rows] == sorted(pairs)
    assert all(r["grade"] == tiny.truth(r["chunk_id"]) for r in rows)


def test_dvc_metrics_show_prints_one_narrow_row_per_arm(passed):
    root = passed[0]
    out = tiny.run(root, "dvc", "metrics", "show").stdout
    rows = out.strip().splitlines()
    assert rows[0].split() == ["Path", "baseline", "delta", "high", "judged", "key", "low",
                               "mean", "measure", "p_holm", "pool_version", "rank_high",
                               "rank_low"]
    assert [r.split()[0] for r in rows[1:]] == [f"metrics/decision/{arm}.json"
                                                for arm in sorted(tiny.ARMS)]
    # the pool version and key add 30 characters, the rank-set 20
    assert max(len(r) for r in rows) <= 180
    assert "weighted_kappa" in tiny.run(root, "dvc", "metrics", "show",
                                        "metrics/agreement.json").stdout
    arms = tiny.run(root, "dvc", "metrics", "show", "metrics/arms").stdout
    assert all(f"metrics/arms/{arm}.json" in arms for arm in tiny.ARMS)


def test_the_report_flags_verdicts_deeper_than_the_pool_and_agrees_with_the_arm_files(passed):
    root = passed[0]
    # the tiny pool has depth 5 and the measures cutoffs 3, 5 and 10
    md = (root / "metrics/report.md").read_text()
    record = json.loads((root / "data/key/record.json").read_text())
    assert f"- key sha256: `{record['key_sha256']}`" in md
    assert f"- pool version: `{record['pool_version']}`" in md
    deep = [ln for ln in md.splitlines() if ln.startswith("- ") and "R@10" in ln]
    assert deep and all("at cutoff 10, deeper than the pool depth 5, ungraded chunks count "
                        "as not relevant (Judged@10: " in ln for ln in deep)
    assert not any("deeper than the pool" in ln for ln in md.splitlines()
                   if ln.startswith("- ") and "@5" in ln)
    html = (root / "metrics/report.html").read_text()
    assert html.count("<svg") == 2 and "<script" not in html
    for arm in tiny.ARMS:
        summary = json.loads((root / f"metrics/decision/{arm}.json").read_text())
        full = json.loads((root / f"metrics/arms/{arm}.json").read_text())
        assert summary["mean"] == pytest.approx(full[summary["measure"]], abs=1e-12)
        assert summary["judged"] == pytest.approx(full["Judged@10"], abs=1e-12)
    # each arm's rank-set is the comparison report's, and the report names the tied groups
    ranks = json.loads((root / "metrics/comparisons.json").read_text())["rank_sets"]
    assert ranks["stream"] == "rank-sets" and ranks["n_resamples"] == 1000
    for arm in tiny.ARMS:
        summary = json.loads((root / f"metrics/decision/{arm}.json").read_text())
        assert ranks["measure"] == summary["measure"]
        assert ranks["arms"][arm]["estimate"] == pytest.approx(summary["mean"], abs=1e-12)
        assert (summary["rank_low"], summary["rank_high"]) == (
            ranks["arms"][arm]["rank_low"], ranks["arms"][arm]["rank_high"])
        assert 1 <= summary["rank_low"] <= summary["rank_high"] <= len(tiny.ARMS)
    assert "## Rank-sets" in md and "Tied groups, best first:" in md


def test_second_repro_changes_nothing(passed):
    root = passed[0]
    lock = (root / "dvc.lock").read_text()
    out = tiny.run(root, "dvc", "repro").stdout
    assert "up to date" in out.lower()
    assert (root / "dvc.lock").read_text() == lock


def test_failed_gate_stops_the_pipeline_before_any_metric(tmp_path, packets_built):
    pairs, audit_pairs = _setup(tmp_path, packets_built)
    tiny.write_grades(tmp_path, "grader-a", tiny.grade_rows(pairs))
    # The auditor swaps every answer and near miss: two-step disagreements everywhere.
    rows = tiny.grade_rows(audit_pairs)
    for r in rows:
        r["grade"] = 2 - r["grade"]
    tiny.write_grades(tmp_path, "auditor-b", rows)
    proc = tiny.run(tmp_path, "dvc", "repro", check=False)
    assert proc.returncode != 0
    assert "two_step" in proc.stderr + proc.stdout
    assert not (tmp_path / "data/key/key.jsonl").exists()
    assert not list((tmp_path / "metrics").glob("arms/*.json"))


def test_changing_a_grade_after_metrics_voids_the_run_unless_post_hoc(passed):
    root, pairs, audit_pairs, _ = passed
    before = {arm: (root / f"metrics/arms/{arm}.json").read_text() for arm in tiny.ARMS}
    ledger = (root / "data/ledger.jsonl").read_text()
    assert len(ledger.splitlines()) == 1
    path = root / "data/grades/grader-a/round-1.jsonl"
    rows = [json.loads(l) for l in path.read_text().splitlines()]
    changed = next(r for r in rows if (r["query_id"], r["chunk_id"]) not in audit_pairs
                   and r["grade"] == 0)
    changed["grade"] = 1
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0
    assert "void" in proc.stderr.lower()
    assert {arm: (root / f"metrics/arms/{arm}.json").read_text() for arm in tiny.ARMS} == before

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["grading"]["post_hoc"] = True
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.run(root, "dvc", "repro")
    # post-hoc stands beside the frozen key: the decision's metrics stay as they were
    assert {arm: (root / f"metrics/arms/{arm}.json").read_text() for arm in tiny.ARMS} == before
    for arm in tiny.ARMS:
        m = json.loads((root / f"metrics/post-hoc/{arm}/metrics.json").read_text())
        assert m["post_hoc"] is True
