"""Label Studio: tasks out in display order, annotations back in, validated like any grades."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from relgrade.errors import InputError
from relgrade.graders.command import packet_pairs
from relgrade.graders.labelstudio import (
    annotation_rows,
    import_label_studio,
    label_studio_config,
    label_studio_tasks,
    label_studio_tasks_json,
)
from tests.graders import experiment as ex


def packets():
    return {"q01": ex.packet("q01", 7), "q02": ex.packet("q02", 2)}


def test_tasks_are_one_per_chunk_in_display_order_with_only_packet_fields():
    ps = packets()
    ps["q01"]["batches"][0] = ps["q01"]["batches"][0][::-1]  # a shuffled display order
    tasks = label_studio_tasks(ps.values())
    assert [(t["data"]["query_id"], t["data"]["chunk_id"], t["data"]["batch"]) for t in tasks] == \
        [("q01", f"q01-c{j}", 0) for j in (4, 3, 2, 1, 0)] + \
        [("q01", "q01-c5", 1), ("q01", "q01-c6", 1), ("q02", "q02-c0", 0), ("q02", "q02-c1", 0)]
    assert all(list(t) == ["data"] for t in tasks)
    assert list(tasks[0]["data"]) == ["query_id", "chunk_id", "query", "intent", "header", "text",
                                      "batch", "rubric_version"]
    assert tasks[0]["data"]["text"] == ps["q01"]["batches"][0][0]["text"]


def test_the_task_file_is_a_json_list():
    data = json.loads(label_studio_tasks_json(packets().values()))
    assert isinstance(data, list) and len(data) == 9


def test_the_labeling_config_asks_for_the_reason_before_the_grade_on_the_scale():
    root = ET.fromstring(label_studio_config([0, 1, 2], 15))
    tags = [el.tag for el in root]
    assert tags.index("TextArea") < tags.index("Choices")
    choices = root.find("Choices")
    assert choices.get("name") == "grade" and choices.get("toName") == "chunk"
    assert [c.get("value") for c in choices] == ["0", "1", "2"]
    assert root.find("TextArea").get("name") == "reason"
    assert "15 words" in root.find("TextArea").get("placeholder")


def annotated(tasks, *, grade_of=None, reason="defines the function in full", who=7):
    out = []
    for i, t in enumerate(tasks, start=1):
        g = grade_of(t) if grade_of else ex.truth(t["data"]["chunk_id"])
        out.append({"id": i, "data": t["data"], "annotations": [{
            "id": 100 + i, "completed_by": who, "was_cancelled": False,
            "result": [
                {"from_name": "reason", "to_name": "chunk", "type": "textarea",
                 "value": {"text": [reason]}},
                {"from_name": "grade", "to_name": "chunk", "type": "choices",
                 "value": {"choices": [str(g)]}},
            ]}]})
    return out


def do_import(export, ps=None, **kw):
    ps = ps or packets()
    return import_label_studio(export, pool_pairs=packet_pairs(ps), scale=[0, 1, 2],
                               max_reason_words=15, kind="human", role="grader",
                               source="export.json", grader="alice", **kw)


def test_a_round_trip_through_label_studio_gives_the_annotated_grades():
    export = annotated(label_studio_tasks(packets().values()))
    df, unannotated = do_import(export)
    assert unannotated == 0
    assert list(df.columns) == ["query_id", "chunk_id", "reason", "grade"]
    assert sorted(zip(df.query_id, df.chunk_id, df.grade)) == sorted(
        (q, c["chunk_id"], ex.truth(c["chunk_id"]))
        for q, p in packets().items() for b in p["batches"] for c in b)


def test_unannotated_and_cancelled_tasks_are_left_out_and_counted():
    export = annotated(label_studio_tasks(packets().values()))
    export[0]["annotations"] = []
    export[1]["annotations"][0]["was_cancelled"] = True
    df, unannotated = do_import(export)
    assert unannotated == 2 and len(df) == 7


def test_two_annotations_on_a_task_need_an_annotator_to_choose():
    export = annotated(label_studio_tasks(packets().values()))
    other = json.loads(json.dumps(export[2]["annotations"][0]))
    other["completed_by"] = {"id": 8, "email": "bob@example.org"}
    other["result"][1]["value"]["choices"] = ["0"]
    export[2]["annotations"].append(other)
    with pytest.raises(InputError) as e:
        do_import(export)
    assert str(e.value) == ("export.json:3: pair (q01, q01-c2): task has more than one annotation "
                            "(found 2 annotations by 7, bob@example.org). Choose whose grades to "
                            "import with --annotator")
    df, _ = do_import(export, annotator="bob@example.org")
    assert df.values.tolist() == [["q01", "q01-c2", "defines the function in full", 0]]


@pytest.mark.parametrize("change, rule", [
    (lambda a: a["result"][1]["value"].update(choices=["3"]), "grade outside the scale 0-2"),
    (lambda a: a["result"][1]["value"].update(choices=["2", "1"]), "grade must be an integer"),
    (lambda a: a["result"].pop(1), "grade must be an integer"),
    (lambda a: a["result"][0]["value"].update(text=[" ".join(["w"] * 16)]),
     "reason longer than 15 words"),
    (lambda a: a["result"].pop(0), "reason required"),
])
def test_a_bad_annotation_is_refused_naming_its_task(change, rule):
    export = annotated(label_studio_tasks(packets().values()))
    change(export[3]["annotations"][0])
    with pytest.raises(InputError, match=rule) as e:
        do_import(export)
    assert str(e.value).startswith("export.json:4: alice: pair (q01, q01-c3)")


def test_a_task_for_a_pair_outside_the_packets_is_refused():
    export = annotated(label_studio_tasks(packets().values()))
    export[0]["data"] = dict(export[0]["data"], chunk_id="elsewhere")
    with pytest.raises(InputError, match="pair not in the pool"):
        do_import(export)


def test_a_file_that_is_not_an_export_is_refused():
    with pytest.raises(InputError, match="JSON list of tasks"):
        annotation_rows({"tasks": []}, source="x.json")
    with pytest.raises(InputError, match="task data lacks `chunk_id`"):
        annotation_rows([{"data": {"query_id": "q01"}, "annotations": []}], source="x.json")
    with pytest.raises(InputError, match="no `data` object"):
        annotation_rows([{"annotations": []}], source="x.json")
