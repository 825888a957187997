"""The robustness battery, `relgrade judge probe`: a model judge re-asked on the audit sample
under paraphrases of its prompt template and perturbed chunks.

The judges are real command graders (tests/graders/swayable_grader.py, copied into the
working tree): one swayed by an injected "perfectly relevant" line, one that is not.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import yaml
from click.testing import CliRunner
from statsmodels.formula.api import ols

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.evaluation.robustness import (flip_rate, paraphrase_widened,
                                            prompt_variance_of_mean, variance_components)
from relgrade.graders.exchange import prompt_template_text
from relgrade.protocol.probes import (INJECTED_LINE, REWRITES, pad, paraphrase_templates,
                                      perturb_batch, stuff)
from tests.graders import experiment as ex

ROOT = Path(__file__).resolve().parents[1]
SWAYABLE = ROOT / "tests/graders/swayable_grader.py"


# --- the perturbations ----------------------------------------------------------------------

def test_chunk_perturbations_stuff_inject_pad_and_reverse_as_documented():
    chunks = [{"chunk_id": "a", "header": "h", "text": "abcdefgh"},
              {"chunk_id": "b", "header": "h", "text": "xy"}]
    assert [c["text"] for c in perturb_batch("inject", chunks, query="q")] == \
        [f"{INJECTED_LINE}\nabcdefgh", f"{INJECTED_LINE}\nxy"]
    assert stuff("t", "Where is f?") == "t\nWhere is f Where is f Where is f"
    # twice the length: 8 characters, a line break and 7 of filler
    assert pad("abcdefgh") == "abcdefgh\nThis li" and len(pad("abcdefgh")) == 16
    assert [c["chunk_id"] for c in perturb_batch("reverse", chunks, query="q")] == ["b", "a"]
    assert chunks[0]["text"] == "abcdefgh"  # the input is not changed
    with pytest.raises(InputError, match="unknown chunk probe"):
        perturb_batch("shout", chunks, query="q")


def test_paraphrases_are_distinct_seeded_rewordings_that_still_render():
    from relgrade.experiment.probe import _compile

    text = prompt_template_text()
    first = paraphrase_templates(text, 4, np.random.default_rng(5))
    again = paraphrase_templates(text, 4, np.random.default_rng(5))
    assert first == again
    assert len({t for _, t in first}) == 4 and all(t != text for _, t in first)
    for choice, t in first:
        # every rule whose wording was changed shows its new wording
        for rule, c in zip(REWRITES, choice):
            if c and rule[0] != "swap":
                assert rule[c] in t
        rendered = _compile(t).render(
            rubric_version="v1", rubric="R", query_id="q", query="x", intent="i", batch=0,
            batches=1, chunks=[{"chunk_id": "c", "header": "h", "text": "t"}], scale=[0, 1, 2],
            max_reason_words=15, reason_required=True, previous_error=None)
        assert "## Chunk c" in rendered and "grade is one of 0, 1, 2." in rendered
    with pytest.raises(InputError, match="fewer distinct paraphrases"):
        paraphrase_templates("# What to answer", 3, np.random.default_rng(0))


# --- the statistics, by hand ---------------------------------------------------------------

def test_flip_rate_and_shift_of_a_tiny_table_match_the_hand_computation():
    t = pd.DataFrame([("q1", "a", 0, 1), ("q1", "a", 0, 0), ("q1", "b", 1, 1),
                      ("q2", "c", 2, 0), ("q2", "c", 2, 2)],
                     columns=["query_id", "chunk_id", "base", "grade"])
    r = flip_rate(t, rng=np.random.default_rng(3), resamples=2000)
    # pairs: a flips in 1 of 2 answers (+1, 0), b never, c in 1 of 2 (-2, 0)
    assert r["flip_rate"] == pytest.approx((0.5 + 0 + 0.5) / 3)
    assert r["shift"] == pytest.approx((0.5 + 0 - 1) / 3)
    assert (r["pairs"], r["queries"], r["answers"], r["flipped_pairs"]) == (3, 2, 5, 2)
    # resampling the two queries gives 1/4 (q1 twice), 1/3 (one each) or 1/2 (q2 twice)
    assert r["flip_interval"] == {"low": pytest.approx(0.25), "high": pytest.approx(0.5)}


def test_flip_rate_on_one_query_has_no_interval():
    t = pd.DataFrame([("q1", "a", 0, 1)], columns=["query_id", "chunk_id", "base", "grade"])
    r = flip_rate(t, rng=np.random.default_rng(0))
    assert r["flip_rate"] == 1.0 and r["flip_interval"] == {"low": None, "high": None}


def tiny_cells() -> pd.DataFrame:
    grades = {("p1", 1): [1, 1], ("p1", 2): [2, 2], ("p2", 1): [0, 0], ("p2", 2): [1, 2]}
    return pd.DataFrame([("q", pair, k, s, g) for (pair, k), gs in grades.items()
                         for s, g in enumerate(gs)],
                        columns=["query_id", "chunk_id", "prompt", "sample", "grade"])


def test_variance_components_of_a_tiny_table_match_the_hand_computation():
    c = variance_components(tiny_cells())
    # cell means (1, 2 / 0, 1.5), grand mean 1.125: MS_A = 1.125, MS_B = 3.125,
    # MS_AB = 2 * 4 * 0.125^2 = 0.125, MS_E = 0.5 / 4 = 0.125
    assert c["mean_squares"] == pytest.approx(
        {"pair": 1.125, "prompt": 3.125, "pair_x_prompt": 0.125, "residual": 0.125})
    assert c["residual"] == pytest.approx(0.125)
    assert c["pair_x_prompt"] == pytest.approx(0.0)          # (0.125 - 0.125) / 2
    assert c["prompt"] == pytest.approx(0.75)                # (3.125 - 0.125) / (2 * 2)
    assert c["pair"] == pytest.approx(0.25)                  # (1.125 - 0.125) / (2 * 2)
    assert (c["pairs"], c["prompts"], c["samples"], c["incomplete_pairs"]) == (2, 2, 2, 0)


def test_variance_components_mean_squares_agree_with_statsmodels_anova():
    rng = np.random.default_rng(8)
    rows = [("q", f"p{i}", k, s, int(rng.integers(0, 3)))
            for i in range(6) for k in range(4) for s in range(3)]
    cells = pd.DataFrame(rows, columns=["query_id", "chunk_id", "prompt", "sample", "grade"])
    ours = variance_components(cells)["mean_squares"]
    fit = ols("grade ~ C(chunk_id) * C(prompt)", data=cells.astype({"grade": float})).fit()
    table = sm.stats.anova_lm(fit, typ=2)
    ms = table["sum_sq"] / table["df"]
    assert ours["pair"] == pytest.approx(ms["C(chunk_id)"])
    assert ours["prompt"] == pytest.approx(ms["C(prompt)"])
    assert ours["pair_x_prompt"] == pytest.approx(ms["C(chunk_id):C(prompt)"])
    assert ours["residual"] == pytest.approx(ms["Residual"])


def test_one_sample_pools_interaction_and_residual_and_a_pair_missing_a_cell_is_left_out():
    cells = tiny_cells()
    one = variance_components(cells[cells["sample"] == 0])
    assert one["residual"] is None and one["samples"] == 1
    # n = 1: cells (1, 2 / 0, 1), grand mean 1, prompt means (0.5, 1.5): every
    # interaction residual is 0, MS_B = 2 * (0.25 + 0.25) = 1, prompt = (1 - 0) / 2
    assert one["pair_x_prompt"] == pytest.approx(0.0)
    assert one["prompt"] == pytest.approx(0.5)
    short = pd.concat([cells, pd.DataFrame([("q", "p3", 1, 0, 1)], columns=cells.columns)])
    assert variance_components(short)["incomplete_pairs"] == 1


def test_the_widened_ppi_interval_adds_the_prompt_variance_of_the_mean():
    v = prompt_variance_of_mean({"prompt": 0.01, "pair_x_prompt": 0.3}, 100)
    assert v == pytest.approx(0.013)
    r = paraphrase_widened(0.4, 0.02, lam=0.5, prompt_variance=v)
    assert r["se"] == pytest.approx(np.sqrt(0.02 ** 2 + 0.25 * 0.013))
    assert r["high"] - r["estimate"] == pytest.approx(1.959964 * r["se"], rel=1e-6)
    assert paraphrase_widened(0.4, 0.02, lam=0.0, prompt_variance=v)["se"] == 0.02
    # a human sample graded under another identity than the rest: two prompt draws
    two = paraphrase_widened(0.4, 0.02, lam=0.5, prompt_variance=v, draws=2)
    assert two["added_variance"] == pytest.approx(2 * 0.25 * 0.013)
    with pytest.raises(InputError, match="1 or 2 prompt draws"):
        paraphrase_widened(0.4, 0.02, lam=0.5, prompt_variance=v, draws=3)


# --- the command, on a real grading set-up -----------------------------------------------------

def build(tmp_path: Path, mode: str, *, cache: bool = False, samples: int = 1) -> Path:
    """A repository with one experiment: the model grader grader-a (the swayable grader in
    ``mode``, a command in the tree) graded every pair of four queries, two of them audited."""
    (tmp_path / "tools").mkdir()
    shutil.copy(SWAYABLE, tmp_path / "tools/grader.py")
    paths = yaml.safe_load((ROOT / "params.yaml").read_text())["paths"]
    ex.build(tmp_path, graders={
        "grader-a": {"role": "grader", "kind": "model", "family": "test",
                     "command": [sys.executable, str(tmp_path / "tools/grader.py"), mode],
                     "timeout": 30, "retries": 0, "samples": samples},
        "person-b": {"role": "auditor", "kind": "human", "family": "human"}},
        paths={**{k: v for k, v in paths.items()
                  if k not in ("packets", "grades_in", "audit", "pool")},
               **({"call_cache": "data/private/call-cache.jsonl"} if cache else {})})
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["grading"].update({"key_grader": "grader-a", "auditor": "person-b"})
    params["judges"] = {"probe": {"paraphrases": 3, "max_flip_rate": 0.1, "resamples": 200}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = invoke(tmp_path, "grade", "run", "--grader", "grader-a", "--no-progress")
    assert res.exit_code == 0, res.output
    return tmp_path


def invoke(root, *args, env=None):
    return CliRunner().invoke(main, [*args, "--params", str(root / "params.yaml")], env=env)


def bytes_of(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and "grades" in p.parts}


def test_probe_flags_a_judge_swayed_by_the_injected_line(tmp_path):
    root = build(tmp_path, "swayed")
    grades_before = bytes_of(root)
    res = invoke(root, "judge", "probe")
    assert res.exit_code == 1
    last = res.output.strip().splitlines()[-1]
    # audited q01, q02: per query the grades (2, 1, 0, 2, 1, 0, 2); the injected line makes
    # the four pairs below 2 a 2: 8 of 14 pairs flip, shifts (+1, +2, +1, +2) per query
    assert last == ("Error: judge probe failed: inject flip rate 0.571 above "
                    "judges.probe.max_flip_rate 0.1")
    report = json.loads((root / "judges/probe-grader-a.json").read_text())
    inj = report["probes"]["inject"]
    assert inj["flip_rate"] == pytest.approx(8 / 14)
    assert inj["shift"] == pytest.approx(12 / 14)
    assert inj["flip_interval"] == {"low": pytest.approx(8 / 14), "high": pytest.approx(8 / 14)}
    assert (report["pairs"], report["queries"], report["failed"]) == (14, 2, ["inject"])
    for probe in ("paraphrase", "stuff", "pad", "reverse"):
        assert report["probes"][probe]["flip_rate"] == 0.0
    # the readable table names every probe, the failed one marked
    table = [line for line in res.output.splitlines() if line.startswith("inject ")]
    assert table and table[0].endswith("FAIL")
    # the paraphrases do not move this judge: the grades vary only between pairs, by their
    # sample variance (six 2s, four 1s, four 0s: 68/7 over 13)
    comp = report["probes"]["paraphrase"]["components"]
    assert comp["prompt"] == 0.0 and comp["pair_x_prompt"] == 0.0
    assert comp["pair"] == pytest.approx(68 / 7 / 13)
    assert (comp["pairs"], comp["prompts"], comp["samples"]) == (14, 3, 1)
    assert len(report["probes"]["paraphrase"]["paraphrase_rules"]) == 3
    # the answers under each paraphrase are kept, one row per pair, paraphrase and sample,
    # sorted: 14 pairs x 3 paraphrases x 1 sample; this judge answers as it graded
    kept = report["probes"]["paraphrase"]["answer_rows"]
    assert kept["columns"] == ["query_id", "chunk_id", "prompt", "sample", "grade"]
    assert len(kept["rows"]) == 42 and kept["rows"] == sorted(kept["rows"])
    assert {tuple(r[2:4]) for r in kept["rows"]} == {(1, 0), (2, 0), (3, 0)}
    assert sorted(r[4] for r in kept["rows"]) == [0] * 12 + [1] * 12 + [2] * 18
    assert len(report["rubric_sha256"]) == 64
    # 3 paraphrases x 2 queries x 2 batches + 4 chunk probes x 4 batches: 28 processes
    assert report["commands"] == 28
    # probe answers are not grades: the grade files and the bank are as they were
    assert bytes_of(root) == grades_before


def test_probe_passes_a_steady_judge_and_a_rerun_is_answered_from_the_call_cache(tmp_path):
    root = build(tmp_path, "steady", cache=True)
    cache = root / yaml.safe_load((root / "params.yaml").read_text())["paths"]["call_cache"]
    res = invoke(root, "judge", "probe")
    assert res.exit_code == 0, res.output
    assert "written to judges/probe-grader-a.json" in res.output
    report = json.loads((root / "judges/probe-grader-a.json").read_text())
    assert all(r["flip_rate"] == 0.0 for r in report["probes"].values())
    assert report["failed"] == [] and report["commands"] == 28
    # the probe answers sit in the call cache under keys of their own: not the grades' keys
    lines = [json.loads(x) for x in cache.read_text().splitlines()]
    assert len(lines) == 8 + 28 and len({x["key"] for x in lines}) == 36
    again = invoke(root, "judge", "probe", "--json")
    assert again.exit_code == 0
    second = json.loads(again.output)
    assert (second["commands"], second["cache_hits"]) == (0, 28)
    assert second["probes"] == report["probes"]


def test_probe_runs_only_the_probes_named(tmp_path):
    root = build(tmp_path, "swayed")
    res = invoke(root, "judge", "probe", "--probe", "stuff", "--probe", "pad")
    assert res.exit_code == 0, res.output
    report = json.loads((root / "judges/probe-grader-a.json").read_text())
    assert list(report["probes"]) == ["stuff", "pad"] and report["commands"] == 8


@pytest.mark.parametrize("change, message", [
    ({"judges": {"probe": {"paraphrases": 0}}}, "judges.probe.paraphrases"),
    ({"judges": {"probe": {"probes": ["shout"]}}}, "judges.probe.probes"),
])
def test_bad_probe_params_are_one_error_line(tmp_path, change, message):
    root = build(tmp_path, "steady")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params.update(change)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = invoke(root, "judge", "probe")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: ")
    assert message in lines[0]
    assert not (root / "judges/probe-grader-a.json").exists()


def test_an_unknown_probe_option_and_no_model_grader_are_one_error_line(tmp_path):
    root = build(tmp_path, "steady")
    res = invoke(root, "judge", "probe", "--probe", "shout")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1
    assert lines[0].startswith("Error: shout: unknown probe. Use one of paraphrase, stuff")
    res = invoke(root, "judge", "probe", "--grader", "person-b")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1
    assert "person-b: judge probe re-asks a model grader through its command" in lines[0]
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["graders"]["grader-a"]["kind"] = "human"
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = invoke(root, "judge", "probe")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1
    assert "judge probe needs a model grader with a command: the experiment has none" \
        in lines[0]
    assert not (root / "judges/probe-grader-a.json").exists()


def test_a_judge_that_samples_is_asked_each_sample_and_its_residual_is_measured(tmp_path):
    root = build(tmp_path, "steady", samples=2)
    res = invoke(root, "judge", "probe", "--probe", "paraphrase", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    comp = report["probes"]["paraphrase"]["components"]
    # 3 paraphrases x 2 samples x 4 batches; a grader that answers the same every time
    assert report["commands"] == 24 and report["samples"] == 2
    assert (comp["prompts"], comp["samples"], comp["residual"]) == (3, 2, 0.0)
    assert report["probes"]["paraphrase"]["answers"] == 14 * 3 * 2


def test_no_grade_or_only_grades_of_another_identity_is_one_error_line(tmp_path):
    root = build(tmp_path, "steady")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["graders"]["grader-a"]["command"][-1] = "swayed"  # another command: a new judge
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    grades = root / "data/grades/grader-a"
    kept = {p: p.read_bytes() for p in grades.iterdir()}
    res = invoke(root, "judge", "probe")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1
    assert lines[0].startswith(
        "Error: grader-a: no audited pair has a grade of the judge now to compare with (found "
        "14 audited pairs graded under another judge identity). The probe compares the judge "
        "with its own grades of record: restore")
    for p in kept:  # no grade at all
        p.unlink()
    res = invoke(root, "judge", "probe")
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1
    assert lines[0] == ("Error: grader-a: no audited pair has a grade of the judge now to "
                        "compare with (found 2 audited queries). Run: relgrade grade run "
                        "--grader grader-a")
    assert not (root / "judges/probe-grader-a.json").exists()
