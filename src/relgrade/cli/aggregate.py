"""``relgrade aggregate``: several raters per pair → one grade per pair.

Reads the long grades table, removes raters who failed their gold questions, aggregates by
majority vote or Dawid-Skene, writes one row per pair in the key's canonical form, and
reports the raters, their agreement and the pairs an expert should adjudicate
(:func:`relgrade.raters.report.aggregate_raters` does the work).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from relgrade.cli.options import (
    format_option,
    labels_option,
    parse_labels,
    parse_scale,
    scale_option,
)
from relgrade.cli.render import handle_errors, number, table
from relgrade.errors import InputError

if TYPE_CHECKING:
    from relgrade.raters.report import RaterReport

#: The aggregation methods, as relgrade.raters.report.METHODS names them (a test checks it);
#: spelled here so that loading the command imports no pandas.
METHOD_NAMES = ("majority", "dawid-skene")
#: The reader's rule for one grader's two grades of one pair (io.judgments).
REPEAT_RULE = "one grader grades one (query, chunk) pair twice"


@click.command("aggregate")
@click.option("--grades", "grades_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The long grades table: .parquet (the grades stage's output) or .jsonl "
                   "rows with query_id, chunk_id, grader, grade.")
@click.option("--gold", "gold_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Gold pairs with their known grade: JSONL (query_id, chunk_id, grade), "
                   "TREC qrels or Parquet.")
@click.option("--method", type=click.Choice(METHOD_NAMES), default="majority",
              show_default=True, help="How the kept raters' grades become one grade.")
@click.option("--threshold", type=float, default=0.7, show_default=True,
              help="Lowest gold accuracy a rater may have and stay.")
@click.option("--min-gold", type=click.IntRange(min=0), default=5, show_default=True,
              help="Fewest gold answers on which a rater can be removed; a rater with fewer "
                   "is kept and flagged.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Write one row per pair: .jsonl in the key's canonical form, or .qrels.")
@scale_option()
@labels_option()
@click.option("--flag-variance", type=float, default=0.5, show_default=True,
              help="Flag a pair for adjudication when its grades' variance is at least this "
                   "(pairs with grades two or more apart are always flagged).")
@click.option("--round", "round_", type=int, default=None,
              help="Aggregate this grading round only (needed when the grades hold several).")
@click.option("--exclude", multiple=True,
              help="Leave this grader out (e.g. an earlier aggregate imported as a grader); "
                   "repeatable.")
@click.option("--tol", type=click.FloatRange(min=0), default=1e-7, show_default=True,
              help="Dawid-Skene: converged when no class prior and no confusion entry moves "
                   "by more than this in one iteration.")
@click.option("--max-iter", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Dawid-Skene: at most this many EM iterations (the report says when it "
                   "stopped without converging).")
@click.option("--repeats", type=click.Choice(["refused", "allowed"]), default="refused",
              show_default=True,
              help="A rater's repeated grades of one pair (Dawid & Skene's 1979 data has "
                   "them): refused, naming the rater, the pair and the lines; or allowed, "
                   "each counted as a vote and in Dawid-Skene's likelihood.")
@click.option("--per-pair", is_flag=True,
              help="Also print each pair's aggregate grade with its majority share (the "
                   "share of its raters who gave it) or its Dawid-Skene posteriors.")
@format_option(json_help="Print the report as one JSON document.")
@handle_errors
def aggregate_cmd(grades_path, gold_path, method, threshold, min_gold, out_path, scale, labels,
                  flag_variance, round_, exclude, tol, max_iter, repeats, per_pair, as_json):
    """Aggregate several raters' grades into one grade per pair.

    Raters whose accuracy on the gold pairs (--gold) is below --threshold, measured on at
    least --min-gold gold answers, are removed and all their grades discarded; the rest are
    aggregated by majority vote (ties: the median of the tied grades, rounded down) or by
    Dawid-Skene. Prints each rater's gold accuracy and what happened to them, Fleiss' kappa
    and Krippendorff's alpha before and after removal, and the high-variance pairs an expert
    should adjudicate. With --out, writes the aggregate sorted by (query_id, chunk_id).
    """
    from relgrade.io.files import write_bytes
    from relgrade.io.judgments import read_grades_table, read_judgments
    from relgrade.protocol.key import key_bytes, qrels_text
    from relgrade.raters.report import aggregate_raters

    labels = parse_labels(labels)
    scale = list(range(len(labels))) if labels else parse_scale(scale)
    if out_path is not None and out_path.suffix.lower() not in (".jsonl", ".qrels"):
        raise InputError("unknown output format (use .jsonl or .qrels)", path=out_path,
                         found=out_path.suffix or "no extension")
    allowed = repeats == "allowed"
    try:
        grades = read_grades_table(grades_path, scale=scale, labels=labels, repeats=allowed)
    except InputError as e:
        if e.rule != REPEAT_RULE:
            raise
        raise InputError(e.rule, path=e.path, line=e.line, item=e.item, found=e.found,
                         fix="Keep one grade per pair and rater, or pass --repeats allowed "
                             "to count each repeated grade") from None
    gold = None if gold_path is None else read_judgments(gold_path, scale=scale, labels=labels)
    report = aggregate_raters(grades, scale=scale, gold=gold, method=method,
                              threshold=threshold, min_gold=min_gold,
                              flag_variance=flag_variance, round_=round_, exclude=exclude,
                              grades_source=grades_path, gold_source=gold_path, tol=tol,
                              max_iter=max_iter, repeats=allowed)
    if out_path is not None:
        data = (key_bytes(report.labels) if out_path.suffix.lower() == ".jsonl"
                else qrels_text(report.labels).encode("utf-8"))
        write_bytes(out_path, data)
        report = report.written_to(out_path)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    for line in report_lines(report, per_pair=per_pair):
        click.echo(line)


def report_lines(result: RaterReport, *, per_pair: bool = False) -> list[str]:
    """The rater report as text lines: input, raters table, aggregation (with ``per_pair``,
    each pair's grade and its majority share or Dawid-Skene posteriors), agreement, flags."""
    from relgrade.raters.report import AGREEMENT_ROWS, METHODS

    report = result.to_dict()
    source = "" if report["grades"] is None else f"{report['grades']}: "
    lines = [f"grades: {source}{result.n_ratings} grades from "
             f"{len(report['raters'])} raters on {result.n_pairs_in} pairs"]
    if report["gold_pairs"] is None:
        lines.append("gold: none given, so no rater is removed")
    else:
        gold = "" if report["gold"] is None else f"{report['gold']}: "
        lines.append(f"gold: {gold}{report['gold_pairs']} pairs; a rater with "
                     f"at least {report['min_gold']} gold answers is removed below "
                     f"accuracy {report['threshold']:g}")
    lines.append("")
    header = ["rater", "grades", "gold", "correct", "accuracy", "within_one", "decision"]
    rows = [[r["grader"], str(r["grades"]),
             "-" if r["gold_pairs"] is None else str(r["gold_pairs"]),
             "-" if r["correct"] is None else str(r["correct"]),
             "-" if r["gold_pairs"] is None else number(r["accuracy"]),
             "-" if r["gold_pairs"] is None else number(r["within_one"]),
             r["decision"]] for r in report["raters"]]
    lines += table(header, rows, right={1, 2, 3, 4, 5})
    lines.append("")
    n_kept = len(report["kept_raters"])
    how = METHODS[report["method"]]
    if report["method"] == "majority":
        lines.append(f"aggregated {report['pairs']} pairs from {n_kept} raters by {how} "
                     f"(ties: {report['tie_rule']})")
    else:
        ds = report["dawid_skene"]
        state = (f"converged after {ds['iterations']} iterations (tol {ds['tol']:g})"
                 if ds["converged"] else
                 f"stopped at --max-iter {ds['iterations']} without converging to tol "
                 f"{ds['tol']:g}")
        priors = ", ".join(f"{g}: {p:.4f}" for g, p in ds["priors"].items())
        lines.append(f"aggregated {report['pairs']} pairs from {n_kept} raters by {how} "
                     f"({state}; class priors {priors})")
    if per_pair:
        lines += [""] + _pair_lines(report)
    if report["out"] is not None:
        lines.append(f"wrote {report['pairs']} rows to {report['out']}")
    else:
        lines.append("nothing written (pass --out FILE to write the aggregate)")
    lines.append("")
    a, k = report["agreement"]["all"], report["agreement"]["kept"]
    rows = [[name, number(a[name]), number(k[name])] for name in AGREEMENT_ROWS]
    lines += table(["agreement", "all raters", "kept raters"], rows, right={1, 2})
    for note in k["notes"]:
        lines.append(f"note (kept raters): {note}")
    for note in a["notes"]:
        if note not in k["notes"]:
            lines.append(f"note (all raters): {note}")
    lines.append("")
    flags = report["high_variance"]
    rule = f"variance >= {report['flag_variance']:g}, or grades 2 or more apart"
    if not flags:
        lines.append(f"high-variance pairs for expert adjudication: none ({rule})")
        return lines
    lines.append(f"high-variance pairs for expert adjudication: {len(flags)} ({rule})")
    header = ["query_id", "chunk_id", "grade", "grades", "variance", "reason"]
    rows = [[f["query_id"], f["chunk_id"], str(f["grade"]), f["grades"],
             number(f["variance"]), f["reason"]] for f in flags]
    lines += table(header, rows, right={2, 4})
    return lines


def _pair_lines(report: dict) -> list[str]:
    if report["method"] == "majority":
        rows = [[p["query_id"], p["chunk_id"], str(p["grade"]), str(p["votes"]),
                 number(p["share"])] for p in report["shares"]]
        return table(["query_id", "chunk_id", "grade", "votes", "share"], rows,
                     right={2, 3, 4})
    posts = report["dawid_skene"]["posteriors"]
    grades = list(posts[0]["posterior"]) if posts else []
    rows = [[p["query_id"], p["chunk_id"], str(p["grade"])]
            + [number(p["posterior"][g]) for g in grades] for p in posts]
    return table(["query_id", "chunk_id", "grade"] + [f"P({g})" for g in grades], rows,
                 right=set(range(2, 3 + len(grades))))
