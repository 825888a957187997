"""End to end: `relgrade grade correct` on the tiny experiment after its key was frozen and
used for metrics.

The correction is appended beside the key grader's round file; `dvc repro` keeps the frozen
key, its metrics and the decision byte for byte, and writes the corrected key beside it as a
post-hoc key (its record listing the correction) with each arm's post-hoc metrics, and the
report gains a post-hoc section beside its unchanged verdicts. Refusals: a pair outside the
pool, a grade off the scale, an empty reason, the grade already recorded.
"""

from __future__ import annotations

import json

import pytest

from relgrade.protocol.corrections import CORRECTION
from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

FROZEN = ("data/key/key.jsonl", "data/key/key.qrels", "data/key/record.json",
          "data/graded/grades.parquet", *(f"metrics/arms/{arm}.json" for arm in tiny.ARMS),
          *(f"metrics/decision/{arm}.json" for arm in tiny.ARMS))
REPORTS = ("metrics/report.md", "metrics/report.html")


@pytest.fixture(scope="module")
def corrected(tmp_path_factory, truth_frozen_built):
    root = tiny.copy_repo(truth_frozen_built, tmp_path_factory.mktemp("correct"))
    before = {name: (root / name).read_bytes() for name in FROZEN if (root / name).exists()}
    reports = {name: (root / name).read_text() for name in REPORTS}
    key = [json.loads(x) for x in (root / "data/key/key.jsonl").read_text().splitlines()]
    target = next(r for r in key if r["grade"] == 0)
    refused = {
        "outside": tiny.run(root, "relgrade", "grade", "correct", target["query_id"],
                            "no-such-chunk", "--grade", "1", "--reason", "x", check=False),
        "scale": tiny.run(root, "relgrade", "grade", "correct", target["query_id"],
                          target["chunk_id"], "--grade", "5", "--reason", "x", check=False),
        "reason": tiny.run(root, "relgrade", "grade", "correct", target["query_id"],
                           target["chunk_id"], "--grade", "1", "--reason", " ", check=False),
        "same": tiny.run(root, "relgrade", "grade", "correct", target["query_id"],
                         target["chunk_id"], "--grade", "0", "--reason", "x", check=False),
    }
    refused["blank by"] = tiny.run(root, "relgrade", "grade", "correct", target["query_id"],
                                   target["chunk_id"], "--grade", "1", "--reason", "x",
                                   "--by", " ", check=False)
    said = tiny.run(root, "relgrade", "grade", "correct", target["query_id"],
                    target["chunk_id"], "--grade", "1", "--reason",
                    "The test names the target in its docstring.", "--by", "Ana Reviewer")
    repro = tiny.run(root, "dvc", "repro")
    after = {name: (root / name).read_bytes() for name in before}
    reports = {name: (text, (root / name).read_text()) for name, text in reports.items()}
    return root, target, before, after, refused, said, repro, reports


def test_refusals_are_clear_errors_and_record_nothing(corrected):
    root, target, *_, refused, _, _, _ = corrected
    pair = f"pair ({target['query_id']}, "
    assert "a correction of a pair outside the pool" in refused["outside"].stderr
    assert f"{pair}no-such-chunk)" in refused["outside"].stderr
    assert ("a corrected grade off the scale (found 5). Use a grade of the scale: 0, 1, 2"
            in refused["scale"].stderr)
    assert "a correction without a reason" in refused["reason"].stderr
    assert "a correction by a blank name" in refused["blank by"].stderr
    assert ("a correction identical to the recorded grade (found grade 0)"
            in refused["same"].stderr)
    assert all(p.returncode == 1 and p.stderr.startswith("Error: ") for p in refused.values())


def test_the_correction_is_recorded_beside_the_key_graders_round_file(corrected):
    root, target, *_ = corrected
    rows = [json.loads(x) for x in
            (root / "data/grades/grader-a/round-1.corrections.jsonl").read_text().splitlines()]
    assert len(rows) == 1  # the refused ones left nothing
    row = rows[0]
    assert (row["query_id"], row["chunk_id"], row["grade_before"], row["grade"]) == \
        (target["query_id"], target["chunk_id"], 0, 1)
    frozen = json.loads((root / "data/key/record.json").read_text())
    assert row["key_sha256"] == frozen["key_sha256"]
    assert row["content_sha256"] and row["intent_sha256"] and row["corrected_at"]
    assert row["corrected_by"] == "Ana Reviewer"
    assert tuple(row) == CORRECTION


def test_the_frozen_key_its_metrics_and_the_grades_stay_byte_for_byte(corrected):
    _, _, before, after, *_ = corrected
    assert after == before


def test_the_corrected_key_and_its_metrics_stand_beside_labelled_post_hoc(corrected):
    root, target, before, _, _, _, repro, _ = corrected
    frozen = json.loads(before["data/key/record.json"])
    record = json.loads((root / "data/key-post-hoc/record.json").read_text())
    assert record["post_hoc"] is True and record["corrects"] == frozen["key_sha256"]
    assert [(c["chunk_id"], c["grade_before"], c["grade"]) for c in record["corrections"]] == \
        [(target["chunk_id"], 0, 1)]
    key = {(r["query_id"], r["chunk_id"]): r["grade"] for r in
           map(json.loads, (root / "data/key-post-hoc/key.jsonl").read_text().splitlines())}
    old = {(r["query_id"], r["chunk_id"]): r["grade"] for r in
           map(json.loads, before["data/key/key.jsonl"].decode().splitlines())}
    changed = {k for k in key if key[k] != old[k]}
    assert changed == {(target["query_id"], target["chunk_id"])} and len(key) == len(old)
    assert f"a post-hoc key {record['key_sha256']} with 1 correction beside the frozen key" \
        in repro.stdout
    for arm in tiny.ARMS:
        m = json.loads((root / f"metrics/post-hoc/{arm}/metrics.json").read_text())
        assert (m["key_sha256"], m["post_hoc"]) == (record["key_sha256"], True)
    status = tiny.run(root, "relgrade", "status").stdout
    assert f"key: a post-hoc key {record['key_sha256']} stands beside the frozen one" in status


def test_the_correction_names_the_dvc_repro_that_writes_the_post_hoc_key(corrected):
    root, target, *_, said, _, _ = corrected
    # the experiment is the repository's top folder here, so plain `dvc repro` is its command
    assert said.stdout == (
        f"corrected {target['query_id']}/{target['chunk_id']}: grade 0 -> 1 (post-hoc, beside "
        f"the frozen key {json.loads((root / 'data/key/record.json').read_text())['key_sha256'][:12]}), "
        "recorded in data/grades/grader-a/round-1.corrections.jsonl; run dvc repro for the "
        "post-hoc key and metrics\n")


def test_the_report_shows_the_post_hoc_key_beside_the_frozen_one_and_keeps_its_verdicts(
        corrected):
    root, target, before, *_, reports = corrected
    old, new = reports["metrics/report.md"]
    assert "Post-hoc" not in old  # no post-hoc key before the correction
    heading = "\n## Post-hoc: a corrected key beside the frozen one\n"
    start = new.index(heading)
    end = new.find("\n## ", start + 1)
    # everything else, the verdicts and the frozen numbers included, stays as it was
    assert new[:start] + (new[end:] if end != -1 else "\n") == old
    section = new[start:end if end != -1 else None]
    frozen = json.loads(before["data/key/record.json"])
    record = json.loads((root / "data/key-post-hoc/record.json").read_text())
    row = json.loads((root / "data/grades/grader-a/round-1.corrections.jsonl").read_text())
    assert (f"1 correction of grader-a's grades by Ana Reviewer, recorded with `relgrade grade "
            f"correct` at {row['corrected_at']}.") in section
    assert f"| frozen | `{frozen['key_sha256']}` |" in section
    assert f"| post-hoc | `{record['key_sha256']}` |" in section
    assert (f"| {target['query_id']} | {target['chunk_id']} | 0 | 1 | grader-a | Ana Reviewer | "
            f"{row['corrected_at']} | The test names the target in its docstring. |") in section
    measure = "nDCG(dcg='exp-log2')@10"
    for arm in tiny.ARMS:  # each arm's mean under both keys, from its two metrics files
        a = json.loads(before[f"metrics/arms/{arm}.json"])[measure]
        b = json.loads((root / f"metrics/post-hoc/{arm}/metrics.json").read_text())[measure]
        assert (f"| {arm} | {a:.4f} | {b:.4f} | {round(b - a, 4) + 0.0:+.4f} |") in section
    old_html, html = reports["metrics/report.html"]
    assert 'id="post-hoc"' not in old_html and '<h2 id="post-hoc">' in html
    start = html.index('\n<h2 id="post-hoc">')
    end = min(i for i in (html.find("\n<h2", start + 1), html.index("\n</body>")) if i != -1)
    assert html[:start] + html[end:] == old_html


def test_metrics_show_and_diff_name_the_post_hoc_key_beside_the_frozen_one(corrected):
    root, *_ = corrected
    record = json.loads((root / "data/key-post-hoc/record.json").read_text())
    line = (f"post-hoc: a post-hoc key {record['key_sha256']} (1 correction, frozen at "
            f"{record['frozen_at']}) stands beside the frozen key; the numbers here are the "
            "frozen key's, the post-hoc ones are in the report's post-hoc section and "
            "metrics/post-hoc")
    show = tiny.run(root, "relgrade", "metrics", "show").stdout.splitlines()
    assert line in show
    assert json.loads(tiny.run(root, "relgrade", "metrics", "show", "--json").stdout)[
        "post_hoc_key"] == {"sha256": record["key_sha256"], "frozen_at": record["frozen_at"],
                            "corrections": 1, "metrics": "metrics/post-hoc"}
    # diff against a first (empty) commit: no decision files there, the post-hoc key here
    tiny.git(root, "commit", "-q", "--allow-empty", "-m", "empty")
    diff = tiny.run(root, "relgrade", "metrics", "diff", check=False)
    assert f"{line} (in the workspace)" in diff.stdout.splitlines(), diff.stdout + diff.stderr
