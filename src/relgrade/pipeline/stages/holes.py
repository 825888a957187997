"""Stage `holes`: arms that joined after the key froze → their holes graded, corrected estimates.

For each arm of params ``holes.arms`` (a run file kept out of ``arms``, so the pool, the key
and every old arm's numbers stay as they are), the holes are its pairs within the measure's
cutoff that the frozen key did not grade (:func:`relgrade.evaluation.new_arm.owed_holes`);
a seeded uniform sample of the queries with holes (``holes.human_fraction``, the draw's
stream ``holes-ARM`` of params ``seed``) is flagged for people.

The grading goes through the usual machinery: the stage writes a small experiment of its own
in ``paths.holes_work`` (its ``params.yaml``, its pool of holes, its "audit" queries, the
sampled ones, and its packets, one per query and role), where ``holes.model_grader`` has the
role grader (every hole) and ``holes.human_grader`` the role auditor (the sampled queries'
holes). ``relgrade grade run``, ``relgrade serve`` and ``relgrade grade import`` with
``--experiment`` that folder record the grades in its ``grades/`` folder; while any is owed
the stage stops with ``Pending: ...`` naming those commands. The folder is the stage's kept
output, so a grade recorded there reruns the stage at the next ``dvc repro``.

With every hole graded, each arm's record (:func:`relgrade.evaluation.new_arm.new_arm_report`:
hole rate, PPI++ estimate beside model-only and key-only, differences with every old arm on
the old arms' per-query values of the metrics stage, the transport check against the pairs of
the key that both graders graded, the level-claim verdict, and its rank-set among the old arms,
bootstrap stream ``holes-rank-sets-ARM`` of params ``seed``, ``metrics.bootstrap``
resamples) goes to ``paths.holes``; the report stage turns it into the arm's decision file
and report section.
"""

from __future__ import annotations

import pandas as pd
import yaml

from relgrade.errors import InputError
from relgrade.evaluation import new_arm
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import grade_commands
from relgrade.experiment.params import PARAMS_FILE
from relgrade.io import files as io
from relgrade.pipeline.judgments import judgments
from relgrade.pipeline.new_arms import (AUDIT, GRADES, PACKETS, POOL, SAMPLES,
                                        check_hole_samples, hole_plan, reference_side,
                                        work_params)
from relgrade.protocol import bank, packets
from relgrade.rng import stage_rng


def _write_work(ex, work, pool, audit_ids) -> Experiment:
    """The holes' experiment written whole into ``work`` (its grades folder left as it is)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / GRADES).mkdir(exist_ok=True)
    io.write_text(work / PARAMS_FILE, yaml.safe_dump(work_params(ex, work), sort_keys=False))
    io.write_parquet(work / POOL, pool.assign(inclusion_prob=1.0))
    io.write_jsonl(work / AUDIT, [{"query_id": q} for q in audit_ids])
    sub = Experiment.load(work / PARAMS_FILE)
    manifest = io.read_json(ex.path("intents_manifest"))
    frozen = io.read_table(ex.path("intents"))
    grading = sub.params.grading
    orders = packets.build_orders(pool, seed=sub.params.need("seed"), round=grading.round,
                                  batch_size=grading.batch_size, audit_ids=audit_ids)
    make = dict(chunks=io.read_table(ex.path("chunks")), intents=frozen,
                intents_sha256=manifest.get("sha256"),
                rubric_version=grading.rubric_version)
    with io.atomic_dir(work / PACKETS) as tmp:
        io.write_json(tmp / packets.PACKETS_MANIFEST, sub.packets_current())
        for role in ("grader", "auditor"):
            (tmp / role).mkdir()
        for role, packet in packets.iter_packets(orders, **make):
            io.write_text_into(tmp / role, packets.packet_filename(packet["query_id"]),
                               packets.packet_json(packet))
    return sub


def _old_values(ex, measure) -> dict:
    out = {}
    for arm in sorted(map(str, ex.params.need("arms"))):
        path = ex.path("per_query") / f"{arm}.parquet"
        if not path.exists():
            raise InputError("per-query values missing", path=path, item=f"arm {arm}",
                             fix="Run the metrics stage first (dvc repro)")
        t = io.read_table(path, columns=["query_id", "measure", "value"])
        t = t[t["measure"] == measure]
        out[arm] = pd.Series(t["value"].to_numpy(dtype=float),
                             index=t["query_id"].astype(str))
    return out


def run(ex):
    p = ex.params
    h, seed = p.need("holes"), p.need("seed")
    relevant_min, ties = p.need("scale").relevant_min, p.runs.ties
    plan = hole_plan(ex)
    measure, key, record, queries = plan.measure, plan.key, plan.record, plan.queries
    runs, owed, pool, audit_ids = plan.runs, plan.owed, plan.pool, plan.audit_ids
    # before anyone grades a hole: the transport check needs old pairs both graders graded
    reference = reference_side(ex, key, model_grader=h.model_grader,
                               human_grader=h.human_grader)
    work = ex.path("holes_work")
    samples = check_hole_samples(work, plan, human_grader=h.human_grader,
                                 key_sha256=record["key_sha256"])
    sub = _write_work(ex, work, pool, audit_ids)
    io.write_json(work / SAMPLES, samples)
    held = judgments(sub, pool, audit_ids)
    bank.require_no_pending(held.pending, how=grade_commands(sub), sample="sampled")
    current = bank.current_grades(held.bank, **held.now)
    current = current.astype({"query_id": str, "chunk_id": str, "grader": str})
    graded = {name: current.loc[current["grader"] == name, ["query_id", "chunk_id", "grade"]]
              for name in (h.model_grader, h.human_grader)}
    old = _old_values(ex, measure)
    records = {}
    for arm, r in runs.items():
        mine = owed[arm]
        records[arm] = new_arm.new_arm_report(
            arm=arm, run=r, key=key, queries=queries, model_grades=graded[h.model_grader],
            human_grades=graded[h.human_grader],
            sample=sorted(set(mine.loc[mine["sampled"], "query_id"])), old=old,
            old_pairs=reference, measure=measure, relevant_min=relevant_min, ties=ties,
            level=h.level, alpha=h.transport_alpha, tolerance=h.transport_tolerance,
            rng=stage_rng(seed, f"holes-rank-sets-{arm}"), n_resamples=p.metrics.bootstrap)
    out = {"key_sha256": record["key_sha256"], "pool_version": record.get("pool_version"),
           "design": {"model_grader": h.model_grader, "human_grader": h.human_grader,
                      "human_fraction": h.human_fraction, "seed": seed,
                      "sample_streams": {arm: f"holes-{arm}" for arm in runs},
                      "rank_set_streams": {arm: f"holes-rank-sets-{arm}" for arm in runs},
                      "rank_set_resamples": p.metrics.bootstrap,
                      "measure": measure, "level": h.level,
                      "transport_alpha": h.transport_alpha,
                      "transport_tolerance": h.transport_tolerance,
                      "zero_for_no_relevant": "a query with no relevant chunk under a key, "
                                              "or not answered, counts 0"},
           "arms": records}
    io.write_json(ex.path("holes"), out)
    for arm, rec in records.items():
        e = rec["estimates"]["ppi++"]
        print(f"holes {measure} {arm}: PPI++ {e['estimate']:.4f} [{e['low']:.4f}, "
              f"{e['high']:.4f}]; hole rate {rec['hole_rate']:.3f}; {rec['level_claim']}")
