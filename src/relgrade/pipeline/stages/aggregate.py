"""Stage `aggregate`: a rater panel's grades → gold accuracy, removed raters, one grade per
pair, and the adjudication queue with the expert's packets (``grading.mode: raters``).

Reads the raters' current grades (``paths.rater_grades``), their private queues
(``paths.assignment``) and the gold file (params ``gold.input``); raters are scored on the
pairs their queues flag as gold questions. A rater's grade of a pair no longer in their
queue (recorded under an earlier assignment) is set aside, with a note, never refused. Writes the report
(``paths.aggregate``: per-rater gold accuracy exact and within one, removed raters with the
reason, per-rater confusion matrices, the queue's size), the per-pair aggregate
(``paths.aggregated``), the queue (``paths.adjudication_queue``) and the expert's packets
(``paths.adjudication_packets``). A queue with no expert declared is refused, naming the
pairs; nothing is written.
"""

import math

from relgrade.pipeline.panel import (
    gold_questions,
    queued_grades,
    raters_of,
    read_assignment,
    read_gold,
)
from relgrade.io import files as io
from relgrade.protocol import packets
from relgrade.raters.assign import queue_orders
from relgrade.raters.panel import aggregate_panel, require_expert


def _number(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def report(ex, result, gold) -> dict:
    """The aggregation report as JSON-ready values."""
    p = ex.params
    within = p.gold is None or p.gold.within_one
    accuracy = {}
    for row in result.accuracy.to_dict("records"):
        entry = {"gold_answers": int(row["gold_pairs"]), "correct": int(row["correct"]),
                 "accuracy": _number(float(row["accuracy"]))}
        if within:
            entry["within_one"] = _number(float(row["within_one"]))
        accuracy[row["grader"]] = entry
    decisions = result.decisions
    removed = {r["grader"]: r["reason"] for r in decisions.to_dict("records") if r["removed"]}
    unjudged = {r["grader"]: r["reason"] for r in decisions.to_dict("records")
                if not r["removed"]}
    agg = result.aggregated
    return {
        "method": p.aggregation.method,
        "raters": raters_of(ex),
        "per_pair": p.need("raters").per_pair,
        "gold": None if p.gold is None else {
            "input": p.gold.input, "pairs": 0 if gold is None else len(gold),
            "fraction": p.gold.fraction, "min_accuracy": p.gold.min_accuracy,
            "min_gold": p.gold.min_gold},
        "accuracy": accuracy,
        "removed": removed,
        "kept_unjudged": unjudged,
        "pairs": int(len(agg)),
        "ties": int(agg["tie"].sum()),
        "queued": int(len(result.queue)),
        "max_spread": p.adjudication.max_spread,
        "expert": p.adjudication.expert,
        "grades": {str(g): int((agg["grade"] == g).sum())
                   for g in p.need("scale").grades},
        "confusion": result.confusion,
        "dawid_skene": result.dawid_skene,
    }


def run(ex):
    p, grading = ex.params, ex.params.grading
    pool = io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    table = io.read_table(ex.path("rater_grades"))
    raters = raters_of(ex)
    mine = table[table["grader"].isin(raters) & (table["round"] == grading.round)]
    queues = read_assignment(ex)
    # grades made under an earlier assignment stay in the bank but do not count
    mine, aside = queued_grades(mine, queues)
    if aside:
        print(f"note: {aside} rater grades of pairs no longer in their rater's queue set "
              "aside (kept in the judgment bank)")
    # raters are scored on the gold questions of their queues, not on every known pair
    gold = gold_questions(read_gold(ex, pool), queues)
    result = aggregate_panel(
        mine, queues=queues, pool=pool, gold=gold,
        scale=p.need("scale").grades, method=p.aggregation.method,
        min_accuracy=p.gold.min_accuracy if p.gold else 0.0,
        min_gold=p.gold.min_gold if p.gold else 0, max_spread=p.adjudication.max_spread,
        tol=p.aggregation.tol, max_iter=p.aggregation.max_iter)
    require_expert(result.queue, p.adjudication.expert)
    orders = queue_orders(result.queue, role="expert", seed=p.need("seed"),
                          round=grading.round, batch_size=grading.batch_size)
    built = packets.build_packets(
        orders, chunks=io.read_table(ex.path("chunks")), intents=io.read_table(ex.path("intents")),
        rubric_version=p.need("grading.rubric_version"),
        intents_sha256=io.read_json(ex.path("intents_manifest"))["sha256"]) if len(orders) else {}
    with io.atomic_dir(ex.path("adjudication_packets")) as tmp:
        for packet in built.get("expert", []):
            io.write_json(tmp / packets.packet_filename(packet["query_id"]), packet)
    io.write_parquet(ex.path("aggregated"), result.aggregated)
    io.write_jsonl(ex.path("adjudication_queue"),
                   [{k: (int(v) if k == "spread" else v) for k, v in r.items()}
                    for r in result.queue.to_dict("records")])
    out = report(ex, result, gold)
    io.write_json(ex.path("aggregate"), out)
    removed = ", ".join(out["removed"]) or "none"
    print(f"aggregate ({out['method']}): {out['pairs']} pairs, raters removed: {removed}; "
          f"{out['queued']} pairs queued for adjudication ({out['ties']} ties)")
    for name, why in {**out["removed"], **out["kept_unjudged"]}.items():
        print(f"{name}: {why}")

