"""The void ledger: fresh, same, changed (void) and post-hoc keys."""

from __future__ import annotations

import pytest

from relgrade.errors import ProtocolError
from relgrade.protocol import ledger

OLD, NEW, NEWER = "a" * 64, "b" * 64, "c" * 64
AT = dict(pool_version="p-0123456789ab", rubric_version="v1", round=1)


def _used(*hashes):
    entries = []
    for i, h in enumerate(hashes):
        entries = ledger.add_use(entries, key_sha256=h, used_at=f"2026-01-0{i + 1}T00:00:00+00:00",
                                 **AT)
    return entries


def test_no_metrics_yet_is_fresh():
    assert ledger.check_void([], key_sha256=NEW, post_hoc=False, **AT) == "fresh"


def test_other_pool_rubric_or_round_is_fresh():
    entries = _used(OLD)
    for change in ({"pool_version": "p-ffffffffffff"}, {"rubric_version": "v2"}, {"round": 2}):
        assert ledger.check_void(entries, key_sha256=NEW, post_hoc=False,
                                 **(AT | change)) == "fresh"


def test_the_key_already_used_is_same():
    assert ledger.check_void(_used(OLD), key_sha256=OLD, post_hoc=False, **AT) == "same"


def test_round_read_back_from_json_as_int_matches():
    entries = [{"pool_version": "p-0123456789ab", "rubric_version": "v1", "round": 1,
                "key_sha256": OLD, "used_at": "t"}]
    assert ledger.check_void(entries, key_sha256=OLD, post_hoc=False,
                             **(AT | {"round": "1"})) == "same"


def test_changed_key_after_metrics_is_void_and_names_both_hashes_and_ways_forward():
    with pytest.raises(ProtocolError) as e:
        ledger.check_void(_used(OLD), key_sha256=NEW, post_hoc=False, **AT)
    assert str(e.value) == (
        f"void: key {OLD} was already used for metrics on pool p-0123456789ab, rubric v1, "
        f"round 1 (at 2026-01-01T00:00:00+00:00); this key differs ({NEW}). Either declare a "
        "new round (raise `grading.round` in the params file and regrade the whole pool blind from "
        "fresh orders) or set `grading.post_hoc: true` (every number is then labelled post-hoc)")


def test_changed_key_is_allowed_as_post_hoc():
    assert ledger.check_void(_used(OLD), key_sha256=NEW, post_hoc=True, **AT) == "post-hoc"


def test_a_post_hoc_key_stays_post_hoc_when_used_again():
    # OLD is the decision key; NEW was used post hoc. NEW again is still post-hoc, and
    # without the flag it is void: the decision stays with the first frozen key.
    entries = _used(OLD, NEW)
    assert ledger.check_void(entries, key_sha256=NEW, post_hoc=True, **AT) == "post-hoc"
    with pytest.raises(ProtocolError, match=f"^void: key {OLD} "):
        ledger.check_void(entries, key_sha256=NEW, post_hoc=False, **AT)
    assert ledger.check_void(entries, key_sha256=OLD, post_hoc=False, **AT) == "same"


def test_add_use_is_idempotent_and_does_not_mutate():
    first = _used(OLD)
    again = ledger.add_use(first, key_sha256=OLD, used_at="later", **AT)
    assert again == first and again is not first
    assert again[0]["used_at"] == "2026-01-01T00:00:00+00:00"
    more = ledger.add_use(first, key_sha256=NEWER, used_at="later", **AT)
    assert len(first) == 1 and len(more) == 2
    assert list(more[1]) == ["pool_version", "rubric_version", "round", "key_sha256", "used_at"]
    assert more[1] == {"pool_version": "p-0123456789ab", "rubric_version": "v1", "round": 1,
                       "key_sha256": NEWER, "used_at": "later"}


def test_same_hash_in_another_round_is_a_new_entry():
    entries = ledger.add_use(_used(OLD), key_sha256=OLD, used_at="t", **(AT | {"round": 2}))
    assert [e["round"] for e in entries] == [1, 2]


def _witness(h, source="metrics/arms/bm25.json", **extra):
    return {"key_sha256": h, "pool_version": AT["pool_version"], "source": source, **extra}


def test_a_use_the_ledger_records_is_not_missing():
    assert ledger.missing_uses(_used(OLD), [_witness(OLD, rubric_version="v1", round=1)]) == []


def test_a_use_shown_by_metrics_but_absent_from_the_ledger_is_missing():
    # Ledger deleted (no entries) and ledger edited (only NEW): OLD is witnessed by a metrics file.
    assert ledger.missing_uses([], [_witness(OLD)]) == [_witness(OLD)]
    assert ledger.missing_uses(_used(NEW), [_witness(OLD), _witness(NEW)]) == [_witness(OLD)]


def test_a_use_on_another_round_does_not_cover_the_witnessed_one():
    assert ledger.missing_uses(_used(OLD), [_witness(OLD, round=2)]) == [_witness(OLD, round=2)]


def test_an_incomplete_ledger_is_refused_with_the_fix():
    with pytest.raises(ProtocolError) as e:
        ledger.require_complete([], [_witness(OLD), _witness(NEW, source="metrics/arms/tfidf.json")],
                                ledger_path="data/ledger.jsonl")
    assert str(e.value) == (
        f"ledger: data/ledger.jsonl has no entry for key {OLD} on pool p-0123456789ab, which "
        "metrics/arms/bm25.json shows was used for metrics (and 1 more); the ledger was deleted, "
        "truncated or edited. Restore it (`git checkout -- data/ledger.jsonl`) before freezing or "
        "scoring a key")


def _entry(key, **extra):
    return {"pool_version": "p-1", "rubric_version": "v1", "round": 1, "key_sha256": key,
            "used_at": "2026-12-01T00:00:00+00:00", **extra}


def test_a_key_revising_the_decision_key_for_changed_content_is_revised_not_void():
    entries = [_entry("k1")]
    at = dict(pool_version="p-1", rubric_version="v1", round=1)
    assert ledger.check_void(entries, key_sha256="k2", post_hoc=False, revises="k1",
                             **at) == "revised"
    entries = ledger.add_use(entries, key_sha256="k2", used_at="t", revises="k1", **at)
    assert entries[-1]["revises"] == "k1"
    # the revision is now the decision key: used again it is "same", and the first key is not
    assert ledger.check_void(entries, key_sha256="k2", post_hoc=False, **at) == "same"
    with pytest.raises(ProtocolError, match="void: key k2"):
        ledger.check_void(entries, key_sha256="k1", post_hoc=False, **at)


def test_a_revision_of_a_key_that_is_not_the_decision_key_is_void():
    entries = [_entry("k1"), _entry("k2", revises="k1")]
    with pytest.raises(ProtocolError, match="void"):
        ledger.check_void(entries, pool_version="p-1", rubric_version="v1", round=1,
                          key_sha256="k3", post_hoc=False, revises="k1")


def test_the_decision_key_follows_the_chain_of_revisions_and_skips_post_hoc_keys():
    entries = [_entry("k1"), _entry("ph"), _entry("k2", revises="k1"),
               _entry("k3", revises="k2"), _entry("k9", revises="k1")]
    assert ledger.decision_key(entries, pool_version="p-1", rubric_version="v1",
                               round=1) == "k3"
    assert ledger.decision_key(entries, pool_version="p-2", rubric_version="v1",
                               round=1) is None


def test_a_metrics_file_witnesses_the_round_it_was_computed_for_not_the_records():
    # the same key frozen again in round 2: the round-1 metrics file still names round 1
    metrics = {"metrics/arms/bm25.json": {"key_sha256": "k1", "pool_version": "p-1",
                                          "rubric_version": "v1", "round": 1}}
    record = {"key_sha256": "k1", "pool_version": "p-1", "rubric_version": "v1", "round": 2}
    used = ledger.witnesses(metrics, [record])
    assert used == [{"key_sha256": "k1", "pool_version": "p-1",
                     "source": "metrics/arms/bm25.json", "rubric_version": "v1", "round": 1}]
    assert ledger.missing_uses([_entry("k1")], used) == []


# --- the ledger's committed history witnesses every use ------------------------------------

def _git(root, *args):
    import subprocess

    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def _experiment_in_git(tmp_path, entries):
    """The repository's params in a fresh git repository, its ledger committed with
    ``entries``."""
    import json
    from pathlib import Path

    from relgrade.experiment.files import Experiment

    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "params.yaml").write_text((repo / "params.yaml").read_text())
    ledger_file = tmp_path / "data/ledger.jsonl"
    ledger_file.parent.mkdir(parents=True)
    ledger_file.write_text("".join(json.dumps(e) + "\n" for e in entries))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ledger")
    return Experiment.load(tmp_path / "params.yaml"), ledger_file


def test_a_ledger_deleted_with_the_metrics_is_refused_because_git_history_holds_its_use(tmp_path):
    entry = _entry("k1")
    ex, ledger_file = _experiment_in_git(tmp_path, [entry])
    assert ex.ledger() == [entry]
    ledger_file.unlink()  # and no metrics file is there to witness the use
    with pytest.raises(ProtocolError) as e:
        ex.ledger()
    msg = str(e.value)
    assert msg.startswith(f"ledger: {ledger_file.as_posix()} has no entry for key k1 on pool p-1, "
                          "which commit ")
    assert f"of {ledger_file.as_posix()} shows was used for metrics" in msg
    assert f"Restore it (`git checkout -- {ledger_file.as_posix()}`)" in msg


def test_a_ledger_truncated_below_its_committed_entries_is_refused(tmp_path):
    first, second = _entry("k1"), _entry("k2", round=2)
    ex, ledger_file = _experiment_in_git(tmp_path, [first, second])
    ledger_file.write_text(ledger_file.read_text().splitlines()[0] + "\n")
    with pytest.raises(ProtocolError, match="has no entry for key k2 on pool p-1"):
        ex.ledger()


def test_outside_a_git_repository_the_ledger_file_alone_decides(tmp_path):
    import json
    from pathlib import Path

    from relgrade.experiment.files import Experiment

    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "params.yaml").write_text((repo / "params.yaml").read_text())
    ex = Experiment.load(tmp_path / "params.yaml")
    assert ex.ledger() == []  # no ledger, no metrics, no history: nothing used yet
    (tmp_path / "data").mkdir()
    (tmp_path / "data/ledger.jsonl").write_text(json.dumps(_entry("k1")) + "\n")
    assert ex.ledger() == [_entry("k1")]


# --- the human key of the ppi stage (kind "ppi-human") ---------------------------------

def _human(entries, h, at="2026-01-09T00:00:00+00:00", **kw):
    return ledger.add_use(entries, key_sha256=h, used_at=at, kind=ledger.HUMAN, **kw, **AT)


def test_a_human_key_entry_says_its_kind_and_a_key_entry_stays_as_before():
    entries = _human(_used(OLD), NEW, made_on_sha256="d" * 64)
    assert list(entries[0]) == list(ledger.LEDGER_KEYS)  # no kind: a key's entry, unchanged
    assert entries[1] == {**AT, "key_sha256": NEW, "used_at": "2026-01-09T00:00:00+00:00",
                          "kind": "ppi-human", "made_on_sha256": "d" * 64}
    # the same human key used again adds nothing; the same hash as a key is another use
    assert _human(entries, NEW, at="later") == entries
    assert len(ledger.add_use(entries, key_sha256=NEW, used_at="t", **AT)) == 3


def test_a_changed_human_key_is_void_naming_the_ledger_and_the_pairs():
    entries = _human(_used(OLD), NEW)
    changed = [("q1", "c1"), ("q1", "c2"), ("q2", "c1"), ("q2", "c4"), ("q3", "c1"),
               ("q3", "c9")]
    with pytest.raises(ProtocolError) as e:
        ledger.check_void(entries, key_sha256=NEWER, post_hoc=False, kind=ledger.HUMAN,
                          ledger_path="data/ledger.jsonl", changed=changed, **AT)
    msg = str(e.value)
    assert msg.startswith(f"void: data/ledger.jsonl records human key {NEW} as the one the "
                          "ppi stage used on pool p-0123456789ab, rubric v1, round 1 (at "
                          f"2026-01-09T00:00:00+00:00); the human sample's grades now give "
                          f"{NEWER} (6 pairs differ: a grade changed on unchanged content, or a "
                          "pair read that was not, or not read that was: q1/c1, q1/c2, "
                          "q2/c1, q2/c4, q3/c1 and 1 more)")
    assert "`grading.round`" in msg and "`grading.post_hoc: true`" in msg


def test_the_human_key_and_the_key_decide_apart():
    # the model key used for metrics does not make a first human key void, nor the reverse
    entries = _used(OLD)
    assert ledger.check_void(entries, key_sha256=NEW, post_hoc=False, kind=ledger.HUMAN,
                             **AT) == "fresh"
    entries = _human(entries, NEW)
    assert ledger.decision_key(entries, kind=ledger.HUMAN, **AT) == NEW
    assert ledger.decision_key(entries, **AT) == OLD
    assert ledger.check_void(entries, key_sha256=OLD, post_hoc=False, **AT) == "same"
    assert ledger.check_void(entries, key_sha256=NEW, post_hoc=False, kind=ledger.HUMAN,
                             **AT) == "same"


def test_a_changed_human_key_is_post_hoc_when_allowed_and_a_revision_when_regraded():
    entries = _human([], NEW)
    assert ledger.check_void(entries, key_sha256=NEWER, post_hoc=True, kind=ledger.HUMAN,
                             **AT) == "post-hoc"
    assert ledger.check_void(entries, key_sha256=NEWER, post_hoc=False, revises=NEW,
                             kind=ledger.HUMAN, **AT) == "revised"
    revised = _human(entries, NEWER, revises=NEW)
    assert ledger.decision_key(revised, kind=ledger.HUMAN, **AT) == NEWER


def test_a_human_key_use_its_kept_record_shows_is_missing_from_a_truncated_ledger():
    source = f"data/ledger.ppi-human/{NEW}.json"
    kept = {source: {"kind": "ppi-human", "key_sha256": NEW, "grader": "person-h",
                     "uses": [AT]}}
    used = ledger.human_witnesses(kept)
    assert used == [{"kind": "ppi-human", "key_sha256": NEW, **AT, "source": source}]
    ledger.require_complete(_human(_used(OLD), NEW), used, ledger_path="L")  # complete
    # the key's entry alone (the human key's line cut off), or the same hash as a key's
    for entries in ([], _used(OLD), _used(OLD, NEW)):
        with pytest.raises(ProtocolError, match=r"^ledger: L has no entry for human key b{64} "
                           r"on pool p-0123456789ab, which data/ledger\.ppi-human/b{64}\.json "
                           r"shows was used by the ppi stage"):
            ledger.require_complete(entries, used, ledger_path="L")
    # the human key used in another round is another use
    with pytest.raises(ProtocolError):
        ledger.require_complete(_human([], NEW), ledger.human_witnesses(
            {source: kept[source] | {"uses": [AT, AT | {"round": 2}]}}), ledger_path="L")
