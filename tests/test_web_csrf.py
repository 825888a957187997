"""Cross-site requests to the grading page are refused: Origin check, form token, POST logout.

A page on another port of the same host is another origin; ``SameSite=Strict`` cookies do not
separate ports, so the server itself must refuse a form it did not serve.
"""

from __future__ import annotations

import http.server
import re
import threading

import pytest
from fastapi.testclient import TestClient

from relgrade.cli.serve import build_site
from relgrade.web.app import create_app
from tests.graders import experiment as ex

OWN = "http://testserver"


@pytest.fixture
def web(tmp_path):
    graders = {"alice": {"role": "grader", "kind": "human", "family": "person"},
               "carol": {"role": "grader", "kind": "human", "family": "person"}}
    packets = ex.build(tmp_path, queries=2, chunks=5, audit=1, graders=graders)
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=["alice", "carol"])
    app = create_app(site)

    def login(name):
        c = TestClient(app)
        assert c.get(f"/login?token={site.graders[name].token}",
                     follow_redirects=False).status_code == 303
        return c

    yield tmp_path, site, packets, login
    site.writer.close()
    for s in stores:
        s.close()


def token_on(page):
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m, "the page carries no form token"
    return m.group(1)


def form(token=None, grade="1"):
    data = {f"grade-{i}": grade for i in range(5)}
    data.update({f"reason-{i}": "points to the definition" for i in range(5)})
    if token is not None:
        data["csrf"] = token
    return data


def saved(root, name="alice"):
    path = root / "data/grades" / name / "round-1.jsonl"
    return ex.read_rows(path) if path.exists() else []


GOOD = "good"


@pytest.mark.parametrize("headers, token, status", [
    ({"origin": OWN}, GOOD, 303),
    ({"referer": OWN + "/g/alice/q/q01/0"}, GOOD, 303),
    ({}, GOOD, 403),
    ({"origin": "http://testserver:8081"}, GOOD, 403),
    ({"origin": "http://127.0.0.1"}, GOOD, 403),
    ({"origin": "https://testserver"}, GOOD, 403),
    ({"origin": "null"}, GOOD, 403),
    ({"origin": "http://evil.example", "referer": OWN + "/g/alice/"}, GOOD, 403),
    ({"referer": "http://testserver:9/x"}, GOOD, 403),
    ({"origin": OWN}, None, 403),
    ({"origin": OWN}, "0" * 64, 403),
    ({"origin": OWN}, "carol", 403),
], ids=["same-origin", "same-origin-referer", "no-origin-no-referer", "other-port",
        "other-host", "other-scheme", "null-origin", "origin-beats-referer", "referer-other-port",
        "no-token", "wrong-token", "another-sessions-token"])
def test_a_save_needs_the_own_origin_and_the_sessions_form_token(web, headers, token, status):
    root, site, packets, login = web
    alice = login("alice")
    own = token_on(alice.get("/g/alice/q/q01/0"))
    if token == GOOD:
        token = own
    elif token == "carol":
        token = token_on(login("carol").get("/g/carol/q/q01/0"))
        assert token != own
    r = alice.post("/g/alice/q/q01/0", data=form(token), headers=headers, follow_redirects=False)
    assert r.status_code == status
    if status == 403:
        assert "Nothing was saved" in r.text or "nothing was saved" in r.text
        assert saved(root) == []
    else:
        assert len(saved(root)) == 5


def test_a_bearer_client_needs_no_origin_and_no_form_token(web):
    root, site, packets, login = web
    c = TestClient(create_app(site))
    r = c.post("/g/alice/q/q01/0", data=form(), follow_redirects=False,
               headers={"authorization": f"Bearer {site.graders['alice'].token}"})
    assert r.status_code == 303
    assert len(saved(root)) == 5


def test_logout_is_a_post_with_the_same_checks(web):
    root, site, packets, login = web
    alice = login("alice")
    page = alice.get("/g/alice/")
    assert 'action="/logout"' in page.text and 'method="post"' in page.text
    assert alice.get("/logout", follow_redirects=False).status_code == 405
    r = alice.post("/logout", data={"csrf": token_on(page)}, follow_redirects=False,
                   headers={"origin": "http://testserver:1234"})
    assert r.status_code == 403
    assert alice.get("/g/alice/").status_code == 200  # still logged in
    r = alice.post("/logout", data={"csrf": token_on(page)}, follow_redirects=False,
                   headers={"origin": OWN})
    assert r.status_code == 303 and r.headers["location"] == "/bye"
    assert "relgrade_token=" in r.headers["set-cookie"]


def test_a_second_tabs_save_over_a_batch_saved_meanwhile_is_refused_visibly(web):
    root, site, packets, login = web
    tab1, tab2 = login("alice"), login("alice")
    token = token_on(tab2.get("/g/alice/q/q01/0"))  # tab 2 shows the batch unsaved
    assert tab1.post("/g/alice/q/q01/0", data=form(token, grade="2"), headers={"origin": OWN},
                     follow_redirects=False).status_code == 303
    r = tab2.post("/g/alice/q/q01/0", data=form(token, grade="0"), headers={"origin": OWN},
                  follow_redirects=False)
    assert r.status_code == 409
    assert "Chunk 1, 2, 3, 4, 5 of this batch was already saved (in another tab?)" in r.text
    assert {row["grade"] for row in saved(root)} == {2}  # never overwritten


def test_a_fullwidth_digit_from_the_form_is_not_a_grade(web):
    root, site, packets, login = web
    alice = login("alice")
    token = token_on(alice.get("/g/alice/q/q01/0"))
    r = alice.post("/g/alice/q/q01/0", data=form(token, grade="\uff12"), headers={"origin": OWN},
                   follow_redirects=False)
    assert r.status_code == 400
    assert "Grade must be an integer on the scale 0-2" in r.text
    assert saved(root) == []


# --- a real browser ---------------------------------------------------------------------

ATTACK = """<!doctype html><html><body>
<form id="f" method="post" action="{target}">{fields}</form>
<script>document.getElementById("f").submit();</script>
</body></html>"""


@pytest.mark.slow
@pytest.mark.browser
def test_a_page_on_another_port_cannot_save_grades_in_a_logged_in_graders_name(tmp_path):
    from playwright.sync_api import sync_playwright

    from tests.e2e.serve import ARGS, CHROMIUM
    from tests.test_web_browser import grade_chunk, ready
    from tests.test_web_browser import server as server_fixture  # noqa: F401

    if not __import__("pathlib").Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    gen = server_fixture.__wrapped__(tmp_path)
    base, root, packets = next(gen)
    fields = "".join(f'<input name="{k}" value="{v}">' for k, v in form(None, "2").items())
    page_html = ATTACK.format(target=f"{base}/g/alice/q/q01/0", fields=fields).encode()

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page_html)

        def log_message(self, *a):
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page()
            page.set_default_timeout(10_000)
            page.goto(f"{base}/login?token=alice-browser-token-0123456789")
            assert page.url.endswith("/g/alice/")
            statuses = []
            page.on("response", lambda r: statuses.append((r.url, r.status)))
            with page.expect_navigation(url=f"{base}/g/alice/q/q01/0"):
                page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
            assert (f"{base}/g/alice/q/q01/0", 403) in statuses
            assert "did not come from this site" in page.text_content("main")
            # the grader's own page still saves
            page.goto(f"{base}/g/alice/q/q01/0")
            ready(page)
            for _ in range(5):
                grade_chunk(page, "points to it", 1)
            with page.expect_navigation():
                page.keyboard.press("Enter")
            browser.close()
        rows = ex.read_rows(root / "data/grades/alice/round-1.jsonl")
        assert [r["grade"] for r in rows] == [1] * 5  # the forged 2s never landed
    finally:
        evil.shutdown()
        next(gen, None)
