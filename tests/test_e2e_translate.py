"""End to end, in a temporary git repository: a deeper pool freezes a second key, and the
report scores every arm under both keys (shift, order, Kendall's tau), for one cycle."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as sps
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]


def _params(root, change):
    params = yaml.safe_load((root / "params.yaml").read_text())
    change(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _qrels(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        q, _, c, g = line.split()
        out.setdefault(q, {})[c] = int(g)
    return out


def _ndcg_exp(qrels, run, k=10):
    """nDCG@k with gain 2^g - 1, by hand: queries with something relevant, unanswered = 0."""
    values = []
    for q, judged in qrels.items():
        if not any(g >= 1 for g in judged.values()):
            continue
        # trec_eval's order: score descending, then chunk id descending
        ranked = [c for c, _ in sorted(run.get(q, {}).items(), key=lambda t: (t[1], t[0]),
                                       reverse=True)][:k]
        dcg = sum((2 ** judged.get(c, 0) - 1) / np.log2(i + 2) for i, c in enumerate(ranked))
        ideal = sorted(judged.values(), reverse=True)[:k]
        idcg = sum((2 ** g - 1) / np.log2(i + 2) for i, g in enumerate(ideal))
        values.append(dcg / idcg)
    return float(np.mean(values))


def _run(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        q, _, c, _, s, _ = line.split()
        out.setdefault(q, {})[c] = float(s)
    return out


@pytest.fixture(scope="module")
def deepened(tmp_path_factory, packets_built):
    # the tiny experiment with intents reviewed and `dvc repro packets` run (shared, see
    # tests/conftest.py): no stage up to the packets reads the primary measure set below
    root = tiny.copy_repo(packets_built, tmp_path_factory.mktemp("translate"))
    _params(root, lambda p: p["metrics"].update(primary="nDCG(dcg='exp-log2')@10"))
    # Both graders grade every pair the arms return (their top 8), from the truth table,
    # not only the depth-5 pool's: the depth-5 pool and the depth-8 one find every grade
    # made, so the two keys cost two runs of the pipeline and no grading between them.
    pairs = {(q, c) for rows in tiny.runs().values() for q, c, _ in rows}
    for grader in ("grader-a", "auditor-b"):
        tiny.write_grades(root, grader, tiny.grade_rows(pairs))
    tiny.run(root, "dvc", "repro")
    first = {"record": json.loads((root / "data/key/record.json").read_text()),
             "qrels": (root / "data/key/key.qrels").read_text(),
             "report": (root / "metrics/report.md").read_text(),
             "decision": json.loads((root / "metrics/decision/lexical.json").read_text()),
             "decisions": {p.name: p.read_text()
                           for p in (root / "metrics/decision").glob("*.json")}}
    _params(root, lambda p: p["pool"].update(depth=8))
    tiny.run(root, "dvc", "repro")
    return root, first


def test_the_first_key_has_no_translation_and_names_its_pool_in_the_metrics(deepened):
    root, first = deepened
    assert "## Translation" not in first["report"]
    assert "## Judging cost" in first["report"]
    assert first["decision"]["pool_version"] == first["record"]["pool_version"]
    assert first["decision"]["key"] == first["record"]["key_sha256"][:12]


def test_a_deeper_pool_keeps_the_first_key_and_the_report_scores_every_arm_under_both(deepened):
    root, first = deepened
    record = json.loads((root / "data/key/record.json").read_text())
    assert record["pool_version"] != first["record"]["pool_version"]
    kept = json.loads((root / "data/key/previous/record.json").read_text())
    assert kept["key_sha256"] == first["record"]["key_sha256"]
    assert (root / "data/key/previous/key.qrels").read_text() == first["qrels"]

    md = (root / "metrics/report.md").read_text()
    section = md.split("## Translation from the previous key\n", 1)[1].split("\n## ", 1)[0]
    assert f"| previous | `{kept['key_sha256']}` | {kept['pool_version']} |" in section
    assert f"| current | `{record['key_sha256']}` | {record['pool_version']} |" in section
    old, new = _qrels(root / "data/key/previous/key.qrels"), _qrels(root / "data/key/key.qrels")
    before, after = {}, {}
    for arm in tiny.ARMS:
        run = _run(root / "data/runs" / f"{arm}.trec")
        before[arm], after[arm] = _ndcg_exp(old, run), _ndcg_exp(new, run)
        shift = after[arm] - before[arm]
        assert (f"| {arm} | {before[arm]:.4f} | {after[arm]:.4f} | "
                f"{round(shift, 4) + 0.0:+.4f} |") in section
    arms = sorted(tiny.ARMS)
    tau = sps.kendalltau([before[a] for a in arms], [after[a] for a in arms]).statistic
    assert f"Kendall τ {tau:.3f}" in section
    # the current key's numbers are the decision's: the same mean as the per-arm metrics file
    for arm in tiny.ARMS:
        decided = json.loads((root / "metrics/decision" / f"{arm}.json").read_text())
        assert decided["mean"] == pytest.approx(after[arm], abs=1e-12)
        assert decided["pool_version"] == record["pool_version"]
    html = (root / "metrics/report.html").read_text()
    assert '<h2 id="translation">' in html


def test_metrics_diff_across_pool_versions_says_not_comparable(deepened):
    root, first = deepened
    tiny.git(root, "add", "-A")
    tiny.git(root, "commit", "-qm", "second key")
    # the first key's decision files back on disk: HEAD holds the second key's
    folder = root / "metrics/decision"
    now = {p.name: p.read_text() for p in folder.glob("*.json")}
    for name, text in first["decisions"].items():
        (folder / name).write_text(text)
    proc = tiny.run(root, "relgrade", "metrics", "diff", check=False)
    for name, text in now.items():
        (folder / name).write_text(text)
    record = json.loads((root / "data/key/record.json").read_text())
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (f"not comparable: pool {record['pool_version']} vs "
                        f"{first['decision']['pool_version']}")
    old, new = json.loads(now["lexical.json"])["mean"], first["decision"]["mean"]
    assert (f"  lexical: nDCG(dcg='exp-log2')@10 {old:.4f} at HEAD -> {new:.4f} at workspace "
            f"({new - old:+.4f})") in lines
    # the same revision on both sides compares
    same = tiny.run(root, "relgrade", "metrics", "diff", "HEAD", "HEAD")
    assert same.stdout.startswith(f"comparable: pool {record['pool_version']} on both sides")
    bad = tiny.run(root, "relgrade", "metrics", "diff", "no-such-rev", check=False)
    assert bad.returncode == 1
    assert bad.stderr == ("Error: no-such-rev: not a git revision. name a commit, a branch or "
                          "a tag (e.g. HEAD~1)\n")
