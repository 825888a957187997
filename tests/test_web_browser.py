"""A person grades a small pool in headless Chromium, with the keyboard, through `relgrade serve`.

Needs Debian's chromium at /usr/bin/chromium (tools/test.sh installs it); skipped otherwise.
Saves screenshots under test-artifacts/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.serve import ARGS, CHROMIUM, serve
from tests.graders import experiment as ex

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"

CODE = '''def resolve_command(ctx, args):
    """Find the subcommand named by the first argument and return it with the rest."""
    cmd_name = make_str(args[0])
    original_cmd_name = cmd_name
    # {kind}: look the name up, then try the normalised form
    cmd = self.get_command(ctx, cmd_name)
    if cmd is None and ctx.token_normalize_func is not None:
        cmd_name = ctx.token_normalize_func(cmd_name)
        cmd = self.get_command(ctx, cmd_name)
    if cmd is None and not ctx.resilient_parsing:
        if split_opt(cmd_name)[0]:
            self.parse_args(ctx, ctx.args)
        ctx.fail(f"No such command {{original_cmd_name!r}}.")
    return cmd_name if cmd else None, cmd, args[1:]
'''


XSS = '<script>window.__relgradeXss = 1</script><img src=x onerror="window.__relgradeXss = 2">'


def code_for(c):
    j = int(c["chunk_id"].rsplit("-c", 1)[1])
    text = CODE.format(kind=("ANSWER", "POINTER", "plain")[j % 3])
    return text + f"# {XSS}\n" if j == 6 else text


@pytest.fixture
def server(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium "
                    "(apt-get install -y chromium chromium-driver)")
    rubric = (ROOT / "rubric/v1.md").read_text() if (ROOT / "rubric/v1.md").exists() else None
    packets = ex.build(tmp_path, queries=2, chunks=7, rubric=rubric, text_of=code_for,
                       graders={"alice": {"role": "grader", "kind": "human", "family": "person"}})
    (tmp_path / "tokens.yaml").write_text("alice: alice-browser-token-0123456789\n")
    with serve(["--params", str(tmp_path / "params.yaml"),
                "--tokens", str(tmp_path / "tokens.yaml")]) as base:
        yield base, tmp_path, packets

def ready(page):
    """Wait until the page's script has set up the keys (it marks the body when done)."""
    page.wait_for_selector("body[data-ready]", state="attached")


def grade_chunk(page, reason, grade):
    page.keyboard.press("r")
    page.keyboard.type(reason)
    page.keyboard.press("Enter")  # leave the reason box
    page.keyboard.press(str(grade))
    page.keyboard.press("n")


def test_a_person_grades_a_small_pool_with_the_keyboard_across_a_reload(server):
    from playwright.sync_api import sync_playwright

    base, root, packets = server
    ARTIFACTS.mkdir(exist_ok=True)
    order = [(q, b, [c["chunk_id"] for c in batch]) for q, p in packets.items()
             for b, batch in enumerate(p["batches"])]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        dialogs, failed = [], []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        # every request the pages make is answered: no favicon 404, no missing asset
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        page.goto(f"{base}/login?token=alice-browser-token-0123456789")
        assert page.url.endswith("/g/alice/")
        page.click("#continue")
        for n, (q, b, ids) in enumerate(order):
            page.wait_for_url(f"**/g/alice/q/{q}/{b}")
            ready(page)
            for k, cid in enumerate(ids):
                if n == 1 and k == 1:
                    # close to a break: reload mid-batch; the typed draft survives the reload
                    page.reload()
                    ready(page)
                    assert page.input_value("#reason-0") == f"says {ids[0]} is grade {ex.truth(ids[0])}"
                    assert page.is_checked(f'input[name="grade-0"][value="{ex.truth(ids[0])}"]')
                    page.keyboard.press("n")
                grade_chunk(page, f"says {cid} is grade {ex.truth(cid)}", ex.truth(cid))
                if n == 0 and k == 2:
                    page.evaluate("window.scrollTo(0, 0)")
                    page.screenshot(path=str(ARTIFACTS / "grading-page.png"))
            counter = page.text_content("#counter-0")
            assert counter.strip() == "5 / 15 words"
            if any(cid.endswith("-c6") for cid in ids):
                # the chunk holding markup shows it as text and runs none of it
                assert XSS in page.text_content(f"#chunk-{ids.index(q + '-c6')} .chunk-text")
                assert page.evaluate("window.__relgradeXss") is None
            with page.expect_navigation():
                page.keyboard.press("Enter")  # save the batch
        assert page.url.endswith("/g/alice/")
        assert dialogs == [] and failed == []
        assert "Every pair in your queue is graded" in page.text_content("main")
        page.screenshot(path=str(ARTIFACTS / "queue-done.png"), full_page=True)

        # a saved batch is final: its boxes are read-only when revisited
        page.goto(f"{base}/g/alice/q/q01/0")
        assert page.is_disabled("#reason-0")
        browser.close()

    rows = ex.read_rows(root / "data/grades/alice/round-1.jsonl")
    expected = [{"query_id": q, "chunk_id": cid, "reason": f"says {cid} is grade {ex.truth(cid)}",
                 "grade": ex.truth(cid)} for q, b, ids in order for cid in ids]
    assert rows == expected
    assert (ARTIFACTS / "grading-page.png").stat().st_size > 10_000
    shutil.copy(root / "data/grades/alice/round-1.jsonl", ARTIFACTS / "browser-grades.jsonl")


def test_every_too_long_reason_of_a_batch_is_flagged_as_typed_and_after_saving(server):
    # chunk 1: 16 words (15 allowed); chunk 3: 10 words of 31 letters, 10 x 31 + 9 = 319
    # characters (300 allowed); chunks 0, 2 and 4: a short reason.
    from playwright.sync_api import sync_playwright

    base, root, packets = server
    long_words, long_chars = " ".join(["word"] * 16), " ".join(["w" * 31] * 10)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.goto(f"{base}/login?token=alice-browser-token-0123456789")
        page.click("#continue")
        ready(page)
        for i in range(5):
            page.fill(f"#reason-{i}", {1: long_words, 3: long_chars}.get(i, "a short reason"))
            page.click(f"#chunk-{i} label.grade.g1")

        def flags():
            return {i: (page.text_content(f"#counter-{i}"),
                        "over" in page.get_attribute(f"#counter-{i}", "class"),
                        page.get_attribute(f"#reason-{i}", "aria-invalid"))
                    for i in range(5)}

        short = ("3 / 15 words", False, None)
        assert flags() == {0: short, 1: ("16 / 15 words", True, "true"), 2: short,
                           3: ("10 / 15 words · 319 / 300 characters", True, "true"), 4: short}
        with page.expect_navigation():
            page.click("#save")
        ready(page)
        assert [i for i in range(5)
                if "has-error" in page.get_attribute(f"#chunk-{i}", "class")] == [1, 3]
        assert flags() == {0: short, 1: ("16 / 15 words", True, "true"), 2: short,
                           3: ("10 / 15 words · 319 / 300 characters", True, "true"), 4: short}
        assert "Reason longer than 300 characters (found 319 characters)" in \
            page.text_content("#chunk-3 .error")
        browser.close()
    assert (root / "data/grades/alice/round-1.jsonl").read_bytes() == b""
