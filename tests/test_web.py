"""The grading web page: access rules, saving whole batches, form errors, escaping, blindness."""

from __future__ import annotations

import json
import re
import threading

import pytest
import yaml
from fastapi.testclient import TestClient

from relgrade.cli.serve import build_site, resolve_tokens
from relgrade.errors import InputError
from relgrade.graders.store import GradeStore
from relgrade.web.app import create_app
from tests.graders import experiment as ex

RUBRIC = """version: v1

# Grading rubric

| grade | meaning |
|---|---|
| 2 | Answers it |
| 1 | Helps |
| 0 | Does not help |

Judge each chunk against the intent line alone. <b>raw html stays text</b>
"""

#: Words and values that must never reach a grader's page, JSON or URL.
FORBIDDEN = re.compile(r"(?i)\b(arms?|ranks?|scores?|provenance|inclusion_prob|bm25-secret-arm|"
                       r"MODEL-SENTINEL-REASON)\b")
XSS = "<script>alert('x')</script>"


def chunk_text(c):
    if c["chunk_id"].endswith("-c1"):
        return f"# POINTER {XSS}\nprint('<b>not bold</b>')\n"
    return None


@pytest.fixture
def web(tmp_path):
    graders = {
        "grader-a": {"role": "grader", "kind": "model", "family": "test", "command": ex.command()},
        "alice": {"role": "grader", "kind": "human", "family": "person"},
        "bob": {"role": "auditor", "kind": "human", "family": "person"},
    }
    packets = ex.build(tmp_path, queries=3, chunks=7, audit=1, graders=graders, rubric=RUBRIC,
                       text_of=chunk_text)
    # Private data the page must never read or show.
    priv = tmp_path / "data/private"
    priv.mkdir(parents=True)
    (priv / "provenance.jsonl").write_text(json.dumps(
        {"query_id": "q01", "chunk_id": "q01-c0", "arm": "bm25-secret-arm", "rank": 1,
         "score": 9.0}) + "\n")
    model = tmp_path / "data/grades/grader-a/round-1.jsonl"
    model.parent.mkdir(parents=True)
    model.write_text("".join(json.dumps({"query_id": q, "chunk_id": c["chunk_id"],
                                         "reason": "MODEL-SENTINEL-REASON", "grade": 2}) + "\n"
                             for q, p in packets.items() for b in p["batches"] for c in b))
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=["alice", "bob"])
    app = create_app(site)
    responses = []

    def client(name=None):
        c = Tab(app)
        c.hooks = {}
        if name:
            r = c.get(f"/login?token={site.graders[name].token}", follow_redirects=False)
            assert r.status_code == 303
        return c

    class Web:
        pass

    w = Web()
    w.root, w.site, w.packets, w.client, w.responses = tmp_path, site, packets, client, responses
    yield w
    site.writer.close()
    for s in stores:
        s.close()


ORIGIN = {"origin": "http://testserver"}


def page_token(html):
    """The form token a page carries (its logout form has one on every grader page)."""
    m = re.search(r'name="csrf" value="([^"]*)"', html)
    return m.group(1) if m else ""


class Tab(TestClient):
    """A browser tab: posts carry the page's Origin and the form token it was served."""

    def post(self, url, *args, data=None, headers=None, **kw):
        data = dict(data or {})
        if "csrf" not in data:
            data["csrf"] = page_token(self.get("/", follow_redirects=True).text)
        return super().post(url, *args, data=data, headers={**ORIGIN, **(headers or {})}, **kw)


def scan(r, *, extra=()):
    """Fail if a response shows anything a grader must not see."""
    text = r.text + " ".join(f"{k}: {v}" for k, v in r.headers.items()) + str(r.url)
    m = FORBIDDEN.search(text)
    assert m is None, f"{r.url} shows {m.group(0)!r}"
    for word in extra:
        assert word not in text, f"{r.url} shows {word!r}"
    return r


def form(n, grade="2", reason="defines the function asked about"):
    data = {}
    for i in range(n):
        data[f"grade-{i}"] = grade
        data[f"reason-{i}"] = reason
    return data


def file_of(w, name):
    return w.root / "data/grades" / name / "round-1.jsonl"


# --- access ------------------------------------------------------------------------------

@pytest.mark.parametrize("method, path", [
    ("get", "/"), ("get", "/g/alice/"), ("get", "/g/alice/q/q01/0"),
    ("get", "/g/alice/progress.json"), ("post", "/g/alice/q/q01/0"),
])
def test_no_token_is_401(web, method, path):
    r = getattr(web.client(), method)(path, follow_redirects=False)
    assert r.status_code == 401
    assert "Log in with the link" in r.text


def test_an_unknown_token_is_401_both_as_link_and_as_bearer(web):
    c = web.client()
    assert c.get("/login?token=guess", follow_redirects=False).status_code == 401
    assert c.get("/g/alice/", headers={"Authorization": "Bearer guess"}).status_code == 401
    ok = c.get("/g/alice/", headers={"Authorization": f"Bearer {web.site.graders['alice'].token}"})
    assert ok.status_code == 200


@pytest.mark.parametrize("method, path", [
    ("get", "/g/bob/"), ("get", "/g/bob/q/q01/0"), ("get", "/g/bob/progress.json"),
    ("get", "/g/bob/next"), ("post", "/g/bob/q/q01/0"),
])
def test_one_graders_token_on_anothers_pages_is_403_and_saves_nothing(web, method, path):
    c = web.client("alice")
    kw = {"data": form(5)} if method == "post" else {}
    r = getattr(c, method)(path, follow_redirects=False, **kw)
    assert r.status_code == 403
    assert file_of(web, "bob").read_bytes() == b""


def test_login_sets_an_http_only_strict_cookie_and_every_page_sends_security_headers(web):
    c = web.client()
    r = c.get(f"/login?token={web.site.graders['alice'].token}", follow_redirects=False)
    assert r.headers["location"] == "/g/alice/"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    page = c.get("/g/alice/q/q01/0")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"


# --- pages -------------------------------------------------------------------------------

def test_a_batch_page_shows_query_intent_five_chunks_with_reason_boxes_and_the_rubric(web):
    c = web.client("alice")
    r = scan(c.get("/g/alice/q/q01/0"))
    p = web.packets["q01"]
    assert p["query"] in r.text and p["intent"] in r.text
    assert r.text.count('<article class="chunk') == 5
    for i, ch in enumerate(p["batches"][0]):
        assert ch["chunk_id"] in r.text and ch["header"] in r.text
        assert f'name="reason-{i}"' in r.text and f'name="grade-{i}"' in r.text
        # the reason box comes before the grade choice
        assert r.text.index(f'name="reason-{i}"') < r.text.index(f'name="grade-{i}"')
    assert "<table>" in r.text and "<td>Answers it</td>" in r.text  # rendered rubric
    assert "&lt;b&gt;raw html stays text&lt;/b&gt;" in r.text
    assert 'class="code"' in r.text  # highlighted code


def test_script_in_chunk_text_is_shown_as_text_never_as_markup(web):
    r = web.client("alice").get("/g/alice/q/q01/0")
    assert "<script>alert" not in r.text
    assert "<b>not bold</b>" not in r.text
    assert re.search(r"&lt;/?script&gt;|&lt;script", r.text)
    # the only script tag is the page's own file
    assert re.findall(r"<script[^>]*>", r.text) == ['<script src="/static/grade.js">']


def test_saving_a_batch_records_it_in_display_order_and_goes_to_the_next_batch(web):
    c = web.client("alice")
    r = c.post("/g/alice/q/q01/0", data=form(5), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/g/alice/q/q01/1"
    rows = ex.read_rows(file_of(web, "alice"))
    assert [(r["query_id"], r["chunk_id"], r["grade"]) for r in rows] == \
        [("q01", ch["chunk_id"], 2) for ch in web.packets["q01"]["batches"][0]]
    assert list(rows[0]) == ["query_id", "chunk_id", "reason", "grade"]
    r = c.post("/g/alice/q/q01/1", data=form(2, grade="0"), follow_redirects=False)
    assert r.headers["location"] == "/g/alice/q/q02/0"
    progress = scan(c.get("/g/alice/progress.json")).json()
    assert progress["graded"] == 7 and progress["pairs"] == 21
    assert progress["queries"][0] == {"query_id": "q01", "graded": 7, "pairs": 7}


@pytest.mark.parametrize("change, status, message", [
    ({"reason-2": " ".join(["word"] * 16)}, 400, "Reason longer than 15 words (found 16 words)"),
    ({"grade-3": "3"}, 400, "Grade outside the scale 0-2 (found 3)"),
    ({"grade-1": "two"}, 400, "Grade must be an integer on the scale 0-2"),
    ({"grade-4": ""}, 400, "Choose a grade (0-2) for this chunk before saving"),
    ({"reason-0": "   "}, 400, "Reason required for every grade from this grader"),
])
def test_a_bad_form_shows_the_error_keeps_the_input_and_saves_nothing(web, change, status, message):
    c = web.client("alice")
    data = dict(form(5, reason="a pointer to where it lives"), **change)
    r = scan(c.post("/g/alice/q/q01/0", data=data, follow_redirects=False))
    assert r.status_code == status
    assert message in r.text
    assert "Nothing was saved" in r.text or "before saving" in message
    assert "a pointer to where it lives" in r.text  # what was typed is kept
    assert file_of(web, "alice").read_bytes() == b""


def test_every_chunk_with_a_problem_is_flagged_with_its_own_message(web):
    # chunk 1: 16 words (15 allowed); chunk 3: 10 words of 31 letters, 10 x 31 + 9 = 319
    # characters (300 allowed); chunk 4: no grade. Chunks 0 and 2 are fine.
    c = web.client("alice")
    data = dict(form(5, reason="a pointer to where it lives"))
    data["reason-1"] = " ".join(["word"] * 16)
    data["reason-3"] = " ".join(["w" * 31] * 10)
    data["grade-4"] = ""
    r = scan(c.post("/g/alice/q/q01/0", data=data, follow_redirects=False))
    assert r.status_code == 400
    articles = {int(re.search(r'id="chunk-(\d)"', a).group(1)): a
                for a in r.text.split("<article ")[1:]}
    flagged = {i: 'class="chunk has-error"' in a for i, a in articles.items()}
    assert flagged == {0: False, 1: True, 2: False, 3: True, 4: True}
    errors = {i: re.findall(r'<div class="error" role="alert">([^<]*)</div>', a)
              for i, a in articles.items()}
    assert errors == {
        0: [], 2: [],
        1: ["Reason longer than 15 words (found 16 words). Say what the chunk says about the "
            "target, in fewer words. Nothing was saved."],
        3: ["Reason longer than 300 characters (found 319 characters). Say what the chunk "
            "says about the target, in fewer words. Nothing was saved."],
        4: ["Choose a grade (0-2) for this chunk before saving."]}
    invalid = re.findall(r'<textarea name="reason-(\d)"[^>]*aria-invalid="true"', r.text)
    assert invalid == ["1", "3", "4"]
    assert file_of(web, "alice").read_bytes() == b""


def test_the_auditor_may_leave_a_zero_without_a_reason(web):
    c = web.client("bob")
    data = form(5, grade="0", reason="")
    r = c.post("/g/bob/q/q01/0", data=data, follow_redirects=False)
    assert r.status_code == 303
    assert [row["reason"] for row in ex.read_rows(file_of(web, "bob"))] == [""] * 5


def test_a_saved_batch_is_final_and_a_second_save_from_another_tab_is_refused(web):
    tab1, tab2 = web.client("alice"), web.client("alice")
    assert tab1.post("/g/alice/q/q02/0", data=form(5), follow_redirects=False).status_code == 303
    r = tab2.post("/g/alice/q/q02/0", data=form(5, grade="0"), follow_redirects=False)
    assert r.status_code == 409  # refused where the grader sees it, never silently dropped
    assert "was already saved (in another tab?)" in r.text
    assert "Saved grades are final" in r.text
    rows = ex.read_rows(file_of(web, "alice"))
    assert len(rows) == 5 and {row["grade"] for row in rows} == {2}
    page = tab2.get("/g/alice/q/q02/0")
    assert page.text.count("disabled") >= 10 and "This batch is saved." in page.text


def test_resume_after_closing_the_browser_goes_to_the_first_unsaved_batch(web):
    first = web.client("alice")
    first.post("/g/alice/q/q01/0", data=form(5), follow_redirects=False)
    again = web.client("alice")  # a new browser: a fresh cookie jar, the same link
    queue = scan(again.get("/g/alice/"))
    assert 'href="/g/alice/q/q01/1"' in queue.text and "5 / 21 pairs" in queue.text
    r = again.get("/g/alice/next", follow_redirects=False)
    assert r.headers["location"] == "/g/alice/q/q01/1"
    r = again.get("/g/alice/q/q01", follow_redirects=False)
    assert r.headers["location"] == "/g/alice/q/q01/1"


def test_the_auditor_sees_only_the_audit_queries_in_the_auditors_own_order(web):
    c = web.client("bob")
    queue = scan(c.get("/g/bob/"))
    assert "Audit queue" in queue.text
    assert "/g/bob/q/q01/0" in queue.text and "q02" not in queue.text and "q03" not in queue.text
    assert c.get("/g/bob/q/q02/0").status_code == 404
    page = c.get("/g/bob/q/q01/0").text
    order = [m for m in re.findall(r'class="chunk-id">([^<]+)<', page)]
    assert order == ["q01-c6", "q01-c5", "q01-c4", "q01-c3", "q01-c2"]  # auditor packets: reversed


def test_no_page_json_or_url_shows_provenance_or_another_graders_grades(web):
    alice, bob = web.client("alice"), web.client("bob")
    alice.post("/g/alice/q/q01/0", data=form(5, reason="ALICE-ONLY-REASON"), follow_redirects=True)
    bob.post("/g/bob/q/q01/0", data=form(5, grade="1", reason="BOB-ONLY-REASON"),
             follow_redirects=True)
    pages = []
    for name, c, other in (("alice", alice, "BOB-ONLY-REASON"), ("bob", bob, "ALICE-ONLY-REASON")):
        g = web.site.graders[name]
        urls = [f"/g/{name}/", f"/g/{name}/progress.json", f"/g/{name}/next",
                "/static/grade.js", "/static/style.css", "/pygments.css", "/"]
        urls += [f"/g/{name}/q/{q}/{b}" for q, p in g.packets.items() for b in range(len(p["batches"]))]
        for u in urls:
            r = c.get(u)
            scan(r, extra=(other,))
            for h in r.history:
                scan(h, extra=(other,))
            pages.append(r)
    assert len(pages) >= 20
    # the page does show a grader their own saved reason
    assert "ALICE-ONLY-REASON" in alice.get("/g/alice/q/q01/0").text


def test_two_graders_saving_at_once_lose_and_interleave_nothing(web):
    errors, statuses = [], []

    def grade_all(name):
        try:
            c = web.client(name)
            g = web.site.graders[name]
            for q, p in g.packets.items():
                for b, batch in enumerate(p["batches"]):
                    r = c.post(f"/g/{name}/q/{q}/{b}",
                               data=form(len(batch), reason=f"{name} says so"),
                               follow_redirects=False)
                    statuses.append(r.status_code)
        except Exception as e:  # reported below
            errors.append(e)

    # alice twice: a second tab racing the first on the same batches
    threads = [threading.Thread(target=grade_all, args=(n,)) for n in ("alice", "bob", "alice")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # 303 saved (or nothing left to save); 409 when the other tab won the race
    assert set(statuses) <= {303, 409}
    for name, n_pairs in (("alice", 21), ("bob", 7)):
        data = file_of(web, name).read_text()
        assert data.endswith("\n")
        rows = ex.read_rows(file_of(web, name))
        pairs = [(r["query_id"], r["chunk_id"]) for r in rows]
        assert len(pairs) == len(set(pairs)) == n_pairs
        assert {r["reason"] for r in rows} == {f"{name} says so"}
        # each batch's rows are adjacent and in display order
        g = web.site.graders[name]
        position = {(q, c["chunk_id"]): (q, b, i) for q, p in g.packets.items()
                    for b, batch in enumerate(p["batches"]) for i, c in enumerate(batch)}
        k = 0
        while k < len(rows):
            q, b, i = position[(rows[k]["query_id"], rows[k]["chunk_id"])]
            batch = g.packets[q]["batches"][b]
            assert i == 0
            assert [r["chunk_id"] for r in rows[k:k + len(batch)]] == [c["chunk_id"] for c in batch]
            k += len(batch)


def test_the_server_refuses_to_start_while_grade_run_holds_the_graders_file(tmp_path):
    ex.build(tmp_path, graders={"alice": {"role": "grader", "kind": "human", "family": "p"}})
    held = GradeStore(tmp_path / "data/grades/alice/round-1.jsonl").open()
    try:
        with pytest.raises(Exception, match="another relgrade process is writing"):
            build_site(str(tmp_path / "params.yaml"))
    finally:
        held.close()


def test_tokens_come_from_the_file_then_params_else_new_ones_are_written_to_the_file(tmp_path):
    path = tmp_path / "tokens.yaml"
    path.write_text("alice: from-file-token\n")
    tokens = resolve_tokens(["alice", "bob", "carol"], tokens_path=path,
                            graders={"bob": {"token": "from-params"}, "carol": {}})
    assert tokens["alice"] == "from-file-token" and tokens["bob"] == "from-params"
    assert len(tokens["carol"]) >= 24
    assert yaml.safe_load(path.read_text()) == tokens
    assert path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(InputError, match="share a login token"):
        resolve_tokens(["a", "b"], graders={"a": {"token": "t"}, "b": {"token": "t"}})


def test_no_human_grader_to_serve_is_a_clear_error(tmp_path):
    ex.build(tmp_path)
    with pytest.raises(InputError, match="no grader to serve"):
        build_site(str(tmp_path / "params.yaml"))


def test_serve_at_the_top_names_the_experiment_whose_graders_are_people(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from relgrade.cli import main

    ex.build(tmp_path)  # the top experiment: one model grader
    ex.build(tmp_path / "experiments/people", graders={
        "person-a": {"role": "grader", "kind": "human", "family": "human"},
        "person-b": {"role": "auditor", "kind": "human", "family": "human"}})
    ex.build(tmp_path / "experiments/models")  # no people: not offered
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["serve", "--port", "0"])
    assert res.exit_code == 1
    assert res.output == (
        "Error: params.yaml: no grader to serve: params has no grader of kind human (found "
        "graders grader-a (model)). To serve an experiment whose graders are people, give "
        "its folder: relgrade serve --experiment experiments/people (person-a, person-b)\n")
    assert "--grader" not in res.output


def test_serve_without_people_anywhere_says_to_add_a_human_grader(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from relgrade.cli import main

    ex.build(tmp_path)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["serve", "--port", "0"])
    assert res.exit_code == 1
    assert res.output == (
        "Error: params.yaml: no grader to serve: params has no grader of kind human (found "
        "graders grader-a (model)). Add a grader of kind human to params `graders` "
        "(docs/graders.md), then run relgrade serve again\n")


def test_the_page_offers_again_only_a_pair_whose_chunk_changed_since_it_was_saved(tmp_path):
    from relgrade.web.app import next_batch, query_progress

    graders = {"alice": {"role": "grader", "kind": "human", "family": "person"}}
    ex.build(tmp_path, queries=1, chunks=3, audit=0, graders=graders)
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=["alice"])
    try:
        stores[0].append([{"query_id": "q01", "chunk_id": f"q01-c{j}", "reason": "read it",
                           "grade": 0} for j in range(3)])
        assert next_batch(site.graders["alice"]) is None
    finally:
        for st in stores:
            st.close()
        site.writer.close()
    ex.build(tmp_path, queries=1, chunks=3, audit=0, graders=graders,
             text_of=lambda c: "edited" if c["chunk_id"] == "q01-c1" else None)
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=["alice"])
    try:
        assert next_batch(site.graders["alice"]) == ("q01", 0)
        assert query_progress(site.graders["alice"], "q01") == (2, 3)
    finally:
        for st in stores:
            st.close()
        site.writer.close()
