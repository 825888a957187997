"""The shipped default experiment demonstrates both kinds of verdict between real retrievers.

On its primary measure, `bm25f` is better than the baseline `bm25` after Holm's correction and
`hybrid` shows no detectable difference from it (DESIGN.md, "Outcome"). The tests read the
committed outputs of the pipeline (metrics/comparisons.json, the decision files through
`relgrade metrics show`), so a rerun that loses either verdict fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from statsmodels.stats.multitest import multipletests

from relgrade.cli import main as cli
from relgrade.experiment.params import load_params

REPO = Path(__file__).resolve().parents[1]


def _settings():
    metrics = load_params(REPO / "params.yaml").metrics
    return metrics.primary, metrics.alpha, metrics.baseline


def _comparisons() -> dict:
    return json.loads((REPO / "metrics" / "comparisons.json").read_text(encoding="utf-8"))


def _primary_pairs() -> dict:
    primary, _, baseline = _settings()
    return {c["arm_a"]: c for c in _comparisons()["comparisons"]
            if c["measure"] == primary and c["arm_b"] == baseline}


def test_the_comparisons_rest_on_the_frozen_key_and_pool():
    record = json.loads((REPO / "data" / "key" / "record.json").read_text(encoding="utf-8"))
    report = _comparisons()
    assert (report["key_sha256"], report["pool_version"], report["post_hoc"]) == (
        record["key_sha256"], record["pool_version"], False)


def test_bm25f_is_better_than_bm25_on_the_primary_measure_after_holm():
    _, alpha, _ = _settings()
    c = _primary_pairs()["bm25f"]
    assert c["significant"] is True
    assert c["p_holm"] < alpha
    assert 0 < c["low"] < c["delta"] < c["high"]  # the interval lies above 0


def test_hybrid_shows_no_detectable_difference_from_bm25_on_the_primary_measure():
    _, alpha, _ = _settings()
    c = _primary_pairs()["hybrid"]
    assert c["significant"] is False
    assert c["p_holm"] >= alpha
    assert c["low"] < 0 < c["high"]  # the interval holds 0 even before the correction


def test_holm_over_every_comparison_matches_statsmodels():
    # the verdicts are Holm-adjusted over all comparisons made (3 arms x 9 measures): the
    # committed adjusted p-values and significance flags equal statsmodels' Holm over the
    # committed unadjusted p-values of the verdict test
    _, alpha, _ = _settings()
    comparisons = _comparisons()["comparisons"]
    assert len(comparisons) == 3 * 9
    reject, adjusted, _, _ = multipletests([c["p_test"] for c in comparisons], alpha=alpha,
                                           method="holm")
    np.testing.assert_allclose([c["p_holm"] for c in comparisons], adjusted, rtol=0, atol=1e-12)
    assert [c["significant"] for c in comparisons] == reject.tolist()


def test_metrics_show_gives_the_user_both_verdicts():
    _, alpha, baseline = _settings()
    res = CliRunner().invoke(cli, ["metrics", "show", "--experiment", str(REPO), "--json"])
    assert res.exit_code == 0, res.output
    shown = {a["arm"]: a for a in json.loads(res.output)["arms"]}
    assert shown["bm25f"]["baseline"] == shown["hybrid"]["baseline"] == baseline
    assert shown["bm25f"]["delta"] > 0 and shown["bm25f"]["p_holm"] < alpha
    assert shown["hybrid"]["p_holm"] >= alpha
