"""A new experiment's folder, written in one piece by ``relgrade init``.

``experiments/NAME/`` gets ``params.yaml`` (from ``templates/params.yaml.j2``), ``dvc.yaml``
(rendered from the stage registry, :func:`relgrade.pipeline.registry.render`, with every
repository file it names written relative to the experiment's folder, so each stage runs
there and reads that folder's ``params.yaml``), ``rubric/v1.md`` (the generic rubric) and its changelog,
``data/input/`` with the inputs checked and copied or converted (see
:mod:`relgrade.experiment.inputs`), an empty ``data/grades/`` and ``DESIGN.md``. The folder
is filled beside its place and moved there only when everything succeeded.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import jinja2
import yaml

from relgrade.errors import InputError
from relgrade.experiment import inputs
from relgrade.pipeline.arms import ARM_DEPTH, BUILT_IN  # the kinds --arm accepts, as `arm add`
from relgrade.pipeline.stages.corpus import build_corpus
from relgrade.pipeline.design import write_design
from relgrade.pipeline.panel import check_gold_file
from relgrade.pipeline.registry import render
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import (
    NAME_PATTERN,
    check_disjoint,
    check_folder,
    check_name,
    claimed_paths,
    experiment_folders,
    find_repository,
    share_source,
)
from relgrade.experiment.params import PARAMS_FILE, load_params
from relgrade import query_sampling as querylog
from relgrade.io.files import atomic_dir, read_yaml, write_json, write_text
from relgrade.io.querylog import read_query_log
from relgrade.protocol.gate import PEOPLE_FAMILY
from relgrade.protocol.intents import UNREVIEWED

#: The share of the pool ``init --mode raters`` draws as gold questions (``--gold-fraction``):
#: about 10%, as docs/raters.md advises; a gold file needs that many pool pairs.
GOLD_FRACTION = 0.1



@dataclass
class Plan:
    """What ``relgrade init`` is asked to make.

    Attributes
    ----------
    folder : pathlib.Path
        The experiment's folder (need not exist; if it does, it must be empty unless
        ``force``).
    corpus, queries, intents : pathlib.Path
        The input files (see :mod:`relgrade.experiment.inputs`).
    runs : dict of str to pathlib.Path
        External runs, arm name → file.
    arms : dict of str to str
        Built-in arms, arm name → ``bm25``, ``tfidf``, ``embed``, ``rrf`` (fuses every
        other arm) or ``rrf:A,B`` (fuses arms A and B).
    """

    folder: Path
    corpus: Path
    queries: Path | None
    intents: Path | None
    runs: dict = field(default_factory=dict)
    arms: dict = field(default_factory=dict)
    baseline: str | None = None
    pool_depth: int = 10
    audit_min: int = 10
    seed: int = 0
    key_grader: str = "grader-a"
    auditor: str = "auditor-b"
    grader_command: str | None = None
    auditor_command: str | None = None
    force: bool = False
    #: A query log: the ``sample`` stage draws the query set from it (``queries`` and
    #: ``intents`` are then not given: the intents are written for the sampled queries).
    query_log: Path | None = None
    sample_n: int | None = None
    allocation: str = "equal"
    #: Other experiments whose banks this one reuses (params ``grading.share_from``), each a
    #: folder relative to the new experiment's.
    share_from: list = field(default_factory=list)
    #: ``single``, ``triage``, ``raters`` or ``ppi`` (params ``grading.mode``).
    mode: str = "single"
    #: Clicks mode: the click log, the rankings folder (TREC runs, for IPS estimates) and the
    #: key folder (a frozen key, for the training set), and the propensity method.
    click_log: Path | None = None
    rankings: Path | None = None
    click_key: Path | None = None
    click_method: str = "randomization"
    #: Ppi mode: the share of the queries people grade in full (params ``ppi.human_fraction``;
    #: None: :data:`HUMAN_FRACTION` unless ``human_queries`` is given).
    human_fraction: float | None = None
    #: Ppi mode: instead of the fraction, how many queries people grade
    #: (params ``ppi.human_queries``).
    human_queries: int | None = None
    #: Triage mode: the triage model grader, (name, command or None).
    triage: tuple = ("model-t", None)
    #: Raters mode: the panel, [(name, command or None), ...], at least 3.
    raters: list = field(default_factory=list)
    #: Raters mode: the expert, (name, command or None).
    expert: tuple = ("expert-e", None)
    #: Raters mode: the gold pairs (query_id, chunk_id, grade).
    gold: Path | None = None
    #: Raters mode: the share of the pool drawn as gold questions (params ``gold.fraction``),
    #: in (0, 0.5].
    gold_fraction: float = GOLD_FRACTION
    #: Keep chunks whose text is empty or blank (params ``corpus.allow_empty``).
    allow_empty: bool = False


def parse_pairs(values, *, option: str) -> dict[str, str]:
    """``NAME=VALUE`` option values as a mapping, in the order given.

    Raises
    ------
    InputError
        A value without ``=``, an empty or repeated name, or a name that is not one
        path segment of letters, digits, ``.``, ``_``, ``-``.

    Examples
    --------
    >>> parse_pairs(["bm25=bm25", "mine=runs/a.trec"], option="--arm")
    {'bm25': 'bm25', 'mine': 'runs/a.trec'}
    """
    out: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise InputError(f"{option} takes NAME=VALUE", found=repr(value))
        try:
            check_name(name)
        except InputError:
            raise InputError("an arm name starts with a letter or digit and holds only letters, "
                             "digits, '.', '_' and '-'", item=option, found=repr(name)) from None
        if name in out:
            raise InputError("the same arm is named twice", item=option, found=name)
        out[name] = rest
    return out


def arms_section(plan: Plan, run_files: dict[str, str], root_rel: str) -> dict:
    """The params ``arms`` section: built-in arms first, then file arms.

    Parameters
    ----------
    plan : Plan
        The arms asked for.
    run_files : dict of str to str
        File arm → its run's path under ``data/input/``.
    root_rel : str
        The repository's folder relative to the experiment's (``../..``).

    Raises
    ------
    InputError
        An unknown kind; an arm named both as built-in and as a run; an rrf arm fusing an
        unknown arm or itself, or nothing.
    """
    both = sorted(set(plan.arms) & set(plan.runs))
    if both:
        raise InputError("an arm is named both by --arm and by --run", found=", ".join(both))
    if not plan.arms and not plan.runs:
        raise InputError("an experiment needs at least one arm",
                         fix="Add --arm NAME=KIND or --run NAME=FILE")
    names = [*plan.arms, *plan.runs]
    out = {}
    for name, spec in plan.arms.items():
        kind, _, fuse = spec.partition(":")
        if kind not in BUILT_IN:
            raise InputError(f"unknown built-in arm kind (use {', '.join(BUILT_IN)}, or "
                             "--run NAME=FILE for an external run)", item=f"--arm {name}",
                             found=repr(spec))
        arm = {"kind": kind, "depth": ARM_DEPTH}
        if kind == "rrf":
            fused = [f for f in fuse.split(",") if f] if fuse else [n for n in names
                                                                    if n != name]
            bad = [f for f in fused if f not in names or f == name]
            if bad or not fused:
                raise InputError("an rrf arm fuses other arms of this experiment",
                                 item=f"--arm {name}", found=", ".join(bad) or "nothing")
            arm |= {"k": 60, "fuse": fused}
        arm["source"] = f"{root_rel}/{BUILT_IN[kind]}"
        out[name] = arm
    for name in plan.runs:
        out[name] = {"kind": "file", "depth": ARM_DEPTH, "source": f"data/input/{run_files[name]}"}
    return out


def yaml_value(value) -> str:
    r"""``value`` as one line of YAML, written by the YAML serializer (never pasted as text).

    Plain style when that reads back as ``value``, else double-quoted with escapes, so a
    value holding a line break, ``: `` or ``#`` stays one value and adds no key.

    Examples
    --------
    >>> yaml_value("grader-a"), yaml_value(5), yaml_value(["a", "b"])
    ('grader-a', '5', '[a, b]')
    >>> yaml_value("x\n  share_from: [/etc]")
    '"x\\n  share_from: [/etc]"'
    """
    def dump(**style):
        text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True,
                              width=1 << 30, **style)
        return text.removesuffix("\n...\n").removesuffix("\n")

    text = dump()
    if "\n" in text or yaml.safe_load(text) != value:
        text = dump(default_style='"')
    return text


def check_names(plan: Plan) -> None:
    """Refuse a grader or arm name that is not one plain word of :data:`NAME_PATTERN`.

    Names become params keys, folder names (``data/grades/NAME``) and file names
    (``metrics/arms/NAME.json``), so each starts with a letter or digit and holds only
    letters, digits, ``.``, ``_`` and ``-``.

    Raises
    ------
    InputError
        Naming the option and the value found.
    """
    named = [("--grader", plan.key_grader), ("--auditor", plan.auditor),
             *(("--arm", a) for a in plan.arms), *(("--run", a) for a in plan.runs)]
    if plan.mode == "triage":
        named.append(("--triage", plan.triage[0]))
    if plan.mode == "raters":
        named += [("--rater", n) for n, _ in plan.raters] + [("--expert", plan.expert[0])]
    if plan.baseline is not None:
        named.append(("--baseline", plan.baseline))
    for option, value in named:
        if not isinstance(value, str) or not NAME_PATTERN.match(value) or set(value) == {"."}:
            raise InputError("a name starts with a letter or digit and holds only letters, "
                             "digits, '.', '_' and '-'", item=option, found=repr(value),
                             fix="Choose a plain name such as grader-a or bm25")


def parse_person(value: str, *, option: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME=COMMAND`` as (name, command or None).

    Examples
    --------
    >>> parse_person("rater-1=python rate.py --seed 1", option="--rater")
    ('rater-1', 'python rate.py --seed 1')
    >>> parse_person("expert-e", option="--expert")
    ('expert-e', None)
    """
    name, sep, command = value.partition("=")
    if sep and not command.strip():
        raise InputError(f"{option} takes NAME or NAME=COMMAND", found=repr(value))
    return name, (command if sep else None)


def graders_section(plan: Plan) -> dict:
    """The params ``graders`` section: each grader a command grader (kind ``model``) when given
    a command, else a person grading on the web page. In ppi mode the auditor is the human
    grader of the sample whatever it is given: kind ``human``, family ``human``, with its
    command when one is given (a person's grades fetched by a command), so its work is priced
    in annotator-hours and the model's in calls.

    Single mode: the key grader and the auditor. Triage mode: the triage model grader too
    (role ``triage``). Raters mode: the raters (role ``rater``), the expert (role ``expert``)
    and the auditor; the key grader is then the panel's aggregate, not a grader of its own.
    """
    def entry(role, command):
        if command:
            return {"role": role, "kind": "model", "command": command}
        return {"role": role, "kind": "human", "family": PEOPLE_FAMILY}

    def human(role, command):  # a person, answering on the page or through a command
        return {"role": role, "kind": "human", "family": PEOPLE_FAMILY} | (
            {"command": command} if command else {})

    people = [(plan.auditor, "auditor", plan.auditor_command)]
    if plan.mode != "raters":
        people.insert(0, (plan.key_grader, "grader", plan.grader_command))
    out = {name: entry(role, command) for name, role, command in people}
    if plan.mode == "ppi":  # the auditor is the human grader of the sample, by definition
        out[plan.auditor] = human("auditor", plan.auditor_command)
    if plan.mode == "triage":
        name, command = plan.triage
        out[name] = entry("triage", command)
    if plan.mode == "raters":
        for name, command in plan.raters:
            out[name] = entry("rater", command)
        out[plan.expert[0]] = entry("expert", plan.expert[1])
    return out


#: The paths a mode adds to params ``paths``.
MODE_PATHS = {
    # the people's queue holds the model's grades: private, DVC-cached, never in git
    "triage": {"triage_queue": "data/private/triage-queue.tsv",
               "triage_key": "data/key/triage.tsv"},
    "ppi": {"ppi": "metrics/ppi.json", "ppi_budget": "metrics/plots/budget.csv"},
    "raters": {"rater_grades": "data/graded/raters.parquet",
               "assignment": "data/private/assignment.parquet",
               "aggregate": "metrics/aggregate.json",
               "aggregated": "data/aggregate/aggregated.parquet",
               "adjudication_queue": "data/aggregate/queue.jsonl",
               "adjudication_packets": "data/aggregate/packets",
               "adjudication": "data/aggregate/adjudication.jsonl"},
}


#: The grade scale ``init`` writes in params (``scale.grades``), against which ``--gold`` is
#: checked.
INIT_SCALE = (0, 1, 2)

#: Where ``init --gold`` copies the gold file: private, kept out of git (its answers would
#: let a rater who reads the repository skip the gold questions); track it with ``dvc add``.
GOLD_INPUT = "data/private/gold.tsv"


def mode_params(plan: Plan) -> tuple[str, str]:
    """The params text a mode adds: lines under ``paths`` and whole sections.

    Returns
    -------
    (str, str)
        ``paths`` lines (each ending with a line break) and the sections (YAML, each
        followed by a blank line); both empty in single mode.
    """
    paths = "".join(f"  {k}: {yaml_value(v)}\n" for k, v in MODE_PATHS.get(plan.mode, {}).items())
    sections: dict = {}
    if plan.mode == "triage":
        sections["triage"] = {"grader": plan.triage[0], "zero_sample": 0.5, "level": 0.95}
    if plan.mode == "ppi":
        fraction = None if plan.human_queries else (
            HUMAN_FRACTION if plan.human_fraction is None else plan.human_fraction)
        sections["ppi"] = {"human_fraction": fraction,
                           "human_queries": plan.human_queries,
                           "level": 0.95, "interval": "jackknife",
                           "judge_audit": {"max_spread": 0.15, "k": 10, "bootstrap": 1000},
                           "budget": {"fractions": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0]}}
    if plan.mode == "raters":
        sections["raters"] = {"per_pair": 3}
        sections["gold"] = {"input": GOLD_INPUT, "fraction": plan.gold_fraction,
                            "min_accuracy": 0.6, "min_gold": 3, "within_one": True}
        sections["aggregation"] = {"method": "majority"}
        sections["adjudication"] = {"max_spread": 1, "expert": plan.expert[0]}
    text = "".join(yaml.safe_dump({k: v}, sort_keys=False) + "\n" for k, v in sections.items())
    return paths, text


#: The share of the queries people grade in ppi mode when neither ``--human-fraction`` nor
#: ``--human-queries`` is given.
HUMAN_FRACTION = 0.2

#: The fewest human-sample queries ``init`` accepts: the default ``jackknife`` interval
#: deletes one query at a time and re-tunes lambda on the rest, which needs 3 (the ppi
#: stage's least sample, :data:`relgrade.evaluation.ppi.MIN_SAMPLE`, whatever the
#: interval; params and the audit stage apply the same rule).
MIN_HUMAN_QUERIES = 3


def human_sample_size(plan: Plan, n_queries: int) -> int:
    """The human sample's size in queries that ``plan``'s ppi options give, checked.

    ``--human-fraction F`` gives ``round(F * n_queries)`` (Python's round, half to even, as
    the audit stage draws it); ``--human-queries N`` gives ``N``; neither gives
    :data:`HUMAN_FRACTION` of the queries.

    Parameters
    ----------
    plan : Plan
        In ppi mode.
    n_queries : int
        The experiment's queries (the queries file's rows, or ``--sample-n``).

    Returns
    -------
    int

    Raises
    ------
    InputError
        The size is below :data:`MIN_HUMAN_QUERIES` or above ``n_queries``, naming the
        option and what it resolved to.

    Examples
    --------
    >>> human_sample_size(Plan(folder="x", corpus=None, queries=None, intents=None,
    ...                        mode="ppi", human_fraction=0.25), 36)
    9
    """
    if plan.human_queries is not None:
        size, option = int(plan.human_queries), "--human-queries"
        said = f"{size}"
    else:
        fraction = HUMAN_FRACTION if plan.human_fraction is None else plan.human_fraction
        size, option = int(round(fraction * n_queries)), "--human-fraction"
        said = f"{fraction:g} of {n_queries} queries = {size}"
    if size < MIN_HUMAN_QUERIES:
        raise InputError(f"the human sample needs at least {MIN_HUMAN_QUERIES} queries (the "
                         "jackknife interval deletes one and re-tunes lambda on the rest)",
                         item=option, found=said,
                         fix=f"Raise it (the experiment has {n_queries} queries)")
    if size > n_queries:
        raise InputError("the human sample cannot hold more queries than the experiment has",
                         item=option, found=f"{said}, of {n_queries} queries",
                         fix=f"Give at most {n_queries}")
    return size


def check_mode(plan: Plan) -> None:
    """Refuse a mode's options that do not fit it.

    Raises
    ------
    InputError
        Raters mode with fewer than 4 raters, a rater named twice or like another grader,
        or no ``--gold``; ``--rater``/``--gold`` outside raters mode; a triage grader named
        like the key grader or the auditor; ``--human-fraction`` or ``--human-queries``
        outside ppi mode, or both given; a human fraction outside (0, 1].
    """
    if plan.mode == "ppi":
        if not plan.grader_command:
            raise InputError("--mode ppi needs --grader-command: the key grader is the model "
                             "grader that grades every pool pair", item="--grader-command",
                             found="none", fix="Give the model grader's command")
        if plan.key_grader == plan.auditor:
            raise InputError("in ppi mode the human grader (--auditor) must not be the model "
                             "grader (--grader)", item="--auditor", found=plan.auditor)
        if plan.human_fraction is not None and plan.human_queries is not None:
            raise InputError("give --human-fraction or --human-queries, not both",
                             item="--human-fraction/--human-queries",
                             found=f"{plan.human_fraction:g} and {plan.human_queries}")
        if plan.human_fraction is not None and not (0 < plan.human_fraction <= 1):
            raise InputError("the human fraction must lie in (0, 1]", item="--human-fraction",
                             found=str(plan.human_fraction))
    else:
        given = [o for o, v in (("--human-fraction", plan.human_fraction),
                                ("--human-queries", plan.human_queries)) if v is not None]
        if given:
            raise InputError(f"{' and '.join(given)} go{'es' if len(given) == 1 else ''} with "
                             "--mode ppi", item=given[0], found=f"--mode {plan.mode}",
                             fix="Add --mode ppi, or leave the option out")
    if plan.mode != "raters" and (plan.raters or plan.gold is not None):
        raise InputError("--rater and --gold go with --mode raters", item="--mode",
                         found=plan.mode)
    if plan.mode == "raters":
        names = [n for n, _ in plan.raters]
        if len(names) < 4:
            # three raters grade each pair; a rater's gold must lie outside its own work,
            # so the panel needs one rater more than the raters per pair
            raise InputError("a rater panel needs at least 4 raters (3 grade each pair; each "
                             "rater's gold lies outside its own work)", item="--rater",
                             found=str(len(names)), fix="Give --rater NAME[=COMMAND] 4 times or more")
        taken = [plan.auditor, plan.expert[0], plan.key_grader]
        clash = sorted({n for n in names if names.count(n) > 1 or n in taken})
        if clash:
            raise InputError("a rater's name is given twice or names another grader",
                             item="--rater", found=", ".join(clash))
        if not 0 < plan.gold_fraction <= 0.5:
            raise InputError("the gold share of the pool is in (0, 0.5]", item="--gold-fraction",
                             found=repr(plan.gold_fraction))
        if plan.gold is None:
            raise InputError("a rater panel needs gold pairs", item="--gold",
                             fix="Give --gold FILE: a TSV of query_id, chunk_id, grade")
    if plan.mode == "triage" and plan.triage[0] in (plan.key_grader, plan.auditor):
        raise InputError("the triage grader is named like the key grader or the auditor",
                         item="--triage", found=plan.triage[0])


def cached_outputs(pipeline: dict, paths: dict, arms) -> list[str]:
    """The files of ``pipeline`` that dvc caches (and git must ignore), in stage order.

    Parameters
    ----------
    pipeline : dict
        A ``dvc.yaml`` as :func:`pipeline` returns it.
    paths : dict of str to str
        The params ``paths`` section: ``${paths.NAME}`` is read from it.
    arms : iterable of str
        The arms a ``foreach: ${arms}`` stage runs over (``${key}``).

    Returns
    -------
    list of str
        Output paths relative to the experiment's folder: every ``outs``, ``metrics`` and
        ``plots`` entry of a stage that is not ``cache: false``.

    Examples
    --------
    >>> p = {"stages": {"retrieve": {"foreach": "${arms}", "do": {"outs": [
    ...     "${paths.runs}/${key}.trec"]}}, "pool": {"outs": ["${paths.pool}",
    ...     {"${paths.pool_manifest}": {"cache": False}}]}}}
    >>> cached_outputs(p, {"runs": "data/runs", "pool": "data/pool/pool.parquet",
    ...                    "pool_manifest": "data/pool/manifest.json"}, ["bm25", "mine"])
    ['data/runs/bm25.trec', 'data/runs/mine.trec', 'data/pool/pool.parquet']
    """
    def resolve(text: str, key=None) -> str:
        for name, value in paths.items():
            text = text.replace("${paths." + name + "}", str(value))
        return text.replace("${key}", key) if key is not None else text

    out = []
    for stage in pipeline["stages"].values():
        body = stage.get("do", stage)
        keys = list(arms) if "foreach" in stage else [None]
        for entry in (*body.get("outs", []), *body.get("metrics", []), *body.get("plots", [])):
            name, opts = (entry, {}) if isinstance(entry, str) else next(iter(entry.items()))
            if (opts or {}).get("cache", True):
                out.extend(resolve(name, key) for key in keys)
    return out


def write_gitignores(folder: Path, outputs) -> None:
    """Write a ``.gitignore`` beside each cached output, as ``dvc repro`` would once its stage
    succeeds: done up front so that an experiment committed after a failed or partial run
    never has a cached output tracked by git (dvc then refuses to reproduce it)."""
    by_folder: dict[Path, list[str]] = {}
    for out in outputs:
        path = Path(out)
        by_folder.setdefault(path.parent, []).append("/" + path.name)
    for parent, names in by_folder.items():
        (folder / parent).mkdir(parents=True, exist_ok=True)
        write_text(folder / parent / ".gitignore", "".join(f"{n}\n" for n in names))


def _paths_of(params_file: Path) -> dict:
    paths = (read_yaml(params_file) or {}).get("paths")
    return {k: v for k, v in paths.items() if isinstance(v, str)} if isinstance(paths, dict) else {}


def _template(name: str) -> str:
    return resources.files("relgrade.pipeline").joinpath("templates", name).read_text(
        encoding="utf-8")


def share_sources(entries, target: Path) -> list[str]:
    """The grade folders of the share sources ``entries``, as deps of the new experiment.

    Parameters
    ----------
    entries : sequence of str
        ``--share-from`` values: experiment folders relative to ``target``.
    target : pathlib.Path
        The new experiment's folder (absolute).

    Returns
    -------
    list of str
        Per entry, ``ENTRY/GRADES_IN`` normalised (``../other/data/grades``).

    Raises
    ------
    InputError
        An entry is not an experiment folder (no ``params.yaml``), is the new experiment's
        folder, or is given twice.
    """
    out = []
    for entry in entries:
        share_source(entry, target, item=f"--share-from {entry}")
        folder = Path(os.path.normpath(target / entry))  # target may not exist yet
        if not (folder / PARAMS_FILE).is_file():
            raise InputError("a share source is not an experiment folder (it holds no "
                             "params.yaml)", item=f"--share-from {entry}",
                             found=f"no {(folder / PARAMS_FILE).as_posix()}",
                             fix="Give another experiment's folder, relative to the new one "
                                 "(e.g. ../other, or ../.. for the repository's top experiment)")
        if folder.resolve() == target:
            raise InputError("a share source is the new experiment itself",
                             item=f"--share-from {entry}", fix="Give another experiment's folder")
        grades_in = _paths_of(folder / PARAMS_FILE).get("grades_in", "data/grades")
        dep = Path(os.path.normpath(Path(entry) / grades_in))
        if dep.as_posix() in out:
            raise InputError("a share source is given twice", item=f"--share-from {entry}")
        out.append(dep.as_posix())
    return out


def check_written(params: dict, expected: dict) -> None:
    """Check that the params text written reads back with each given value where it belongs.

    Parameters
    ----------
    params : dict
        The written ``params.yaml``, parsed.
    expected : dict
        Key path (tuple of str) → the value given; None for a key that must be absent.

    Raises
    ------
    InputError
        A value reads back otherwise (a value that would have changed the file's structure).
    """
    for keys, value in expected.items():
        node = params
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
        if node != value:
            raise InputError("a value would not read back from params.yaml as given",
                             item=".".join(keys), found=repr(value),
                             fix="Give plain names and values")


def even_audit(plan) -> tuple[int, int, str] | None:
    """The largest audit an experiment sampled from a query log can take evenly from its
    strata, known before the sample is drawn.

    The sample stage splits ``plan.sample_n`` over the log's strata
    (:func:`relgrade.query_sampling.sample_allocation`, params ``sample.head_share`` 0.5 and
    ``sample.torso_share`` 0.3 as init writes them) and the audit takes the same number of
    queries from each stratum sampled (:func:`relgrade.protocol.audit.audit_size`), so it
    can take at most ``G x m``: ``G`` strata with queries, ``m`` the fewest any of them gives.

    Returns
    -------
    (int, int, str) or None
        ``G x m``, ``m`` and the stratum giving ``m`` (the first such, in ``head``,
        ``torso``, ``tail`` order); None when no stratum gets a query.

    Raises
    ------
    InputError
        The log does not read, or ``sample_n`` or the allocation does not fit it (as the
        sample stage would say).
    """
    table, lines = read_query_log(Path(plan.query_log))
    counts = querylog.strata(table, path=plan.query_log, lines=lines)
    per = {s: k for s, k in querylog.sample_allocation(
        counts, n=plan.sample_n, allocation=plan.allocation).items() if k > 0}
    if not per:
        return None
    fewest = min(per, key=lambda s: (per[s], querylog.STRATA.index(s)))
    return len(per) * per[fewest], per[fewest], fewest


def init_experiment(plan: Plan) -> Experiment:
    """Write the experiment ``plan`` asks for, in one piece.

    Parameters
    ----------
    plan : Plan
        What to make.

    Returns
    -------
    Experiment
        The new experiment, loaded from its ``params.yaml``.

    Raises
    ------
    InputError
        The folder's name is not one path segment (:func:`check_name`); the folder is not
        inside a relgrade repository, is the repository itself, or is not empty (without
        ``force``); an input is missing or invalid (see :mod:`relgrade.experiment.inputs`);
        an external run names a query, or a chunk of a chunks-file corpus, that is not there;
        the arms are invalid (:func:`arms_section`); the new experiment's paths would overlap
        another experiment's (:func:`check_disjoint`); a ``share_from`` entry is refused
        (:func:`share_sources`). Nothing is written then.
    """
    folder = Path(plan.folder)
    check_folder(folder)
    name = check_name(folder.resolve().name if folder.name in ("", ".") else folder.name,
                      path=folder)
    check_names(plan)
    check_mode(plan)
    repo = find_repository(folder)
    target = folder.resolve()
    if target == repo:
        raise InputError("the repository's own experiment is its top folder; a new one goes "
                         "in a folder of its own", path=folder,
                         fix="Use experiments/NAME")
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not plan.force:
        raise InputError("the folder is not empty", path=folder,
                         fix="Choose a new folder, or pass --force to replace it")
    if plan.query_log is not None:
        for given, option in ((plan.queries, "--queries"), (plan.intents, "--intents"),
                              (plan.runs or None, "--run")):
            if given:
                raise InputError(f"{option} cannot be given with a query log: the query set is "
                                 "drawn by the sample stage", item=option,
                                 fix="Run `dvc repro` up to the sample stage, then write the "
                                     "intents (and any runs) for the sampled queries")
        if plan.sample_n is None or plan.sample_n < 1:
            raise InputError("a query log needs the number of queries to sample",
                             item="--sample-n", found=repr(plan.sample_n))
    elif plan.queries is None or plan.intents is None:
        raise InputError("give the queries and intents, or a query log to sample them from",
                         item="--queries/--intents/--query-log")
    for path in (plan.corpus, plan.queries, plan.intents, plan.query_log, plan.gold,
                 *plan.runs.values()):
        if path is not None and not Path(path).is_file():
            raise InputError("input file not found", path=path)
    share_sources(plan.share_from, target)  # refuses a bad source before anything is written
    root_rel = Path(os.path.relpath(repo, target)).as_posix()
    with atomic_dir(target) as tmp:
        data = tmp / "data" / "input"
        data.mkdir(parents=True)
        corpus_name, chunk_ids = inputs.corpus_input(plan.corpus, data,
                                                     allow_empty=plan.allow_empty)
        if plan.query_log is None:
            queries_name, queries, groups = inputs.queries_input(plan.queries, data)
            if chunk_ids is None and plan.runs:
                # a source spec: build its chunks now, so a run's unknown chunk ids are
                # refused here rather than by the retrieve stage
                chunk_ids = build_corpus(plan.corpus, allow_empty=plan.allow_empty)[0][
                    "chunk_id"].astype(str)
            intents_name = inputs.intents_input(plan.intents, data, queries=queries)
            log_name = None
        else:
            # The sample stage writes queries.sampled.tsv; the intents are written for its
            # queries afterwards (the intents stage refuses a query without one).
            log_name = "query-log" + "".join(Path(plan.query_log).suffixes[-1:])
            shutil.copyfile(plan.query_log, data / log_name)
            queries_name, groups = "queries.sampled.tsv", ["head", "torso", "tail"]
            intents_name = "intents.tsv"
            write_text(data / intents_name, "query_id\tquery\tintent\n")
            queries = None
        run_files = {arm: inputs.run_input(arm, src, data, queries=queries, chunk_ids=chunk_ids)
                     for arm, src in plan.runs.items()}
        arms = arms_section(plan, run_files, root_rel)
        baseline = plan.baseline or next(iter(arms))
        if baseline not in arms:
            raise InputError("the baseline is not an arm of the experiment", item="--baseline",
                             found=baseline)
        audit_min = plan.audit_min
        deviations = []
        n_queries = len(queries) if queries is not None else plan.sample_n
        if plan.mode == "ppi":
            human_sample_size(plan, n_queries)  # refused here, before people grade anything
        even = None if plan.query_log is None else even_audit(plan)
        if even is not None and even[0] < min(audit_min, plan.sample_n):
            audit_min = even[0]
            deviations.append(f"audit.min_queries is {audit_min}: the sample of "
                              f"{plan.sample_n} queries draws {even[1]}, the fewest of its "
                              f"strata, from {even[2]}, and the audit takes an even share of "
                              f"each stratum ({audit_min} = {audit_min // even[1]} x "
                              f"{even[1]}), not the {plan.audit_min} it asks for")
        elif n_queries is not None and n_queries < audit_min:
            audit_min = n_queries
            deviations.append(f"audit.min_queries is {audit_min}, every query: the experiment "
                              f"has {audit_min} queries, fewer than the {plan.audit_min} the "
                              "audit asks for")
        if plan.gold is not None:  # private: under data/private/, git-ignored below
            # the packets stage's rules, now; a pair's place in the pool is checked there
            check_gold_file(plan.gold, scale=INIT_SCALE,
                            queries=None if queries is None else queries["query_id"])
            (tmp / GOLD_INPUT).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(plan.gold, tmp / GOLD_INPUT)
        mode_paths, mode_sections = mode_params(plan)
        env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                 autoescape=False)
        env.filters["yaml"] = yaml_value  # every value through the YAML serializer
        text = env.from_string(_template("params.yaml.j2")).render(
            name=name, seed=plan.seed, corpus=corpus_name, allow_empty=plan.allow_empty,
            queries=queries_name,
            groups=groups, intents=intents_name, pool_depth=plan.pool_depth,
            audit_min=audit_min, deviations=deviations, key_grader=plan.key_grader,
            auditor=plan.auditor, baseline=baseline, query_log=log_name,
            sample_n=plan.sample_n, allocation=plan.allocation,
            share_from=list(plan.share_from), mode=plan.mode, mode_paths=mode_paths,
            mode_sections=mode_sections,
            arms=yaml.safe_dump({"arms": arms}, sort_keys=False),
            graders=yaml.safe_dump({"graders": graders_section(plan)}, sort_keys=False))
        check_written(yaml.safe_load(text), {
            ("seed",): plan.seed, ("pool", "depth"): plan.pool_depth,
            ("audit", "min_queries"): audit_min, ("grading", "key_grader"): plan.key_grader,
            ("grading", "auditor"): plan.auditor, ("metrics", "baseline"): baseline,
            ("grading", "deviations"): deviations,
            ("grading", "share_from"): list(plan.share_from) or None,
            ("corpus", "allow_empty"): True if plan.allow_empty else None})
        write_text(tmp / PARAMS_FILE, text)
        params = load_params(tmp / PARAMS_FILE)
        if params.intents is not None:  # no review yet: a dep DVC finds, pending work
            write_json(tmp / params.intents.review, UNREVIEWED, indent=2)
        # other experiments' `paths` as written: their params may use sections this
        # version does not know, and only the paths matter here
        claims = {f: claimed_paths(f, _paths_of(f / PARAMS_FILE))
                  for f in experiment_folders(repo) if f.resolve() != target}
        claims[target] = claimed_paths(target, params.paths.as_dict())
        check_disjoint(claims)
        # the pipeline from the stage registry, as `relgrade pipeline render` writes it
        text = render(Experiment(tmp, params), repo=repo, name=name)
        write_text(tmp / "dvc.yaml", text)
        write_gitignores(tmp, [*cached_outputs(yaml.safe_load(text), params.paths.as_dict(),
                                               arms),
                               *([GOLD_INPUT] if plan.gold is not None else [])])
        (tmp / "rubric").mkdir()
        write_text(tmp / "rubric" / "v1.md", _template("rubric.md"))
        write_text(tmp / "rubric" / "CHANGELOG.md",
                   "# Rubric changelog\n\n- v1: the generic rubric written by `relgrade init`; "
                   "corpus examples to be added in section 8 before grading.\n")
        (tmp / "data" / "grades").mkdir()
        write_text(tmp / "data" / "grades" / ".gitkeep", "")
        write_design(Experiment(tmp, params), name=name)
    return Experiment.load(target / PARAMS_FILE)



#: The params ``paths`` of a click experiment.
CLICK_PATHS = {"click_propensity": "metrics/propensity.json",
               "click_propensity_plot": "metrics/plots/propensity.csv",
               "click_ips": "metrics/ips.json", "click_pairs": "data/clicks/pairs.parquet",
               "training_set": "data/training"}


def check_click_log(path) -> None:
    """Refuse a click log the click stages would refuse: it is opened and validated as the
    ``propensity`` stage opens it, on the default engine (DuckDB) that init's params use.

    Parameters
    ----------
    path : str or os.PathLike
        The click log (Parquet, CSV or JSON Lines; docs/clicks.md).

    Raises
    ------
    InputError
        The stage's own error for the log (:func:`relgrade.clicks.engine.open_log`): a
        missing column, a value off its rule (naming the session and position), a session
        showing two chunks at one position, a file DuckDB cannot read.
    """
    from relgrade.clicks import engine  # DuckDB: only for a click experiment

    runner = engine.get("duckdb")
    with runner.errors(path):
        runner.open_log(path).con.close()


def init_click_experiment(plan: Plan) -> Experiment:
    """Write a click experiment (``relgrade init --mode clicks``): params, the rendered
    ``dvc.yaml`` (propensity, pairs, and IPS and the training set when their inputs are
    given), the click log and rankings copied under ``data/input/``.

    Parameters
    ----------
    plan : Plan
        ``folder``, ``click_log`` (required), ``rankings`` (a folder of TREC runs, one per
        ranking), ``click_key`` (a frozen key folder holding ``key.jsonl``, relative paths
        taken from the repository's top), ``click_method``, ``seed``, ``force``.

    Returns
    -------
    Experiment

    Raises
    ------
    InputError
        No click log, or it is not a file, or a log the click stages refuse
        (:func:`check_click_log`); rankings that are not a folder of files; a key
        folder without ``key.jsonl`` and ``record.json``; the folder is not inside a relgrade repository, is
        its top, or is not empty (without ``force``). Nothing is written then.
    """
    folder = Path(plan.folder)
    check_folder(folder)
    name = check_name(folder.resolve().name if folder.name in ("", ".") else folder.name,
                      path=folder)
    repo = find_repository(folder)
    target = folder.resolve()
    if target == repo:
        raise InputError("the repository's own experiment is its top folder; a new one goes "
                         "in a folder of its own", path=folder, fix="Use experiments/NAME")
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not plan.force:
        raise InputError("the folder is not empty", path=folder,
                         fix="Choose a new folder, or pass --force to replace it")
    if plan.click_log is None or not Path(plan.click_log).is_file():
        raise InputError("a click experiment needs its click log", item="--click-log",
                         found=str(plan.click_log) if plan.click_log else "none")
    if plan.rankings is not None and not (Path(plan.rankings).is_dir()
                                          and any(Path(plan.rankings).iterdir())):
        raise InputError("the rankings are a folder of TREC runs, one per ranking",
                         item="--rankings", path=plan.rankings)
    if plan.click_key is not None and not all((Path(plan.click_key) / f).is_file()
                                              for f in ("key.jsonl", "record.json")):
        raise InputError("the key folder lacks key.jsonl or record.json", item="--click-key",
                         path=plan.click_key, fix="Give a frozen key's folder, e.g. data/key")
    check_click_log(plan.click_log)
    with atomic_dir(target) as tmp:
        data = tmp / "data" / "input"
        data.mkdir(parents=True)
        log_name = "clicks" + "".join(Path(plan.click_log).suffixes[-1:])
        shutil.copyfile(plan.click_log, data / log_name)
        clicks = {"log": f"data/input/{log_name}", "method": plan.click_method,
                  "max_position": 10, "bootstrap": 1000, "level": 0.95, "clip": 10.0}
        if plan.rankings is not None:
            shutil.copytree(plan.rankings, data / "rankings")
            clicks["rankings"] = "data/input/rankings"
        if plan.click_key is not None:
            clicks["key"] = Path(os.path.relpath(Path(plan.click_key).resolve(),
                                                 target)).as_posix()
            clicks["exclude_eval_queries"] = True
        params = {"seed": plan.seed, "paths": dict(CLICK_PATHS), "clicks": clicks}
        text = (f"# relgrade click experiment {name}, written by `relgrade init --mode clicks`."
                "\n# Every random choice takes its seed from here; see docs/clicks.md.\n"
                + yaml.safe_dump(params, sort_keys=False))
        write_text(tmp / PARAMS_FILE, text)
        loaded = load_params(tmp / PARAMS_FILE)
        rendered = render(Experiment(tmp, loaded), repo=repo, name=name)
        write_text(tmp / "dvc.yaml", rendered)
        write_gitignores(tmp, cached_outputs(yaml.safe_load(rendered), CLICK_PATHS, []))
        write_text(tmp / "DESIGN.md", f"# {name}: a click experiment\n\n"
                   "What the log is, where it comes from and how its rankings were shown: "
                   "to be written.\n")
    return Experiment.load(target / PARAMS_FILE)
