"""End to end: `relgrade judge probe` then `dvc repro` widens a ppi experiment's PPI++
intervals by the judge's paraphrase component, in metric units, as recorded; a probe report
of another judge identity is ignored with a note.

The model grader is a real command whose answers move with the prompt's wording
(tests/graders/wording_grader.py); the human grader reads the fixture's truth
(tests/graders/tiny_grader.py). The experiment is made by `relgrade init --mode ppi` and run
by the user's loop (`dvc repro` and the commands its Pending line names).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import pytest
import yaml
from scipy import stats as sps

from tests.e2e import tiny
from tests.test_e2e_init_modes import _loop, _repo

pytestmark = [pytest.mark.slow]

GRADERS = Path(__file__).with_name("graders")
MODEL = f"{sys.executable} {GRADERS / 'wording_grader.py'}"
HUMAN = f"{sys.executable} {GRADERS / 'tiny_grader.py'}"
NDCG = "nDCG(dcg='exp-log2')@10"
EXP = "experiments/ppi"


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    root = _repo(tmp_path_factory, "ppi-paraphrase")
    tiny.run(root, "relgrade", "init", EXP, "--corpus", "data/input/chunks.jsonl",
             "--queries", "data/input/queries.tsv", "--intents", "data/input/intents.tsv",
             "--arm", "bm25=bm25", "--arm", "tfidf=tfidf", "--pool-depth", "3",
             "--grader", "model-m", "--grader-command", MODEL, "--auditor", "person-h",
             "--auditor-command", HUMAN, "--mode", "ppi", "--human-fraction", "0.5")
    tiny.run(root, "relgrade", "intents", "review", "--experiment", EXP, "--reviewer",
             "person-h")
    _loop(root, EXP)
    folder = root / EXP
    before = json.loads((folder / "metrics/ppi.json").read_text())
    # the wording moves this judge's grades: the probe's gate fails (exit 1) after it has
    # written the report, which the ppi stage then uses
    probe = tiny.run(root, "relgrade", "judge", "probe", "--experiment", EXP,
                     "--probe", "paraphrase", check=False)
    assert probe.returncode == 1, probe.stdout + probe.stderr
    assert "written to experiments/ppi/judges/probe-model-m.json" in probe.stdout
    repro = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml")
    after = json.loads((folder / "metrics/ppi.json").read_text())
    return root, folder, before, probe, repro, after


def test_without_a_probe_report_the_ppi_output_has_no_paraphrase_entry(probed):
    _, _, before, *_ = probed
    assert "paraphrase" not in before
    row = before["estimates"][NDCG]["arms"]["bm25"]["ppi++"]
    assert "paraphrase" not in row


def test_the_probe_renders_the_ppi_stage_onto_its_report_and_repro_reruns_it(probed):
    root, folder, _, probe, repro, _ = probed
    assert f"rendered {EXP}/dvc.yaml: the ppi stage reads {EXP}/judges/probe-model-m.json" \
        in probe.stdout
    ppi_deps = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]["ppi"]["deps"]
    assert "judges/probe-model-m.json" in ppi_deps
    tiny.run(root, "relgrade", "pipeline", "check", "--experiment", EXP)
    assert "ppi paraphrase: judges/probe-model-m.json" in repro.stdout
    assert "widened the PPI++ intervals, 1 prompt draw(s)" in repro.stdout


def test_repro_widens_each_interval_by_the_recorded_component(probed):
    _, folder, before, _, _, after = probed
    report_bytes = (folder / "judges/probe-model-m.json").read_bytes()
    report = json.loads(report_bytes)
    para = after["paraphrase"]
    assert para["sha256"] == hashlib.sha256(report_bytes).hexdigest()
    assert (para["used"], para["widen"], para["widened"], para["draws"]) == (True, True, True, 1)
    assert para["judge"] == report["judge"] and para["note"] is None
    assert para["paraphrases"] == 4
    assert para["probed_queries"] == len(after["design"]["human_sample"])
    comp = para["components"][NDCG]
    est_b, est_a = before["estimates"][NDCG], after["estimates"][NDCG]
    big_n = est_a["N"]
    # the wording grader moves grades under a paraphrase: some component is positive
    assert max(c["prompt_variance"] for c in comp["arms"].values()) > 0
    rows = [(est_b["arms"][a]["ppi++"], est_a["arms"][a]["ppi++"], comp["arms"][a])
            for a in ("bm25", "tfidf")]
    rows += [(b["ppi++"], a["ppi++"], c) for b, a, c in
             zip(est_b["differences"], est_a["differences"], comp["differences"])]
    for old, new, c in rows:
        v = c["prompt"] + c["pair_x_prompt"] / big_n
        assert c["prompt_variance"] == pytest.approx(v, abs=1e-15)
        added = 1 * old["lambda"] ** 2 * v
        assert new["estimate"] == old["estimate"] and new["lambda"] == old["lambda"]
        assert new["paraphrase"]["added_variance"] == pytest.approx(added, abs=1e-15)
        assert new["se"] == pytest.approx(math.sqrt(old["se"] ** 2 + added), rel=1e-12)
        assert new["paraphrase"]["unwidened"]["se"] == old["se"]
        q = sps.t.ppf(0.975, new["df"])  # the default jackknife interval's quantile
        if not new["clipped"]:
            assert new["high"] - new["low"] == pytest.approx(2 * q * new["se"], rel=1e-9)
        assert new["high"] >= old["high"] and new["low"] <= old["low"]
    # model-only and human-only are as they were
    assert est_a["arms"]["bm25"]["human-only"] == est_b["arms"]["bm25"]["human-only"]
    # the report's PPI section names the source and its sha256
    md = (folder / "metrics/report.md").read_text()
    assert f"Paraphrase component: judges/probe-model-m.json (sha256 {para['sha256'][:12]})" in md


def test_a_probe_of_another_identity_is_ignored_with_a_note(probed):
    root, folder, before, *_ = probed
    path = folder / "judges/probe-model-m.json"
    report = json.loads(path.read_text())
    report["judge"] = "0" * 64  # measured under an earlier identity of the judge
    path.write_text(json.dumps(report, indent=2))
    proc = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml")
    out = json.loads((folder / "metrics/ppi.json").read_text())
    para = out["paraphrase"]
    assert (para["used"], para["widened"]) == (False, False)
    assert para["note"].startswith("ignored: measured under judge identity 000000000000, "
                                   "the key grader's identity now is ")
    assert "ignored: measured under judge identity 000000000000" in proc.stdout
    assert out["estimates"] == before["estimates"]
    md = (folder / "metrics/report.md").read_text()
    assert "ignored: measured under judge identity 000000000000" in md


def test_a_probe_report_edited_by_hand_is_one_error_line_and_nothing_is_written(probed):
    root, folder, *_ = probed
    path = folder / "judges/probe-model-m.json"
    report = json.loads(path.read_text())
    report["probes"]["paraphrase"]["answer_rows"]["rows"][3] = ["q01", "c1", "one", 0, 2]
    path.write_text(json.dumps(report, indent=2))
    kept = (folder / "metrics/ppi.json").read_bytes()
    proc = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert proc.returncode != 0
    errors = [x for x in proc.stderr.splitlines() if x.startswith("Error:")]
    assert len(errors) == 1 and "probe-model-m.json" in errors[0]
    assert "probes.paraphrase.answer_rows.rows[3]" in errors[0]
    assert "is not [query_id, chunk_id, prompt, sample, grade]" in errors[0]
    assert (folder / "metrics/ppi.json").read_bytes() == kept
