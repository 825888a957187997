"""The end-of-run summary of the session fixtures' shared builds (tests/conftest.py): who
built each one, and how long the other worker sat idle waiting for it."""

from __future__ import annotations

import json

from tests.conftest import BUILDS_LOG, _built_once, shared_build_lines


def test_the_summary_names_each_builder_and_sums_only_the_waits_for_a_build_in_progress():
    records = [
        {"build": "packets-built", "worker": "gw0", "waited_s": 0.0, "built_s": 95.4},
        {"build": "packets-built", "worker": "gw1", "waited_s": 41.6, "built_s": None},
        {"build": "frozen-built", "worker": "gw1", "waited_s": 0.0, "built_s": 120.0},
        # taken when the build was long done: not a wait
        {"build": "packets-built", "worker": "gw1", "waited_s": 0.2, "built_s": None},
        {"build": "frozen-built", "worker": "gw0", "waited_s": 12.5, "built_s": None},
    ]
    assert shared_build_lines(records) == [
        "packets-built: built by gw0 in 95 s; waited for by gw1 42 s",
        "frozen-built: built by gw1 in 120 s; waited for by gw0 12 s",
        # 41.6 + 12.5
        "workers idle waiting for a shared build: 54 s in all",
    ]


def test_no_shared_build_gives_no_summary():
    assert shared_build_lines([]) == []


def test_a_build_logs_its_builder_then_a_second_caller_logs_a_use(tmp_path_factory):
    made = []
    first = _built_once(tmp_path_factory, "summary-probe", lambda root: made.append(root))
    again = _built_once(tmp_path_factory, "summary-probe", lambda root: made.append(root))
    assert first == again and made == [first]  # built once
    log = first.parent / BUILDS_LOG
    mine = [r for r in map(json.loads, log.read_text().splitlines())
            if r["build"] == "summary-probe"]
    assert [r["built_s"] is not None for r in mine] == [True, False]
    assert mine[0]["worker"] == mine[1]["worker"]
