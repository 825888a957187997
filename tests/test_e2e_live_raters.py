"""End to end: a spammer on the grading page is stopped by their gold answers as they grade,
and the pairs left in their queue go to the raters who stay.

experiments/crowd-sim is copied into a temporary git + dvc repository as
tests/test_e2e_crowd.py copies it, with the committed grade files of its four honest raters
and its auditor but not the spammer's (rater-5); rater-5 becomes a person (params ``kind:
human``) who grades in headless Chromium through `relgrade serve`, answering the gold
questions hidden in the queue right, wrong, wrong, right, ... (40% over five). After the
first save at which rater-5 has at least ``gold.min_gold`` (4) gold answers and an accuracy
below ``gold.min_accuracy`` (0.6), the page says the grading is paused. `dvc repro` then
deals every pair rater-5 had not graded to the other raters, names what each owes, and
their simulated graders (`relgrade grade run`, as printed) grade it; rater-5's saved grades
stay on disk as they were.

Needs Debian's chromium at /usr/bin/chromium (tools/test.sh installs it); skipped otherwise.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.e2e import tiny
from tests.e2e.serve import ARGS, CHROMIUM, serve

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EXP = "experiments/crowd-sim"
SPAMMER = "rater-5"
TOKEN = "rater-5-live-token-0123456789abcdef"
# right, wrong, wrong, right, wrong: 2 of 5 right (40%) when the fifth answer is reached
PATTERN = (True, False, False, True, False)
SPEC = ('rater-5: {role: rater, kind: model, family: simulated, model: "uniform spammer, '
        'sim/crowd.yaml", command: "python experiments/crowd-sim/sim/rater.py rater-5"}')


def _pending(proc) -> str:
    lines = [x for x in proc.stderr.splitlines() if x.startswith("Pending: ")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return lines[0]


def _wrong(grade: int) -> int:
    return 2 if grade == 0 else 0


@pytest.fixture(scope="module")
def live(tmp_path_factory, crowd_sim_pooled):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium "
                    "(apt-get install -y chromium chromium-driver)")
    from playwright.sync_api import sync_playwright

    # the copy (tests.e2e.shipped) with sample -> pool run, shared by the crowd-sim modules
    # (tests/conftest.py): the pool stage reads neither the graders params nor grade files
    root = tiny.copy_repo(crowd_sim_pooled / "repo", tmp_path_factory.mktemp("live"))
    exp = root / EXP
    shutil.rmtree(exp / "data/grades" / SPAMMER)  # the spammer grades on the page
    params = (exp / "params.yaml").read_text()
    assert SPEC in params
    (exp / "params.yaml").write_text(params.replace(
        SPEC, "rater-5: {role: rater, kind: human, family: person}"))
    tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:packets")
    gold = pd.read_csv(exp / "data/private/gold.tsv", sep="\t", dtype=str)
    known = {(q, c): int(g) for q, c, g in zip(gold["query_id"], gold["chunk_id"], gold["grade"])}
    queue = pd.read_parquet(exp / "data/private/assignment.parquet")
    mine = queue[queue["grader"] == SPAMMER]
    asked = {(q, c) for q, c, o in zip(mine["query_id"], mine["chunk_id"], mine["gold"]) if o}
    before = queue[queue["grader"] != SPAMMER]
    folder = exp / "data/packets/rater" / SPAMMER
    packets = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
    (root / "tokens.yaml").write_text(f"{SPAMMER}: {TOKEN}\n")
    saves, answers, typed = [], [], []  # per save: the gold answers so far (right or not)
    with serve(["--experiment", EXP, "--grader", SPAMMER, "--tokens", "tokens.yaml"],
               src=root / "src", cwd=root) as base:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page()
            page.goto(f"{base}/login?token={TOKEN}")
            page.click("#continue")
            stopped = False
            for qid, packet in packets.items():
                for b, batch in enumerate(packet["batches"]):
                    page.wait_for_url(f"**/g/{SPAMMER}/q/{qid}/{b}")
                    page.wait_for_selector("body[data-ready]", state="attached")
                    for c in batch:
                        pair = (qid, c["chunk_id"])
                        grade = 1
                        if pair in asked:
                            right = PATTERN[len(answers) % len(PATTERN)]
                            grade = known[pair] if right else _wrong(known[pair])
                            answers.append(right)
                        page.keyboard.press("r")
                        page.keyboard.type("looked at it")
                        page.keyboard.press("Enter")
                        page.keyboard.press(str(grade))
                        page.keyboard.press("n")
                        typed.append((qid, c["chunk_id"], grade))
                    with page.expect_navigation():
                        page.keyboard.press("Enter")
                    saves.append(list(answers))
                    if page.query_selector("#stopped") is not None:
                        stopped = True
                        break
                if stopped:
                    break
            paused = page.text_content("main")
            stop_url = page.url
            # every page of the queue now says the same, and the queue page too
            page.goto(f"{base}/g/{SPAMMER}/q/{next(iter(packets))}/0")
            again = page.text_content("main")
            progress = page.request.get(f"{base}/g/{SPAMMER}/progress.json").json()
            browser.close()
    grades_file = exp / "data/grades" / SPAMMER / "round-1.jsonl"
    saved = grades_file.read_bytes()
    repro = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    line = _pending(repro)
    dealt = pd.read_parquet(exp / "data/private/assignment.parquet")
    commands = [c for c in line.split("`")[1::2] if c.startswith("relgrade grade run")]
    for command in commands:
        # this copy holds no top-level experiment, so relgrade finds no repository around
        # crowd-sim and prints the commands without --experiment (test_e2e_crowd.py's rig)
        tiny.run(root, *command.split(), "--experiment", EXP, "--no-progress")
    after = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    return dict(root=root, exp=exp, stopped=stopped, saves=saves, paused=paused, typed=typed,
                stop_url=stop_url, again=again, progress=progress, saved=saved,
                grades_file=grades_file, repro=repro, line=line, before=before, dealt=dealt,
                mine=mine, commands=commands, after=after)


def test_the_spammer_is_stopped_at_the_first_save_that_meets_the_gold_rule(live):
    assert live["stopped"]
    saves = live["saves"]
    last, earlier = saves[-1], saves[:-1]
    # stopped with at least min_gold (4) answers under 60% right ...
    assert len(last) >= 4 and sum(last) / len(last) < 0.6
    # ... and not one save earlier: then fewer than 4 gold answers, or 60% or more right
    assert all(len(a) < 4 or sum(a) / len(a) >= 0.6 for a in earlier)
    assert "Your grading is paused" in live["paused"]
    assert "check questions" in live["paused"] and "Every grade you saved is kept" \
        in live["paused"]
    # the page names no gold pair and no number
    assert not re.search(r"\d", live["paused"].split("paused", 1)[1])
    assert "Your grading is paused" in live["again"]
    assert live["progress"]["stopped"] is True


def test_what_the_spammer_saved_stays_on_disk_through_the_repro_and_the_regrading(live):
    rows = [json.loads(x) for x in live["saved"].decode().splitlines()]
    # every grade typed and saved before the pause, the batch that crossed the line included
    assert [(r["query_id"], r["chunk_id"], r["grade"]) for r in rows] == live["typed"]
    assert live["grades_file"].read_bytes() == live["saved"]


def test_the_spammers_open_pairs_are_dealt_to_the_raters_who_stay(live):
    rows = [json.loads(x) for x in live["saved"].decode().splitlines()]
    done = {(r["query_id"], r["chunk_id"]) for r in rows}
    mine = live["mine"]
    open_pairs = {(q, c) for q, c in zip(mine["query_id"], mine["chunk_id"])} - done
    assert open_pairs
    assert (f"packets: removed on gold: {SPAMMER}; {len(open_pairs)} of their open pairs "
            "dealt to the raters who stay") in live["repro"].stdout
    dealt, before = live["dealt"], live["before"]
    others = dealt[dealt["grader"] != SPAMMER]
    new = set(zip(others["grader"], others["query_id"], others["chunk_id"])) - set(
        zip(before["grader"], before["query_id"], before["chunk_id"]))
    # each open pair went to exactly one rater who did not hold it
    assert sorted((q, c) for _, q, c in new) == sorted(open_pairs)
    # the spammer's own rows stay (their gold answers are what removes them)
    assert len(dealt[dealt["grader"] == SPAMMER]) == len(mine)
    # the repro names the raters who now owe them, each with their count
    owed = {}
    for g, _, _ in new:
        owed[g] = owed.get(g, 0) + 1
    for g, n in owed.items():
        assert re.search(rf"\b{n} (pairs? )?needs? {g} \({n} new\)", live["line"]), live["line"]
    assert SPAMMER not in live["line"]
    assert sorted(live["commands"]) == sorted(f"relgrade grade run --grader {g}" for g in owed)


def test_once_the_dealt_pairs_are_graded_the_raters_owe_nothing(live):
    after = live["after"]
    pending = [x for x in after.stderr.splitlines() if x.startswith("Pending: ")]
    # what is left is the expert's adjudication, never a rater's work
    assert all("need rater-" not in x for x in pending), after.stderr
