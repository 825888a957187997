"""``relgrade agreement A B``: agreement between two grade files, outside the pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import click

from relgrade.cli.options import (
    format_option,
    labels_option,
    params_option,
    parse_labels,
    parse_scale,
    scale_option,
)
from relgrade.cli.render import handle_errors, number


@click.command("agreement")
@click.argument("a", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(dir_okay=False, path_type=Path))
@scale_option(default=None,
              help="The grade scale, comma-separated. Default: params scale.grades of the "
                   "experiment (--experiment, --params, or params.yaml here), else 0,1,2.")
@labels_option()
@click.option("--relevant-min", default=None, type=int,
              help="The lowest grade that counts as relevant (for binary kappa). Default: "
                   "params scale.relevant_min of the experiment, else 1.")
@params_option
@format_option(json_help="Print the measures as JSON.")
@handle_errors
def agreement_cmd(a, b, scale, labels, relevant_min, params_path, as_json):
    """Agreement between two grade files A and B over the pairs both graded.

    Each file holds JSON Lines grade rows (query_id, chunk_id, reason, grade), TREC qrels
    (qid 0 docid grade) or Parquet, read by the rules of every judgment file
    (docs/formats.md). Prints quadratic and linear weighted kappa over the full scale,
    binary kappa (0 against >= --relevant-min), unweighted kappa, raw agreement,
    disagreement, two-step disagreement, the confusion matrix (rows A, columns B), the pairs compared and the pairs
    graded in only one file (missing, dropped pairwise). --json also holds Fleiss' kappa with
    its P̄ and P_e and Krippendorff's alpha at the nominal, ordinal, interval and ratio levels
    (ratio not with --labels), over the same pairs. Run inside an experiment (or given
    --experiment or --params), the scale and the relevant grade default to its params
    (scale.grades, scale.relevant_min). A grader's round file with its bank sidecar
    (round-N.bank.jsonl) is read as the pipeline reads it: where a pair was regraded after
    its chunk, intent or rubric changed, its latest grade counts and the superseded one is
    skipped (a note says how many); two grades of a pair made on the same content are
    refused.
    """
    import pandas as pd

    from relgrade.protocol import agreement as ag
    from relgrade.schema import check_scale

    labels = parse_labels(labels)
    scale = list(range(len(labels))) if labels else parse_scale(scale)
    if scale is None or relevant_min is None:
        p_scale, p_min = _params_scale(params_path)
        scale = p_scale if scale is None else scale
        relevant_min = p_min if relevant_min is None else relevant_min
    check_scale(scale, relevant_min)
    (ga, skipped_a), (gb, skipped_b) = (_read(f, scale=scale, labels=labels) for f in (a, b))
    ga["grader"], gb["grader"] = "A", "B"
    paired, missing = ag.pair_grades(pd.concat([ga, gb], ignore_index=True),
                                     rater_a="A", rater_b="B")
    res = ag.agreement(paired["grade_a"].to_numpy(), paired["grade_b"].to_numpy(),
                       scale=scale, relevant_min=relevant_min, raters=(str(a), str(b)))
    out = {"a": str(a), "b": str(b), "pairs": res["pairs"], "missing": missing}
    for name in ag.MEASURES:
        out[name] = res[name]
        if name == "weighted_kappa":
            out["linear_weighted_kappa"] = ag.linear_weighted_kappa(
                paired["grade_a"].to_numpy(), paired["grade_b"].to_numpy(), scale=scale)
    # the multi-rater statistics on the same pairs, as reference tables print them
    both = pd.concat([paired[["query_id", "chunk_id"]].assign(grader="A", grade=paired["grade_a"]),
                      paired[["query_id", "chunk_id"]].assign(grader="B", grade=paired["grade_b"])],
                     ignore_index=True)
    multi = ag.multi_rater_agreement(both, scale=scale) if len(paired) else None
    notes = list(res["notes"])
    for name, f, n in (("A", a, skipped_a), ("B", b, skipped_b)):
        if n:
            notes.append(f"{name} ({f}): {n} superseded grade{'s' if n != 1 else ''} "
                         "skipped: a later grade of the same pair, recorded after its chunk, "
                         "intent or rubric changed, counts")
    for name in ag.MULTI_MEASURES:
        out[name] = None if multi is None else multi[name]
    if multi is not None:
        notes += multi["notes"]
    if labels and out["krippendorff_alpha_ratio"] is not None:
        # text labels are ranks 0..n-1: their differences and ratios are not quantities
        out["krippendorff_alpha_ratio"] = None
        notes.append("krippendorff_alpha_ratio is not applicable: --labels grades are ranks "
                     "without a true zero")
    if labels:
        out["labels"] = labels
    out.update({"scale": scale, "relevant_min": relevant_min, "confusion": res["confusion"],
                "notes": notes})
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    rows = [("pairs", out["pairs"]), ("missing", out["missing"])]
    rows += [(name, out[name]) for name in ag.MEASURES[:1] + ("linear_weighted_kappa",)
             + ag.MEASURES[1:]]
    width = max(len(name) for name, _ in rows)
    click.echo(f"A = {a}")
    click.echo(f"B = {b}")
    for name, value in rows:
        click.echo(f"{name:<{width}}  {number(value)}")
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


def _read(path: Path, *, scale, labels):
    """One grade file's judgments and how many superseded grades were skipped.

    A JSON Lines file with a bank sidecar is read through the bank
    (:func:`relgrade.graders.recorded.read_recorded`: each pair's latest recorded grade);
    any other file by the rules of every judgment file
    (:func:`relgrade.io.judgments.read_judgments`, one grade per pair).

    Returns
    -------
    (pandas.DataFrame, int)
        ``query_id``, ``chunk_id``, ``grade``, ``reason``; the superseded rows left out.

    Raises
    ------
    InputError
        As the reader used.
    """
    from relgrade.graders.recorded import has_bank, read_recorded
    from relgrade.io.judgments import read_judgments

    if labels is None and has_bank(path):
        got = read_recorded(path, scale=scale)
        return got.table, got.superseded
    return read_judgments(path, scale=scale, labels=labels), 0


def _params_scale(params_path: Path) -> tuple[list[int], int]:
    """``scale.grades`` and ``scale.relevant_min`` of the experiment's params.

    Parameters
    ----------
    params_path : pathlib.Path
        From ``--experiment`` / ``--params``, else ``params.yaml`` here.

    Returns
    -------
    (list of int, int)
        The params' scale and relevant grade; ``[0, 1, 2]`` and 1 when no params file is
        here (outside an experiment) or it has no ``scale`` section.

    Raises
    ------
    InputError
        A params file named with ``--experiment`` or ``--params`` is missing; a params file
        is not valid params (:func:`relgrade.experiment.params.load_params`).
    """
    from relgrade.experiment.params import PARAMS_FILE, load_params

    if not params_path.is_file() and Path(params_path) == Path(PARAMS_FILE):
        return [0, 1, 2], 1  # outside an experiment
    p = load_params(params_path)
    if p.scale is None:
        return [0, 1, 2], 1
    return sorted(int(g) for g in p.scale.grades), int(p.scale.relevant_min)
