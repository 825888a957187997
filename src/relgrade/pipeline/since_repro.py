"""What params changed since the last ``dvc repro``: DVC's own comparison, read from its lock.

``dvc.lock`` records, for every stage that ran, the value each params key it reads had then
(``stages.NAME.params["params.yaml"]``); ``dvc repro`` reruns a stage when one of those
values differs from ``params.yaml`` now. :func:`params_since_repro` makes the same
comparison without DVC (two YAML reads, no file hashed), so ``relgrade status`` can say that
its pool, grading counts and cost are of the last run, and what the edit will change: an arm
added to params (by hand or by ``relgrade arm add``) has no run and no pool pairs until
``dvc repro`` makes them, and its pairs are not counted or priced before then.

:func:`inputs_since_repro` does the same for files: the md5 ``dvc.lock`` records for each
input a stage read (a grader's file, the rubric) and each output kept in git (the audit
lock), compared with the files now, hashed as DVC 3 hashes them.
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


def _load_as_dvc(path: Path, read: dict | None = None):
    """A YAML file read as DVC reads ``dvc.lock`` and params files: ruamel.yaml's safe
    loader (YAML 1.2; PyYAML reads the ``1e-07`` DVC writes as a string, ``yes`` as a
    boolean). Raises InputError naming ``path`` when it cannot be read or parsed. With
    ``read`` (resolved path → parsed content, filled here), a file read before is not
    parsed again."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    seen = str(Path(path).resolve())
    if read is not None and seen in read:
        return read[seen]
    try:
        data = YAML(typ="safe").load(path.read_bytes())
        if read is not None:
            read[seen] = data
        return data
    except OSError as e:
        raise InputError("cannot be read", path=path, found=e.strerror) from None
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError("not valid YAML", path=path,
                         line=None if mark is None else mark.line + 1,
                         found=getattr(e, "problem", None)) from None


def _lock_and_params(ex, lock_path: Path, read: dict | None):
    """The lock's ``stages`` mapping and the params file, both read as DVC reads them; or the
    state to report instead (``{"state": "no run"}`` when there is no lock or no stage in it,
    ``{"state": "unreadable", "error": ...}`` when either file cannot be read)."""
    if not lock_path.exists():
        return {"state": "no run"}
    try:
        lock = _load_as_dvc(lock_path, read)
        raw = _load_as_dvc(Path(ex.params.source), read)
    except InputError as e:
        return {"state": "unreadable", "error": str(e)}
    stages = lock.get("stages") if isinstance(lock, Mapping) else None
    if not isinstance(stages, Mapping) or not stages:
        return {"state": "no run"}
    return stages, raw


def _params_key(ex) -> str:
    """The name ``dvc.lock`` records the experiment's params file under: its path relative
    to the folder of ``dvc.yaml`` (the experiment's root), ``params.yaml`` by default."""
    return Path(os.path.relpath(Path(ex.params.source), ex.root)).as_posix()


def _dvc_yaml_stages(dvc_yaml: Path, read: dict | None) -> Mapping | None:
    """``dvc_yaml``'s ``stages`` mapping as DVC reads it; None when it cannot be read."""
    try:
        stages = _load_as_dvc(dvc_yaml, read).get("stages")
    except (InputError, AttributeError):
        return None
    return stages if isinstance(stages, Mapping) else None


def _stages_now(dvc_yaml: Path, raw, read: dict | None = None) -> set[str] | None:
    """The stage names ``dvc_yaml`` defines with params ``raw``: a plain stage's name, and
    ``NAME@ITEM`` for each item a ``foreach: ${KEY}`` stage expands over (the keys of a
    mapping, the items of a list), as DVC names them; None when the file cannot be read or
    a ``foreach`` is of another form (every lock stage is then compared)."""
    stages = _dvc_yaml_stages(dvc_yaml, read)
    if stages is None:
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


def params_since_repro(ex, *, read: dict | None = None) -> dict:
    """Compare the experiment's params with what its last ``dvc repro`` recorded.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (its ``dvc.lock`` beside the params file).
    read : dict, optional
        Resolved path → parsed YAML, shared by calls that read the same ``dvc.lock``,
        ``dvc.yaml`` and params file (filled here); None parses every file anew.

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
    got = _lock_and_params(ex, lock_path, read)
    if isinstance(got, dict):
        return got
    stages, raw = got
    name = _params_key(ex)
    # a stage dvc.yaml no longer has (a removed arm's retrieve@ARM) stays in the lock, but
    # dvc repro never runs it: its record is not compared
    defined = _stages_now(lock_path.with_name("dvc.yaml"), raw, read)
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


def removed_outputs(ex, *, read: dict | None = None) -> dict[str, str]:
    """The outputs the last ``dvc repro`` recorded that are gone now, and the stage of each.

    DVC deletes a stage's outputs before it runs the stage's command and writes the lock
    only when the command succeeds: a stage that failed (a bad params value, say) leaves its
    outputs missing while ``dvc.lock`` still records them as built. Only an output whose
    recorded md5 is in the repository's DVC cache (``.dvc/cache``) counts: it was made (or
    pulled) here; in a fresh clone, before ``dvc pull`` or ``dvc repro``, none is.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (its ``dvc.lock`` beside the params file).
    read : dict, optional
        Resolved path → parsed YAML, shared with :func:`params_since_repro` (filled here).

    Returns
    -------
    dict of str to str
        Output path (relative to the folder of ``dvc.lock``, as the lock spells it) → the name
        of the stage that recorded it; empty without a lock, with an unreadable one, or when
        every recorded output exists.
    """
    lock_path, rwlock = ex.dvc_files()
    got = _lock_and_params(ex, lock_path, read)
    if isinstance(got, dict) or rwlock is None:
        return {}
    stages, _ = got
    cache = rwlock.parent.parent / "cache" / "files" / "md5"
    gone: dict[str, str] = {}
    for stage, entry in stages.items():
        outs = entry.get("outs") if isinstance(entry, Mapping) else None
        for out in outs if isinstance(outs, list) else ():
            path = out.get("path") if isinstance(out, Mapping) else None
            md5 = str(out.get("md5") or "") if isinstance(out, Mapping) else ""
            if not (isinstance(path, str) and len(md5) >= 3) or \
                    (lock_path.parent / path).exists():
                continue
            if (cache / md5[:2] / md5[2:]).exists():  # made here, then removed
                gone.setdefault(path, str(stage))
    return gone


def stopped_stages(ex, *, read: dict | None = None) -> list[str]:
    """The stages the last ``dvc repro`` ran and did not finish: stages ``dvc.yaml`` still
    has whose outputs, recorded by an earlier run in ``dvc.lock``, are gone (DVC deletes
    them before running a stage's command; a stage that stops on owed grading or fails
    leaves none and its lock entry as it was).

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment.
    read : dict, optional
        As :func:`params_since_repro`'s.

    Returns
    -------
    list of str
        The stage names, sorted; empty without a lock or when every recorded output exists.
    """
    gone = set(removed_outputs(ex, read=read).values())
    if not gone:
        return []
    lock_path, _ = ex.dvc_files()
    got = _lock_and_params(ex, lock_path, read)
    defined = None if isinstance(got, dict) else _stages_now(
        lock_path.with_name("dvc.yaml"), got[1], read)
    return sorted(s for s in gone if defined is None or s in defined)


# --- inputs edited since the last run ----------------------------------------------------

def _kept_outputs(dvc_yaml: Path, raw, read: dict | None = None) -> set[str] | None:
    """The paths of the outputs ``dvc_yaml`` keeps in git (``cache: false``: manifests, the
    audit lock, the key and its record, metrics files), with ``${KEY}`` read from params
    ``raw`` and a ``foreach`` stage's ``${key}`` set to each item; an output whose path
    cannot be resolved so is left out. None when the file cannot be read."""
    import re

    stages = _dvc_yaml_stages(dvc_yaml, read)
    if stages is None:
        return None
    var = re.compile(r"\$\{\s*([^}]+?)\s*\}")
    out: set[str] = set()
    for body in stages.values():
        if not isinstance(body, Mapping):
            continue
        keys = [None]
        if "foreach" in body:
            over = body.get("foreach")
            items = _lookup(raw, over[2:-1].strip()) if isinstance(over, str) and \
                over.startswith("${") else _MISSING
            keys = list(items) if isinstance(items, (Mapping, list)) else []
            body = body.get("do") or {}
        for entry in body.get("outs") or []:
            if not (isinstance(entry, Mapping) and len(entry) == 1):
                continue
            (path, flags), = entry.items()
            if not (isinstance(flags, Mapping) and flags.get("cache") is False):
                continue
            for key in keys:
                def value(m, key=key):
                    got = str(key) if m.group(1) == "key" and key is not None else \
                        _lookup(raw, m.group(1))
                    if got is _MISSING or isinstance(got, (Mapping, list)):
                        raise KeyError(m.group(1))
                    return str(got)
                try:
                    out.add(var.sub(value, str(path)))
                except KeyError:
                    continue
    return out


def _ignored(root: Path) -> list[str]:
    """The patterns of the ``.dvcignore`` files from ``root`` up to the DVC repository's
    folder (the nearest holding ``.dvc``), comments and blank lines left out."""
    patterns: list[str] = []
    here = root.resolve()
    for folder in (here, *here.parents):
        path = folder / ".dvcignore"
        if path.is_file():
            patterns += [line.strip() for line in path.read_text("utf-8").splitlines()
                         if line.strip() and not line.lstrip().startswith("#")]
        if (folder / ".dvc").is_dir():
            break
    return patterns


def _skipped(parts: tuple[str, ...], patterns: list[str]) -> bool:
    """Whether DVC leaves a file out of a folder's hash: a ``.dvcignore`` pattern without a
    slash matches any part of its path (``__pycache__/`` a folder, ``.*.inflight`` a file's
    name), a pattern with one matches the path from the folder hashed."""
    from fnmatch import fnmatchcase

    for pattern in patterns:
        folder_only = pattern.endswith("/")
        pat = pattern.rstrip("/")
        if "/" in pat:
            if fnmatchcase("/".join(parts), pat.lstrip("/")):
                return True
            continue
        names = parts[:-1] if folder_only else parts
        if any(fnmatchcase(name, pat) for name in names):
            return True
    return False


def _md5(path: Path) -> str:
    import hashlib

    digest = hashlib.md5()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dvc_md5(path: Path, *, ignore: list[str] = ()) -> tuple[str, int, int]:
    """The md5 DVC 3 records for a file or folder (``hash: md5`` in ``dvc.lock``), its size
    in bytes and its number of files.

    Parameters
    ----------
    path : pathlib.Path
        A file, or a folder.
    ignore : list of str
        ``.dvcignore`` patterns (:func:`_skipped`): files DVC leaves out of a folder.

    Returns
    -------
    tuple of (str, int, int)
        A file's md5 of its bytes, size, 1; a folder's md5 of its listing (every file's
        ``{"md5", "relpath"}``, sorted by path, as JSON) with ``.dir`` appended, its files'
        total size and their number.

    Raises
    ------
    OSError
        A file cannot be read.
    """
    import hashlib
    import json

    if not path.is_dir():
        return _md5(path), path.stat().st_size, 1
    entries = []
    for file in path.rglob("*"):
        if not file.is_file():
            continue
        parts = file.relative_to(path).parts
        if not _skipped(parts, ignore):
            entries.append((parts, file))
    entries.sort(key=lambda e: e[0])
    listing = [{"md5": _md5(f), "relpath": "/".join(p)} for p, f in entries]
    digest = hashlib.md5(json.dumps(listing, sort_keys=True).encode("utf-8")).hexdigest()
    return f"{digest}.dir", sum(f.stat().st_size for _, f in entries), len(entries)


def _change(path: Path, recorded: Mapping, ignore: list[str]) -> str | None:
    """``"deleted"``, ``"edited"`` or None (as recorded) for one lock entry; None too for an
    entry DVC 3 did not hash with md5 (nothing to compare with)."""
    if recorded.get("hash") != "md5" or not isinstance(recorded.get("md5"), str):
        return None
    if not path.exists():
        return "deleted"
    want = recorded["md5"]
    if want.endswith(".dir") != path.is_dir():
        return "edited"
    if not path.is_dir() and "size" in recorded and path.stat().st_size != recorded["size"]:
        return "edited"  # cheaply, before any byte is hashed
    try:
        md5 = dvc_md5(path, ignore=ignore)[0]
    except OSError:
        return "edited"
    return None if md5 == want else "edited"


def _current_entries(stages: Mapping, defined: set[str] | None) -> dict[str, Mapping]:
    """The lock's stage entries that ``dvc.yaml`` still defines (every one when ``defined``
    is None), by stage name."""
    return {str(s): e for s, e in stages.items() if isinstance(e, Mapping)
            and (defined is None or str(s) in defined)}


def _listed(entry: Mapping, what: str) -> list[Mapping]:
    """A lock entry's ``deps`` or ``outs`` (``what``) that name a path."""
    return [x for x in entry.get(what) or [] if isinstance(x, Mapping) and "path" in x]


def inputs_since_repro(ex, *, read: dict | None = None) -> dict:
    """Compare the experiment's inputs with what its last ``dvc repro`` recorded.

    The files compared are those ``dvc.lock`` records for the stages ``dvc.yaml`` still
    has: every dependency no stage makes (the graders' files under ``paths.grades_in``, the
    rubric, the corpus and query inputs, an external run), its code (``.py``) left out, and
    every output kept in git (``cache: false``: the audit lock, manifests, the key and its
    record, metrics files), which a person or a relgrade command may rewrite between runs.
    Each is hashed as DVC 3 hashes it (md5 of a file's bytes; of a folder's listing, its
    ``.dvcignore`` patterns applied), after a cheaper size check; outputs DVC caches are not
    hashed (they are made, not edited).

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (its ``dvc.lock`` and ``dvc.yaml`` beside the params file).
    read : dict, optional
        As :func:`params_since_repro`'s: files already parsed there are not parsed again.

    Returns
    -------
    dict
        ``{"state": "no run"}`` without a ``dvc.lock`` (or one without stages), ``{"state":
        "unreadable", "error": str}`` when it or ``dvc.yaml`` cannot be read, ``{"state":
        "unchanged"}``, or ``{"state": "changed", "paths": {path: {"change": "edited" |
        "deleted", "stages": [name, ...]}}, "stages": [name, ...], "repro": str}``: each
        path (relative to the experiment's folder, as the lock records it, sorted) that
        differs from the lock, the stages that recorded it (sorted), every such stage (the
        ones ``dvc repro`` reruns, with the stages after them) and the ``dvc repro`` that
        brings the outputs up to date.
    """
    lock_path, _ = ex.dvc_files()
    got = _lock_and_params(ex, lock_path, read)
    if isinstance(got, dict):
        return got
    stages, raw = got
    dvc_yaml = lock_path.with_name("dvc.yaml")
    defined = _stages_now(dvc_yaml, raw, read)
    kept = _kept_outputs(dvc_yaml, raw, read)
    if kept is None:
        return {"state": "unreadable", "error": f"{dvc_yaml}: cannot be read"}
    entries = _current_entries(stages, defined)

    outs = {str(o["path"]) for e in entries.values() for o in _listed(e, "outs")}
    # a stage's output, a folder of outputs (the runs of retrieve@ARM), or inside one
    made = outs | {"/".join(Path(p).parts[:i]) for p in outs for i in range(1, len(Path(p).parts))}

    def is_made(path: str) -> bool:
        parts = Path(path).parts
        return path in made or any("/".join(parts[:i]) in outs for i in range(1, len(parts)))

    watched: dict[str, tuple[Mapping, list[str]]] = {}
    for stage, entry in entries.items():
        for dep in _listed(entry, "deps"):
            path = str(dep["path"])
            if not is_made(path) and not path.endswith(".py"):
                watched.setdefault(path, (dep, []))[1].append(stage)
        for out in _listed(entry, "outs"):
            if str(out["path"]) in kept:
                watched.setdefault(str(out["path"]), (out, []))[1].append(stage)
    ignore = _ignored(ex.root)
    changed = {}
    for path in sorted(watched):
        recorded, by = watched[path]
        change = _change(ex.root / path, recorded, ignore)
        if change is not None:
            changed[path] = {"change": change, "stages": sorted(by)}
    if not changed:
        return {"state": "unchanged"}
    return {"state": "changed", "paths": changed,
            "stages": sorted({s for c in changed.values() for s in c["stages"]}),
            "repro": repro_command(ex)}


#: The stages whose outputs a user reads as the decision (the key, the arms' metrics, the
#: ppi estimates, the comparisons, the report, a new arm's estimate on its holes): each is
#: named by :func:`stages_behind` when it last ran on an earlier version of a file another
#: stage has made again since.
DECISION_STAGES = ("key", "metrics", "ppi", "compare", "report", "holes")


def stages_behind(ex, *, read: dict | None = None) -> dict:
    """The decision stages whose last run read an earlier version of a file that another
    stage has made again since (the stage failed or refused after its input was remade).

    DVC's lock records, for every stage, the md5 of each dependency as the stage last read
    it, and of each output as the stage last made it. When ``dvc repro`` remakes a file (the
    grades table, after people's grades changed) and a stage after it stops with an error
    (the ppi stage refusing), the later stage's lock entry keeps the md5 it read before: its
    outputs (the decision files ``relgrade status`` and ``relgrade metrics show`` print) are
    of the earlier input. Only the lock is read; no file is hashed.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment (its ``dvc.lock`` and ``dvc.yaml`` beside the params file).
    read : dict, optional
        As :func:`params_since_repro`'s.

    Returns
    -------
    dict
        ``{}`` when no decision stage is behind (or there is no readable lock); else
        ``{"stages": {stage: [(path, maker), ...]}, "repro": str}``: each stage of
        :data:`DECISION_STAGES` (``metrics@ARM`` included, by the name before ``@``) that
        is behind, sorted, with the paths (relative to the experiment's folder, sorted) it
        read in an earlier version and the stage that made each since, and the ``dvc
        repro`` that reruns it.
    """
    lock_path, _ = ex.dvc_files()
    got = _lock_and_params(ex, lock_path, read)
    if isinstance(got, dict):
        return {}
    stages, raw = got
    defined = _stages_now(lock_path.with_name("dvc.yaml"), raw, read)
    entries = _current_entries(stages, defined)

    made = {str(o["path"]): (stage, o.get("md5")) for stage, e in entries.items()
            for o in _listed(e, "outs")}
    behind: dict[str, list[tuple[str, str]]] = {}
    for stage, entry in entries.items():
        if stage.split("@")[0] not in DECISION_STAGES:
            continue
        for dep in _listed(entry, "deps"):
            maker = made.get(str(dep["path"]))
            if maker is None or maker[0] == stage or dep.get("md5") is None \
                    or maker[1] is None or dep.get("md5") == maker[1]:
                continue
            behind.setdefault(stage, []).append((str(dep["path"]), maker[0]))
    if not behind:
        return {}
    return {"stages": {s: sorted(p) for s, p in sorted(behind.items())},
            "repro": repro_command(ex)}


def behind_lines(behind: Mapping) -> list[str]:
    """The decision stages whose files are of an earlier input (the stage stopped after its
    input was made again), one line each.

    Parameters
    ----------
    behind : mapping
        :func:`relgrade.pipeline.since_repro.stages_behind`'s result (empty: nothing to say).

    Returns
    -------
    list of str

    Examples
    --------
    >>> for line in behind_lines({"repro": "dvc repro", "stages": {"ppi": [
    ...         ("data/grades.parquet", "grades")]}}): print(line)
    stale: ppi last ran on an earlier data/grades.parquet (made again since by grades); its files below are of the earlier input, and `dvc repro` runs it again (an Error line there says why it stops)
    """
    out = []
    for stage, paths in (behind.get("stages") or {}).items():
        read = ", ".join(f"{path} (made again since by {maker})" for path, maker in paths)
        out.append(f"stale: {stage} last ran on an earlier {read}; its files below are of "
                   f"the earlier input, and `{behind['repro']}` runs it again (an Error line "
                   "there says why it stops)")
    return out
