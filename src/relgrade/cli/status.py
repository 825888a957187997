"""``relgrade status``: where the experiment stands, from whatever files exist."""

from __future__ import annotations

import json
from pathlib import Path

import click

from relgrade.cli.render import handle_errors
from relgrade.errors import RelgradeError
from relgrade.experiment.stage import load_params, path_of
from relgrade.experiment.status import experiment_status, status_lines
from relgrade.io import files as io
from relgrade.protocol import grades


@click.command("status")
@click.option("--params", "params_path", default="params.yaml", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The experiment's params.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handle_errors
def status_cmd(params_path, as_json):
    """Say where the experiment stands: frozen inputs, pool, intents, grading, gate, key, metrics.

    For each grader it counts the pool pairs graded in the current round and names, query by
    query, the pairs that still lack a grade (after the pool grew, only those need grading).
    """
    params = load_params(params_path)
    base = params_path.parent
    problems: dict[str, str] = {}

    def load(step, name, reader):
        path = base / path_of(params, name)
        if not path.exists():
            return None
        try:
            return reader(path)
        except RelgradeError as e:
            problems[step] = str(e)
            return None

    pool = load("pool", "pool", lambda p: io.read_table(p, columns=["query_id", "chunk_id"]))
    audit = load("audit", "audit", lambda p: [str(r["query_id"]) for r in io.read_jsonl(p)])
    rnd = int((params.get("grading") or {}).get("round", 1))
    rows = {}
    for name, spec in (params.get("graders") or {}).items():
        path = base / path_of(params, "grades_in") / name / f"round-{rnd}.jsonl"
        if not path.exists():
            continue
        try:
            rows[name] = grades.validate_grader_file(
                io.iter_jsonl(path), name=name, spec=grades.grader_spec(params["graders"], name),
                pool_pairs=None if pool is None else grades.pool_pairs_of(pool),
                audit_query_ids=audit, scale=params["scale"]["grades"],
                max_reason_words=int(params["grading"]["max_reason_words"]),
                source=path.as_posix())
        except RelgradeError as e:
            rows[name] = str(e)
    metrics_dir = base / path_of(params, "metrics")
    metrics = {}
    for p in sorted(metrics_dir.glob("*.json")) if metrics_dir.is_dir() else []:
        try:
            metrics[p.stem] = io.read_json(p)
        except RelgradeError as e:
            problems[f"metrics {p.stem}"] = str(e)
    st = experiment_status(
        params=params, pool=pool, audit_query_ids=audit, grader_rows=rows, metrics=metrics,
        corpus_manifest=load("corpus", "corpus_manifest", io.read_json),
        queries_manifest=load("queries", "queries_manifest", io.read_json),
        pool_manifest=load("pool", "pool_manifest", io.read_json),
        intents_manifest=load("intents", "intents_manifest", io.read_json),
        agreement=load("gate", "agreement", io.read_json),
        gate=load("gate", "gate", io.read_json),
        record=load("key", "record", io.read_json), problems=problems)
    if as_json:
        click.echo(json.dumps(st, indent=2, ensure_ascii=False))
    else:
        for line in status_lines(st):
            click.echo(line)
