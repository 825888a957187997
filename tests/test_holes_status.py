"""Which experiment a holes folder belongs to (``relgrade status`` there points to it)."""

from __future__ import annotations

from relgrade.pipeline.new_arms import holes_parent


def _params(folder, paths):
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"  {k}: {v}\n" for k, v in paths.items())
    (folder / "params.yaml").write_text(f"paths:\n{lines}")


def test_a_holes_folder_names_the_experiment_whose_paths_holes_work_it_is(tmp_path):
    (tmp_path / ".git").mkdir()
    _params(tmp_path, {"holes_work": "data/holes", "record": "data/key/record.json"})
    _params(tmp_path / "experiments/b", {"holes_work": "data/late"})
    assert holes_parent(tmp_path / "data/holes") == tmp_path.resolve()
    assert holes_parent(tmp_path / "experiments/b/data/late") == (
        tmp_path / "experiments/b").resolve()
    # another experiment's holes folder, or a folder that is nobody's, has no parent
    assert holes_parent(tmp_path / "experiments/b/data/holes") is None
    assert holes_parent(tmp_path / "data/other") is None


def test_the_search_stops_at_the_repository_top_and_passes_over_unreadable_params(tmp_path):
    _params(tmp_path, {"holes_work": "repo/data/holes"})      # outside the repository
    repo = tmp_path / "repo"
    (repo / ".dvc").mkdir(parents=True)
    (repo / "data").mkdir()
    (repo / "data/params.yaml").write_text("paths: [unclosed\n")
    assert holes_parent(repo / "data/holes") is None


def test_a_holes_record_of_another_shape_is_not_computed_and_says_so():
    from relgrade.pipeline.new_arms import _verdict

    for record in ({"arms": {"fresh": 3}}, {"arms": [1]}, {"arms": {"fresh": {"estimates": 1}}}):
        got = _verdict(record, "fresh", key_sha256="k", sample=[], owed=0)
        assert got["state"] == "not computed"
    assert _verdict({"arms": {"fresh": 3}}, "fresh", key_sha256="k", sample=[],
                    owed=0)["error"].startswith("the holes' record is not of the shape")
