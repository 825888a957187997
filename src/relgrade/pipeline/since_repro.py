"""What params changed since the last ``dvc repro``: DVC's own comparison, read from its lock.

``dvc.lock`` records, for every stage that ran, the value each params key it reads had then
(``stages.NAME.params["params.yaml"]``); ``dvc repro`` reruns a stage when one of those
values differs from ``params.yaml`` now. :func:`params_since_repro` makes the same
comparison without DVC (two YAML reads, no file hashed), so ``relgrade status`` can say that
its pool, grading counts and cost are of the last run, and what the edit will change: an arm
added to params (by hand or by ``relgrade arm add``) has no run and no pool pairs until
``dvc repro`` makes them, and its pairs are not counted or priced before then.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from relgrade.errors import InputError
from relgrade.experiment.layout import repro_command

_MISSING = object()


def _lookup(raw: Mapping, key: str):
    """The value of dotted params ``key`` in ``raw`` (as DVC reads it), or ``_MISSING``."""
    value = raw
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _load_as_dvc(path: Path):
    """A YAML file read as DVC reads ``dvc.lock`` and params files: ruamel.yaml's safe
    loader (YAML 1.2; PyYAML reads the ``1e-07`` DVC writes as a string, ``yes`` as a
    boolean). Raises InputError naming ``path`` when it cannot be read or parsed."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe").load(path.read_bytes())
    except OSError as e:
        raise InputError("cannot be read", path=path, found=e.strerror) from None
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError("not valid YAML", path=path,
                         line=None if mark is None else mark.line + 1,
                         found=getattr(e, "problem", None)) from None


def _params_key(ex) -> str:
    """The name ``dvc.lock`` records the experiment's params file under: its path relative
    to the folder of ``dvc.yaml`` (the experiment's root), ``params.yaml`` by default."""
    return Path(os.path.relpath(Path(ex.params.source), ex.root)).as_posix()


def _stages_now(dvc_yaml: Path, raw) -> set[str] | None:
    """The stage names ``dvc_yaml`` defines with params ``raw``: a plain stage's name, and
    ``NAME@ITEM`` for each item a ``foreach: ${KEY}`` stage expands over (the keys of a
    mapping, the items of a list), as DVC names them; None when the file cannot be read or
    a ``foreach`` is of another form (every lock stage is then compared)."""
    try:
        stages = _load_as_dvc(dvc_yaml).get("stages")
    except (InputError, AttributeError):
        return None
    if not isinstance(stages, Mapping):
        return None
    names = set()
    for name, body in stages.items():
        over = body.get("foreach") if isinstance(body, Mapping) else None
        if over is None:
            names.add(str(name))
            continue
        if not (isinstance(over, str) and over.startswith("${") and over.endswith("}")):
            return None
        items = _lookup(raw, over[2:-1].strip())
        if items is _MISSING or not isinstance(items, (Mapping, list)):
            return None
        names.update(f"{name}@{item}" for item in items)
    return names


def params_since_repro(ex) -> dict:
    """Compare the experiment's params with what its last ``dvc repro`` recorded.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (its ``dvc.lock`` beside the params file).

    Returns
    -------
    dict
        ``{"state": "no run"}`` without a ``dvc.lock`` (or one without stages), ``{"state":
        "unreadable", "error": str}`` when the lock or params file cannot be read,
        ``{"state": "unchanged"}``, or ``{"state": "changed", "keys": {key: {"was": value,
        "now": value}}, "stages": [name, ...], "arms": {"added": [...], "removed": [...],
        "changed": [...]}, "repro": str}``: each params key whose value differs from the
        one a stage recorded (``now`` absent when the key was deleted), the stages that
        recorded it and ``dvc repro`` reruns, with the stages of an added arm that
        ``dvc.yaml`` defines (``retrieve@ARM``, ``metrics@ARM``: no lock entry yet, run for
        the first time), sorted (a removed arm's own stages, ``NAME@ARM``, left out:
        ``dvc.yaml`` no longer has them), the arms added, removed or
        edited since the arms the lock recorded (each list sorted), and the ``dvc repro``
        that brings the outputs up to date.

    Notes
    -----
    A key a stage never read (a stage new since the last run, such as ``retrieve@NAME`` of
    an added arm) is not compared: its stage has no lock entry (an added arm's stages are
    listed all the same). Every arm's stages read the
    whole ``arms`` mapping, so an added arm shows as a change of ``arms``. When stages
    recorded different values of one key (some ran after an edit, some before), ``was`` is
    the first stage's.
    """
    lock_path, _ = ex.dvc_files()
    if not lock_path.exists():
        return {"state": "no run"}
    try:
        lock = _load_as_dvc(lock_path)
        raw = _load_as_dvc(Path(ex.params.source))
    except InputError as e:
        return {"state": "unreadable", "error": str(e)}
    stages = lock.get("stages") if isinstance(lock, Mapping) else None
    if not isinstance(stages, Mapping) or not stages:
        return {"state": "no run"}
    name = _params_key(ex)
    # a stage dvc.yaml no longer has (a removed arm's retrieve@ARM) stays in the lock, but
    # dvc repro never runs it: its record is not compared
    defined = _stages_now(lock_path.with_name("dvc.yaml"), raw)
    keys: dict[str, dict] = {}
    changed_stages: list[str] = []
    arms_then = _MISSING
    for stage, entry in stages.items():
        if defined is not None and str(stage) not in defined:
            continue
        recorded = ((entry or {}).get("params") or {}).get(name) if isinstance(
            entry, Mapping) else None
        if not isinstance(recorded, Mapping):
            continue
        if "arms" in recorded and (arms_then is _MISSING or stage == "pool"):
            arms_then = recorded["arms"]  # the pool's record, else the first stage's
        differs = False
        for key, was in recorded.items():
            now = _lookup(raw, key)
            if now is _MISSING or now != was:
                differs = True
                keys.setdefault(key, {"was": was} | ({} if now is _MISSING else {"now": now}))
        if differs:
            changed_stages.append(str(stage))
    if not keys:
        return {"state": "unchanged"}
    arms = {"added": [], "removed": [], "changed": []}
    arms_now = raw.get("arms") if isinstance(raw, Mapping) else None
    if "arms" in keys and isinstance(arms_then, Mapping) and isinstance(arms_now, Mapping):
        arms = {"added": sorted(str(a) for a in arms_now if a not in arms_then),
                "removed": sorted(str(a) for a in arms_then if a not in arms_now),
                "changed": sorted(str(a) for a in arms_now
                                  if a in arms_then and arms_now[a] != arms_then[a])}
    # a removed arm's own stages (retrieve@ARM, metrics@ARM) are gone from dvc.yaml
    gone = set(arms["removed"])
    changed_stages = [s for s in changed_stages if s.partition("@")[2] not in gone]
    # an added arm's own stages have no lock entry yet: dvc repro runs them all the same
    added = set(arms["added"])
    changed_stages += [s for s in sorted(defined or ()) if s not in stages
                       and "@" in s and s.partition("@")[2] in added]
    return {"state": "changed", "keys": keys, "stages": sorted(changed_stages), "arms": arms,
            "repro": repro_command(ex)}
