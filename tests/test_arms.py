"""``relgrade arm add|remove`` on an experiment made by ``relgrade init``: the params section
rewritten alone, the pipeline rendered, refusals that write nothing."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from click.testing import CliRunner

from relgrade.cli import main as cli
from relgrade.cli.arm import frozen_key_note
from relgrade.experiment.files import Experiment
from relgrade.experiment.sections import replace_section
from tests.test_init import init, repo  # noqa: F401  (the fixture)

EXP = "experiments/second"


def arm(*args):
    return CliRunner().invoke(cli, ["arm", *args, "--experiment", EXP])


def test_add_rewrites_only_the_arms_section_and_renders_the_pipeline(repo):  # noqa: F811
    assert init("--arm", "bm25=bm25", "--run", "ext=in/runs/ext.trec").exit_code == 0
    params = repo / EXP / "params.yaml"
    before = params.read_text()
    res = arm("add", "fused", "--kind", "rrf", "--fuse", "bm25,ext")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[:2] == [
        f"Added arm fused (rrf) to {EXP}/params.yaml; rendered {EXP}/dvc.yaml.",
        "Pending: the experiment has no pool yet; `dvc repro` makes the arm's run with the "
        "others."]
    after = params.read_text()
    # every line outside the arms section is kept byte for byte, comments included
    start = before.index("\narms:\n")
    end = before.index("\n", before.index("source: data/input/runs/ext.trec")) + 1
    assert after.startswith(before[:start]) and after.endswith(before[end:])
    assert yaml.safe_load(after)["arms"]["fused"] == {
        "kind": "rrf", "depth": 100, "k": 60, "fuse": ["bm25", "ext"],
        "source": "../../src/relgrade/retrieve/fusion.py"}
    dvc = yaml.safe_load((repo / EXP / "dvc.yaml").read_text())
    assert "data/input/runs/ext.trec" in dvc["stages"]["retrieve"]["do"]["deps"]
    check = CliRunner().invoke(cli, ["pipeline", "check", "--experiment", EXP])
    assert check.exit_code == 0, check.output


def test_add_refusals_write_nothing(repo):  # noqa: F811
    assert init("--arm", "bm25=bm25", "--run", "ext=in/runs/ext.trec").exit_code == 0
    files = {p: p.read_bytes() for p in (repo / EXP).rglob("*") if p.is_file()}
    for args, message in [
        (("add", "bm25", "--kind", "tfidf"), "the experiment already has this arm"),
        (("add", "x", "--kind", "rrf", "--fuse", "nope"), "an rrf arm fuses other arms"),
        (("add", "x"), "give --kind KIND or --run FILE (one of them)"),
        (("add", "x", "--kind", "bm25", "--fuse", "ext"), "--fuse is for an rrf arm"),
        (("add", "x", "--run", "in/runs/missing.trec"), "input file not found"),
        (("add", "a/b", "--kind", "bm25"), "an arm name starts with a letter or digit"),
        (("add", "x", "--kind", "bm25", "--holes"), "--holes takes an external run"),
        (("add", "x", "--run", "in/runs/ext.trec", "--model-grader", "grader-a"),
         "--model-grader goes with --holes"),
        (("add", "x", "--run", "in/runs/ext.trec", "--holes", "--human-fraction", "0.2"),
         "an arm on the frozen key needs the holes' graders and sample"),
        (("add", "x", "--run", "in/runs/ext.trec", "--holes", "--model-grader", "nobody",
          "--human-grader", "grader-a", "--human-fraction", "0.2"),
         "holes.model_grader nobody is not declared under graders"),
        (("add", "ext", "--run", "in/runs/ext.trec", "--holes", "--model-grader", "grader-a",
          "--human-grader", "auditor-b", "--human-fraction", "0.2"),
         "the experiment already has this arm"),
    ]:
        res = arm(*args)
        assert res.exit_code == 1 and res.output.startswith("Error: ") and message in \
            res.output, (args, res.output)
    assert {p: p.read_bytes() for p in (repo / EXP).rglob("*") if p.is_file()} == files


def test_add_a_run_with_an_unknown_chunk_names_its_first_line_and_writes_nothing(
        repo):  # noqa: F811
    from relgrade.pipeline.stages import corpus, queries

    assert init("--arm", "bm25=bm25", "--run", "ext=in/runs/ext.trec").exit_code == 0
    # arm add checks a run against the corpus and queries once their stages have run
    ex = Experiment.load(repo / EXP / "params.yaml")
    corpus.run(ex)
    queries.run(ex)
    files = {p: p.read_bytes() for p in (repo / EXP).rglob("*") if p.is_file()}
    # lines 1 and 3 are known; line 2 names the first unknown chunk, line 4 the second
    (repo / "in/runs/bad.trec").write_text(
        "kw01 Q0 kw01-answer 1 3.0 x\nkw01 Q0 nope-1 2 2.0 x\nkw02 Q0 kw01-answer 1 1.0 x\n"
        "kw02 Q0 nope-2 2 0.5 x\n")
    res = arm("add", "bad", "--run", "in/runs/bad.trec")
    assert res.exit_code == 1
    assert res.output == ("Error: in/runs/bad.trec:2: query kw01, chunk nope-1: unknown chunk "
                          "id (found 2 row(s) name chunks that are not in the corpus, first "
                          "nope-1, nope-2)\n")
    assert {p: p.read_bytes() for p in (repo / EXP).rglob("*") if p.is_file()} == files


def test_remove_refuses_the_baseline_and_a_fused_arm_then_removes_one(repo):  # noqa: F811
    assert init("--arm", "bm25=bm25", "--arm", "tfidf=tfidf", "--arm", "hyb=rrf:bm25,ext",
                "--run", "ext=in/runs/ext.trec").exit_code == 0
    res = arm("remove", "bm25")
    assert res.exit_code == 1 and "the arm is the baseline" in res.output
    res = arm("remove", "ext")
    assert res.exit_code == 1
    assert res.output == (f"Error: {EXP}/params.yaml: arms.ext: the arm is fused by other arms "
                          "(found hyb). Remove those arms, or the arm from their `fuse`, "
                          "first\n")
    ex = Experiment.load(repo / EXP / "params.yaml")
    made = {a: [ex.path("metrics") / f"{a}.json", ex.path("per_query") / f"{a}.parquet"]
            for a in ("tfidf", "hyb")}
    for path in made["tfidf"] + made["hyb"]:  # as the metrics stage leaves them
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    res = arm("remove", "tfidf")
    assert res.exit_code == 0, res.output
    # the removed arm's metrics go with it (publish would read them as from an older key)
    assert [p.exists() for p in made["tfidf"] + made["hyb"]] == [False, False, True, True]
    assert res.output.splitlines()[-1] == (
        f"Pending: none; `dvc repro {EXP}/dvc.yaml` re-pools without it (no grading is owed).")
    params = yaml.safe_load((repo / EXP / "params.yaml").read_text())
    assert list(params["arms"]) == ["bm25", "hyb", "ext"]
    assert "/tfidf.trec" not in (repo / EXP / "data/runs/.gitignore").read_text().splitlines()


def test_replace_section_keeps_comments_around_the_section_and_appends_a_missing_one():
    text = "# top\nseed: 1\n# the arms\narms:\n  a: {kind: bm25}\n  # inner\n\n# pool\npool: {}\n"
    assert replace_section(text, "arms", {"b": {"kind": "tfidf"}}) == (
        "# top\nseed: 1\n# the arms\narms:\n  b:\n    kind: tfidf\n  # inner\n\n# pool\n"
        "pool: {}\n")
    assert replace_section("seed: 1", "arms", {}) == "seed: 1\narms: {}\n"


COMMENTED_ARMS = """arms:
  # the baseline: plain BM25, as the team runs it
  bm25:
    kind: bm25   # Okapi, k1 1.2
    depth: 100
    source: ../../src/relgrade/retrieve/bm25.py
  # the vendor's run, delivered weekly
  ext:
    kind: file
    depth: 100
    source: data/input/runs/ext.trec  # copied from in/runs
"""


def test_add_and_remove_keep_the_comments_inside_the_arms_section(repo):  # noqa: F811
    assert init("--arm", "bm25=bm25", "--run", "ext=in/runs/ext.trec").exit_code == 0
    params = repo / EXP / "params.yaml"
    text = params.read_text()
    start = text.index("\narms:\n") + 1
    end = text.index("\n", text.index("source: data/input/runs/ext.trec")) + 1
    assert yaml.safe_load(text[start:end]) == yaml.safe_load(COMMENTED_ARMS)
    text = text[:start] + COMMENTED_ARMS + text[end:]
    end = start + len(COMMENTED_ARMS)
    params.write_text(text)
    res = arm("add", "tf", "--kind", "tfidf")
    assert res.exit_code == 0, res.output
    # every line of the section is kept, comments and spacing included; the arm follows them
    assert params.read_text() == text[:start] + COMMENTED_ARMS + (
        "  tf:\n    kind: tfidf\n    depth: 100\n"
        "    source: ../../src/relgrade/retrieve/tfidf.py\n") + text[end:]
    res = arm("remove", "tf")
    assert res.exit_code == 0, res.output
    assert params.read_text() == text
    # a removed arm takes the comment lines above it; the ones above the next arm stay
    res = arm("add", "hyb", "--kind", "rrf", "--fuse", "bm25")
    assert res.exit_code == 0, res.output
    assert arm("remove", "ext").exit_code == 0
    assert params.read_text() == text[:start] + (
        "arms:\n  # the baseline: plain BM25, as the team runs it\n  bm25:\n"
        "    kind: bm25   # Okapi, k1 1.2\n    depth: 100\n"
        "    source: ../../src/relgrade/retrieve/bm25.py\n"
        "  hyb:\n    kind: rrf\n    depth: 100\n    k: 60\n    fuse:\n    - bm25\n"
        "    source: ../../src/relgrade/retrieve/fusion.py\n") + text[end:]


def test_shape_names_the_stages_a_hand_edit_changed_and_none_for_committed_ones(repo):  # noqa: F811
    from pathlib import Path

    from relgrade.pipeline.registry import shape

    top = Path(__file__).resolve().parents[1]
    for folder in [top, *sorted((top / "experiments").iterdir())]:
        if (folder / "params.yaml").is_file():
            assert shape(folder) is None, folder.name  # no check fires on them
    assert init("--arm", "bm25=bm25", "--run", "ext=in/runs/ext.trec").exit_code == 0
    params = repo / EXP / "params.yaml"
    arms = yaml.safe_load(params.read_text())["arms"]
    plain = replace_section(params.read_text(), "arms", arms | {"more": {
        "kind": "tfidf", "depth": 100, "source": "../../src/relgrade/retrieve/tfidf.py"}})
    params.write_text(plain)
    assert shape(repo / EXP) is None  # a plain arm: the retrieve stage runs foreach arm
    fused = replace_section(plain, "arms", yaml.safe_load(plain)["arms"] | {"hyb": {
        "kind": "rrf", "depth": 100, "fuse": ["ext", "bm25"],
        "source": "../../src/relgrade/retrieve/fusion.py"}})
    params.write_text(fused)
    assert shape(repo / EXP) == ["retrieve"]  # now it must depend on ext's run


def test_the_render_check_runs_under_dvc_and_only_inside_a_relgrade_repository(
        repo, tmp_path_factory, monkeypatch):  # noqa: F811
    import shutil

    import pytest

    from relgrade.errors import InputError
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.runner import DVC_STAGE, require_rendered

    assert init("--arm", "bm25=bm25", "--run", "ext=in/runs/ext.trec").exit_code == 0
    params = repo / EXP / "params.yaml"
    text = params.read_text()
    params.write_text(replace_section(text, "arms", yaml.safe_load(text)["arms"] | {"hyb": {
        "kind": "rrf", "depth": 100, "fuse": ["ext", "bm25"],
        "source": "../../src/relgrade/retrieve/fusion.py"}}))
    ex = Experiment.load(params)
    monkeypatch.delenv(DVC_STAGE, raising=False)
    require_rendered(ex)  # run by hand, outside DVC: no check
    monkeypatch.setenv(DVC_STAGE, "retrieve@hyb")
    with pytest.raises(InputError, match="the pipeline differs from what params.yaml gives "
                                         r"\(stages: retrieve\)"):
        require_rendered(ex)
    # the same experiment copied out of any repository (no stages/ and dvc.yaml above it):
    # nothing to render against, so the stage runs
    alone = tmp_path_factory.mktemp("outside") / "alone"
    shutil.copytree(repo / EXP, alone)
    require_rendered(Experiment.load(alone / "params.yaml"))


def test_add_a_bm25f_arm_writes_its_kind_and_library_source(repo):  # noqa: F811
    assert init("--arm", "bm25=bm25").exit_code == 0
    res = arm("add", "fields", "--kind", "bm25f")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == (
        f"Added arm fields (bm25f) to {EXP}/params.yaml; rendered {EXP}/dvc.yaml.")
    assert yaml.safe_load((repo / EXP / "params.yaml").read_text())["arms"]["fields"] == {
        "kind": "bm25f", "depth": 100, "source": "../../src/relgrade/retrieve/bm25f.py"}


def _note_commands(note):
    return [shlex.split(c) for c in re.findall(r"`([^`]+)`", note)]


def test_a_frozen_ppi_key_note_names_no_holes_and_its_commands_run_as_printed(repo):  # noqa: F811
    assert init("--run", "ext=in/runs/ext.trec", "--mode", "ppi", "--grader-command",
                "python g.py", "--human-queries", "4").exit_code == 0
    res = arm("add", "fresh", "--run", "in/runs/ext.trec", "--depth", "10")
    assert res.exit_code == 0, res.output
    ex = Experiment.load(repo / EXP / "params.yaml")
    assert frozen_key_note(ex, "fresh", run=Path("in/runs/ext.trec")) is None  # not frozen
    (repo / EXP / "data/key").mkdir(parents=True)
    (repo / EXP / "data/key/record.json").write_text("{}\n")
    note = frozen_key_note(ex, "fresh", run=Path("in/runs/ext.trec"))
    assert note == (
        "note: the key is frozen; in ppi mode the key is the model grader's, so an arm cannot "
        f"join it under holes: `dvc repro {EXP}/dvc.yaml` owes the grading priced above and "
        "freezes a new key (the report translates the previous one); to take the arm back, "
        f"`relgrade arm remove fresh --experiment {EXP}` (docs/new-arm.md).")
    assert "--holes" not in note
    repro, remove = _note_commands(note)
    # the dvc target is the experiment's pipeline file, named from the repository's top
    assert repro[:2] == ["dvc", "repro"] and (repo / repro[2]).is_file()
    assert remove[0] == "relgrade"
    done = CliRunner().invoke(cli, remove[1:])
    assert done.exit_code == 0, done.output
    assert "fresh" not in yaml.safe_load((repo / EXP / "params.yaml").read_text())["arms"]


def test_a_frozen_key_note_outside_ppi_mode_names_the_holes_way_with_its_experiment(
        repo):  # noqa: F811
    assert init("--arm", "bm25=bm25", "--run", "ext=in/runs/ext.trec").exit_code == 0
    assert arm("add", "fresh", "--run", "in/runs/ext.trec").exit_code == 0
    (repo / EXP / "data/key").mkdir(parents=True)
    (repo / EXP / "data/key/record.json").write_text("{}\n")
    ex = Experiment.load(repo / EXP / "params.yaml")
    assert frozen_key_note(ex, "fresh", run=Path("in/runs/ext.trec")) == (
        f"note: the key is frozen; to keep it as it is, `relgrade arm remove fresh "
        f"--experiment {EXP}`, then add the run with --holes (docs/new-arm.md).")
    assert frozen_key_note(ex, "fresh", run=None) is None  # a computed arm: no note


def test_setting_a_section_of_a_shipped_params_file_to_its_own_value_changes_no_byte():
    # the round trip keeps quoting, long lines and each file's own sequence indentation
    top = Path(__file__).resolve().parents[1]
    for path in [top / "params.yaml", *sorted((top / "experiments").glob("*/params.yaml"))]:
        text = path.read_text()
        for name, value in yaml.safe_load(text).items():
            assert replace_section(text, name, value) == text, (path, name)


def _holes_experiment(repo):  # noqa: F811
    """experiments/second with grader-a a model (a command) and aud a person."""
    assert init("--arm", "bm25=bm25", "--arm", "tfidf=tfidf", "--grader-command", "python g.py",
                "--auditor", "aud").exit_code == 0
    for name in ("fresh", "fresh2"):
        (repo / f"in/runs/{name}.trec").write_bytes((repo / "in/runs/ext.trec").read_bytes())
    return repo / EXP / "params.yaml"


def test_holes_graders_of_the_wrong_kind_are_refused_naming_the_grader_and_nothing_is_written(
        repo):  # noqa: F811
    _holes_experiment(repo)
    files = {p: p.read_bytes() for p in (repo / EXP).rglob("*") if p.is_file()}
    # aud is a person, grader-a a model: swapped, each is named with its kind
    res = arm("add", "fresh", "--run", "in/runs/fresh.trec", "--holes", "--model-grader", "aud",
              "--human-grader", "grader-a", "--human-fraction", "0.5")
    assert res.exit_code == 1
    assert res.output == (
        f"Error: {EXP}/params.yaml: holes.model_grader aud is a grader of kind human "
        "(graders.aud.kind): the model_grader must be of kind model (or import); swap the "
        "two or name another grader\n")
    # a person as the people's grader, a second person as the model: the model is named
    res = arm("add", "fresh", "--run", "in/runs/fresh.trec", "--holes", "--model-grader",
              "grader-a", "--human-grader", "grader-a", "--human-fraction", "0.5")
    assert res.exit_code == 1 and "is also the model grader" in res.output
    assert {p: p.read_bytes() for p in (repo / EXP).rglob("*") if p.is_file()} == files
    assert not (repo / EXP / "data/input/runs/fresh.trec").exists()


def test_a_holes_folder_with_another_graders_grades_is_refused_naming_it_and_nothing_is_written(
        repo):  # noqa: F811
    _holes_experiment(repo)
    # an earlier holes arm's model grader left its grades in the holes' folder
    left = repo / EXP / "data/holes/grades/judge-old"
    left.mkdir(parents=True)
    (left / "round-1.jsonl").write_text('{"query_id": "q1"}\n')
    files = {p: p.read_bytes() for p in (repo / EXP).rglob("*") if p.is_file()}
    res = arm("add", "fresh", "--run", "in/runs/fresh.trec", "--holes", "--model-grader",
              "grader-a", "--human-grader", "aud", "--human-fraction", "0.5")
    assert res.exit_code == 1
    assert res.output == (
        f"Error: {EXP}/data/holes/grades/judge-old: judge-old: the holes' folder holds grades "
        "of a grader that is not a holes grader now (found holes graders grader-a (model) and "
        "aud (people)). Grade the holes with judge-old again (--model-grader or "
        f"--human-grader judge-old: its grades are reused), or move {EXP}/data/holes/grades/"
        "judge-old out of the holes' folder (`git mv`; its grades stay in git) to grade the "
        "holes anew\n")
    assert {p: p.read_bytes() for p in (repo / EXP).rglob("*") if p.is_file()} == files
    assert not (repo / EXP / "data/input/runs/fresh.trec").exists()


def test_remove_takes_a_holes_arm_out_of_holes_and_the_section_with_its_last_arm(
        repo):  # noqa: F811
    params = _holes_experiment(repo)
    before = params.read_text()
    dvc_before = (repo / EXP / "dvc.yaml").read_text()
    for name in ("fresh", "fresh2"):
        res = arm("add", name, "--run", f"in/runs/{name}.trec", "--holes", "--model-grader",
                  "grader-a", "--human-grader", "aud", "--human-fraction", "0.5")
        assert res.exit_code == 0, res.output
    ex = Experiment.load(params)
    decision = ex.path("decision")
    decision.mkdir(parents=True)
    for name in ("bm25", "fresh", "fresh2"):  # as the report stage leaves them
        (decision / f"{name}.json").write_text("{}\n")
    res = arm("remove", "fresh")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == [
        f"Removed arm fresh from holes.arms in {EXP}/params.yaml; rendered {EXP}/dvc.yaml.",
        f"Pending: none; `dvc repro {EXP}/dvc.yaml` rewrites the holes' record and the report "
        "without it (no grading is owed; the grades recorded for its holes stay)."]
    holes = yaml.safe_load(params.read_text())["holes"]
    assert list(holes["arms"]) == ["fresh2"] and holes["model_grader"] == "grader-a"
    assert sorted(p.name for p in decision.iterdir()) == ["bm25.json", "fresh2.json"]
    dvc = yaml.safe_load((repo / EXP / "dvc.yaml").read_text())
    assert dvc["stages"]["holes"]["deps"][-1] == "data/input/runs/fresh2.trec"
    assert "data/input/runs/fresh.trec" not in dvc["stages"]["holes"]["deps"]
    # the last one: the section goes, and every other line is as before the arms came; the
    # holes' record goes with it (no stage is left to rewrite it without the arm)
    record = ex.path("holes")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text('{"arms": {"fresh2": {}}}\n')
    assert arm("remove", "fresh2").exit_code == 0
    assert not record.exists()
    after = params.read_text()
    assert "holes" not in yaml.safe_load(after)
    assert after == before
    assert (repo / EXP / "dvc.yaml").read_text() == dvc_before
    check = CliRunner().invoke(cli, ["pipeline", "check", "--experiment", EXP])
    assert check.exit_code == 0, check.output
    res = arm("remove", "fresh")
    assert res.exit_code == 1 and "not an arm of the experiment (found bm25, tfidf)" in res.output


def test_remove_of_a_run_arm_says_its_copied_run_is_kept_and_add_takes_it_back(
        repo):  # noqa: F811
    assert init("--arm", "bm25=bm25", "--run", "ext=in/runs/ext.trec",
                "--run", "other=in/runs/ext.trec").exit_code == 0
    res = arm("remove", "other")
    assert res.exit_code == 0, res.output
    copy = f"{EXP}/data/input/runs/other.trec"
    assert res.output.splitlines()[1] == (
        f"Kept its run {copy}, the copy `arm add` made: it records what the arm ranked when "
        f"its pairs were pooled; `git rm {copy}` drops it, and `relgrade arm add other --run "
        f"{copy}` brings the arm back.")
    assert (repo / copy).is_file()
    # the command it names works as printed: the copy is its own source
    before = (repo / copy).read_bytes()
    res = arm("add", "other", "--run", copy)
    assert res.exit_code == 0, res.output
    assert (repo / copy).read_bytes() == before
