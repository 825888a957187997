"""``relgrade agreement A B``: agreement between two grade files, outside the pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pandas as pd

from relgrade.cli import handle_errors
from relgrade.errors import InputError
from relgrade.io.files import iter_jsonl, read_lines
from relgrade.protocol import agreement as ag
from relgrade.schema import check_scale


def _id(value, name: str, path: Path, line: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise InputError(f"{name} must be a non-empty string or integer", path=path, line=line,
                         found=json.dumps(value))
    return str(value)


def _read_jsonl_grades(path: Path, scale: list[int]) -> pd.DataFrame:
    rows, seen = [], {}
    for line, obj in iter_jsonl(path):
        missing = [k for k in ("query_id", "chunk_id", "grade") if k not in obj]
        if missing:
            raise InputError("a grade row needs query_id, chunk_id and grade", path=path,
                             line=line, found="no " + ", ".join(missing))
        q = _id(obj["query_id"], "query_id", path, line)
        c = _id(obj["chunk_id"], "chunk_id", path, line)
        g = obj["grade"]
        if isinstance(g, bool) or not isinstance(g, int):
            raise InputError("grade must be an integer", path=path, line=line,
                             item=f"pair ({q}, {c})", found=json.dumps(g))
        _on_scale(g, scale, path, line, q, c)
        if (q, c) in seen:
            raise InputError(f"second grade for one pair (first on line {seen[(q, c)]})",
                             path=path, line=line, item=f"pair ({q}, {c})",
                             fix="Keep one grade per pair")
        seen[(q, c)] = line
        reason = obj.get("reason")
        rows.append((q, c, g, reason if isinstance(reason, str) else ""))
    return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grade", "reason"])


def _read_qrels_grades(path: Path, scale: list[int]) -> pd.DataFrame:
    from relgrade.io.trec import read_trec_qrels

    df = read_trec_qrels(path)
    for q, c, g in zip(df["query_id"], df["chunk_id"], df["grade"]):
        _on_scale(int(g), scale, path, None, q, c)
    out = df[["query_id", "chunk_id", "grade"]].copy()
    out["reason"] = ""
    return out


def _on_scale(g: int, scale: list[int], path: Path, line, q, c) -> None:
    if g not in scale:
        raise InputError(f"grade outside the scale {','.join(map(str, scale))}", path=path,
                         line=line, item=f"pair ({q}, {c})", found=g,
                         fix="Pass the file's scale with --scale")


def read_grade_file(path, scale: list[int]) -> pd.DataFrame:
    """A grade file as ``query_id, chunk_id, grade, reason``: JSONL rows or TREC qrels.

    The format is told from the first non-blank line: a JSON object means JSON Lines grade
    rows (``query_id``, ``chunk_id``, ``grade``, optional ``reason``); anything else is read
    as TREC qrels (``qid iter docid grade``).
    """
    path = Path(path)
    first = next((ln for ln in read_lines(path) if ln.strip()), "")
    if first.lstrip().startswith("{"):
        return _read_jsonl_grades(path, scale)
    return _read_qrels_grades(path, scale)


def _parse_scale(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip() != ""]
    except ValueError:
        raise InputError("--scale lists integer grades separated by commas",
                         found=repr(text), fix="For example --scale 0,1,2") from None
    return check_scale(values)


def _fmt(value) -> str:
    if value is None:
        return "undefined"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


@click.command("agreement")
@click.argument("a", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--scale", "scale_text", default="0,1,2", show_default=True,
              help="The grade scale, comma-separated.")
@click.option("--relevant-min", default=1, show_default=True, type=int,
              help="The lowest grade that counts as relevant (for binary kappa).")
@click.option("--json", "as_json", is_flag=True, help="Print the measures as JSON.")
@handle_errors
def agreement_cmd(a, b, scale_text, relevant_min, as_json):
    """Agreement between two grade files A and B over the pairs both graded.

    Each file holds JSON Lines grade rows (query_id, chunk_id, reason, grade) or TREC qrels
    (qid 0 docid grade). Prints quadratic weighted kappa over the full scale, binary kappa
    (0 against >= --relevant-min), unweighted kappa, raw agreement, disagreement, two-step
    disagreement, the confusion matrix (rows A, columns B), the pairs compared and the pairs
    graded in only one file (missing, dropped pairwise).
    """
    scale = _parse_scale(scale_text)
    check_scale(scale, relevant_min)
    ga, gb = read_grade_file(a, scale), read_grade_file(b, scale)
    ga["grader"], gb["grader"] = "A", "B"
    paired, missing = ag.pair_grades(pd.concat([ga, gb], ignore_index=True),
                                     rater_a="A", rater_b="B")
    res = ag.agreement(paired["grade_a"].to_numpy(), paired["grade_b"].to_numpy(),
                       scale=scale, relevant_min=relevant_min, raters=(str(a), str(b)))
    out = {"a": str(a), "b": str(b), "pairs": res["pairs"], "missing": missing}
    out.update({name: res[name] for name in ag.MEASURES})
    out.update({"scale": scale, "relevant_min": relevant_min, "confusion": res["confusion"],
                "notes": res["notes"]})
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    rows = [("pairs", out["pairs"]), ("missing", out["missing"])]
    rows += [(name, out[name]) for name in ag.MEASURES]
    width = max(len(name) for name, _ in rows)
    click.echo(f"A = {a}")
    click.echo(f"B = {b}")
    for name, value in rows:
        click.echo(f"{name:<{width}}  {_fmt(value)}")
    click.echo("")
    click.echo("confusion (rows: grade in A, columns: grade in B)")
    cells = [[f"A={g}"] + [str(n) for n in row] for g, row in zip(scale, res["confusion"])]
    header = [""] + [f"B={g}" for g in scale]
    colw = max(len(t) for t in header + [c for r in cells for c in r])
    click.echo("  ".join(t.rjust(colw) for t in header).rstrip())
    for r in cells:
        click.echo("  ".join(t.rjust(colw) for t in r))
    for note in out["notes"]:
        click.echo(f"note: {note}")
