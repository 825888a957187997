"""The grading web page: server-rendered pages for people who grade, one batch at a time.

``relgrade serve`` builds a :class:`Site` from the params and the packets and serves
:func:`create_app`. Each grader logs in with a personal link (``/login?token=...``; the
token then lives in an HTTP-only cookie) and sees:

* a queue of their queries with progress (``/g/NAME/``); an auditor's queue holds only the
  audit queries, with the chunks in the auditor's own display order (their packets);
* a batch page per query and batch (``/g/NAME/q/QUERY_ID/B``): the query, the intent line,
  at most five chunks (header, and text as highlighted code, always HTML-escaped), each with
  a reason box (live word count) before the grade choice, and the rubric in a side panel;
* keyboard use: ``0``/``1``/``2`` grade the current chunk, ``n``/``p`` move between chunks,
  ``r`` goes to the reason box and ``Esc`` or ``Enter`` leaves it, ``Enter`` saves the batch.

A batch is saved whole through the single writer (:class:`relgrade.graders.store.SingleWriter`)
after :func:`relgrade.protocol.grades.validate_grade_rows` accepts every row of it; a refused form is
shown again with the error and nothing saved. A saved batch is final. Everything the page
shows comes from the grader's own packets and own grades: no arm, rank, score, provenance
or other grader's grade reaches any page, JSON or URL.

Access: no or an unknown token → 401; a valid token on another grader's pages → 403.

Cross-site requests: every state-changing request (``POST``: saving a batch, ``/logout``)
must come from the page itself. Its ``Origin`` header (else its ``Referer``) must name the
server's own scheme, host and port (a page on another port of the same host is another
origin), and its form must carry the session's form token (``csrf``, an HMAC of the login
token under a key drawn when the app starts), else → 403 and nothing is saved. A request
authenticated by an ``Authorization: Bearer`` header carries no ambient credential a browser
could send for another site, so it needs neither.

A form posted for a batch whose chunks another tab has saved meanwhile is refused whole with
409 and a message on the page: saved grades are final, never silently overwritten, and the
other grades of that form are not silently dropped either.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping
from urllib.parse import quote, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from relgrade.errors import InputError, ProtocolError, found_clause
from relgrade.graders.store import GradeStore, SingleWriter
from relgrade.protocol.grades import reason_required, scale_text, validate_grade_rows
from relgrade.protocol.packets import check_batch
from relgrade.text import inert

HERE = Path(__file__).parent
COOKIE = "relgrade_token"
#: The form field holding the session's form token.
CSRF_FIELD = "csrf"
_INT = re.compile(r"^-?[0-9]+$")  # ASCII digits only: int() also reads "２"
_DISPUTE_ID = re.compile(r"^d-[0-9a-f]{12}$")
_FILENAME = re.compile(r"[\w./-]+\.[A-Za-z0-9]+")

#: Response headers on every page: no inline script may run, nothing is framed or cached.
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self'; form-action 'self'; base-uri 'none'; "
                                "frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` even on
    # the page's own posts, and the origin check below could not tell them from a forgery.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass
class WebGrader:
    """One grader served by the page.

    Attributes
    ----------
    name, role, kind : str
        From params ``graders.NAME``.
    token : str
        The grader's login token.
    packets : dict
        query id → packet, in queue order (the grader's own packets only).
    store : GradeStore
        The grader's open grade file for the round.

    Raises
    ------
    InputError
        A packet has a batch of more than five chunks (the page never shows more at once).
    """

    name: str
    role: str
    kind: str
    token: str
    packets: dict
    store: GradeStore

    def __post_init__(self):
        for qid, p in self.packets.items():
            for b, batch in enumerate(p["batches"]):
                check_batch(batch, item=f"{qid} batch {b}")


@dataclass(frozen=True)
class GoldWatch:
    """The gold check the page applies to a rater after every save (``grading.mode:
    raters`` with ``gold``): the aggregate stage's rule, on the grades saved so far.

    Attributes
    ----------
    queues : pandas.DataFrame
        The private assignment table (``grader``, ``query_id``, ``chunk_id``, ``work``,
        ``gold``) the served packets were built from.
    gold : pandas.DataFrame
        The gold questions (``query_id``, ``chunk_id``, ``grade``) among those queues.
    min_accuracy : float
        Params ``gold.min_accuracy``.
    min_gold : int
        Params ``gold.min_gold``: no rater is stopped on fewer gold answers.
    """

    queues: object
    gold: object
    min_accuracy: float
    min_gold: int

    def stopped(self, g: "WebGrader") -> bool:
        """Whether rater ``g``'s current saved grades remove them on gold
        (:func:`relgrade.raters.panel.removed_on_gold`, the aggregate stage's rule, over
        the pairs of their queue). Never for a grader who is not a rater."""
        import pandas as pd

        from relgrade.raters.panel import removed_on_gold

        if g.role != "rater":
            return False
        mine = self.queues[self.queues["grader"].astype(str) == g.name]
        queued = set(zip(mine["query_id"].astype(str), mine["chunk_id"].astype(str)))
        current = g.store.current_keys()
        latest = {}
        for _, row in g.store.rows:  # the latest current grade of each queued pair
            key = (str(row.get("query_id")), str(row.get("chunk_id")))
            if key in queued and key in current:
                latest[key] = int(row["grade"])
        if not latest:
            return False
        grades = pd.DataFrame([(q, c, g.name, v) for (q, c), v in latest.items()],
                              columns=["query_id", "chunk_id", "grader", "grade"])
        return g.name in removed_on_gold(grades, queues=mine, gold=self.gold,
                                         min_accuracy=self.min_accuracy,
                                         min_gold=self.min_gold)


@dataclass
class Site:
    """Everything the app serves.

    Attributes
    ----------
    graders : dict
        name → :class:`WebGrader`.
    rubric : str
        The rubric (Markdown), rendered once into the side panel.
    scale : list of int
    max_reason_words : int
    writer : SingleWriter
        The one thread that appends saved batches.
    round : int
        The grading round (shown).
    max_reason_chars : int, default 300
        The longest reason allowed, in characters.
    gold_watch : GoldWatch or None
        With a rater panel and gold: raters whose saved grades fall below the gold rule
        are stopped on the page (nothing they saved is lost).
    sections : list of (str, str)
        The rubric's sections (id, heading) a dispute may name; empty: no dispute button.
    file_dispute : callable, optional
        ``dispute (dict of the filed fields) -> its id``: checks and records a dispute (one
        filed before is recorded once; raising :class:`~relgrade.errors.InputError` with nothing recorded);
        None: no dispute button.
    """

    graders: dict
    rubric: str
    scale: list
    max_reason_words: int
    writer: SingleWriter
    round: int = 1
    max_reason_chars: int = 300
    gold_watch: GoldWatch | None = None
    sections: list = field(default_factory=list)
    file_dispute: Callable | None = None
    rubric_html: str = field(default="", init=False)
    _code_cache: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        md = MarkdownIt("commonmark", {"html": False}).enable("table")
        self.rubric_html = md.render(_strip_version_line(self.rubric))

    def code_html(self, header: str, text: str) -> str:
        """The chunk text as highlighted, escaped HTML (cached per header and text); control,
        bidi and other invisible characters shown as ``\\uXXXX`` (:func:`relgrade.text.inert`),
        newlines and tabs kept."""
        key = hashlib.sha256(f"{header}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()
        html = self._code_cache.get(key)
        if html is None:
            html = highlight(inert(text, keep="\n\t"), _lexer_for(header),
                             HtmlFormatter(cssclass="code"))
            if len(self._code_cache) > 4096:
                self._code_cache.clear()
            self._code_cache[key] = html
        return html


def _shown(value):
    """A value a page template prints, made inert (markup, already escaped, untouched)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return inert(value, keep="\n")
    return value


def _strip_version_line(text: str) -> str:
    """The rubric without its leading ``version: ...`` line (the panel shows the version)."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lower().startswith("version:"):
        lines = lines[first + 1:]
    return "\n".join(lines) + "\n"


def _lexer_for(header: str):
    """A Pygments lexer from the first file name in the chunk's header, else plain text."""
    for name in _FILENAME.findall(header or ""):
        try:
            return get_lexer_for_filename(name, stripnl=False, ensurenl=False)
        except ClassNotFound:
            continue
    return TextLexer(stripnl=False, ensurenl=False)


def pygments_css() -> str:
    """The highlighting style sheet (class ``code``)."""
    return HtmlFormatter(cssclass="code", style="friendly").get_style_defs(".code")


# --- progress ------------------------------------------------------------------------

def _pairs(packet) -> list[str]:
    return [str(c["chunk_id"]) for batch in packet["batches"] for c in batch]


def _saved(g: WebGrader, qid: str, chunk_id: str) -> bool:
    # a grade made on other content (a stale pair) does not count: the pair is offered again
    return g.store.is_current((qid, chunk_id))


def batch_done(g: WebGrader, qid: str, b: int) -> bool:
    """Whether every chunk of batch ``b`` of query ``qid`` has a saved grade."""
    return all(_saved(g, qid, str(c["chunk_id"])) for c in g.packets[qid]["batches"][b])


def query_progress(g: WebGrader, qid: str) -> tuple[int, int]:
    """(saved pairs, pairs) of one query."""
    ids = _pairs(g.packets[qid])
    return sum(_saved(g, qid, c) for c in ids), len(ids)


def next_batch(g: WebGrader, after: tuple[str, int] | None = None):
    """The first unsaved (query id, batch) in queue order, starting after ``after``."""
    items = [(q, b) for q, p in g.packets.items() for b in range(len(p["batches"]))]
    if after is not None and after in items:
        i = items.index(after)
        items = items[i + 1:] + items[:i + 1]
    for q, b in items:
        if not batch_done(g, q, b):
            return q, b
    return None


# --- the app -------------------------------------------------------------------------

class _Denied(Exception):
    def __init__(self, status: int, message: str):
        self.status, self.message = status, message


class _Stopped(Exception):
    def __init__(self, g, status: int):
        self.grader, self.status = g, status


#: What a rater stopped on gold reads: no number and no pair, since which pairs are gold
#: must stay private.
STOPPED_MESSAGE = (
    "Thank you for your work. Your grading is paused: on the check questions mixed into "
    "every queue, your grades agree with the expected ones less often than this project "
    "requires. Every grade you saved is kept, and the pairs left in your queue will go to "
    "other raters. If you think this is a mistake, please contact the person who runs this "
    "evaluation.")


def _origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an absolute URL, the port made explicit; None if unparsable."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def same_origin(request: Request) -> bool:
    """Whether a request comes from this server's own pages (same scheme, host and port).

    The ``Origin`` header decides when present (``null`` never matches); else the
    ``Referer``; a request with neither is not trusted.
    """
    own = _origin_of(str(request.base_url))
    claimed = request.headers.get("origin")
    if claimed is None:
        claimed = request.headers.get("referer")
    if not claimed or own is None:
        return False
    return _origin_of(claimed) == own


def create_app(site: Site) -> FastAPI:
    """The FastAPI app serving ``site`` (see the module docstring for the pages)."""
    app = FastAPI(title="relgrade", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    # every printed value inert before it is escaped: no bidi or control character reaches
    # the page (set before any template is compiled)
    templates.env.finalize = _shown
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    by_token = {g.token: g for g in site.graders.values()}
    css = pygments_css()
    form_key = secrets.token_bytes(32)  # drawn per app: a restart expires open forms

    def form_token(token: str) -> str:
        """The session's form token: an HMAC of the login token under ``form_key``."""
        return hmac.new(form_key, token.encode("utf-8", "surrogatepass"),
                        hashlib.sha256).hexdigest()

    def bearer(request: Request) -> bool:
        return request.headers.get("authorization", "").lower().startswith("bearer ")

    async def check_cross_site(request: Request) -> None:
        """Refuse a state-changing request that does not come from this server's pages."""
        if bearer(request):
            return
        if not same_origin(request):
            raise _Denied(403, "This request did not come from this site's own page "
                               "(its Origin is another site or port). Nothing was saved.")
        token = request.cookies.get(COOKIE) or ""
        sent = str((await request.form()).get(CSRF_FIELD, ""))
        if not token or not hmac.compare_digest(sent.encode("utf-8", "surrogatepass"),
                                                form_token(token).encode()):
            raise _Denied(403, "This form has expired or did not come from this site "
                               "(no valid form token). Reload the page and save again; "
                               "nothing was saved.")

    @app.middleware("http")
    async def _headers(request: Request, call_next):
        response = await call_next(request)
        for k, v in SECURITY_HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    @app.exception_handler(_Stopped)
    async def _stopped(request: Request, exc: _Stopped):
        return templates.TemplateResponse(request, "stopped.html",
                                          {"message": STOPPED_MESSAGE, "grader": exc.grader},
                                          status_code=exc.status)

    def check_active(g: WebGrader, *, status: int = 200) -> None:
        # a rater stopped on gold sees the pause page wherever they go, and saves nothing
        if site.gold_watch is not None and site.gold_watch.stopped(g):
            raise _Stopped(g, status)

    @app.exception_handler(_Denied)
    async def _denied(request: Request, exc: _Denied):
        return templates.TemplateResponse(request, "denied.html",
                                          {"message": exc.message, "status": exc.status},
                                          status_code=exc.status)

    def token_of(request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return request.cookies.get(COOKIE)

    def who(request: Request) -> WebGrader:
        token = token_of(request)
        if token:
            for known, g in by_token.items():
                if hmac.compare_digest(known.encode(), token.encode()):
                    return g
        raise _Denied(401, "Log in with the link relgrade serve printed for you.")

    def grader_for(request: Request, name: str) -> WebGrader:
        g = who(request)
        if name != g.name:
            raise _Denied(403, "These pages belong to another grader.")
        return g

    def packet_for(g: WebGrader, qid: str, b: int | None = None):
        p = g.packets.get(qid)
        if p is None or (b is not None and not 0 <= b < len(p["batches"])):
            raise _Denied(404, "No such query or batch in your queue.")
        if b is not None:
            check_batch(p["batches"][b], item=f"{qid} batch {b}")  # at most 5 served, ever
        return p

    def url(g: WebGrader, qid: str | None = None, b: int | None = None) -> str:
        base = f"/g/{quote(g.name, safe='')}/"
        if qid is None:
            return base
        return base + f"q/{quote(qid, safe='')}/{b}"

    def base_context(request: Request, g: WebGrader) -> dict:
        done = sum(query_progress(g, q)[0] for q in g.packets)
        total = sum(query_progress(g, q)[1] for q in g.packets)
        return {"grader": g, "done": done, "total": total, "round": site.round,
                "queue_url": url(g), "audit": g.role == "auditor",
                "csrf": form_token(token_of(request) or "")}

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request):
        g = who(request)
        return RedirectResponse(url(g), status_code=303)

    @app.get("/login")
    def login(request: Request, token: str = ""):
        g = by_token.get(token)
        if g is None:
            raise _Denied(401, "This login link is not valid.")
        response = RedirectResponse(url(g), status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict",
                            max_age=30 * 24 * 3600, path="/")
        return response

    @app.post("/logout")
    async def logout(request: Request):
        await check_cross_site(request)
        response = RedirectResponse("/bye", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    @app.get("/bye", response_class=HTMLResponse)
    def bye(request: Request):
        raise _Denied(401, "You are logged out. Use your login link to come back.")

    @app.get("/pygments.css")
    def pygments_sheet():
        return Response(css, media_type="text/css")

    @app.get("/g/{name}/", response_class=HTMLResponse)
    def queue(request: Request, name: str):
        g = grader_for(request, name)
        check_active(g)
        rows = []
        for qid, p in g.packets.items():
            done, total = query_progress(g, qid)
            first = next((b for b in range(len(p["batches"])) if not batch_done(g, qid, b)), 0)
            rows.append({"query_id": qid, "query": p["query"], "done": done, "total": total,
                         "url": url(g, qid, first)})
        nxt = next_batch(g)
        return templates.TemplateResponse(request, "queue.html", {
            **base_context(request, g), "rows": rows, "next_url": url(g, *nxt) if nxt else None})

    @app.get("/g/{name}/progress.json")
    def progress(request: Request, name: str):
        g = grader_for(request, name)
        queries = []
        for qid in g.packets:
            done, total = query_progress(g, qid)
            queries.append({"query_id": qid, "graded": done, "pairs": total})
        stopped = site.gold_watch is not None and site.gold_watch.stopped(g)
        return JSONResponse({"grader": g.name, "role": g.role, "stopped": stopped,
                             "graded": sum(q["graded"] for q in queries),
                             "pairs": sum(q["pairs"] for q in queries), "queries": queries})

    @app.get("/g/{name}/next")
    def goto_next(request: Request, name: str):
        g = grader_for(request, name)
        check_active(g)
        nxt = next_batch(g)
        return RedirectResponse(url(g, *nxt) if nxt else url(g), status_code=303)

    def render_batch(request, g, qid, b, *, values=None, error=None, error_index=None,
                     chunk_errors=None, status=200, dispute=None):
        # chunk_errors: index -> message, each shown on its own chunk (every too-long reason
        # of the batch at once); error with error_index: one chunk's; error alone: the form's
        p = packet_for(g, qid, b)
        saved = {str(r["chunk_id"]): r for _, r in g.store.rows if str(r["query_id"]) == qid
                 and _saved(g, qid, str(r["chunk_id"]))}
        chunks = []
        for i, c in enumerate(p["batches"][b]):
            cid = str(c["chunk_id"])
            row = saved.get(cid)
            v = (values or {}).get(i, {})
            chunks.append({
                "index": i, "chunk_id": cid, "header": c["header"],
                "code": site.code_html(c["header"], c["text"]),
                "saved": row is not None,
                "reason": row["reason"] if row is not None else v.get("reason", ""),
                "grade": str(row["grade"]) if row is not None else v.get("grade", ""),
                "error": (chunk_errors or {}).get(i) or (error if error_index == i else None),
            })
        qids = list(g.packets)
        done, total = query_progress(g, qid)
        nb = len(p["batches"])
        return templates.TemplateResponse(request, "batch.html", {
            **base_context(request, g), "packet": p, "query_id": qid, "batch": b, "batches": nb,
            "chunks": chunks, "all_saved": all(c["saved"] for c in chunks),
            "form_error": error if error_index is None else None,
            "has_error": error is not None or bool(chunk_errors),
            "scale": site.scale, "max_words": site.max_reason_words,
            "max_chars": site.max_reason_chars,
            "rubric_html": site.rubric_html, "query_pos": qids.index(qid) + 1,
            "query_count": len(qids), "query_done": done, "query_total": total,
            "prev_url": url(g, qid, b - 1) if b > 0 else None,
            "next_url": url(g, qid, b + 1) if b + 1 < nb else None,
            "action": url(g, qid, b), "draft_key": f"{g.name}|{qid}|{b}",
            "reason_optional_zero": not reason_required(g.kind, g.role, 0),
            "disputes_on": site.file_dispute is not None and bool(site.sections),
            "sections": site.sections, "dispute_action": url(g, qid, b) + "/dispute",
            "dispute": dispute or {},
            "disputed": (request.query_params.get("disputed", "")
                         if _DISPUTE_ID.match(request.query_params.get("disputed", ""))
                         else None),
        }, status_code=status)

    @app.get("/g/{name}/q/{qid}", response_class=HTMLResponse)
    def query_page(request: Request, name: str, qid: str):
        g = grader_for(request, name)
        check_active(g)
        p = packet_for(g, qid)
        first = next((b for b in range(len(p["batches"])) if not batch_done(g, qid, b)), 0)
        return RedirectResponse(url(g, qid, first), status_code=303)

    @app.get("/g/{name}/q/{qid}/{b}", response_class=HTMLResponse)
    def batch_page(request: Request, name: str, qid: str, b: int):
        g = grader_for(request, name)
        check_active(g)
        return render_batch(request, g, qid, b)

    @app.post("/g/{name}/q/{qid}/{b}", response_class=HTMLResponse)
    async def save_batch(request: Request, name: str, qid: str, b: int):
        g = grader_for(request, name)
        p = packet_for(g, qid, b)
        await check_cross_site(request)
        check_active(g, status=403)
        form = await request.form()
        batch = p["batches"][b]
        values, rows = {}, []
        stale = []
        for i, c in enumerate(batch):
            cid = str(c["chunk_id"])
            reason = str(form.get(f"reason-{i}", ""))
            raw = str(form.get(f"grade-{i}", "")).strip()
            values[i] = {"reason": reason, "grade": raw}
            if _saved(g, qid, cid):
                # The page never submits a saved chunk (its fields are disabled): a value
                # for one comes from a page shown before another tab saved it.
                if f"grade-{i}" in form:
                    stale.append(i + 1)
                continue
            grade = int(raw) if _INT.match(raw) else raw
            rows.append((i + 1, {"query_id": qid, "chunk_id": cid, "reason": reason.strip(),
                                 "grade": grade}))
        if stale:
            return render_batch(request, g, qid, b, values=values, status=409, error=(
                f"Chunk {', '.join(map(str, stale))} of this batch was already saved (in "
                "another tab?). Saved grades are final: yours for it were not saved, and "
                "nothing else of this form was saved either. Check the batch and save "
                "again."))
        pool_pairs = {(qid, str(c["chunk_id"])) for c in batch}
        # each row on its own first, so every chunk with a problem (a too-long reason in the
        # third chunk as in the first, a grade not chosen) is flagged on the page at once,
        # each with its own message
        chunk_errors = {}
        for line, row in rows:
            if row["grade"] == "":
                chunk_errors[line - 1] = (f"Choose a grade ({scale_text(site.scale)}) for "
                                          "this chunk before saving.")
                continue
            try:
                validate_grade_rows(
                    [(line, row)], pool_pairs=pool_pairs, scale=site.scale,
                    max_reason_words=site.max_reason_words,
                    require_reason=lambda gr: reason_required(g.kind, g.role, gr),
                    source=f"form {qid} batch {b}", grader=g.name,
                    max_reason_chars=site.max_reason_chars)
            except InputError as e:
                chunk_errors[line - 1] = _form_message(e)
        if chunk_errors:
            return render_batch(request, g, qid, b, values=values, status=400,
                                chunk_errors=chunk_errors)
        try:
            df = validate_grade_rows(
                rows, pool_pairs=pool_pairs, scale=site.scale,
                max_reason_words=site.max_reason_words,
                require_reason=lambda gr: reason_required(g.kind, g.role, gr),
                source=f"form {qid} batch {b}", grader=g.name,
                max_reason_chars=site.max_reason_chars)
        except InputError as e:
            index = (e.line - 1) if e.line else None
            return render_batch(request, g, qid, b, values=values, status=400,
                                error=_form_message(e), error_index=index)
        records = [{"query_id": r.query_id, "chunk_id": r.chunk_id, "reason": r.reason,
                    "grade": int(r.grade)} for r in df.itertuples(index=False)]
        if records:
            try:
                await asyncio.wrap_future(site.writer.submit(g.store, records))
            except InputError as e:
                if e.rule != "pair already recorded for this grader":
                    return render_batch(request, g, qid, b, values=values, status=409,
                                        error=_form_message(e))
                return render_batch(request, g, qid, b, status=409,
                                    error="This batch was already saved (in another tab?). "
                                          "Saved grades are final.")
            except ProtocolError as e:  # the grade file could not be held: say so, save nothing
                return render_batch(request, g, qid, b, values=values, status=503,
                                    error=f"{e}. Nothing was saved; try again in a moment.")
        nxt = next_batch(g, after=(qid, b))
        return RedirectResponse(url(g, *nxt) if nxt else url(g), status_code=303)

    @app.post("/g/{name}/q/{qid}/{b}/dispute", response_class=HTMLResponse)
    async def file_dispute(request: Request, name: str, qid: str, b: int):
        """File a dispute on one chunk of the batch: the grader's grade, the rubric section
        read, a reason. It never changes a grade; nothing is recorded when it is refused."""
        g = grader_for(request, name)
        p = packet_for(g, qid, b)
        await check_cross_site(request)
        if site.file_dispute is None:
            raise _Denied(404, "Disputes are not taken on this page.")
        form = await request.form()
        batch = p["batches"][b]
        raw_i = str(form.get("chunk", ""))
        i = int(raw_i) if _INT.match(raw_i) and 0 <= int(raw_i) < len(batch) else None
        raw_g = str(form.get("grade", "")).strip()
        entered = {"index": i, "grade": raw_g, "section": str(form.get("section", "")),
                   "reason": str(form.get("reason", ""))}
        if i is None:
            return render_batch(request, g, qid, b, status=400, dispute=entered,
                                error="The dispute names no chunk of this batch. Nothing was "
                                      "recorded.")
        row = {"query_id": qid, "chunk_id": str(batch[i]["chunk_id"]), "grader": g.name,
               "grade": int(raw_g) if _INT.match(raw_g) else raw_g,
               "section": entered["section"], "reason": entered["reason"]}
        try:
            filed = await asyncio.to_thread(site.file_dispute, row)
        except InputError as e:
            msg = _form_message(e).replace("Nothing was saved.", "Nothing was recorded.")
            return render_batch(request, g, qid, b, status=400, dispute=entered,
                                error=f"Dispute not filed: {msg}", error_index=i)
        return RedirectResponse(f"{url(g, qid, b)}?disputed={filed}", status_code=303)

    return app


def _form_message(e: InputError) -> str:
    """An error for the form: the rule and what was found, without file and line."""
    msg = e.rule[0].upper() + e.rule[1:]
    if e.found is not None:
        msg += f" {found_clause(str(e.found))}"
    if e.fix:
        msg += f". {e.fix}"
    return msg + ". Nothing was saved."


def site_graders(graders: Mapping, *, packets_by_role: Mapping, tokens: Mapping,
                 stores: Mapping, audit_ids=None, packets_by_grader: Mapping | None = None
                 ) -> dict:
    """:class:`WebGrader` objects for the graders to serve.

    Parameters
    ----------
    graders : dict
        name → params entry (``role``, ``kind``), for the graders to serve.
    packets_by_role : dict
        role → (query id → packet).
    tokens : dict
        name → token.
    stores : dict
        name → open :class:`GradeStore`.
    audit_ids : iterable of str, optional
        The audit queries; an auditor's queue keeps only these.
    packets_by_grader : dict, optional
        name → (query id → packet) for graders with packets of their own (a rater's
        queue, an expert's adjudication queue); they take precedence over the role's.
    """
    out = {}
    own = packets_by_grader or {}
    audit = None if audit_ids is None else {str(q) for q in audit_ids}
    for name, spec in graders.items():
        role = spec["role"]
        packets = dict(own[name] if name in own else packets_by_role[role])
        if role == "auditor" and audit is not None:
            packets = {q: p for q, p in packets.items() if q in audit}
        out[name] = WebGrader(name=name, role=role, kind=spec.get("kind", "human"),
                              token=tokens[name], packets=packets, store=stores[name])
    return out
