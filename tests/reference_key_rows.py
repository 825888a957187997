"""The key's functions as they were before they ran on columns: the reference the column
forms in :mod:`relgrade.protocol.key` are tested against (random keys, non-ASCII and escaped
ids, repeated and missing pairs). Kept as they were, docstrings aside; not used by relgrade.
"""
from __future__ import annotations

import pandas as pd

from relgrade.canonical import canonical_json
from relgrade.errors import InputError


def _sorted_rows(key: pd.DataFrame) -> list[tuple[str, str, int]]:
    # plain lists first: iterating an Arrow-backed column element by element is slow
    rows = sorted(zip(key["query_id"].astype(str).tolist(),
                      key["chunk_id"].astype(str).tolist(),
                      (int(g) for g in key["grade"].tolist())))
    for a, b in zip(rows, rows[1:]):
        if a[:2] == b[:2]:
            raise InputError("a key holds one grade per pair",
                             item=f"pair ({a[0]}, {a[1]})", found="two rows")
    return rows


def build_key(
    grades: pd.DataFrame,
    *,
    key_grader: str,
    round: int,
    pool: pd.DataFrame,
    relevant_min: int,
) -> tuple[pd.DataFrame, list[str]]:
    mine = grades[(grades["grader"].astype(str) == key_grader)
                  & (grades["round"].astype("int64") == int(round))]
    rows = _sorted_rows(mine)
    have = {(q, c): g for q, c, g in rows}
    pool_pairs = sorted(zip(pool["query_id"].astype(str), pool["chunk_id"].astype(str)))
    pool_set = set(pool_pairs)
    outside = [p for p in have if p not in pool_set]
    if outside:
        q, c = outside[0]
        raise InputError("the key grader graded a pair outside the pool", item=f"pair ({q}, {c})",
                         found=f"{len(outside)} such pairs",
                         fix="Rerun the grades stage against the current pool")
    missing: dict[str, int] = {}
    for p in pool_pairs:
        if p not in have:
            missing[p[0]] = missing.get(p[0], 0) + 1
    if missing:
        n = sum(missing.values())
        shown = ", ".join(f"{q} ({k})" for q, k in list(missing.items())[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise InputError(f"{n} pool pairs lack a grade from the key grader, in "
                         f"{len(missing)} queries: {shown}{more}", item=key_grader,
                         fix=f"Grade them (`relgrade grade` grades only the missing pairs) "
                             f"for round {int(round)}")
    best: dict[str, int] = {}
    for q, _, g in rows:
        best[q] = max(best.get(q, g), g)
    dropped = sorted(q for q, g in best.items() if g < relevant_min)
    kept = [r for r in rows if r[0] not in set(dropped)]
    if not kept:
        # the message as relgrade words it now (it gained the grader's words and the file)
        raise InputError("no query has a chunk graded relevant by the key grader: the key "
                         "would be empty", item=key_grader,
                         found=f"{len(dropped)} queries dropped, every grade of "
                               f"{key_grader} below scale.relevant_min {relevant_min}",
                         fix=f"Check {key_grader}'s grades (a grader that grades every pair "
                             "0 makes no key) and params scale.relevant_min")
    key = pd.DataFrame({
        "query_id": pd.Series([r[0] for r in kept], dtype="str"),
        "chunk_id": pd.Series([r[1] for r in kept], dtype="str"),
        "grade": pd.Series([r[2] for r in kept], dtype="int64"),
    })
    return key, dropped


def key_bytes(key: pd.DataFrame) -> bytes:
    return "".join(
        canonical_json({"query_id": q, "chunk_id": c, "grade": g}) + "\n"
        for q, c, g in _sorted_rows(key)
    ).encode("utf-8")


def made_on_bytes(key: pd.DataFrame, made_on: pd.DataFrame) -> bytes:
    table = {(str(r.query_id), str(r.chunk_id)): r for r in made_on.itertuples(index=False)}
    lines = []
    for q, c, _ in _sorted_rows(key):
        r = table.get((q, c))
        if r is None:
            raise InputError("a key pair without what its grade was made on",
                             item=f"pair ({q}, {c})")
        lines.append(canonical_json({"query_id": q, "chunk_id": c,
                                     "content_sha256": str(r.content_sha256),
                                     "intent_sha256": str(r.intent_sha256),
                                     "rubric_sha256": str(r.rubric_sha256)}) + "\n")
    return "".join(lines).encode("utf-8")


def content_revision(old_key: pd.DataFrame, old_made_on: pd.DataFrame,
                     new_key: pd.DataFrame, new_made_on: pd.DataFrame) -> dict:
    def table(key, made_on):
        made = {(str(r.query_id), str(r.chunk_id)): (str(r.content_sha256),
                                                      str(r.intent_sha256),
                                                      str(r.rubric_sha256))
                for r in made_on.itertuples(index=False)}
        return {(q, c): (g, made.get((q, c))) for q, c, g in _sorted_rows(key)}

    old, new = table(old_key, old_made_on), table(new_key, new_made_on)
    regraded, changed = [], []
    for pair in sorted(old.keys() & new.keys()):
        (g0, m0), (g1, m1) = old[pair], new[pair]
        if m0 != m1:
            regraded.append({"query_id": pair[0], "chunk_id": pair[1],
                             "content_sha256": None if m1 is None else m1[0],
                             "grade_before": g0, "grade": g1})
        elif g0 != g1:
            changed.append(pair)
    return {"regraded": regraded, "changed": changed,
            "added": sorted(new.keys() - old.keys()), "removed": sorted(old.keys() - new.keys())}


def qrels_frame(key: pd.DataFrame) -> pd.DataFrame:
    rows = _sorted_rows(key)
    return pd.DataFrame({
        "query_id": pd.Series([r[0] for r in rows], dtype="str"),
        "chunk_id": pd.Series([r[1] for r in rows], dtype="str"),
        "grade": pd.Series([r[2] for r in rows], dtype="int64"),
    })


def qrels_text(key: pd.DataFrame) -> str:
    return "".join(f"{q} 0 {c} {g}\n" for q, c, g in _sorted_rows(key))
