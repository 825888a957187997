"""Publish: the bundle's files, and the private-text scan (query, intent, chunk, reason)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from relgrade.errors import ProtocolError
from relgrade.protocol import publish
from relgrade.protocol.key import key_bytes

REPO = Path(__file__).resolve().parents[1]
HASH = "ab" * 32

KEY = pd.DataFrame({"query_id": ["kw01", "kw01", "qu01"],
                    "chunk_id": ["src/cache.py:evict", "docs/cache.md:intro", "src/http.py:TIMEOUT"],
                    "grade": [2, 0, 1]})
RECORD = {"key_sha256": HASH, "frozen_at": "2026-01-01T00:00:00+00:00", "rubric_version": "v1",
          "round": 1, "grader_setup": {"grader-a": {"family": "f"}},
          "pool_version": "p-0123456789ab", "input_sha256": {}, "dropped_queries": ["kw02"],
          "post_hoc": False}
METRICS = {"bm25": {"arm": "bm25", "key_sha256": HASH, "pool_version": "p-0123456789ab",
                    "post_hoc": False, "queries": 2, "nDCG(dcg='exp-log2')@10": 0.75},
           "dense": {"arm": "dense", "key_sha256": HASH, "pool_version": "p-0123456789ab",
                     "post_hoc": False, "queries": 2, "nDCG(dcg='exp-log2')@10": 0.5}}

CHUNK_TEXT = ("def evict(self):\n    \"\"\"Drop the least recently used entry once the cache "
              "holds more than max_size items.\"\"\"\n    self._data.popitem(last=False)\n")
PRIVATE = {
    "query": [("kw01", "cache eviction"), ("qu01", "Where is the HTTP timeout set?"),
              ("kw07", "bm25")],
    "intent": [("kw01", "Where is the cache eviction policy defined?"),
               ("qu01", "Where is the default HTTP timeout configured, and to what value?")],
    "chunk": [("src/cache.py:evict", CHUNK_TEXT), ("src/http.py:TIMEOUT", "TIMEOUT = 30"),
              ("docs/cache.md:intro", "Caching overview")],
    "reason": [("grader-a kw01 src/cache.py:evict", "Implements LRU eviction on overflow."),
               ("grader-a qu01 src/http.py:TIMEOUT", "Sets the default timeout constant.")],
}
ALLOWED = [*KEY["query_id"], *KEY["chunk_id"], "kw02", *METRICS]


def _files(metrics=METRICS):
    return publish.bundle_files(KEY, RECORD, metrics)


def _plant(value, field="note"):
    m = json.loads(json.dumps(METRICS))
    m["bm25"][field] = value
    return _files(m)


def test_bundle_holds_qrels_public_record_and_metrics_only():
    files = _files()
    assert sorted(files) == ["README.txt", "key.qrels", "metrics.json", "record.json"]
    assert files["key.qrels"] == (b"kw01 0 docs/cache.md:intro 0\nkw01 0 src/cache.py:evict 2\n"
                                  b"qu01 0 src/http.py:TIMEOUT 1\n")
    record = json.loads(files["record.json"])
    assert record == {"key_sha256": HASH, "pool_version": "p-0123456789ab",
                      "rubric_version": "v1", "round": 1,
                      "frozen_at": "2026-01-01T00:00:00+00:00", "dropped_queries": ["kw02"],
                      "post_hoc": False}
    assert list(json.loads(files["metrics.json"])) == ["bm25", "dense"]


def test_clean_bundle_passes_the_scan():
    assert publish.find_private(_files(), PRIVATE, allowed=ALLOWED) == []
    assert publish.scan_private(_files(), PRIVATE, allowed=ALLOWED) == []


def test_metrics_from_another_key_are_refused():
    m = json.loads(json.dumps(METRICS))
    m["dense"]["key_sha256"] = "cd" * 32
    with pytest.raises(ProtocolError, match="metrics of arm dense were computed from key cdcd"):
        _files(m)


def test_planted_query_text_is_caught():
    leaks = publish.find_private(_plant({"kw01": "cache eviction"}), PRIVATE, allowed=ALLOWED)
    assert [(l.kind, l.id, l.file) for l in leaks] == [("query", "kw01", "metrics.json")]


def test_planted_intent_is_caught_even_in_part():
    part = "policy: Where is the default HTTP timeout configured, and to"
    leaks = publish.find_private(_plant(part), PRIVATE, allowed=ALLOWED)
    assert [(l.kind, l.id) for l in leaks] == [("intent", "qu01")]
    assert leaks[0].text == "Where is the default HTTP timeout configured, and to"


def test_planted_chunk_text_is_caught_by_a_forty_character_run_reflowed():
    # 40+ characters of the chunk, with its line breaks and indentation changed
    planted = "Drop the least recently used entry   once the\ncache"
    leaks = publish.find_private(_plant(planted), PRIVATE, allowed=ALLOWED)
    assert [(l.kind, l.id) for l in leaks] == [("chunk", "src/cache.py:evict")]


def test_a_short_run_of_a_chunk_is_not_a_leak():
    planted = "least recently used"  # 19 characters of a long chunk
    assert publish.find_private(_plant(planted), PRIVATE, allowed=ALLOWED) == []


def test_short_chunk_text_is_caught_whole():
    leaks = publish.find_private(_plant("value TIMEOUT = 30 here"), PRIVATE, allowed=ALLOWED)
    assert [(l.kind, l.id) for l in leaks] == [("chunk", "src/http.py:TIMEOUT")]


def test_planted_reason_is_caught_and_the_scan_refuses():
    files = _plant("Implements LRU eviction on overflow.")
    with pytest.raises(ProtocolError) as e:
        publish.scan_private(files, PRIVATE, allowed=ALLOWED)
    assert str(e.value) == (
        "private text in the publish bundle (1 found): reason grader-a kw01 src/cache.py:evict "
        "in metrics.json: 'Implements LRU eviction on overflow.'. Nothing was published")


def test_text_in_a_raw_bundle_with_json_escapes_is_caught():
    raw = json.dumps({"x": "Where is the HTTP timeout set?"}, ensure_ascii=True).encode()
    leaks = publish.find_private(raw + b"\n\x00not json", PRIVATE)
    assert [(l.kind, l.id) for l in leaks] == [("query", "qu01")]


def test_a_one_word_query_equal_to_an_arm_name_is_allowed_but_a_field_is_not():
    # "bm25" is both the arm's name (public) and query kw07's text
    assert publish.find_private(_files(), PRIVATE, allowed=ALLOWED) == []
    leaks = publish.find_private(_files(), PRIVATE, allowed=[a for a in ALLOWED if a != "bm25"])
    assert [(l.kind, l.id) for l in leaks] == [("query", "kw07")]


def test_the_error_lists_at_most_limit_leaks():
    files = _plant(["cache eviction", "Implements LRU eviction on overflow.",
                    "Sets the default timeout constant."])
    with pytest.raises(ProtocolError) as e:
        publish.scan_private(files, PRIVATE, allowed=ALLOWED, limit=2)
    msg = str(e.value)
    assert msg.startswith("private text in the publish bundle (3 found): query kw01")
    assert "; and 1 more. Nothing was published" in msg


# --- the stage -----------------------------------------------------------------------------

def _stage_dir(root, metrics=METRICS, key_lines=None):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    # the arms are those with metrics (the stage publishes exactly the arms of params)
    params["arms"] = {arm: params["arms"]["bm25"] for arm in metrics}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    p = params["paths"]

    def put(name, obj, suffix=""):
        path = root / (p[name] + suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(obj, pd.DataFrame):
            obj.to_parquet(path, index=False)
        else:
            path.write_text(json.dumps(obj))

    (root / p["key"]).parent.mkdir(parents=True, exist_ok=True)
    # the key in the canonical byte form the key stage writes (sorted, one JSON line a row)
    (root / p["key"]).write_bytes(key_bytes(KEY) if key_lines is None
                                  else "".join(key_lines).encode())
    # the stage reads the key checked against its record: the record holds the file's hash
    sha = hashlib.sha256((root / p["key"]).read_bytes()).hexdigest()
    put("record", RECORD | {"key_sha256": sha})
    for arm, m in metrics.items():
        put("metrics", m | {"key_sha256": sha} if m.get("key_sha256") == HASH else m,
            suffix=f"/{arm}.json")
    put("queries", pd.DataFrame({"query_id": ["kw01", "qu01"], "group": ["keyword", "question"],
                                 "query": [q for _, q in PRIVATE["query"][:2]]}))
    put("intents", pd.DataFrame({"query_id": ["kw01", "qu01"], "query": ["a", "b"],
                                 "intent": [t for _, t in PRIVATE["intent"]]}))
    put("chunks", pd.DataFrame({"chunk_id": [c for c, _ in PRIVATE["chunk"]],
                                "header": ["h"] * 3, "text": [t for _, t in PRIVATE["chunk"]],
                                "source": ["s"] * 3}))
    put("grades", pd.DataFrame({"query_id": ["kw01", "qu01"],
                                "chunk_id": ["src/cache.py:evict", "src/http.py:TIMEOUT"],
                                "grader": ["grader-a"] * 2, "role": ["grader"] * 2,
                                "round": [1, 1], "grade": [2, 1],
                                "reason": [t for _, t in PRIVATE["reason"]]}))
    return root / p["publish"]


def _run(root):
    return subprocess.run([sys.executable, str(REPO / "stages/publish.py")], cwd=root,
                          capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})


def test_stage_writes_the_bundle_when_clean(tmp_path):
    out = _stage_dir(tmp_path)
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["README.txt", "key.qrels", "metrics.json",
                                                     "record.json"]
    assert (out / "key.qrels").read_bytes() == _files()["key.qrels"]
    assert [p.name for p in out.parent.iterdir() if out.name in p.name] == [out.name]


def test_stage_refuses_a_key_out_of_canonical_order_and_writes_nothing(tmp_path):
    """The qrels are streamed from the key as it is on disk, so a key file the key stage did
    not write (rows out of order) is refused by line, not sorted in memory."""
    rows = [{"query_id": q, "chunk_id": c, "grade": int(g)}
            for q, c, g in KEY.itertuples(index=False)]
    out = _stage_dir(tmp_path, key_lines=[json.dumps(r) + "\n" for r in rows])
    proc = _run(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr == (
        "Error: data/key/key.jsonl:2: pair (kw01, docs/cache.md:intro): a key is in canonical "
        "order (query_id, then chunk_id) (found after (kw01, src/cache.py:evict)). Rerun the "
        "key stage: it writes the key sorted and hashed\n")
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if out.name in p.name] == []


def test_stage_refuses_a_pair_graded_twice_in_the_key(tmp_path):
    rows = ['{"query_id":"kw01","chunk_id":"a","grade":1}\n',
            '{"query_id":"kw01","chunk_id":"a","grade":2}\n']
    out = _stage_dir(tmp_path, key_lines=rows)
    proc = _run(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: data/key/key.jsonl:2: pair (kw01, a): a key holds one "
                                  "grade per pair (found two rows)")
    assert not out.exists()


def test_stage_refuses_a_metrics_file_with_a_planted_reason_and_writes_nothing(tmp_path):
    m = json.loads(json.dumps(METRICS))
    m["dense"]["note"] = "Sets the default timeout constant."
    out = _stage_dir(tmp_path, metrics=m)
    proc = _run(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr == (
        "Error: private text in the publish bundle (1 found): reason grader-a qu01 "
        "src/http.py:TIMEOUT in metrics.json: 'Sets the default timeout constant.'. "
        "Nothing was published\n")
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if out.name in p.name] == []


def test_short_texts_are_not_matched_against_the_readme_wording():
    private = {"query": [("kw09", "version"), ("kw10", "chunk text")]}
    assert "version" in _files()["README.txt"].decode()
    assert publish.find_private(_files(), private, allowed=ALLOWED) == []


def test_long_text_planted_in_the_readme_is_caught():
    files = dict(_files())
    files["README.txt"] += ("note: " + PRIVATE["intent"][1][1] + "\n").encode()
    leaks = publish.find_private(files, PRIVATE, allowed=ALLOWED)
    assert [(l.kind, l.id, l.file) for l in leaks] == [("intent", "qu01", "README.txt")]


def test_single_word_inside_a_longer_json_string_is_not_a_leak():
    private = {"query": [("kw11", "evict")]}
    assert publish.find_private(_plant("see evict docs"), private, allowed=ALLOWED) == []
    leaks = publish.find_private(_plant("evict"), private, allowed=ALLOWED)
    assert [(l.kind, l.id) for l in leaks] == [("query", "kw11")]


# --- gold answers and the triage model's grades stay private --------------------------------

def test_the_bundle_holds_nothing_of_the_gold_file_or_the_triage_queue_beside_it(tmp_path):
    out = _stage_dir(tmp_path)
    private = tmp_path / "data/private"
    private.mkdir(parents=True, exist_ok=True)
    (private / "gold.tsv").write_text("query_id\tchunk_id\tgrade\nkw01\tgold-only-chunk\t2\n")
    (private / "triage-queue.tsv").write_text(
        "query_id\tchunk_id\tmodel_grade\tstratum\tselected\tinclusion_probability\n"
        "kw01\ttriage-only-chunk\t1\trelevant\tTrue\t1.0\n")
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["README.txt", "key.qrels", "metrics.json",
                                                     "record.json"]
    bundle = b"".join(p.read_bytes() for p in out.iterdir())
    for text in (b"gold-only-chunk", b"triage-only-chunk", b"model_grade", b"gold.tsv",
                 b"triage-queue"):
        assert text not in bundle


def test_the_publish_stage_reads_neither_the_gold_file_nor_the_triage_queue():
    from relgrade.pipeline import registry

    (stage,) = [s for s in registry.stages() if s.name == "publish"]
    deps = {d if isinstance(d, str) else d.path for d in stage.deps}
    assert not deps & {"${gold.input}", "${paths.triage_queue}"}


def test_the_triage_queue_is_a_dvc_cached_output_never_kept_in_git():
    from relgrade.pipeline import registry

    (packets,) = [s for s in registry.stages() if s.name == "packets"]
    (queue,) = [o for o in packets.outs
                if not isinstance(o, str) and o.path == "${paths.triage_queue}"]
    assert queue.cache and queue.options() == {}


@pytest.mark.parametrize(("experiment", "section", "key"), [
    ("experiments/crowd-sim", "gold", "input"),
    ("experiments/triage-sim", "paths", "triage_queue"),
])
def test_the_repositorys_gold_and_triage_queue_live_under_private_data_out_of_git(
        experiment, section, key):
    params = yaml.safe_load((REPO / experiment / "params.yaml").read_text())
    path = params[section][key]
    assert path.startswith("data/private/")
    tracked = subprocess.run(["git", "ls-files", "--", f"{experiment}/{path}"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
    assert tracked == ""
    ignored = (REPO / experiment / "data/private/.gitignore").read_text().split()
    assert "/" + path.rsplit("/", 1)[1] in ignored


@pytest.mark.parametrize("seed", range(5))
def test_phrase_index_finds_the_leftmost_match_that_re_search_finds(seed):
    """The token index behind the short-phrase check gives what the regex scan gave."""
    import random
    import re as regex_module

    from relgrade.protocol.publish import _Phrases

    rnd = random.Random(seed)
    alphabet = ["ab", "a", "b", "x_y", "a-b", "(a", "b)", "é", "0", "\x00ab", "ab\x00"]
    hay = " ".join(rnd.choice(alphabet) + rnd.choice(["", "", "-", "a", "b"])
                   for _ in range(300))
    index = _Phrases(hay)
    for _ in range(300):
        words = [rnd.choice(["ab", "a", "b", "y", "a-b", "b)", "(a", "é", "0", "ab-"])
                 for _ in range(rnd.randint(2, 4))]
        phrase = " ".join(words)
        m = regex_module.search(r"(?<!\w)" + regex_module.escape(phrase) + r"(?!\w)", hay)
        assert index.first(phrase) == (m.start() if m else None), phrase


def test_phrase_index_on_a_hand_made_text():
    from relgrade.protocol.publish import _Phrases

    text = "xab cd ab cde\x00ab cd-e"
    index = _Phrases(text)
    # "ab cd" inside "xab cd" has a word character before it; "ab cde" has one after it;
    # the first match between boundaries starts at 14 (after the separator), before "-e"
    assert index.first("ab cd") == 14
    assert index.first("cd ab") == 4
    assert index.first("cd ab cde") == 4  # the separator after "cde" is not a word character
    assert index.first("ab cde ab") is None  # "cde\x00ab" is one token, not "cde ab"
    assert index.first("ab cde\x00ab cd") == 7
    assert index.first("zz yy") is None
