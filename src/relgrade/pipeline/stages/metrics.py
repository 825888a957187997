"""Stage `metrics ARM`: one arm's measures on the frozen key, and the key's use in the ledger.

Refuses when the key, its qrels and its record were not written together (a hash differs);
when the ledger lacks a use of a key that metrics files witness (deleted, truncated or
edited); and when the void rule forbids the record's key (a different key was already used
for metrics on the same pool, rubric and round, and the record is not post-hoc), so a key and
record swapped by hand never give metrics that are not labelled post-hoc.

Writes `paths.metrics/ARM.json` (means, key hash, pool version, post-hoc flag) and
`paths.per_query/ARM.parquet` (query_id, group, measure, value) from the frozen key. With a
sampled tail (`pool.tail_sample` > 0) the inferred measures infNDCG@k and xinfAP@k, from the
pool table's inclusion probabilities, follow the others. When a
post-hoc key of the same pool, rubric and round stands beside it (`paths.key_post_hoc`), the
arm's post-hoc numbers go to `paths.metrics_post_hoc/ARM/` (`metrics.json`, labelled
post-hoc, and `per_query.parquet`); otherwise that folder holds a note saying there is none.
The ledger entries are written first, so no metric exists without the key's use recorded.
"""

from datetime import datetime, timezone

from relgrade.errors import InputError
from relgrade.evaluation import metrics, weighting
from relgrade.experiment.progress import QUIET_SECONDS, step_printer
from relgrade.io import files as io
from relgrade.io.runs import read_run, run_lines
from relgrade.protocol import ledger
from relgrade.ranking import validate_run

NO_POST_HOC = "No post-hoc key beside the frozen key {key}: {arm}'s only metrics are {path}.\n"
POST_HOC = ("{arm}'s metrics under the post-hoc key {key} (labelled post-hoc) beside its "
            "frozen-key metrics in {path}.\n")

TRIPLE = ("pool_version", "rubric_version", "round")


def post_hoc_key(ex, record):
    """The post-hoc key and record standing beside the frozen ``record``, or None: one whose
    record says ``post_hoc: true`` and whose pool version, rubric version and round are the
    frozen key's."""
    if not getattr(ex.params.paths, "key_post_hoc", None):
        return None
    if not ex.key_files(post_hoc=True).record.exists():
        return None
    key, ph = ex.read_key(post_hoc=True)
    if ph.get("post_hoc") is not True or any(str(ph.get(k)) != str(record.get(k)) for k in TRIPLE):
        return None
    return key, ph


def _use(entries, record, *, post_hoc):
    """Check the void rule for ``record``'s key; the ledger with its use added."""
    at = {k: record[k] for k in TRIPLE}
    # A key that revises the decision key (pairs regraded because their chunk, intent or
    # rubric changed) says so in its record; the key stage checked it pair by pair.
    revises = None if post_hoc else record.get("revises")
    status = ledger.check_void(entries, key_sha256=record["key_sha256"], post_hoc=post_hoc,
                               revises=revises, **at)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return status, ledger.add_use(entries, key_sha256=record["key_sha256"], used_at=now,
                                  revises=revises if status == ledger.REVISED else None, **at)


def run(ex, arm):
    if arm not in ex.params.need("arms"):
        raise InputError("unknown arm", item=str(arm), fix="Name an arm of params `arms`")
    step = step_printer(f"metrics@{arm}", 2, quiet=QUIET_SECONDS)
    step("reading and checking the run")
    entries = ex.ledger()
    key, record = ex.read_key()
    status, entries = _use(entries, record, post_hoc=bool(record.get("post_hoc", False)))
    beside = post_hoc_key(ex, record)
    if beside is not None:
        _, entries = _use(entries, beside[1], post_hoc=True)
    queries = io.read_table(ex.path("queries"), columns=["query_id", "group"])
    run_path = ex.path("runs") / f"{arm}.trec"
    run = read_run(run_path)
    validate_run(run, path=run_path, queries=queries["query_id"], lines=run_lines(run_path))

    inclusion = None
    if ex.params.pool is not None and ex.params.pool.tail_sample:
        # a sampled tail: the inferred measures weigh each judged pair by 1 / its inclusion
        # probability, which the pool table records
        inclusion = io.read_table(ex.path("pool"),
                                  columns=["query_id", "chunk_id", "inclusion_prob"])

    def score(k):
        return metrics.evaluate_arm(
            key=k, run=run, cutoffs=ex.params.need("metrics").cutoffs,
            relevant_min=ex.params.need("scale").relevant_min, ties=ex.params.runs.ties,
            groups=queries, inclusion=inclusion)

    def labelled(rec, summary, post_hoc):
        # the rubric version and round say which ledger entry witnesses this use, even after
        # the same key is frozen again in a later round
        return {"arm": arm, "key_sha256": rec["key_sha256"], "pool_version": rec["pool_version"],
                "rubric_version": rec.get("rubric_version"), "round": rec.get("round"),
                "post_hoc": post_hoc, **summary}

    step("scoring every query on the key, then the means and their intervals")
    summary, table = score(key)
    io.write_jsonl(ex.path("ledger"), entries)
    frozen_json = ex.path("metrics") / f"{arm}.json"
    out = labelled(record, summary, bool(record.get("post_hoc", False))
                   or status == ledger.POST_HOC)
    if ex.params.need("metrics").weighted:
        # traffic-weighted means beside the unweighted ones (metrics.weighted)
        q = io.read_table(ex.path("queries"), columns=["query_id", "weight"])
        out["traffic_weighted"] = weighting.weighted_means(
            table, dict(zip(q["query_id"].astype(str), q["weight"].astype(float))))
    io.write_json(frozen_json, out)
    io.write_parquet(ex.path("per_query") / f"{arm}.parquet", table)
    if not getattr(ex.params.paths, "metrics_post_hoc", None):
        return
    with io.atomic_dir(ex.post_hoc_metrics_folder(arm)) as tmp:  # one swap: both files or none
        if beside is None:
            io.write_text(tmp / "README.md", NO_POST_HOC.format(
                key=record["key_sha256"], arm=arm, path=frozen_json.as_posix()))
        else:
            ph_summary, ph_table = score(beside[0])
            io.write_json(tmp / "metrics.json", labelled(beside[1], ph_summary, True))
            io.write_parquet(tmp / "per_query.parquet", ph_table)
            io.write_text(tmp / "README.md", POST_HOC.format(
                key=beside[1]["key_sha256"], arm=arm, path=frozen_json.as_posix()))

