"""``relgrade grade ...``: record grades.

``grade import`` adds existing judgments to a grader's round file, validated as the grades
stage validates it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from relgrade.cli import handle_errors
from relgrade.errors import InputError, ProtocolError
from relgrade.experiment.stage import load_params, path_of
from relgrade.graders import labelstudio
from relgrade.graders.store import writer_lock
from relgrade.io import files as io
from relgrade.protocol import grades


@click.group("grade")
def grade_cmd():
    """Record grades for the pool, only ever adding to what is already recorded."""


@contextlib.contextmanager
def _sole_writer(target: Path):
    """Hold the grade file's writer lock (:func:`relgrade.graders.store.writer_lock`).

    A grading run or page that holds the file makes the import refuse rather than race it;
    the grade file is not created to be locked, so a failed import leaves nothing behind.
    """
    with writer_lock(target, advice="import when it has finished"):
        inflight = target.with_name(f".{target.name}.inflight")
        if inflight.exists() and inflight.read_bytes().startswith(b"relgrade-inflight"):
            raise ProtocolError(f"{target.as_posix()}: a grading batch was interrupted and "
                                "is not recovered yet; rerun `relgrade grade run` for this "
                                "grader first, then import")
        yield


def _existing(target: Path, **kw):
    if not target.exists():
        return b"", set()
    df = grades.validate_grader_file(io.iter_jsonl(target), source=target.as_posix(), **kw)
    return target.read_bytes(), set(zip(df["query_id"], df["chunk_id"]))


@grade_cmd.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--grader", required=True, help="The grader (a key of params `graders`).")
@click.option("--round", "round_", type=int, default=None,
              help="Grading round (default: params grading.round).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "qrels", "label-studio"]),
              default=None,
              help="jsonl grade rows, TREC qrels (graders of kind import only), or a Label "
                   "Studio JSON export of tasks from `relgrade packets export --format "
                   "label-studio`. Default: qrels for a .qrels file, else jsonl.")
@click.option("--params", "params_path", default="params.yaml", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The experiment's params.")
@handle_errors
def import_cmd(file, grader, round_, fmt, params_path):
    """Validate FILE against the pool and append its grades to the grader's round file.

    FILE is checked exactly as the grades stage checks a grader's file. Pairs the grader
    already graded in that round are refused, so nothing recorded is replaced; the merged
    file is written atomically.
    """
    params = load_params(params_path)
    base = params_path.parent
    spec = grades.grader_spec(params.get("graders") or {}, grader, params_path=params_path)
    fmt = fmt or ("qrels" if file.suffix.lower() == ".qrels" else "jsonl")
    if fmt == "qrels" and spec["kind"] != "import":
        raise InputError("TREC qrels carry no reasons: only a grader of kind `import` takes "
                         "them", path=file, item=grader, found=f"kind {spec['kind']}",
                         fix="Declare a grader with `kind: import` for these judgments")
    grading = params["grading"]
    rnd = int(grading["round"]) if round_ is None else round_
    audit_path = base / path_of(params, "audit")
    check = dict(name=grader, spec=spec, scale=params["scale"]["grades"],
                 max_reason_words=int(grading["max_reason_words"]),
                 audit_query_ids=([r["query_id"] for r in io.read_jsonl(audit_path)]
                                  if audit_path.exists() else None),
                 pool_pairs=grades.pool_pairs_of(io.read_table(
                     base / path_of(params, "pool"), columns=["query_id", "chunk_id"])))
    if fmt == "qrels":
        rows = grades.qrels_rows(io.read_lines(file), source=file.as_posix())
    elif fmt == "label-studio":
        rows, _ = labelstudio.annotation_rows(io.read_json(file), source=file.as_posix())
    else:
        rows = io.iter_jsonl(file)
    new = grades.validate_grader_file(rows, source=file.as_posix(), **check)
    if new.empty:
        raise InputError("no grade rows to import", path=file)
    target = base / path_of(params, "grades_in") / grader / f"round-{rnd}.jsonl"
    meta = target.with_name(f"round-{rnd}.meta.json")
    manifest = base / path_of(params, "intents_manifest")
    intents_sha256 = io.read_json(manifest).get("sha256") if manifest.exists() else None
    if meta.exists() and rnd == int(grading["round"]):
        grades.check_meta(io.read_json(meta), source=meta.as_posix(),
                          rubric_version=str(grading["rubric_version"]),
                          intents_sha256=intents_sha256)
    with _sole_writer(target):
        before, done = _existing(target, **check)
        again = [p for p in zip(new["query_id"], new["chunk_id"]) if p in done]
        if again:
            shown = ", ".join(f"({q}, {c})" for q, c in again[:10])
            raise InputError(f"{len(again)} pairs already graded by {grader} in round {rnd}",
                             path=file, found=shown + (" ..." if len(again) > 10 else ""),
                             fix=f"Remove them from {file.name}; recorded grades are never "
                                 "replaced (a changed grade needs a new round)")
        if before and not before.endswith(b"\n"):
            before += b"\n"
        rows = new[grades.ROW_COLUMNS].to_dict("records")
        io.write_bytes(target, before + io.jsonl_bytes(rows))
        # Imported grades were made against the packets of this round: record which intents
        # and rubric those were, so a later change of either is refused, not silently mixed.
        if not meta.exists() and rnd == int(grading["round"]) and intents_sha256:
            io.write_json(meta, {"intents_sha256": intents_sha256,
                                 "rubric_version": str(grading["rubric_version"])})
    click.echo(f"imported {len(new)} grades for {grader} (round {rnd}) into "
               f"{target.as_posix()}: {len(done) + len(new)} rows")
