"""The experiment's design record, ``DESIGN.md``: the protocol's sections, filled in.

The record is rendered from ``templates/DESIGN.md.j2`` with what params say (scale, arms,
pool, what graders see, graders, audit and gates, deviations), the intent review record
when it exists, and, once the key is frozen, its record (agreement reached, key sha256, pool
version, dropped queries). The parts only a person can write sit between
``<!-- relgrade: person NAME -->`` and ``<!-- relgrade: end NAME -->``; rendering again keeps
what was written there. A block, or the rubric, that still holds :data:`FILL_IN` is unfilled
(:func:`unfilled`).
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2

from relgrade.pipeline.cost import seconds_per_judgment
from relgrade.experiment.chunk_edit import ORIGIN_NAME
from relgrade.io.files import read_json, write_text

#: The file name of the design record, in the experiment's folder.
DESIGN_FILE = "DESIGN.md"
#: The marker of a part a person must write.
FILL_IN = "<!-- relgrade: fill in -->"
#: The person-written blocks, in the order they appear.
BLOCKS = {
    "question": "What decision does this experiment inform, and what result would change it?",
    "corpus": "Why this corpus (and version), how the queries were written or sampled, and "
              "who wrote the intents.",
    "graders": "Who or what grades: model and prompt, or the people and their background; "
               "how the auditor was kept blind.",
    "deviations": "Anything done differently from the protocol, and why.",
}
_BLOCK = re.compile(r"<!-- relgrade: person (?P<name>[a-z-]+) -->\n(?P<body>.*?)\n?"
                    r"<!-- relgrade: end (?P=name) -->", re.S)


def person_blocks(text: str) -> dict[str, str]:
    """The person-written blocks of a design record.

    Parameters
    ----------
    text : str
        A ``DESIGN.md``.

    Returns
    -------
    dict of str to str
        Block name → its text (without the two marker lines).

    Examples
    --------
    >>> person_blocks("<!-- relgrade: person question -->\\nWhy.\\n<!-- relgrade: end question -->")
    {'question': 'Why.'}
    """
    return {m["name"]: m["body"] for m in _BLOCK.finditer(text)}


def unfilled(text: str) -> list[str]:
    """The person blocks of ``text`` that still hold :data:`FILL_IN`, in order.

    Parameters
    ----------
    text : str
        A ``DESIGN.md``.

    Returns
    -------
    list of str
        Block names.
    """
    return [name for name, body in person_blocks(text).items() if FILL_IN in body]


def placeholder(name: str) -> str:
    """The text a new block ``name`` holds: the fill-in marker and what to write."""
    return f"{FILL_IN} {BLOCKS[name]}"


def design_context(*, name: str, params, record: dict | None = None,
                   review: dict | None = None, corpus_sha256: str | None = None,
                   record_path: str | None = None, corpus_origin: dict | None = None) -> dict:
    """What the design template is filled with.

    Parameters
    ----------
    name : str
        The experiment's name (its folder's last segment).
    params : relgrade.experiment.params.Params
        The experiment's params (``corpus``, ``queries``, ``arms``, ``pool``, ``intents``,
        ``audit``, ``gates`` and ``scale`` must be set).
    record : dict, optional
        The frozen key's record (``key_sha256``, ``pool_version``, ``agreement``, ...).
    review : dict, optional
        The intent review record (``reviewer``, ``table_sha256``, ``flagged``).
    corpus_sha256 : str, optional
        The corpus manifest's sha256, when the corpus stage ran.
    record_path : str, optional
        Where the record lives, relative to the experiment.
    corpus_origin : dict, optional
        ``chunks.origin.json`` beside an edited chunks file (``exported_from``,
        ``archive_sha256``): the source spec it was exported from before an edit.

    Returns
    -------
    dict
        The template's variables.
    """
    p = params
    grading, graders = p.grading, p.graders_dict()
    arms = [{"name": arm, "kind": cfg["kind"], "depth": cfg["depth"], "fuse": cfg.get("fuse"),
             "source": cfg.get("source") if cfg["kind"] == "file" else None}
            for arm, cfg in p.arms_dict().items()]
    pool = p.need("pool")
    audit = p.need("audit")
    deviations = list(record.get("deviations") or []) if record else list(grading.deviations)
    return {
        "name": name, "record": record, "record_path": record_path, "review": review,
        "corpus_input": p.need("corpus").input, "corpus_sha256": corpus_sha256,
        "corpus_origin": corpus_origin,
        "queries_input": p.need("queries").input, "groups": list(p.need("queries").groups),
        "arms": arms, "pool_depth": pool.depth, "tail_sample": pool.tail_sample,
        "tail_depth": pool.tail_depth, "seed": p.seed,
        "scale": list(p.need("scale").grades), "relevant_min": p.need("scale").relevant_min,
        "rubric": grading.rubric, "rubric_version": grading.rubric_version,
        "batch_size": grading.batch_size, "max_reason_words": grading.max_reason_words,
        "intents_input": p.need("intents").input, "intents_review": p.need("intents").review,
        "graders": [{"name": g, "role": cfg.get("role"), "kind": cfg.get("kind"),
                     "family": cfg.get("family"),
                     "seconds": _number(seconds_per_judgment(p, g))}
                    for g, cfg in sorted(graders.items())],
        "key_grader": grading.key_grader, "auditor": grading.auditor,
        "audit_percent": _number(round(audit.fraction * 100, 1)),
        "audit_min": audit.min_queries, "gates": p.need("gates").thresholds(),
        "deviations": deviations,
        "ppi": None if grading.mode != "ppi" else {
            "human": (f"{_number(p.need('ppi').human_fraction * 100)}% of the queries"
                      if p.need("ppi").human_fraction is not None
                      else f"{p.need('ppi').human_queries} queries"),
            "level": _number(p.need("ppi").level), "interval": p.need("ppi").interval},
        "triage": None if grading.mode != "triage" else {
            "grader": p.triage_grader_name(), "zero_sample": _number(p.need("triage").zero_sample),
            "level": _number(p.need("triage").level),
            "record": (record or {}).get("triage")},
    }


def _number(x: float):
    return int(x) if float(x).is_integer() else x


def render_design(context: dict, blocks: dict[str, str] | None = None) -> str:
    """The design record's text.

    Parameters
    ----------
    context : dict
        From :func:`design_context`.
    blocks : dict of str to str, optional
        Person blocks already written (from :func:`person_blocks`); the others get
        :func:`placeholder`.

    Returns
    -------
    str
        Markdown, ending in one newline.
    """
    kept = {name: (blocks or {}).get(name) or placeholder(name) for name in BLOCKS}
    env = jinja2.Environment(loader=jinja2.PackageLoader("relgrade.pipeline", "templates"),
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
                             autoescape=False)
    text = env.get_template("DESIGN.md.j2").render(**context, blocks=kept)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"


def write_design(ex, name: str | None = None) -> Path:
    """Render the experiment's ``DESIGN.md`` again, keeping its person blocks.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment.
    name : str, optional
        Its name (default: ``default`` for the repository's top folder, else the name of
        its folder).

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    InputError
        A params section the record needs is not set; the key record, review record or
        corpus manifest exists but is not JSON.
    """
    path = ex.root / DESIGN_FILE
    blocks = person_blocks(path.read_text(encoding="utf-8")) if path.is_file() else {}
    record_path = ex.path("record")
    record = read_json(record_path) if record_path.is_file() else None
    review_path = ex.file(ex.params.need("intents").review)
    review = read_json(review_path) if review_path.is_file() else None
    manifest_path = ex.path("corpus_manifest")
    manifest = read_json(manifest_path) if manifest_path.is_file() else None
    # an edited corpus keeps naming the pinned source it was exported from
    origin_path = ex.file(ex.params.need("corpus").input).with_name(ORIGIN_NAME)
    origin = read_json(origin_path) if origin_path.is_file() else None
    if name is None:
        # the repository's own experiment is its top folder, whatever the clone is called
        name = "default" if (ex.root / "stages").is_dir() else ex.root.resolve().name
    context = design_context(
        name=name, params=ex.params, record=record, review=review,
        corpus_sha256=(manifest or {}).get("sha256"),
        record_path=ex.params.paths.record, corpus_origin=origin)
    write_text(path, render_design(context, blocks))
    return path


def unfilled_parts(ex) -> list[str]:
    """Where the experiment's design record and rubric still wait for a person.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment.

    Returns
    -------
    list of str
        ``DESIGN.md: NAME`` for each unfilled block, ``RUBRIC: corpus examples`` when the
        rubric still holds :data:`FILL_IN`; ``DESIGN.md: missing`` without a design record.
        Each file is named under ``ex.root`` as given (``experiments/x/DESIGN.md`` for an
        experiment loaded as ``experiments/x``; ``DESIGN.md`` for the one in the working
        folder).
    """
    out = []
    path = ex.root / DESIGN_FILE
    if not path.is_file():
        out.append(f"{path.as_posix()}: missing (relgrade design writes it)")
    else:
        out += [f"{path.as_posix()}: {name}"
                for name in unfilled(path.read_text(encoding="utf-8"))]
    rubric = ex.params.grading.rubric
    if rubric and ex.file(rubric).is_file() and FILL_IN in ex.file(rubric).read_text(
            encoding="utf-8"):
        out.append(f"{ex.file(rubric).as_posix()}: corpus examples")
    return out
