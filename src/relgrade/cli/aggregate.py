"""``relgrade aggregate``: several raters per pair → one grade per pair.

Reads the long grades table, removes raters who failed their gold questions, aggregates by
majority vote or Dawid-Skene, writes one row per pair in the key's canonical form, and
reports the raters, their agreement and the pairs an expert should adjudicate.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import click
import pandas as pd

from relgrade.cli import handle_errors
from relgrade.errors import InputError
from relgrade.io.files import iter_jsonl, read_parquet, write_bytes
from relgrade.protocol.agreement import KRIPPENDORFF_LEVELS, multi_rater_agreement
from relgrade.protocol.key import key_bytes, qrels_text
from relgrade.raters import aggregate as agg
from relgrade.raters import gold as gd
from relgrade.schema import check_scale

AGREEMENT_ROWS = ("fleiss_kappa",) + tuple(f"krippendorff_alpha_{lv}" for lv in
                                           KRIPPENDORFF_LEVELS)
METHODS = {"majority": "majority vote", "dawid-skene": "Dawid-Skene"}


@contextlib.contextmanager
def _about(path):
    """Name ``path`` in a library error that names no file."""
    try:
        yield
    except InputError as e:
        if e.path is not None:
            raise
        raise InputError(e.rule, path=path, line=e.line, item=e.item, found=e.found,
                         fix=e.fix) from None


def _jsonl_grades(path: Path) -> pd.DataFrame:
    rows, seen = [], {}
    for line, obj in iter_jsonl(path):
        missing = [k for k in ("query_id", "chunk_id", "grader", "grade") if k not in obj]
        if missing:
            raise InputError("a row of the grades table needs query_id, chunk_id, grader and "
                             "grade", path=path, line=line, found="no " + ", ".join(missing))
        values = []
        for name in ("query_id", "chunk_id", "grader"):
            v = obj[name]
            if isinstance(v, bool) or not isinstance(v, (str, int)) or not str(v).strip():
                raise InputError(f"{name} must be a non-empty string or integer", path=path,
                                 line=line, found=json.dumps(v))
            values.append(str(v))
        q, c, who = values
        g = obj["grade"]
        if isinstance(g, bool) or not isinstance(g, int):
            raise InputError("grade must be an integer", path=path, line=line,
                             item=f"{who}: pair ({q}, {c})", found=json.dumps(g))
        rnd = obj.get("round")
        if rnd is not None and (isinstance(rnd, bool) or not isinstance(rnd, int)):
            raise InputError("round must be an integer", path=path, line=line,
                             item=f"{who}: pair ({q}, {c})", found=json.dumps(rnd))
        key = (who, q, c, rnd)
        if key in seen:
            raise InputError(f"a grader has two grades for one pair (first on line "
                             f"{seen[key]})", path=path, line=line,
                             item=f"{who}: pair ({q}, {c})", fix="Keep one grade per pair")
        seen[key] = line
        rows.append((q, c, who, g, rnd))
    df = pd.DataFrame(rows, columns=["query_id", "chunk_id", "grader", "grade", "round"])
    if df["round"].isna().all():
        df = df.drop(columns="round")
    return df


def read_grades(path) -> pd.DataFrame:
    """The long grades table from Parquet (the grades stage's output) or JSON Lines rows."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return read_parquet(path)
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl_grades(path)
    raise InputError("unknown grades format (use .parquet or .jsonl)", path=path,
                     found=suffix or "no extension")


def _select(grades: pd.DataFrame, path: Path, round_: int | None,
            exclude: tuple[str, ...]) -> pd.DataFrame:
    if round_ is not None:
        if "round" not in grades.columns:
            raise InputError("--round given but the grades have no round column", path=path)
        grades = grades[pd.to_numeric(grades["round"], errors="coerce") == round_]
    elif "round" in grades.columns:
        rounds = sorted({int(r) for r in grades["round"].dropna()})
        if len(rounds) > 1:
            raise InputError("the grades hold several rounds", path=path,
                             found="rounds " + ", ".join(map(str, rounds)),
                             fix="Pass --round N to aggregate one round")
    if exclude:
        names = set(grades["grader"].astype(str)) if "grader" in grades.columns else set()
        unknown = [n for n in exclude if n not in names]
        if unknown:
            raise InputError("--exclude names a grader the grades do not have", path=path,
                             item=unknown[0])
        grades = grades[~grades["grader"].astype(str).isin(exclude)]
    return grades


def _num(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undefined"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _plain(value):
    """JSON-ready value: NaN becomes null, numpy scalars become Python ones."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(t) for t in col) for col in zip(header, *rows)]
    out = []
    for r in [header, *rows]:
        cells = [t.rjust(w) if i in right else t.ljust(w)
                 for i, (t, w) in enumerate(zip(r, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def _rater_rows(ratings, accuracy, decisions) -> list[dict]:
    counts = ratings.groupby("grader")["grade"].size()
    acc = {} if accuracy is None else accuracy.set_index("grader").to_dict("index")
    dec = decisions.set_index("grader").to_dict("index")
    rows = []
    for name in sorted(counts.index):
        a = acc.get(name, {})
        d = dec.get(name)
        rows.append({
            "grader": name,
            "grades": int(counts[name]),
            "gold_pairs": _plain(a["gold_pairs"]) if a else None,
            "correct": _plain(a["correct"]) if a else None,
            "accuracy": _plain(a["accuracy"]) if a else None,
            "within_one": _plain(a["within_one"]) if a else None,
            "removed": bool(d["removed"]) if d else False,
            "flagged": bool(d is not None and not d["removed"]),
            "decision": d["reason"] if d else ("kept" if accuracy is not None
                                               else "kept (no gold table)"),
        })
    return rows


@click.command("aggregate")
@click.option("--grades", "grades_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The long grades table: .parquet (the grades stage's output) or .jsonl "
                   "rows with query_id, chunk_id, grader, grade.")
@click.option("--gold", "gold_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Gold pairs with their known grade: JSONL (query_id, chunk_id, grade), "
                   "TREC qrels or Parquet.")
@click.option("--method", type=click.Choice(list(METHODS)), default="majority",
              show_default=True, help="How the kept raters' grades become one grade.")
@click.option("--threshold", type=float, default=0.7, show_default=True,
              help="Lowest gold accuracy a rater may have and stay.")
@click.option("--min-gold", type=click.IntRange(min=0), default=5, show_default=True,
              help="Fewest gold answers on which a rater can be removed; a rater with fewer "
                   "is kept and flagged.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Write one row per pair: .jsonl in the key's canonical form, or .qrels.")
@click.option("--scale", "scale_text", default="0,1,2", show_default=True,
              help="The grade scale, comma-separated.")
@click.option("--flag-variance", type=float, default=0.5, show_default=True,
              help="Flag a pair for adjudication when its grades' variance is at least this "
                   "(pairs with grades two or more apart are always flagged).")
@click.option("--round", "round_", type=int, default=None,
              help="Aggregate this grading round only (needed when the grades hold several).")
@click.option("--exclude", multiple=True,
              help="Leave this grader out (e.g. an earlier aggregate imported as a grader); "
                   "repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@handle_errors
def aggregate_cmd(grades_path, gold_path, method, threshold, min_gold, out_path, scale_text,
                  flag_variance, round_, exclude, as_json):
    """Aggregate several raters' grades into one grade per pair.

    Raters whose accuracy on the gold pairs (--gold) is below --threshold, measured on at
    least --min-gold gold answers, are removed and all their grades discarded; the rest are
    aggregated by majority vote (ties: the median of the tied grades, rounded down) or by
    Dawid-Skene. Prints each rater's gold accuracy and what happened to them, Fleiss' kappa
    and Krippendorff's alpha before and after removal, and the high-variance pairs an expert
    should adjudicate. With --out, writes the aggregate sorted by (query_id, chunk_id).
    """
    try:
        scale = check_scale(int(v) for v in scale_text.split(",") if v.strip())
    except ValueError:
        raise InputError("--scale lists integer grades separated by commas",
                         found=repr(scale_text), fix="For example --scale 0,1,2") from None
    if not (0.0 <= threshold <= 1.0):
        raise InputError("--threshold is a gold accuracy between 0 and 1",
                         found=repr(threshold))
    if out_path is not None and out_path.suffix.lower() not in (".jsonl", ".qrels"):
        raise InputError("unknown output format (use .jsonl or .qrels)", path=out_path,
                         found=out_path.suffix or "no extension")

    grades = _select(read_grades(grades_path), grades_path, round_, tuple(exclude))
    with _about(grades_path):
        ratings = agg.check_ratings(grades, scale=scale)
    if ratings.empty:
        raise InputError("no grades to aggregate", path=grades_path)

    accuracy, known, kept = None, None, ratings
    decisions = pd.DataFrame({c: pd.Series(dtype=object) for c in gd.DECISION_COLUMNS})
    if gold_path is not None:
        from relgrade.cli.evaluate import read_qrels

        with _about(gold_path):
            known = gd.check_gold(read_qrels(gold_path))
        off = known[~known["grade"].isin(scale)]
        if len(off):
            raise InputError(f"gold grade outside the scale {','.join(map(str, scale))}",
                             path=gold_path,
                             item=f"pair ({off.iloc[0]['query_id']}, {off.iloc[0]['chunk_id']})",
                             found=int(off.iloc[0]["grade"]))
        accuracy = gd.gold_accuracy(ratings, known)
        kept, decisions = gd.remove_raters(ratings, accuracy, threshold=threshold,
                                           min_gold=min_gold)
        if kept.empty:
            raise InputError("every rater fell below the gold threshold: nothing is left to "
                             "aggregate", path=grades_path,
                             fix="Check the gold table's grades, or lower --threshold")

    ds = None
    if method == "majority":
        labels = agg.majority(kept, scale=scale)
    else:
        ds = agg.dawid_skene(kept, scale=scale)
        labels = ds.labels
    flags = agg.flag_high_variance(kept, threshold=flag_variance)
    flags = flags.merge(labels[["query_id", "chunk_id", "grade"]], on=["query_id", "chunk_id"],
                        how="left")
    both = {"all": multi_rater_agreement(ratings, scale=scale),
            "kept": multi_rater_agreement(kept, scale=scale)}

    if out_path is not None:
        key = labels[["query_id", "chunk_id", "grade"]]
        data = key_bytes(key) if out_path.suffix.lower() == ".jsonl" \
            else qrels_text(key).encode("utf-8")
        write_bytes(out_path, data)

    raters = _rater_rows(ratings, accuracy, decisions)
    kept_raters = sorted(kept["grader"].unique())
    report = {
        "grades": str(grades_path),
        "gold": None if gold_path is None else str(gold_path),
        "gold_pairs": None if known is None else int(len(known)),
        "method": method,
        "scale": scale,
        "threshold": threshold,
        "min_gold": min_gold,
        "round": round_,
        "pairs": int(len(labels)),
        "raters": raters,
        "removed": [r["grader"] for r in raters if r["removed"]],
        "flagged_raters": [r["grader"] for r in raters if r["flagged"]],
        "kept_raters": kept_raters,
        "agreement": both,
        "flag_variance": flag_variance,
        "high_variance": [{k: _plain(v) for k, v in row.items()}
                          for row in flags.to_dict("records")],
        "out": None if out_path is None else str(out_path),
    }
    if method == "majority":
        report["tie_rule"] = agg.TIES["median-low"]
    else:
        report["dawid_skene"] = {
            "iterations": ds.iterations, "converged": ds.converged,
            "log_likelihood": ds.log_likelihood,
            "priors": {str(g): float(p) for g, p in ds.priors.items()},
            "confusion": {name: ds.confusion.loc[name].to_numpy().tolist()
                          for name in kept_raters},
        }
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    for line in _render(report, n_ratings=len(ratings), n_pairs_in=ratings[["query_id",
                        "chunk_id"]].drop_duplicates().shape[0]):
        click.echo(line)


def _render(report: dict, *, n_ratings: int, n_pairs_in: int) -> list[str]:
    lines = [f"grades: {report['grades']}: {n_ratings} grades from "
             f"{len(report['raters'])} raters on {n_pairs_in} pairs"]
    if report["gold"] is None:
        lines.append("gold: none given, so no rater is removed")
    else:
        lines.append(f"gold: {report['gold']}: {report['gold_pairs']} pairs; a rater with at "
                     f"least {report['min_gold']} gold answers is removed below accuracy "
                     f"{report['threshold']:g}")
    lines.append("")
    header = ["rater", "grades", "gold", "correct", "accuracy", "within_one", "decision"]
    rows = [[r["grader"], str(r["grades"]),
             "-" if r["gold_pairs"] is None else str(r["gold_pairs"]),
             "-" if r["correct"] is None else str(r["correct"]),
             "-" if r["gold_pairs"] is None else _num(r["accuracy"]),
             "-" if r["gold_pairs"] is None else _num(r["within_one"]),
             r["decision"]] for r in report["raters"]]
    lines += _table(header, rows, right={1, 2, 3, 4, 5})
    lines.append("")
    n_kept = len(report["kept_raters"])
    how = METHODS[report["method"]]
    if report["method"] == "majority":
        lines.append(f"aggregated {report['pairs']} pairs from {n_kept} raters by {how} "
                     f"(ties: {report['tie_rule']})")
    else:
        ds = report["dawid_skene"]
        state = (f"converged after {ds['iterations']} iterations" if ds["converged"]
                 else f"stopped at {ds['iterations']} iterations without converging")
        priors = ", ".join(f"{g}: {p:.4f}" for g, p in ds["priors"].items())
        lines.append(f"aggregated {report['pairs']} pairs from {n_kept} raters by {how} "
                     f"({state}; class priors {priors})")
    if report["out"] is not None:
        lines.append(f"wrote {report['pairs']} rows to {report['out']}")
    else:
        lines.append("nothing written (pass --out FILE to write the aggregate)")
    lines.append("")
    a, k = report["agreement"]["all"], report["agreement"]["kept"]
    rows = [[name, _num(a[name]), _num(k[name])] for name in AGREEMENT_ROWS]
    lines += _table(["agreement", "all raters", "kept raters"], rows, right={1, 2})
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
             _num(f["variance"]), f["reason"]] for f in flags]
    lines += _table(header, rows, right={2, 4})
    return lines
