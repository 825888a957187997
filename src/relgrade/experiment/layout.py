"""Where the experiments of one repository live, and the rules their folders follow.

The repository's own experiment is its top folder (``params.yaml``, ``dvc.yaml``, ``data/``,
``metrics/``); every further experiment is a folder below ``experiments/`` with the same
shape. An experiment's name is the last segment of its folder: one path segment of letters,
digits, ``.``, ``_`` and ``-``, starting with a letter or digit (``experiments/httpx`` is
named ``httpx``; ``experiments/2026/httpx`` is a folder path whose name is ``httpx``). No two
experiments may write to the same file or folder: each ``paths`` entry, resolved from its
experiment's folder, must lie outside every other experiment's entries.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from relgrade.errors import InputError
from relgrade.experiment.params import PARAMS_FILE
from relgrade.text import hidden_at

#: The folder, under the repository, that holds every experiment but the default one.
EXPERIMENTS_DIR = "experiments"
#: One path segment: what an experiment's name may be.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def probe_report_file(root, grader: str) -> Path:
    """Where ``relgrade judge probe`` writes the probe report of model grader ``grader``:
    ``judges/probe-GRADER.json`` in the experiment's folder ``root`` (beside the
    repository's ledger for the top-level experiment)."""
    return Path(root) / "judges" / f"probe-{grader}.json"


def check_name(name: str, *, path=None) -> str:
    """An experiment name, checked: one path segment (see :data:`NAME_PATTERN`).

    Parameters
    ----------
    name : str
        The name (the last segment of the experiment's folder).
    path : str or Path, optional
        The folder it came from, named in the error.

    Returns
    -------
    str
        ``name`` unchanged.

    Raises
    ------
    InputError
        ``name`` holds a path separator (``/`` or ``\\``), is ``.`` or ``..``, is empty, or
        holds a character other than letters, digits, ``.``, ``_``, ``-``.

    Examples
    --------
    >>> check_name("httpx-bm25")
    'httpx-bm25'
    """
    if "/" in name or "\\" in name:
        raise InputError("an experiment name is one path segment; it holds a path separator",
                         path=path, found=repr(name),
                         fix="Give the experiment's folder, e.g. experiments/NAME")
    if not NAME_PATTERN.match(name) or set(name) == {"."}:
        raise InputError("an experiment name starts with a letter or digit and holds only "
                         "letters, digits, '.', '_' and '-'", path=path, found=repr(name))
    return name


def check_folder(folder) -> None:
    """Refuse an experiment folder whose path holds a control, format or separator
    character (:func:`relgrade.text.is_hidden`): the path is written into ``dvc.yaml``
    commands, YAML and the commands relgrade prints.

    Raises
    ------
    InputError
        Naming the folder (shown inert) and the first such character.

    Examples
    --------
    >>> check_folder("experiments/httpx-bm25")
    """
    text = Path(folder).as_posix()
    at = hidden_at(text)
    if at is not None:
        raise InputError("an experiment's folder path holds no control, format or line-"
                         "separator character", path=text,
                         found=f"U+{ord(text[at]):04X} at character {at + 1}",
                         fix="Name the folder in letters, digits, '.', '_', '-' and '/'")


def find_repository(start) -> Path:
    """The relgrade repository holding ``start``: the nearest folder with ``stages/`` and
    ``dvc.yaml``, from ``start`` upward.

    Parameters
    ----------
    start : str or os.PathLike
        A folder, which need not exist yet (its nearest existing parent is searched from).

    Returns
    -------
    pathlib.Path
        The repository's folder, absolute.

    Raises
    ------
    InputError
        No folder from ``start`` upward holds both.
    """
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / "stages").is_dir() and (folder / "dvc.yaml").is_file():
            return folder
    raise InputError("not inside a relgrade repository (no folder upward holds stages/ and "
                     "dvc.yaml)", path=start,
                     fix="Run it in a clone of the relgrade repository")


#: What the repository's own experiment (its top folder) is called in titles and headings.
DEFAULT_EXPERIMENT = "default experiment"


def experiment_label(root, repo) -> str:
    """The name an experiment goes by in plot titles and headings.

    Parameters
    ----------
    root : str or os.PathLike
        The experiment's folder (holding its ``params.yaml``).
    repo : str or os.PathLike
        The repository's folder (:func:`find_repository`).

    Returns
    -------
    str
        :data:`DEFAULT_EXPERIMENT` for the repository's top folder, else the experiment's
        folder name (``experiments/crowd-sim`` → ``crowd-sim``); never a path of this
        machine, so a rendered ``dvc.yaml`` is the same in every clone.

    Examples
    --------
    >>> experiment_label("/r/experiments/crowd-sim", "/r")
    'crowd-sim'
    >>> experiment_label("/r", "/r")
    'default experiment'
    """
    here, top = Path(root).resolve(), Path(repo).resolve()
    return DEFAULT_EXPERIMENT if here == top else here.name


def working_tree(base) -> Path:
    """The working tree an experiment's own files must stay inside.

    Parameters
    ----------
    base : str or os.PathLike
        The experiment's folder.

    Returns
    -------
    pathlib.Path
        The relgrade repository holding ``base`` (:func:`find_repository`), resolved; an
        experiment in no repository (a folder of its own) is its own working tree.
    """
    try:
        return find_repository(base)
    except InputError:
        return Path(base).resolve()


def refuse_absolute(entry: str, *, what: str, item: str, source=None, fix=None) -> None:
    """Refuse a path named in params by an absolute path.

    Parameters
    ----------
    entry : str
        The path as written.
    what : str
        What it names, as the message's subject (``a share source``).
    item : str
        How the entry is named in errors (``paths.call_cache``).
    source : str or os.PathLike, optional
        The params file, named in errors.
    fix : str, optional
        How to fix it.

    Raises
    ------
    InputError
        ``entry`` is an absolute path (or has a drive).
    """
    if Path(entry).is_absolute() or Path(entry).drive:
        raise InputError(f"{what} is named relative to the experiment, never by an absolute "
                         "path", path=source, item=item, found=entry, fix=fix)


def inside_tree(entry: str, base, tree, *, what: str, item: str, source=None,
                fix=None) -> Path:
    """Where a path named in params relative to ``base`` lies, checked to stay in ``tree``.

    Parameters
    ----------
    entry : str
        The path as written, relative to ``base``.
    base : str or os.PathLike
        The folder it is relative to (the experiment's).
    tree : str or os.PathLike
        The working tree it must lie inside (:func:`working_tree`).
    what, item, source, fix
        As :func:`refuse_absolute`.

    Returns
    -------
    pathlib.Path
        ``base / entry`` resolved (symlinks followed, ``..`` applied; it need not exist).

    Raises
    ------
    InputError
        ``entry`` is absolute, or it resolves (climbing with ``..``, or through a symlink)
        outside ``tree``.
    """
    refuse_absolute(entry, what=what, item=item, source=source, fix=fix)
    top = Path(tree).resolve()
    target = (Path(base).resolve() / entry).resolve()
    if not target.is_relative_to(top):
        raise InputError(f"{what} lies outside the repository's working tree", path=source,
                         item=item, found=f"{entry} resolves to {target.as_posix()}, outside "
                                          f"{top.as_posix()}", fix=fix)
    return target


def share_source(entry: str, base, *, item: str, source=None) -> Path:
    """Where a share source ``entry`` (params ``grading.share_from``, ``--share-from``) lies,
    checked to be an experiment of the repository that holds ``base``.

    Parameters
    ----------
    entry : str
        The source as written: a folder relative to ``base``.
    base : str or os.PathLike
        The experiment that shares (it need not exist yet: ``relgrade init``).
    item : str
        How the entry is named in errors (``grading.share_from: ../a``).
    source : str or os.PathLike, optional
        The params file, named in errors.

    Returns
    -------
    pathlib.Path
        The source's folder, resolved (symlinks followed).

    Raises
    ------
    InputError
        ``entry`` is an absolute path; ``base`` is not inside a relgrade repository; the
        folder resolves (symlinks followed) outside the repository's working tree
        (:func:`inside_tree`); or it is not one of the repository's experiments
        (:func:`experiment_folders`). A folder without ``params.yaml`` inside the repository
        is left to the caller to name.
    """
    fix = ("Name another experiment of this repository by its folder, relative to this one "
           "(e.g. ../other, or ../.. for the repository's top experiment)")
    what = "a share source"
    refuse_absolute(entry, what=what, item=item, source=source, fix=fix)
    base = Path(base).resolve()
    try:
        repo = find_repository(base)
    except InputError:
        raise InputError("sharing grades needs both experiments in one relgrade repository, "
                         "and this experiment is in none", path=source, item=item,
                         found=f"no folder above {base.as_posix()} holds stages/ and dvc.yaml",
                         fix="Remove grading.share_from, or move the experiment into the "
                             "repository") from None
    folder = inside_tree(entry, base, repo, what=what, item=item, source=source, fix=fix)
    experiments = {f.resolve() for f in experiment_folders(repo)}
    if (folder / PARAMS_FILE).is_file() and folder not in experiments:
        raise InputError("a share source is not an experiment of this repository (its top "
                         f"folder or a folder under {EXPERIMENTS_DIR}/)", path=source,
                         item=item, found=f"{entry} resolves to {folder.as_posix()}", fix=fix)
    return folder


def experiment_folders(repo) -> list[Path]:
    """Every experiment of the repository: its top folder when it has ``params.yaml``, then
    each folder under ``experiments/`` holding a ``params.yaml``, sorted, except a folder
    inside another one of them.

    A folder inside an experiment's folder is part of that experiment, never an experiment
    of its own, though it may hold a ``params.yaml``: the holes folder of an arm that joined
    after the key froze (``paths.holes_work``, e.g. ``experiments/NAME/data/holes``) does,
    for the graders' commands.

    Parameters
    ----------
    repo : str or os.PathLike
        The repository's folder.

    Returns
    -------
    list of pathlib.Path
        The experiments' folders (the top one first), as ``repo / relative``.
    """
    repo = Path(repo)
    out = [repo] if (repo / PARAMS_FILE).is_file() else []
    under = repo / EXPERIMENTS_DIR
    if under.is_dir():
        found = {p.parent for p in under.rglob(str(PARAMS_FILE))
                 if not any(part.startswith(".") for part in p.relative_to(under).parts)}
        out += sorted(f for f in found if not any(parent in found for parent in f.parents))
    return out


def claimed_paths(folder, paths: dict) -> dict[Path, str]:
    """The files and folders an experiment writes, resolved from its folder.

    Parameters
    ----------
    folder : str or os.PathLike
        The experiment's folder.
    paths : dict
        Its params ``paths`` section (entry name → path relative to the folder).

    Returns
    -------
    dict of pathlib.Path to str
        Absolute, normalised path → the ``paths`` entry that names it.
    """
    root = Path(folder).resolve()
    return {Path(_normalise(root / value)): name for name, value in paths.items()
            if value is not None}


def _normalise(path: Path) -> str:
    # resolve() would follow symlinks of folders that may not exist yet; collapse ".." only.
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if len(parts) > 1:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return str(Path(*parts))


def check_disjoint(claims: dict[Path, dict[Path, str]]) -> None:
    """Refuse two experiments that write to the same file or folder.

    Parameters
    ----------
    claims : dict
        Experiment folder → :func:`claimed_paths` of it.

    Raises
    ------
    InputError
        A path of one experiment equals, or lies inside or around, a path of another: names
        both experiments, both ``paths`` entries and the path.
    """
    seen: list[tuple[Path, Path, str]] = []
    for folder in sorted(claims):
        for path, entry in sorted(claims[folder].items()):
            for other_folder, other, other_entry in seen:
                if other_folder == folder:
                    continue
                if path == other or path in other.parents or other in path.parents:
                    raise InputError(
                        "two experiments claim the same output folder",
                        path=folder / PARAMS_FILE, item=f"paths.{entry}",
                        found=f"{path} (also paths.{other_entry} of {other_folder})",
                        fix="Keep every path of an experiment inside its own folder")
            seen.append((folder, path, entry))


def experiment_folder(folder) -> Path:
    """An ``--experiment`` folder as the user typed it, read from where the command runs.

    A relative folder that holds no params file here is read from the repository's top
    as well, so that a command relgrade printed (``--experiment experiments/NAME``, relative
    to the top) also works typed inside the repository, e.g. in the experiment's folder.

    Parameters
    ----------
    folder : str or os.PathLike
        The folder given.

    Returns
    -------
    pathlib.Path
        ``folder`` when it holds ``params.yaml`` (or is absolute, or no repository holds the
        working folder), else the repository's ``folder`` when that holds one, else ``folder``.
    """
    folder = Path(folder)
    if folder.is_absolute() or (folder / PARAMS_FILE).is_file():
        return folder
    try:
        top = find_repository(Path.cwd()) / folder
    except InputError:
        return folder
    return top if (top / PARAMS_FILE).is_file() else folder


def _root_and_repository(ex) -> tuple[Path, Path]:
    """The experiment's folder and its repository's (the folder itself outside any)."""
    root = Path(ex.root).resolve()
    try:
        return root, find_repository(root)
    except InputError:
        return root, root


def repro_command(ex, stage: str | Sequence[str] | None = None, *, cwd=None) -> str:
    """The ``dvc repro`` a user types at the repository's top (or in folder ``cwd``) to run
    experiment ``ex``'s pipeline (or some stages of it).

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    stage : str or sequence of str, optional
        One stage's name (``packets``), or several (``["retrieve@a", "retrieve@b"]``), each
        a target of the one command.
    cwd : str or os.PathLike, optional
        The folder the command is typed in (default: the repository's top).

    Returns
    -------
    str
        ``dvc repro [STAGE ...]`` typed in the experiment's folder (the repository's top
        experiment, by default), else ``dvc repro PATH/dvc.yaml[:STAGE] ...`` with ``PATH``
        relative to ``cwd`` (the repository's top by default).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> repro_command(SimpleNamespace(root="/nowhere/x"), "packets")
    'dvc repro packets'
    >>> repro_command(SimpleNamespace(root="/nowhere/x"), ["retrieve@a", "retrieve@b"])
    'dvc repro retrieve@a retrieve@b'
    """
    stages = [stage] if isinstance(stage, str) else list(stage or [])
    root, repo = _root_and_repository(ex)
    here = Path(cwd).resolve() if cwd is not None else repo
    if here == root:
        return " ".join(["dvc repro", *stages])
    target = f"{Path(os.path.relpath(root, here)).as_posix()}/dvc.yaml"
    return " ".join(["dvc repro", *([f"{target}:{s}" for s in stages] or [target])])


def grade_commands(ex) -> dict[str, str]:
    """Per grader, the command a user types (at the repository's top) to do its grading.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        The experiment.

    Returns
    -------
    dict of str to str
        Grader name → ``relgrade grade run --grader NAME`` for a grader with a ``command``,
        ``relgrade serve`` for a person (kind ``human``: grades in the browser), else
        ``relgrade grade import --grader NAME FILE`` (grades made elsewhere), after
        ``relgrade packets export --role ROLE --out NAME-packets.jsonl`` (+
        :data:`relgrade.protocol.bank.THEN`) for a grader or auditor, the file of packets
        it grades from (with ``--grader NAME`` when it is not the role's own); each with
        ``--experiment PATH`` when the experiment is not the repository's top one (``PATH``
        relative to the repository). An experiment outside any repository gets no suffix.
        While the packets must be rebuilt first (:meth:`Experiment.packets_stale`, e.g.
        after a rubric revision), each is ``dvc repro ...:packets`` +
        :data:`relgrade.protocol.bank.THEN` + the command, which
        :func:`relgrade.protocol.bank.pending_message` names once before the commands.
    """
    from relgrade.protocol.bank import THEN  # it loads pandas, which a stage may not need

    where = experiment_option(ex)
    # packets to be rebuilt first (a rubric revision, a new pool): grading the old ones
    # is refused, so the rebuild is named before the grading command
    first = repro_command(ex, "packets") + THEN if ex.packets_stale() else ""
    out = {}
    for name, grader in ex.params.graders_dict().items():
        if grader.get("command"):
            out[name] = f"{first}relgrade grade run --grader {name}{where}"
        elif grader.get("kind") == "human":
            out[name] = f"{first}relgrade serve{where}"
        else:
            out[name] = f"{first}{_export_first(ex, name, grader, where)}" \
                        f"relgrade grade import --grader {name}{where} FILE"
    return out


def _export_first(ex, name: str, grader, where: str) -> str:
    """For a grader of grades made elsewhere: ``relgrade packets export ...`` + ``THEN``,
    the command that writes the packets it grades from (its role's, only the pairs it owes
    once it has grades), or "" for a role without packets to export."""
    from relgrade.protocol.bank import THEN

    role = grader.get("role")
    if role not in ("grader", "auditor"):  # relgrade.schema.ROLES: the roles with packets
        return ""
    mine = ex.params.grading.key_grader if role == "grader" else ex.params.grading.auditor
    # the export keeps the owed pairs of the role's grader unless told whose
    who = "" if name == mine else f" --grader {name}"
    return (f"relgrade packets export --role {role}{who} --out {name}-packets.jsonl{where}"
            + THEN)


def packets_build_command(ex, grader: str, queries: Sequence[str]) -> str | None:
    """The ``dvc repro`` that writes grader ``grader``'s packets of ``queries`` first, when
    its packets folder does not hold them yet (None when it does).

    The stopping rule (params ``grading.stop: anytime``) moves its next batch when the ppi
    stage looks, after the packets stage ran: the packets of that batch exist only once the
    packets stage runs again (it reads the rule's record), and ``relgrade grade run``,
    ``relgrade serve`` and ``relgrade packets export`` read the packets.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    grader : str
        A grader of params ``graders``.
    queries : sequence of str
        Query ids the grader owes.

    Returns
    -------
    str or None
        :func:`repro_command` of stage ``packets`` (``dvc repro PATH/dvc.yaml:packets``), or
        None when every query has a packet of the grader.
    """
    try:
        held = set(ex.grader_packets(grader))
    except InputError:
        held = set()
    if all(str(q) in held for q in queries):
        return None
    return repro_command(ex, "packets")


def experiment_option(ex) -> str:
    """The `` --experiment PATH`` a command typed at the repository's top needs to name
    experiment ``ex`` ("" for the top's own experiment, or outside any repository).

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        Anything with a ``root`` folder.

    Returns
    -------
    str
        ``" --experiment experiments/NAME"`` (POSIX, relative to the repository found from
        ``ex.root`` upward) or ``""``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> experiment_option(SimpleNamespace(root="/nowhere/x"))
    ''
    """
    root, repo = _root_and_repository(ex)
    return "" if repo == root else f" --experiment {root.relative_to(repo).as_posix()}"


#: relgrade's commands that take no ``--experiment`` (they name their files themselves).
_NO_EXPERIMENT = frozenset({"init", "evaluate", "clicks", "aggregate"})


def aim_commands(text: str, option: str) -> str:
    """``text`` with every relgrade command it names in backticks (`` `relgrade serve` ``)
    given the experiment's ``option`` when the command names no ``--experiment`` itself and
    takes one (not ``relgrade init``, ``evaluate``, ``clicks`` or ``aggregate``).

    A command an error names is typed where the user stands; unless it names its
    experiment, it acts on the one of that folder (at the repository's top, the default
    experiment), which is not the one the error is about.

    Parameters
    ----------
    text : str
        A message.
    option : str
        ``" --experiment PATH"`` (as :func:`experiment_option` gives it), or ``""`` to
        leave the text as it is.

    Returns
    -------
    str

    Examples
    --------
    >>> aim_commands("run `relgrade serve` or `relgrade status --experiment y`",
    ...              " --experiment x")
    'run `relgrade serve --experiment x` or `relgrade status --experiment y`'
    """
    if not option:
        return text

    def aimed(m: re.Match) -> str:
        command = m.group(1)
        if "--experiment" in command or command.split()[1] in _NO_EXPERIMENT:
            return m.group(0)
        return f"`{command}{option}`"

    return re.sub(r"`(relgrade [^`]*)`", aimed, text)


def redraw_command(ex) -> str:
    """The ``relgrade audit redraw --force`` a user types (at the repository's top) to draw
    experiment ``ex``'s audit sample again.

    Returns
    -------
    str
        ``relgrade audit redraw --force [--experiment PATH]``.
    """
    where = experiment_option(ex)
    return f"relgrade audit redraw --force{where}"


def top_path(ex, relative) -> str:
    """A file of experiment ``ex`` named in params (relative to its folder), as a user at the
    repository's top types it, beside the commands the messages name.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    relative : str or os.PathLike
        The path as params give it (``data/input/intents.tsv``).

    Returns
    -------
    str
        ``experiments/NAME/data/input/intents.tsv`` for an experiment below the top; the
        path itself for the top's experiment (or outside any repository).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> top_path(SimpleNamespace(root="/nowhere/x"), "data/input/intents.tsv")
    'data/input/intents.tsv'
    """
    root, repo = _root_and_repository(ex)
    return (root / relative).relative_to(repo).as_posix()


def stage_path(ex, path) -> str:
    """A file of experiment ``ex`` that a stage prints, named as :func:`top_path` names it.

    DVC runs a stage in the experiment's folder, but its lines are read at the repository's
    top, where ``dvc repro experiments/NAME/dvc.yaml`` was typed: there ``data/key`` names
    the top experiment's folder. Run in the experiment's folder, a stage names a file below
    it from the top (``experiments/NAME/data/key/key.jsonl``), as its errors do
    (:mod:`relgrade.experiment.stage`); otherwise, and for the top's experiment, the path is
    printed as it is given.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    path : str or os.PathLike
        A path as :meth:`Experiment.path` or :meth:`Experiment.file` give it (under
        ``ex.root``).

    Returns
    -------
    str
        POSIX form.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> stage_path(SimpleNamespace(root="/nowhere/x"), "/nowhere/x/data/key")
    '/nowhere/x/data/key'
    """
    given = Path(path).as_posix()
    if Path.cwd().resolve() != Path(ex.root).resolve():
        return given
    relative = os.path.relpath(path, ex.root)
    if relative.startswith(".."):
        return given
    named = top_path(ex, relative)
    return given if named == Path(relative).as_posix() else named


def disagreements_file(ex) -> str | None:
    """Experiment ``ex``'s disagreements file (params ``paths.disagreements``) as a user at
    the repository's top types it.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment

    Returns
    -------
    str or None
        The path in POSIX form (:func:`top_path`: ``experiments/NAME/data/private/...``
        below the top, the params' own path for the top's experiment); None when params
        name no disagreements file. Raises nothing.
    """
    relative = ex.params.paths.disagreements
    return None if not relative else top_path(ex, relative)


def review_command(ex) -> str:
    """The ``relgrade intents review`` a user types (at the repository's top, or anywhere in
    it: ``--experiment`` is read from the top too) to review experiment ``ex``'s intents, as
    its auditor (params ``grading.auditor``).

    Returns
    -------
    str
        ``run `relgrade intents review [--experiment PATH] --reviewer AUDITOR```.
    """
    where = experiment_option(ex)
    auditor = ex.params.grading.auditor or "NAME"
    return f"run `relgrade intents review{where} --reviewer {auditor}`"


# --- the experiment's model judges ------------------------------------------------------

def model_judges(ex) -> list[str]:
    """The experiment's model graders that have a command (and so a judge identity)."""
    return [name for name, g in ex.params.graders.items()
            if g.kind == "model" and g.as_dict().get("command") is not None]


def key_judges(ex) -> list[str]:
    """The model graders with a command whose grades make the key: ``grading.key_grader``
    and, in triage mode, the graders of role ``triage``."""
    names = [ex.params.grading.key_grader]
    if ex.params.grading.mode == "triage":
        names += [n for n, g in ex.params.graders.items() if g.role == "triage"]
    judges = model_judges(ex)
    return [n for n in dict.fromkeys(names) if n in judges]


def judge_scripts(ex) -> list[str]:
    """The files of the working tree the key judges' commands run (their programs or
    scripts, which their judge identities hash: :func:`relgrade.io.files.command_script`),
    relative to the experiment's folder, POSIX, sorted. A command that does not parse as
    a command line names none here (``grade run`` and the stages say why)."""
    import shlex

    from relgrade.io.files import command_script

    tree = working_tree(ex.root)
    out = set()
    for name in key_judges(ex):
        value = ex.params.graders[name].as_dict().get("command")
        try:
            argv = shlex.split(value) if isinstance(value, str) else [str(a) for a in value]
        except (ValueError, TypeError):
            continue
        found = command_script(argv, tree=tree, cwd=tree)
        if found is not None:
            out.add(Path(os.path.relpath(found[1], Path(ex.root).resolve())).as_posix())
    return sorted(out)
