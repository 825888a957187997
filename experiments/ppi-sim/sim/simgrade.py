"""The shared part of ppi-sim's SIMULATED graders: the known truth and each pair's draws.

The known truth is the default experiment's frozen key before bm25f joined its arms, copied to
``truth.jsonl`` beside this file (521 pairs over 36 queries, pool version p-d97bb8ce83c2, key
sha256 61e7a0b8bfb6...); a pair it does not hold is
truly 0. A pair's draws are ``sha256(seed, tag, query_id, chunk_id)`` read as numbers in
[0, 1), so a grade depends on neither batching, order nor worker count.
"""

import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRUTH = HERE / "truth.jsonl"


def truth() -> dict:
    """The known true grade of each (query_id, chunk_id) the truth file holds."""
    out = {}
    for line in TRUTH.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        out[(row["query_id"], row["chunk_id"])] = int(row["grade"])
    return out


def draw(seed: int, tag: str, query_id: str, chunk_id: str) -> float:
    """The pair's uniform draw in [0, 1) for one purpose (``tag``)."""
    digest = hashlib.sha256(json.dumps([seed, tag, query_id, chunk_id]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def confuse(t: int, u: float, v: float, *, up: dict, down: dict) -> int:
    """``t`` moved one grade up with probability ``up[t]``, else down with ``down[t]``.

    ``u`` decides whether the grade moves, ``v`` (only for a 1 that may go either way) which
    way; a 0 never goes down and a 2 never up.
    """
    p_up, p_down = up.get(t, 0.0), down.get(t, 0.0)
    if u >= p_up + p_down:
        return t
    return t + 1 if v * (p_up + p_down) < p_up else t - 1


def emit(query_id: str, chunk_id: str, grade: int, reason: str) -> None:
    """One grade row on stdout, as relgrade's command graders answer."""
    print(json.dumps({"query_id": query_id, "chunk_id": chunk_id, "reason": reason,
                      "grade": grade}))
