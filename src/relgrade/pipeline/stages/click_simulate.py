"""Stage `simulate` (click experiments): a seeded, labelled-simulated click log with its truth.

Writes, from params ``clicks.simulate`` and ``seed``: the impression log (``clicks.log``,
Parquet), the simulated rankers" rankings plus an ``oracle`` (chunks by true relevance) as
TREC runs under ``clicks.rankings``, a key of simulated grades (``clicks.key``: key.jsonl and
record.json, the record marked ``simulated``) covering the first quarter of the queries, and
``truth.json`` beside the log: the true p(k), each ranking"s true click reward and share, and
the seed. Everything here is simulated under the position-based model; nothing is a user"s.
"""

import numpy as np
import pandas as pd

from relgrade.canonical import jsonl_bytes, sha256_bytes
from relgrade.clicks import simulate
from relgrade.io import files as io
from relgrade.rng import derive_seed

#: Grade of a simulated relevance r: floor(4 r), so 0..3 on the seed"s scale.
GRADE_STEPS = 4


def run(ex):
    c = ex.params.need("clicks")
    s = ex.params.need("clicks.simulate")
    seed = derive_seed(ex.params.need("seed"), "clicks", "simulate")
    sim = simulate.position_based_log(seed, sessions=s.sessions, queries=s.queries,
                                      positions=s.positions, rankers=s.rankers,
                                      randomized_share=s.randomized_share)
    oracle = sim.relevance.sort_values(["query_id", "relevance", "chunk_id"],
                                       ascending=[True, False, True]).copy()
    oracle["rank"] = oracle.groupby("query_id").cumcount() + 1
    oracle["ranker"] = "oracle"
    rankings = pd.concat([sim.rankings, oracle[["ranker", "query_id", "chunk_id", "rank"]]])
    truth = {}
    with io.atomic_dir(ex.file(ex.params.need("clicks.rankings"))) as folder:
        for name, g in rankings.groupby("ranker", sort=True):
            g = g.sort_values(["query_id", "rank"])
            lines = [f"{q} Q0 {d} {r} {len(g) - i} {name}"
                     for i, (q, d, r) in enumerate(zip(g["query_id"], g["chunk_id"], g["rank"]))]
            (folder / f"{name}.run").write_text("\n".join(lines) + "\n", encoding="utf-8")
            reward, share = simulate.true_click_reward(g, sim)
            truth[name] = {"ips": reward, "snips": share}
    key = sim.relevance[sim.relevance["query_id"].isin(
        sorted(sim.relevance["query_id"].unique())[: max(1, s.queries // 4)])]
    grades = np.minimum((key["relevance"].to_numpy() * GRADE_STEPS).astype(int), GRADE_STEPS - 1)
    rows = [{"query_id": q, "chunk_id": d, "grade": int(g)}
            for q, d, g in zip(key["query_id"], key["chunk_id"], grades)]
    data = jsonl_bytes(rows)
    key_dir = ex.file(ex.params.need("clicks.key"))
    io.write_bytes(key_dir / "key.jsonl", data)
    io.write_json(key_dir / "record.json", {
        "simulated": True, "key_sha256": sha256_bytes(data), "seed": seed, "grade_rule": f"min(floor({GRADE_STEPS} r), {GRADE_STEPS - 1})",
        "queries": int(key["query_id"].nunique())})
    io.write_parquet(ex.file(c.log), sim.log)
    io.write_json(ex.file(c.log).parent / "truth.json", {
        "simulated": True, "model": "position-based: P(click) = p(k) r(q, d)",
        "seed": seed, "propensity": sim.propensity.tolist(), "rankings": truth})
    print(f"simulated {len(sim.log):,} impressions in {s.sessions:,} sessions (seed {seed})")

