"""People grading their triage queue on the web page (`relgrade serve`) in headless Chromium.

Used by the triage experiment's end-to-end test (tests/test_e2e_triage.py), and the way the
grade files committed under experiments/triage-sim/data/grades/person-* were made: each
person grades every pair of their packets with the known truth of the simulation, one
keyboard-driven batch at a time, exactly as a person at the page would.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

from tests.e2e.serve import ARGS, CHROMIUM, serve


def truth(experiment: Path) -> dict[tuple[str, str], int]:
    """The simulation's true grade of each listed pair (unlisted pairs are 0)."""
    rows = [json.loads(x) for x in
            (experiment / "data/input/truth.jsonl").read_text().splitlines()]
    return {(r["query_id"], r["chunk_id"]): int(r["grade"]) for r in rows}


@contextmanager
def serving(root: Path, experiment: str, tokens: dict[str, str]):
    """`relgrade serve` for the experiment's human graders; yields its base URL."""
    (root / "tokens.yaml").write_text("".join(f"{n}: {t}\n" for n, t in tokens.items()))
    with serve(["--experiment", experiment, "--tokens", str(root / "tokens.yaml")],
               src=root / "src", cwd=root) as base:
        yield base


def packets_of(experiment: Path, role: str) -> dict[str, dict]:
    """A role's packets, query id → packet, in the page's queue order (sorted ids)."""
    folder = experiment / "data/packets" / role
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def grade_queue(browser, base: str, name: str, token: str, packets: dict[str, dict],
                grade_of) -> list[tuple[str, str, int]]:
    """Grade every batch of ``packets`` as ``name`` on the page; returns what was entered."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{base}/login?token={token}")
    page.click("#continue")
    done = []
    for qid, packet in packets.items():
        for b, batch in enumerate(packet["batches"]):
            page.wait_for_url(f"**/g/{name}/q/{qid}/{b}")
            page.wait_for_selector("body[data-ready]", state="attached")
            for chunk in batch:
                g = grade_of(qid, chunk["chunk_id"])
                page.keyboard.press("r")
                page.keyboard.type(f"read as grade {g}")
                page.keyboard.press("Enter")
                page.keyboard.press(str(g))
                page.keyboard.press("n")
                done.append((qid, chunk["chunk_id"], g))
            with page.expect_navigation():
                page.keyboard.press("Enter")  # save the batch
    if dialogs:
        raise AssertionError(f"the page raised dialogs: {dialogs}")
    if "Every pair in your queue is graded" not in page.text_content("main"):
        raise AssertionError(f"{name}'s queue is not done: {page.url}")
    page.close()
    return done


def people_grade(root: Path, experiment: str, graders: dict[str, str]) -> dict[str, list]:
    """Serve the experiment and let each person (name → role) grade their queue by truth."""
    from playwright.sync_api import sync_playwright

    exp = root / experiment
    known = truth(exp)
    tokens = {n: f"{n}-triage-token-0123456789abcdef" for n in graders}
    out = {}
    with serving(root, experiment, tokens) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            for name, role in graders.items():
                out[name] = grade_queue(browser, base, name, tokens[name],
                                        packets_of(exp, role),
                                        lambda q, c: known.get((q, c), 0))
        finally:
            browser.close()
    return out


if __name__ == "__main__":  # grade a clone's triage-sim queue: python -m tests.e2e.triage_web ROOT
    people_grade(Path(sys.argv[1]), "experiments/triage-sim",
                 {"person-a": "grader", "person-b": "auditor"})
