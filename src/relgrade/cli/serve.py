"""``relgrade serve``: the grading web page for people (see :mod:`relgrade.web.app`)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError


def resolve_tokens(names, *, graders: dict, tokens_path=None) -> dict:
    """A login token per grader: from the tokens file, else params, else a new random one.

    Parameters
    ----------
    names : list of str
        The graders to serve.
    graders : dict
        Params ``graders`` (an entry may hold ``token``).
    tokens_path : path, optional
        A YAML/JSON file ``grader: token``. Graders missing from it get a new token and the
        file is rewritten (readable by its owner only), so login links survive a restart.

    Raises
    ------
    InputError
        The tokens file is not a mapping of strings, or two graders share a token.
    """
    from relgrade.io.files import read_yaml, write_text

    from_file = {}
    if tokens_path is not None and Path(tokens_path).exists():
        from_file = read_yaml(tokens_path)
        if not isinstance(from_file, dict) or not all(
                isinstance(v, str) and v for v in from_file.values()):
            raise InputError("tokens file must map each grader to a non-empty string",
                             path=tokens_path)
    out, new = {}, False
    for name in names:
        token = from_file.get(name) or (graders.get(name) or {}).get("token")
        if not token:
            token, new = secrets.token_urlsafe(24), True
        out[name] = str(token)
    if len(set(out.values())) != len(out):
        raise InputError("two graders share a login token", path=tokens_path,
                         item=", ".join(sorted(n for n, t in out.items()
                                               if list(out.values()).count(t) > 1)))
    if tokens_path is not None and (new or any(from_file.get(n) != t for n, t in out.items())):
        merged = {**from_file, **out}
        write_text(tokens_path, "".join(f"{k}: {v}\n" for k, v in merged.items()))
        os.chmod(tokens_path, 0o600)
    return out


def build_site(params_path=None, *, graders=None, tokens_path=None):
    """The :class:`~relgrade.web.app.Site` for ``relgrade serve``, with its stores open.

    Parameters
    ----------
    params_path : path, optional
        The params file (default :data:`relgrade.experiment.params.PARAMS_FILE`); its folder
        is where relative paths start.
    graders : list of str, optional
        Graders to serve; default: every grader of kind ``human``.
    tokens_path : path, optional
        See :func:`resolve_tokens`.

    Returns
    -------
    site : Site
    stores : list of GradeStore
        Open stores, to close when the server stops (``site.writer`` too).

    Raises
    ------
    InputError
        No grader to serve (the message names the repository's experiments that have
        graders of kind human), an unknown grader, missing packets, or a grade file's
        sidecar that records other intents or another rubric.
    ProtocolError
        A grader's grade file is held by another process (e.g. ``relgrade grade run``).
    """
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.params import PARAMS_FILE
    from relgrade.graders.command import packet_meta
    from relgrade.graders.store import GradeStore, SingleWriter
    from relgrade.experiment import revisions
    from relgrade.schema import PANEL_ROLES
    from relgrade.web.app import Site, site_graders

    if params_path is None:
        params_path = PARAMS_FILE

    ex = Experiment.load(params_path, resolve=True)
    all_graders = ex.params.graders_dict()
    names = list(graders) if graders else [n for n, g in all_graders.items()
                                           if g["kind"] == "human"]
    if not names:
        raise _no_human_grader(params_path, all_graders)
    specs = {n: ex.params.grader(n) for n in names}
    grading = ex.params.grading
    roles = {s["role"] for s in specs.values()}
    # a rater's packets are their own queue, an expert's the adjudication queue
    own = {n: ex.grader_packets(n) for n, s in specs.items() if s["role"] in PANEL_ROLES}
    packets_by_role = {r: ex.packets(r) for r in roles if r not in PANEL_ROLES}
    audit_ids = None
    if "auditor" in roles and ex.audit_ids() is not None:
        audit_ids = ex.audit_ids()
    tokens = resolve_tokens(names, graders=all_graders, tokens_path=tokens_path)
    stores = {}
    try:
        for n in names:
            files = ex.grader_files(n)
            mine = own[n] if n in own else packets_by_role[specs[n]["role"]]
            ex.ensure_meta(files, packet_meta(mine))
            stores[n] = GradeStore(files.grades, made_on=ex.made_on(mine),
                                   carried=revisions.carried_check(ex)).open()
    except BaseException:
        for st in stores.values():
            st.close()
        raise
    site = Site(graders=site_graders(specs, packets_by_role=packets_by_role, tokens=tokens,
                                     stores=stores, audit_ids=audit_ids,
                                     packets_by_grader=own),
                rubric=ex.rubric(), scale=list(ex.params.need("scale").grades),
                max_reason_words=ex.params.need("grading.max_reason_words"),
                max_reason_chars=grading.max_reason_chars,
                writer=SingleWriter(), round=grading.round,
                gold_watch=_gold_watch(ex) if "rater" in roles else None, **_disputes(ex))
    return site, list(stores.values())


def _gold_watch(ex):
    """The page's gold check of a rater panel with gold (None without ``gold``): the
    queues the packets were built from, their gold questions and the params' rule."""
    from relgrade.io.files import read_table
    from relgrade.pipeline.panel import gold_questions, read_assignment, read_gold
    from relgrade.web.app import GoldWatch

    if ex.params.grading.mode != "raters" or ex.params.gold is None:
        return None
    queues = read_assignment(ex)
    pool = read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    gold = gold_questions(read_gold(ex, pool), queues)
    return GoldWatch(queues=queues, gold=gold, min_accuracy=ex.params.gold.min_accuracy,
                     min_gold=ex.params.gold.min_gold)


def _disputes(ex) -> dict:
    """The page's dispute button: the rubric's sections and the recorder. The first dispute
    creates the disputes file (params ``paths.disputes``, added when the params name none)
    and renders the pipeline again (:func:`relgrade.pipeline.disputes.file`)."""
    from relgrade.experiment import revisions
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline import disputes as filing

    if not ex.params.grading.rubric or not ex.rubric_path().is_file():
        return {}  # no rubric, no section to dispute
    sections = [(s.id, s.heading or "text before the first section")
                for s in revisions.current_sections(ex).values()]

    def record(row: dict) -> str:
        # params as they are now: the first dispute may have added paths.disputes
        done = filing.file(Experiment.load(ex.params.source), [row],
                           source="the grading page", via="page")
        return done.ids[0]

    return {"sections": sections, "file_dispute": record}


def _no_human_grader(params_path, graders: dict) -> InputError:
    """The error of an experiment with no grader of kind human, saying what to give instead.

    Parameters
    ----------
    params_path : path
        The params file read.
    graders : dict
        Its params ``graders`` (name -> entry with ``kind``).

    Returns
    -------
    InputError
        Naming the file and its graders' kinds; the fix names each other experiment of the
        repository with graders of kind human (``--experiment DIR``), else says to add one.
    """
    from relgrade.experiment.layout import experiment_folders
    from relgrade.experiment.params import PARAMS_FILE
    from relgrade.io.files import read_yaml

    here = Path(params_path).parent
    elsewhere = []
    if Path(params_path).name == PARAMS_FILE.name:
        for folder in experiment_folders(here):
            if folder.resolve() == here.resolve():
                continue
            try:
                raw = read_yaml(folder / PARAMS_FILE).get("graders") or {}
            except (InputError, AttributeError):  # not readable: not offered
                continue
            people = sorted(str(n) for n, g in raw.items()
                            if isinstance(g, dict) and g.get("kind") == "human")
            if people:
                elsewhere.append(f"--experiment {folder.as_posix()} ({', '.join(people)})")
    found = "graders " + (", ".join(f"{n} ({g['kind']})" for n, g in graders.items()) or "none")
    if elsewhere:
        fix = ("To serve an experiment whose graders are people, give its folder: relgrade "
               "serve " + "; or ".join(elsewhere))
    else:
        fix = ("Add a grader of kind human to params `graders` (docs/graders.md), then run "
               "relgrade serve again")
    return InputError("no grader to serve: params has no grader of kind human",
                      path=params_path, found=found, fix=fix)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on.")
@params_option
@click.option("--grader", "graders", multiple=True,
              help="A grader to serve (repeatable; default: every grader of kind human).")
@click.option("--tokens", "tokens_path", type=click.Path(dir_okay=False), default=None,
              help="YAML file grader: token; created or completed with new tokens.")
@handle_errors
def serve_cmd(host, port, params_path, graders, tokens_path):
    """Serve the grading web page: each grader logs in with the link printed here and grades
    their queue one batch of at most five chunks at a time; saved batches go to
    paths.grades_in/GRADER/round-N.jsonl."""
    import uvicorn

    from relgrade.web.app import create_app

    site, stores = build_site(params_path, graders=graders, tokens_path=tokens_path)
    try:
        for g in site.graders.values():
            click.echo(f"{g.name} ({g.role}, {len(g.packets)} queries): "
                       f"http://{host}:{port}/login?token={g.token}")
        uvicorn.run(create_app(site), host=host, port=port, log_level="warning",
                    use_colors=False)
    finally:
        site.writer.close()
        for st in stores:
            st.close()
