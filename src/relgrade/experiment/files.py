"""The experiment on disk: where every file of one experiment lives, and how it is read.

An :class:`Experiment` pairs the folder the params' relative paths start from with the
typed :class:`~relgrade.experiment.params.Params`. It is the one place that knows the data
layout: each ``paths`` entry (:meth:`Experiment.path`), a grader's files for a round
(``paths.grades_in/GRADER/round-N.jsonl`` and its sidecars, :meth:`Experiment.grader_files`),
the packets of a role, the rubric, the frozen key checked against its record, and what a
comparison of arms reads (:meth:`Experiment.compare_inputs`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from typing import TYPE_CHECKING

import numpy as np

from relgrade.errors import InputError, ProtocolError
from relgrade.experiment.layout import inside_tree, repro_command, working_tree
from relgrade.experiment.params import PARAMS_FILE, Params, load_params, parse_params
from relgrade.graders.store import bank_path, read_bank
from relgrade.io.grade_columns import RoundBlocks, read_bank_columns
from relgrade.io import files as io
from relgrade.io import githistory
from relgrade.io.runs import read_run
from relgrade.protocol import stopping as stopping_mod
from relgrade.protocol.sidecar import pair_rows

if TYPE_CHECKING:
    import pandas as pd

    from relgrade.protocol import grades as grades_mod

# pandas, and the protocol modules that import it (grades, ledger, packets, bank, key, the
# key and made-on readers), are imported by the methods that use them: a stage that needs
# none of them (the pool stage works on Arrow tables) starts without pandas (0.26 CPU-s).

def _typed(path: Path) -> str:
    """``path`` as typed from the current folder (relative when below it, else as given)."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


#: Columns of the frozen key, as the key stage writes them.
KEY_COLUMNS = ["query_id", "chunk_id", "grade"]


@dataclass(frozen=True)
class GraderFiles:
    """One grader's files for one round, all under ``paths.grades_in/GRADER/``.

    Attributes
    ----------
    grader : str
        The grader (a key of params ``graders``).
    round : int
        The grading round.
    grades : pathlib.Path
        ``round-N.jsonl``: the grade rows.
    meta : pathlib.Path
        ``round-N.meta.json``: the packets' intents hash and rubric version.
    bank : pathlib.Path
        ``round-N.bank.jsonl``: what each grade row was made on (the judgment bank's record,
        see :mod:`relgrade.graders.store`).
    samples : pathlib.Path
        ``samples/round-N.jsonl``: every sample of a grader run with ``samples > 1``.
    consistency : pathlib.Path
        ``round-N.consistency.json``: that grader's agreement with itself.
    corrections : pathlib.Path
        ``round-N.corrections.jsonl``: post-hoc corrections of the frozen key
        (:mod:`relgrade.protocol.corrections`), appended by ``relgrade grade correct``; the
        grades stage never reads it, the key stage does.
    """

    grader: str
    round: int
    grades: Path
    meta: Path
    bank: Path
    samples: Path
    consistency: Path
    corrections: Path


@dataclass(frozen=True)
class KeyFiles:
    """A key's three files, written as one unit: the key, its qrels, and its record last.

    Attributes
    ----------
    key : pathlib.Path
        The key in its canonical byte form (JSON Lines).
    qrels : pathlib.Path or None
        The same key as TREC qrels (None: params declare no ``paths.qrels``).
    record : pathlib.Path
        The record, holding the sha256 of the others.
    made_on : pathlib.Path or None
        What each key row's grade was made on (chunk content, intent line and rubric
        hashes; see :func:`relgrade.protocol.key.made_on_bytes`), or None when params
        declare no ``paths.key_made_on``.
    """

    key: Path
    qrels: Path | None
    record: Path
    made_on: Path | None = None


class Experiment:
    """One experiment: its params and the folder its relative paths start from.

    Parameters
    ----------
    root : str or os.PathLike
        The folder of the params file (``.`` for a stage run by dvc).
    params : Params
        The experiment's params.
    """

    def __init__(self, root, params: Params):
        self.root = Path(root)
        self.params = params

    @classmethod
    def load(cls, params_path, *, resolve: bool = False) -> Experiment:
        """The experiment whose params file is ``params_path``.

        Parameters
        ----------
        params_path : str or os.PathLike
            The params file; its folder is the experiment's root.
        resolve : bool, default False
            Make the root an absolute path.

        Raises
        ------
        InputError
            The params file is missing or invalid (see
            :func:`~relgrade.experiment.params.load_params`).
        """
        params = load_params(params_path)
        root = Path(params_path).parent
        return cls(root.resolve() if resolve else root, params)

    @classmethod
    def from_mapping(cls, raw: dict, root=".") -> Experiment:
        """An experiment from params already read as a mapping (checked as a file is)."""
        return cls(root, parse_params(raw, source=Path(root) / PARAMS_FILE))

    # --- paths -----------------------------------------------------------------------

    def path(self, name: str) -> Path:
        """The path of params ``paths.NAME``, under the experiment's root.

        Raises
        ------
        InputError
            ``paths`` has no entry ``name``.
        """
        value = getattr(self.params.paths, name, None)
        if value is None:
            raise InputError(f"params `paths` has no entry `{name}`", path=self.params.source,
                             item=f"paths.{name}", fix=f"Add `{name}:` under `paths`")
        return self.root / value

    def working_tree(self) -> Path:
        """The working tree this experiment's files stay inside: the repository holding it,
        or its own folder when it is in none (:func:`relgrade.experiment.layout.working_tree`)."""
        return working_tree(self.root)

    def call_cache(self) -> Path | None:
        """The call cache file (params ``paths.call_cache``), checked to stay in the working
        tree; None when params declare none.

        Returns
        -------
        pathlib.Path or None
            The file, resolved (symlinks followed); it need not exist yet.

        Raises
        ------
        InputError
            The entry is an absolute path, or it resolves (climbing with ``..`` or through a
            symlink) outside :meth:`working_tree`: the same rule as a share source's
            (:func:`relgrade.experiment.layout.inside_tree`).
        """
        entry = self.params.paths.call_cache
        if not entry:
            return None
        return inside_tree(entry, self.root, self.working_tree(), what="the call cache",
                           item="paths.call_cache", source=self.params.source,
                           fix="Keep the call cache inside the repository, relative to the "
                               "experiment (e.g. data/private/call-cache.jsonl, or "
                               "../shared/call-cache.jsonl for experiments that share it)")

    def file(self, relative) -> Path:
        """A file named in params (``corpus.input``, ``intents.review``, ...), under the root."""
        return self.root / relative

    def grader_files(self, grader: str, round: int | None = None) -> GraderFiles:
        """Where grader ``grader``'s files for ``round`` (default params ``grading.round``) live."""
        rnd = self.params.grading.round if round is None else int(round)
        folder = self.path("grades_in") / grader
        return GraderFiles(grader=grader, round=rnd, grades=folder / f"round-{rnd}.jsonl",
                           meta=folder / f"round-{rnd}.meta.json",
                           bank=bank_path(folder / f"round-{rnd}.jsonl"),
                           samples=folder / "samples" / f"round-{rnd}.jsonl",
                           consistency=folder / f"round-{rnd}.consistency.json",
                           corrections=folder / f"round-{rnd}.corrections.jsonl")

    def grader_round_files(self, round: int | None = None) -> dict[str, GraderFiles]:
        """Every grader folder under ``paths.grades_in`` that holds a grade file for ``round``.

        Returns
        -------
        dict of str to GraderFiles
            Folder name → its files, sorted by name; hidden folders are skipped.
        """
        root = self.path("grades_in")
        folders = sorted(p for p in root.glob("*") if p.is_dir() and not p.name.startswith("."))
        out = {}
        for folder in folders:
            files = self.grader_files(folder.name, round)
            if files.grades.exists():
                out[folder.name] = files
        return out

    def read_bank(self, files: GraderFiles) -> list | None:
        """A grade file's bank sidecar lines, ``[(line, row), ...]``, or None without one."""
        return read_bank(files.grades)

    def bank_table(self, files: GraderFiles, fields=None):
        """A grade file's bank sidecar for counting: its columns
        (:func:`relgrade.io.grade_columns.read_bank_columns`, a ``pyarrow.Table``) when it
        can be read so, else its lines as :meth:`read_bank` gives them (which refuses a bad
        line as before); None without a sidecar. For the counts of
        :mod:`relgrade.graders.cache` (``cache_counts``, ``judge_counts``), which take
        either. ``fields``: only these sidecar fields as columns (all when None)."""
        if files.bank.is_file():
            table = read_bank_columns(files.bank, fields)
            if table is not None:
                return table
        return read_bank(files.grades)

    def consistency(self, grader: str, round: int | None = None) -> dict | None:
        """A grader's self-consistency for ``round`` (``samples``, ``pairs``,
        ``fleiss_kappa``, ``unanimous_share``), or None when it was run once per pair."""
        f = self.grader_files(grader, round).consistency
        if not f.exists():
            return None
        c = io.read_json(f)
        return {k: c.get(k) for k in ("samples", "pairs", "fleiss_kappa", "unanimous_share")}

    def ensure_meta(self, files: GraderFiles, meta: dict) -> None:
        """Write the grade file's sidecar: the packets' intents hash, rubric version and
        round, and the round's regrade mode (params ``grading.regrade``).

        An intent or rubric edit since the sidecar was written is not an error: each grade's
        bank line records what it was made on, so earlier grades of edited pairs are stale
        and owed again, and the sidecar is brought up to the packets now graded from.

        Raises
        ------
        InputError
            The sidecar is not a JSON object, or names another round than the packets.
        """
        meta = {**meta, "regrade": self.params.grading.regrade}
        if files.meta.exists():
            old = io.read_json(files.meta)
            if not isinstance(old, dict):
                raise InputError("a grade file's sidecar must be a JSON object",
                                 path=files.meta, found=type(old).__name__)
            if "round" in old and "round" in meta and int(old["round"]) != int(meta["round"]):
                raise InputError("the sidecar names another round than the packets",
                                 path=files.meta, found=f"round {old['round']}, packets "
                                 f"round {meta['round']}", fix="Rebuild the packets: dvc "
                                 "repro packets")
            if all(old.get(k) == v for k, v in meta.items()):
                return
        io.write_json(files.meta, meta)

    # --- what graders are given --------------------------------------------------------

    def packets_folder(self, role: str) -> Path:
        """The folder of one role's packets (``paths.packets/ROLE``)."""
        return self.path("packets") / role

    def packets(self, role: str) -> dict:
        """One role's packets, query id → packet, sorted by query id.

        Raises
        ------
        InputError
            No packets for the role, or a packet that
            :func:`relgrade.protocol.packets.check_packet` refuses.
        """
        return self._packets_in(self.packets_folder(role), what=role)

    def grader_packets(self, name: str) -> dict:
        """Grader ``name``'s packets, query id → packet: its role's, or for a rater its own
        (``packets/rater/NAME``), for an expert the adjudication queue's.

        Raises
        ------
        InputError
            ``name`` is not declared; no packets; a packet
            :func:`relgrade.protocol.packets.check_packet` refuses.
        """
        role = self.params.grader(name)["role"]
        fix = (f"Run: {repro_command(self)} (the aggregation stage writes the expert's packets)"
               if role == "expert" else f"Run: {repro_command(self, 'packets')}")
        return self._packets_in(self.grader_packets_folder(name), what=f"{name}'s", fix=fix)

    def grader_packets_folder(self, name: str) -> Path:
        """Where grader ``name``'s packets live: ``packets/ROLE`` for a grader or auditor,
        ``packets/rater/NAME`` for a rater, ``paths.adjudication_packets`` for an expert."""
        role = self.params.grader(name)["role"]
        if role == "rater":
            return self.packets_folder("rater") / name
        if role == "expert":
            return self.path("adjudication_packets")
        return self.packets_folder(role)

    def grader_file(self, files) -> grades_mod.GraderFile:
        """One grader's round files as the judgment bank reads them: when both exist, as
        columns a block of rows at a time (:class:`relgrade.io.grade_columns.RoundBlocks`,
        read when the bank is built), the rows streamed and the bank lines read only if a
        row must be named in an error; else rows streamed and the bank lines loaded.

        Parameters
        ----------
        files : GraderFiles
            As :meth:`grader_round_files` gives them (``grades``, ``meta``, ``bank``,
            ``round``).

        Returns
        -------
        relgrade.protocol.grades.GraderFile
        """
        from relgrade.protocol import grades as grades_mod

        blocks = RoundBlocks.of(files.grades, files.bank)
        return grades_mod.GraderFile(
            rows=io.iter_jsonl(files.grades), source=files.grades.as_posix(),
            sha256=io.sha256_file(files.grades), round=files.round,
            meta=io.read_json(files.meta) if files.meta.exists() else None,
            meta_source=files.meta.as_posix(),
            bank=None if blocks is not None else self.read_bank(files),
            bank_source=files.bank.as_posix(), blocks=blocks,
            load_bank=None if blocks is None else (lambda: self.read_bank(files)))

    def audit_ids(self, *, whole: bool = False) -> list[str] | None:
        """The audited query ids (``paths.audit``), in the file's order; None before the audit
        stage has written it.

        With params ``grading.stop: anytime`` (ppi mode) the ids the rule reads now: the first
        queries of the seeded grading order up to the next look, or further when people
        graded ahead of it (:meth:`stop_graded`), or up to where the rule settled
        (:meth:`stop_record`, :func:`relgrade.protocol.stopping.owed_queries`);
        ``whole=True`` gives the whole locked sample.
        """
        path = self.path("audit")
        if not path.is_file():
            return None
        ids = [str(r["query_id"]) for r in io.read_jsonl(path)]
        if whole or self.params.grading.stop == "none":
            return ids
        return stopping_mod.owed_queries(self.stop_record(ids),
                                         batch=self.params.grading.stop_batch,
                                         graded=self.stop_graded(ids))

    def stop_graded(self, sample=None) -> set[str]:
        """The human sample's queries the human grader (params ``grading.auditor``) has any
        grade of this round in its grade file, whatever order they were graded in.

        Parameters
        ----------
        sample : list of str, optional
            The locked sample's ids (read from ``paths.audit`` when not given).

        Returns
        -------
        set of str
            Query ids; empty before the grader has a grade file of the round.
        """
        sample = set(map(str, sample if sample is not None
                         else self.audit_ids(whole=True) or []))
        auditor = self.params.grading.auditor
        if not auditor:
            return set()
        grades = self.grader_files(auditor).grades
        if not grades.is_file():
            return set()
        return {str(r.get("query_id")) for _, r in io.iter_jsonl(grades)} & sample

    def stop_record(self, sample=None) -> dict:
        """The stopping rule's record of this round's locked sample (params ``paths.stop``).

        The file's record when it belongs to the locked sample of the round and holds a look;
        else a new one with no look, from params now
        (:func:`relgrade.protocol.stopping.new_record`), not written.

        Parameters
        ----------
        sample : list of str, optional
            The locked sample's ids (read from ``paths.audit`` when not given).

        Raises
        ------
        InputError
            ``paths.stop`` is missing from params, or the file is not a JSON object.
        """
        p = self.params
        sample = sample if sample is not None else self.audit_ids(whole=True) or []
        lock_path = self.path("audit_lock")
        lock_sha = io.read_json(lock_path).get("sha256") if lock_path.is_file() else None
        path = self.path("stop")
        if path.is_file():
            record = io.read_json(path)
            if not isinstance(record, dict) or "order" not in record:
                raise InputError("the stopping rule's record must be a JSON object with an "
                                 "order", path=path, found=type(record).__name__,
                                 fix="restore it from git (git checkout -- FILE)")
            if stopping_mod.matches(record, round=p.grading.round, lock_sha256=lock_sha) \
                    and record.get("looks"):
                # a record with looks is the rule the looks were taken under; one without
                # holds nothing params do not give (order, margin, level, batch follow them)
                if sorted(record["order"]) != sorted(map(str, sample)):
                    raise InputError("the stopping rule's order is not the locked sample",
                                     path=path, found=f"{len(record['order'])} queries, "
                                     f"the lock holds {len(sample)}",
                                     fix="restore it from git (git checkout -- FILE)")
                return record
        level = p.ppi.level if p.ppi is not None else 0.95
        return stopping_mod.new_record(sample, seed=p.need("seed"),
                                       batch=p.grading.stop_batch,
                                       margin=p.grading.stop_margin, level=level,
                                       round=p.grading.round, lock_sha256=lock_sha)

    def stop_reads_path(self) -> Path:
        """The file of the queries the stopping rule reads now: params ``paths.stop`` with
        ``.reads`` appended (``data/audit/stop.json.reads``), one query id a line, in the
        record's order.

        The stages before the ppi stage depend on it in place of the record (whose looks the
        ppi stage writes after they ran): it changes whenever what they read from the record
        (:meth:`audit_ids`) does, and not when a look settles on the queries they read already.

        Raises
        ------
        InputError
            ``paths.stop`` is missing from params.
        """
        path = self.path("stop")
        return path.with_name(f"{path.name}.reads")

    def write_stop_reads(self, record: dict) -> list[str]:
        """Write :meth:`stop_reads_path` from the stopping rule's ``record`` (as
        :meth:`audit_ids` reads it: params' batch, the human grader's grades now), only when
        its bytes change.

        Parameters
        ----------
        record : dict
            The record as written to ``paths.stop`` (:mod:`relgrade.protocol.stopping`).

        Returns
        -------
        list of str
            The query ids written, the head of the record's order.
        """
        ids = stopping_mod.owed_queries(record, batch=self.params.grading.stop_batch,
                                        graded=self.stop_graded(record["order"]))
        data = "".join(f"{q}\n" for q in ids).encode()
        path = self.stop_reads_path()
        if not path.is_file() or path.read_bytes() != data:
            io.write_bytes(path, data)
        return ids

    def packets_built_for(self) -> dict:
        """What the packets folder was built for, as the packets stage recorded it.

        Returns
        -------
        dict
            ``pool_version``, ``round``, ``intents_sha256`` (and ``regrade``) of
            ``PACKETS/manifest.json``; empty when the folder holds no manifest.
        """
        from relgrade.protocol import packets as packets_mod

        path = self.path("packets") / packets_mod.PACKETS_MANIFEST
        return io.read_json(path) if path.is_file() else {}

    def packets_current(self) -> dict:
        """What packets must be built for now: the pool manifest's ``pool_version``, params
        ``grading.round``, the frozen intents' ``sha256``, params ``grading.rubric_version``
        and the rubric file's ``rubric_sha256`` (each only when known)."""
        now: dict = {"round": self.params.grading.round}
        for name, key, out in (("pool_manifest", "pool_version", "pool_version"),
                               ("intents_manifest", "sha256", "intents_sha256")):
            if getattr(self.params.paths, name, None) and self.path(name).is_file():
                now[out] = io.read_json(self.path(name)).get(key)
        now.update(self._rubric_now())
        return now

    def _rubric_now(self) -> dict:
        """Params' ``rubric_version`` and the rubric file's ``rubric_sha256``, each when known."""
        now: dict = {}
        if self.params.grading.rubric_version is not None:
            now["rubric_version"] = str(self.params.grading.rubric_version)
        if self.params.grading.rubric is not None and self.rubric_path().is_file():
            now["rubric_sha256"] = io.sha256_file(self.rubric_path())
        return now

    def _rubric_stale(self, built_version, built_sha) -> ProtocolError | None:
        """The refusal of packets made under another rubric than params name, or None.

        ``built_version`` / ``built_sha`` are what the packets were made under (None when
        not recorded: that part is not compared)."""
        from relgrade.experiment.layout import repro_command

        now = self._rubric_now()
        version, sha = now.get("rubric_version"), now.get("rubric_sha256")
        moved_version = built_version is not None and version is not None and (
            str(built_version) != version)
        moved_sha = built_sha is not None and sha is not None and str(built_sha) != sha
        if not (moved_version or moved_sha):
            return None
        made = f"rubric {built_version}" + (f" (sha256 {str(built_sha)[:12]})"
                                             if built_sha is not None else "")
        named = f"rubric {version} (sha256 {str(sha)[:12]}, {self.params.grading.rubric})"
        return ProtocolError(
            f"the packets in {_typed(self.path('packets'))} were made under {made}, "
            f"params name {named}: grades made from them would be stale at once. "
            f"Rebuild the packets first: {repro_command(self, 'packets')}")

    def check_packets_current(self) -> None:
        """Refuse packets built for another pool version, round or intent table.

        Raises
        ------
        ProtocolError
            The packets folder's manifest differs from :meth:`packets_current`; the message
            names both and the one command that rebuilds the packets.
        """
        from relgrade.experiment.layout import repro_command

        built = self.packets_built_for()
        if not built:  # packets of an older relgrade, or written by hand: nothing to compare
            return
        rubric = self._rubric_stale(built.get("rubric_version"), built.get("rubric_sha256"))
        if rubric is not None:
            raise rubric
        now = {k: v for k, v in self.packets_current().items()
               if k not in ("rubric_version", "rubric_sha256")}
        stale = [f"{k} {built.get(k)} (now {v})" for k, v in now.items() if built.get(k) != v]
        if stale:
            raise ProtocolError(
                f"the packets in {_typed(self.path('packets'))} are out of date: built for "
                + ", ".join(stale) + f". Rebuild them first: {repro_command(self, 'packets')}")

    def packets_stale(self) -> ProtocolError | None:
        """Why the packets folder must be rebuilt before grading, or None when it need not.

        The manifest's check (:meth:`check_packets_current`); when the manifest records no
        rubric (packets of an older relgrade), the first packet's ``rubric_version`` stands
        for the folder (one build writes one version into every packet).

        Returns
        -------
        ProtocolError or None
            The refusal :meth:`check_packets_current` or :meth:`check_packets_rubric` would
            raise (its message names the ``dvc repro ...:packets`` that rebuilds them).
        """
        if not getattr(self.params.paths, "packets", None):
            return None
        try:
            self.check_packets_current()
        except ProtocolError as e:
            return e
        return self.packets_rubric_stale()

    def packets_rubric_stale(self) -> ProtocolError | None:
        """The refusal of a packets folder made under another rubric than params name, or
        None: the manifest's ``rubric_version`` and ``rubric_sha256``, or, when it records
        none (packets of an older relgrade), the first packet's ``rubric_version`` (one build
        writes one version into every packet). No packets folder: None."""
        from relgrade.protocol import packets as packets_mod

        if not getattr(self.params.paths, "packets", None):
            return None
        built = self.packets_built_for()
        if "rubric_version" in built:
            return self._rubric_stale(built.get("rubric_version"), built.get("rubric_sha256"))
        folder = self.path("packets")
        found = sorted(folder.rglob("*.json")) if folder.is_dir() else []
        first = next((f for f in found if f.name != packets_mod.PACKETS_MANIFEST), None)
        if first is None:
            return None
        packet = io.read_json(first)
        if not isinstance(packet, dict):
            return None
        return self._rubric_stale(packet.get("rubric_version"), None)

    def _packets_in(self, folder: Path, *, what: str,
                    fix: str | None = None) -> dict:
        from relgrade.protocol import packets as packets_mod

        if fix is None:
            fix = f"Run: {repro_command(self, 'packets')}"
        if getattr(self.params.paths, "packets", None) and folder.is_relative_to(
                self.path("packets")):
            self.check_packets_current()
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if not files:
            raise InputError(f"no {what} packets found", path=folder, fix=fix)
        out = {}
        for f in files:
            p = packets_mod.check_packet(io.read_json(f), path=f)
            out[str(p["query_id"])] = p
        self.check_packets_rubric(out)
        return dict(sorted(out.items()))

    def check_packets_rubric(self, packets: dict) -> None:
        """Refuse packets whose ``rubric_version`` is not params ``grading.rubric_version``.

        Packets carry the version they were made under; a grade made from them records
        that version, so grading them after a rubric revision would record grades stale at
        once (or carry one rubric's version with another's sha256).

        Raises
        ------
        ProtocolError
            A packet made under another version; the message names the packets' rubric,
            params' rubric and the ``dvc repro ...:packets`` that rebuilds them.
        """
        for packet in packets.values():
            err = self._rubric_stale(packet.get("rubric_version"), None)
            if err is not None:
                raise err

    def rubric_path(self) -> Path:
        """The rubric file (params ``grading.rubric``), relative to the experiment's root.

        Raises
        ------
        InputError
            ``grading.rubric`` is not set.
        """
        rubric = self.params.grading.rubric
        if rubric is None:
            raise InputError("params has no rubric", path=self.params.source,
                             item="grading.rubric", fix="Set grading.rubric to its file")
        return self.root / rubric

    def rubric(self) -> str:
        """The rubric text (params ``grading.rubric``).

        Raises
        ------
        InputError
            ``grading.rubric`` is not set, or the file cannot be read.
        """
        return "\n".join(io.read_lines(self.rubric_path())) + "\n"

    def pending_packets(self, grader: str, packets: dict) -> dict:
        """``packets`` cut down to the pairs ``grader`` still owes in this round.

        A pair is owed unless the grader's round file holds a grade of it whose bank line was
        made on what the packet shows now (a row without a bank line counts as graded: the
        grades stage refuses such a file anyway); the bank line of a grade is the one paired
        with its row (:func:`relgrade.protocol.sidecar.pair_rows`). Batches keep their order;
        emptied batches and queries are left out.

        Returns
        -------
        dict
            query id → packet with only the owed chunks.
        """
        import pandas as pd

        files = self.grader_files(grader)
        made_now = self.made_on(packets)
        rows = list(io.iter_jsonl(files.grades)) if files.grades.exists() else []
        graded = {(str(r.get("query_id")), str(r.get("chunk_id"))) for _, r in rows}
        # a pair's latest grade was made on the record paired with its last row
        bank = read_bank(files.grades)
        records = [] if bank is None else pair_rows(
            rows, bank, source=files.grades.as_posix(), bank_source=files.bank.as_posix()).records
        latest = {(str(r.get("query_id")), str(r.get("chunk_id"))): line
                  for (_, r), line in zip(rows, records)}
        reasons = {(str(r.get("query_id")), str(r.get("chunk_id"))): r.get("reason")
                   for _, r in rows}
        carry = None

        def carried(pair, line) -> bool:
            # made under an earlier rubric whose revisions since left its sections alone
            nonlocal carry
            if carry is None:
                from relgrade.experiment import revisions

                carry = revisions.carry(self)
            one = pd.DataFrame({"query_id": [pair[0]], "chunk_id": [pair[1]],
                                "reason": [reasons.get(pair) or ""],
                                "rubric_sha256": [str(line.get("rubric_sha256"))]})
            return bool(carry.carried(one).iat[0])

        def owed(qid, chunk):
            pair = (str(qid), str(chunk["chunk_id"]))
            if pair not in graded:
                return True
            line = latest.get(pair)
            now = made_now({"query_id": pair[0], "chunk_id": pair[1]})
            if line is None or now is None:
                return False
            moved = [k for k in now if line.get(k) != now[k]]
            if moved and set(moved) <= {"rubric_version", "rubric_sha256"}:
                return not carried(pair, line)
            return bool(moved)

        out = {}
        for qid, packet in packets.items():
            batches = [[c for c in batch if owed(qid, c)] for batch in packet["batches"]]
            batches = [b for b in batches if b]
            if batches:
                out[qid] = {**packet, "batches": batches}
        return out

    def rubric_sha256(self) -> str:
        """The sha256 of the rubric file's bytes (params ``grading.rubric``).

        Raises
        ------
        InputError
            ``grading.rubric`` is not set, or the file does not exist.
        """
        path = self.rubric_path()
        if not path.exists():
            raise InputError("rubric file not found", path=path, item="grading.rubric")
        return io.sha256_file(path)

    def made_on(self, packets: dict):
        """What a grade of each pair of ``packets`` is made on, as a function of a grade row.

        Returns
        -------
        callable
            Grade row → ``{"content_sha256", "intent_sha256", "rubric_version",
            "rubric_sha256"}`` of its pair as the packet shows it (with the rubric file's
            sha256 now), or None for a pair no packet holds; for
            :class:`relgrade.graders.store.GradeStore`'s ``made_on``.

        Raises
        ------
        ProtocolError
            A packet made under another rubric version than params name
            (:meth:`check_packets_rubric`): its version and today's sha256 would disagree.
        """
        from relgrade.protocol.bank import packet_made_on

        self.check_packets_rubric(packets)
        table = packet_made_on(packets, rubric_sha256=self.rubric_sha256())
        return lambda row: table.get((str(row["query_id"]), str(row["chunk_id"])))

    def made_on_now(self):
        """What a grade of any pair is made on today: the chunks and frozen intents tables.

        Returns
        -------
        callable
            Grade row → ``{"content_sha256", "intent_sha256", "rubric_version",
            "rubric_sha256"}`` from ``paths.chunks``, ``paths.intents`` and the rubric file,
            or None for a chunk or query they lack.

        Raises
        ------
        InputError
            A table or the rubric file is missing.
        """
        content, intents, rubric = self._made_on_sources()

        def made_on(row):
            c, q = content.get(str(row["chunk_id"])), intents.get(str(row["query_id"]))
            if c is None or q is None:
                return None
            return {"content_sha256": c, "intent_sha256": q, **rubric}
        return made_on

    def made_on_now_table(self, pairs: pd.DataFrame) -> pd.DataFrame:
        """What a grade of each pair is made on today, as columns: :meth:`made_on_now` for a
        whole table, without a dict per pair.

        Parameters
        ----------
        pairs : pandas.DataFrame of shape (n_pairs, >= 2)
            ``query_id``, ``chunk_id``.

        Returns
        -------
        pandas.DataFrame of shape (n_pairs, 6)
            ``query_id``, ``chunk_id`` as given, then :data:`relgrade.schema.MADE_ON`
            (``content_sha256``, ``intent_sha256``, ``rubric_version``, ``rubric_sha256``)
            as categoricals of str; all four missing (NaN) for a pair whose chunk or query
            the tables lack. Row ``i`` holds what :meth:`made_on_now` returns for pair ``i``.

        Raises
        ------
        InputError
            A table or the rubric file is missing.
        """
        import pandas as pd

        content, intents, rubric = self._made_on_sources()
        c = _codes_of(pairs["chunk_id"].astype(str), content)
        q = _codes_of(pairs["query_id"].astype(str), intents)
        known = (c[0] >= 0) & (q[0] >= 0)
        out = pd.DataFrame({"query_id": pairs["query_id"].to_numpy(),
                            "chunk_id": pairs["chunk_id"].to_numpy()})
        out["query_id"] = out["query_id"].astype(pairs["query_id"].dtype)
        out["chunk_id"] = out["chunk_id"].astype(pairs["chunk_id"].dtype)
        for name, (codes, words) in (("content_sha256", c), ("intent_sha256", q)):
            out[name] = pd.Categorical.from_codes(np.where(known, codes, -1), categories=words)
        for name, value in rubric.items():
            out[name] = pd.Categorical.from_codes(np.where(known, 0, -1),
                                                  categories=pd.Index([value], dtype=object))
        return out

    def _made_on_sources(self):
        """The chunks' content hashes and the intents' hashes (Series by id) and the rubric
        fields, as :meth:`made_on_now` and :meth:`made_on_now_table` look them up."""
        from relgrade.protocol.bank import content_sha256, intent_sha256

        for name in ("chunks", "intents"):
            if not self.path(name).exists():
                raise InputError(f"the {name} table is missing, so what a grade is made on "
                                 "cannot be recorded", path=self.path(name),
                                 fix="Run: " + repro_command(
                                     self, {"chunks": "corpus"}.get(name, name)))
        content = content_sha256(io.read_table(self.path("chunks"), only=True,
                                               columns=["chunk_id", "header", "text"]))
        intents = intent_sha256(io.read_table(self.path("intents"), only=True,
                                              columns=["query_id", "intent"]))
        rubric = {"rubric_version": str(self.params.grading.rubric_version),
                  "rubric_sha256": self.rubric_sha256()}
        return content, intents, rubric

    # --- the frozen key ----------------------------------------------------------------

    def key_files(self, *, post_hoc: bool = False, previous: bool = False) -> KeyFiles:
        """Where the frozen key, its qrels and record live, or the post-hoc or previous ones.

        The frozen key is ``paths.key``, ``paths.qrels`` and ``paths.record``. A post-hoc
        key (a changed key after metrics were seen, allowed by ``grading.post_hoc``) stands
        beside it, never instead of it: ``key.jsonl``, ``key.qrels`` and ``record.json`` in
        the folder ``paths.key_post_hoc``. The previous key (the frozen key the current one
        replaced, kept for one cycle) has the same four files in ``paths.key_previous``.
        """
        if post_hoc or previous:
            folder = self.path("key_previous" if previous else "key_post_hoc")
            return KeyFiles(key=folder / "key.jsonl", qrels=folder / "key.qrels",
                            record=folder / "record.json", made_on=folder / "made_on.jsonl")
        qrels = self.path("qrels") if getattr(self.params.paths, "qrels", None) else None
        made_on = self.path("key_made_on") if self.params.paths.key_made_on else None
        return KeyFiles(key=self.path("key"), qrels=qrels, record=self.path("record"),
                        made_on=made_on)

    def read_key_made_on(self) -> pd.DataFrame | None:
        """What each frozen key row's grade was made on, or None when there is no such file
        (a key frozen before relgrade wrote one).

        Raises
        ------
        ProtocolError
            The file's sha256 is not the record's ``made_on_sha256``.
        """
        from relgrade.io.judgments import read_made_on_table
        from relgrade.protocol.key import MADE_ON_COLUMNS

        files = self.key_files()
        if files.made_on is None or not files.made_on.exists() or not files.record.exists():
            return None
        want = io.read_json(files.record).get("made_on_sha256")
        if want is None:
            return None
        got = io.sha256_file(files.made_on)
        if got != want:
            raise ProtocolError(f"{files.made_on}: sha256 {got} is not the {want} its record "
                                f"{files.record} froze; restore both from git")
        return read_made_on_table(files.made_on, MADE_ON_COLUMNS)

    def post_hoc_metrics_folder(self, arm: str) -> Path:
        """One arm's post-hoc metrics: ``paths.metrics_post_hoc/ARM/`` (``metrics.json``,
        ``per_query.parquet``)."""
        return self.path("metrics_post_hoc") / arm

    def read_key(self, *, post_hoc: bool = False,
                 previous: bool = False) -> tuple[pd.DataFrame, dict]:
        """The frozen (or post-hoc, or previous) key and its record, checked to have been
        written together.

        Parameters
        ----------
        post_hoc : bool, default False
            Read the post-hoc key beside the frozen one (see :meth:`key_files`).
        previous : bool, default False
            Read the frozen key the current one replaced (see :meth:`key_files`).

        Returns
        -------
        key : pandas.DataFrame
            Columns ``query_id``, ``chunk_id``, ``grade``, one row per graded pair.
        record : dict
            The key's record (``key_sha256``, ``qrels_sha256``, ``pool_version``,
            ``rubric_version``, ``round``, ``post_hoc``, ...).

        Raises
        ------
        InputError
            The key or its record is missing or unreadable.
        ProtocolError
            The key file's sha256 differs from the one its record froze, or the qrels file's
            differs from the record's ``qrels_sha256`` (see
            :func:`relgrade.protocol.key.check_whole`).
        """
        from relgrade.io.judgments import read_key_table

        files, record = self._checked_key(post_hoc=post_hoc, previous=previous)
        return read_key_table(files.key, KEY_COLUMNS), record

    def checked_key(self) -> tuple[KeyFiles, dict]:
        """The frozen key's files and its record, the key (and qrels) checked against the
        record as :meth:`read_key` checks them, before the key is read (a streamed sha256).

        Returns
        -------
        files : KeyFiles
        record : dict

        Raises
        ------
        InputError, ProtocolError
            As :meth:`read_key`.
        """
        return self._checked_key()

    def _checked_key(self, *, post_hoc: bool = False, previous: bool = False):
        """The key's files and its record, the key (and qrels) checked against the record
        (:meth:`read_key`'s checks, before the key is read)."""
        from relgrade.protocol.key import check_whole

        files = self.key_files(post_hoc=post_hoc, previous=previous)
        record = io.read_json_object(files.record)
        check_whole(record, key_sha256=io.sha256_file(files.key),
                    qrels_sha256=(io.sha256_file(files.qrels)
                                  if files.qrels is not None and files.qrels.exists() else None),
                    record_source=files.record, key_source=files.key, qrels_source=files.qrels)
        return files, record

    def key_batches(self) -> tuple[dict, "Iterator[pd.DataFrame]", Path]:
        """The frozen key in batches, checked first to have been written with its record.

        Returns
        -------
        record : dict
            The key's record, as :meth:`read_key` returns it.
        batches : iterator of pandas.DataFrame
            The key file's rows in its order, columns ``query_id``, ``chunk_id``, ``grade``,
            about 4 MiB of the file per batch (see
            :func:`relgrade.io.batches.iter_key_batches`): memory holds one batch.
        path : pathlib.Path
            The key file.

        Raises
        ------
        InputError, ProtocolError
            As :meth:`read_key`, before any batch (the file's sha256 is checked in a streamed
            pass first).
        """
        from relgrade.protocol.key import check_whole

        from relgrade.io.batches import iter_key_batches

        files = self.key_files()
        record = io.read_json(files.record)
        check_whole(record, key_sha256=io.sha256_file(files.key),
                    qrels_sha256=(io.sha256_file(files.qrels)
                                  if files.qrels is not None and files.qrels.exists() else None),
                    record_source=files.record, key_source=files.key, qrels_source=files.qrels)
        return record, iter_key_batches(files.key), files.key

    # --- the void ledger ---------------------------------------------------------------

    def metrics_files(self) -> dict[str, dict]:
        """Every arm metrics file there is, frozen (``paths.metrics/*.json``) and post-hoc
        (``paths.metrics_post_hoc/*/metrics.json``): path → content.

        Raises
        ------
        InputError
            A metrics file is not valid JSON.
        """
        found = []
        frozen = self.path("metrics")
        if frozen.is_dir():
            found += sorted(frozen.glob("*.json"))
        if getattr(self.params.paths, "metrics_post_hoc", None):
            folder = self.path("metrics_post_hoc")
            if folder.is_dir():
                found += sorted(folder.glob("*/metrics.json"))
        return {p.as_posix(): io.read_json(p) for p in found}

    def ledger(self) -> list[dict]:
        """The ledger's entries, refused when metrics files show a use it does not record.

        The witnesses are every metrics file (:meth:`metrics_files`: the key hash and pool
        version it was computed on), completed with the rubric version and round of the
        frozen and post-hoc records at hand, the records of the human keys the ppi stage kept
        beside the ledger (:meth:`human_key_records`,
        :func:`relgrade.protocol.ledger.human_witnesses`), and, in a git repository, every entry of the
        ledger's committed history (:meth:`ledger_history`): deleting the ledger and the
        metrics files together does not make a used key fresh.

        Returns
        -------
        list of dict
            The entries (empty when there is no ledger file and nothing was scored yet).

        Raises
        ------
        ProtocolError
            The ledger is unreadable (truncated in the middle of a line), an entry lacks a
            key, or a witnessed use is missing (see
            :func:`relgrade.protocol.ledger.require_complete`): the fix is to restore it
            from git.
        """
        from relgrade.protocol import ledger as ledger_mod

        path = self.path("ledger")
        try:
            entries = io.read_jsonl(path) if path.exists() else []
        except InputError as e:
            raise ProtocolError(f"ledger: {e}; the ledger was truncated or edited. Restore "
                                f"it (`git checkout -- {path}`) before freezing or scoring "
                                "a key") from None
        entries = ledger_mod.check_entries(entries, ledger_path=path)
        records = []
        for post_hoc in (False, True):
            if post_hoc and not getattr(self.params.paths, "key_post_hoc", None):
                continue
            rec = self.key_files(post_hoc=post_hoc).record
            if rec.exists():
                try:  # a damaged record witnesses nothing (the key stage refuses it)
                    records.append(io.read_json_object(rec))
                except InputError:
                    pass
        ledger_mod.require_complete(
            entries, ledger_mod.witnesses(self.metrics_files(), records)
            + ledger_mod.human_witnesses(self.human_key_records()) + self.ledger_history(),
            ledger_path=path)
        return entries

    def human_key_files(self, sha256: str) -> tuple[Path, Path, Path]:
        """Where a human key the ppi stage used is kept, beside the ledger (in git).

        Parameters
        ----------
        sha256 : str
            The human key's hash (see :mod:`relgrade.protocol.ledger`).

        Returns
        -------
        key, made_on, record : pathlib.Path
            In ``LEDGER.ppi-human/`` (``LEDGER`` is ``paths.ledger`` without its suffix):
            ``SHA256.jsonl``, the human key in :func:`relgrade.protocol.key.key_bytes` form
            (its sha256 is ``sha256``); ``SHA256.made_on.jsonl``, what each grade was made on
            (:func:`relgrade.protocol.key.made_on_bytes`); ``SHA256.json``, the record of its
            uses (``kind``, ``key_sha256``, ``grader``, ``pairs``, ``queries`` and ``uses``,
            each ``{"pool_version", "rubric_version", "round"}``), which witness them if the
            ledger loses them (:meth:`human_key_records`).
        """
        ledger = self.path("ledger")
        folder = ledger.with_name(ledger.stem + ".ppi-human")
        return (folder / f"{sha256}.jsonl", folder / f"{sha256}.made_on.jsonl",
                folder / f"{sha256}.json")

    def human_key_records(self) -> dict[str, dict]:
        """Every record of a human key kept beside the ledger (:meth:`human_key_files`):
        path → content; a file that does not read as a JSON object is left out.
        """
        ledger = self.path("ledger")
        folder = ledger.with_name(ledger.stem + ".ppi-human")
        out = {}
        for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                out[p.as_posix()] = io.read_json_object(p)
            except InputError:
                continue
        return out

    def read_human_key(self, entry: dict) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        """A human key the ledger records (its entry), as kept beside it, or None when
        it is not at hand whole: a file missing, the key file's sha256 not the entry's
        ``key_sha256``, or the made-on file's not its ``made_on_sha256``.

        Returns
        -------
        key, made_on : pandas.DataFrame or None
            ``query_id``, ``chunk_id``, ``grade``; and
            :data:`relgrade.protocol.key.MADE_ON_COLUMNS`.
        """
        from relgrade.io.judgments import read_key_table, read_made_on_table
        from relgrade.protocol.key import MADE_ON_COLUMNS

        key_path, made_path, _ = self.human_key_files(str(entry["key_sha256"]))
        if not key_path.is_file() or not made_path.is_file():
            return None
        if io.sha256_file(key_path) != entry["key_sha256"] \
                or io.sha256_file(made_path) != entry.get("made_on_sha256"):
            return None
        return read_key_table(key_path, KEY_COLUMNS), read_made_on_table(made_path,
                                                                          MADE_ON_COLUMNS)

    def ledger_history(self) -> list[dict]:
        """The uses of keys that the ledger's committed history holds (git), as witnesses.

        Returns
        -------
        list of dict
            One use per entry of every committed version of ``paths.ledger`` (``key_sha256``,
            ``pool_version``, ``rubric_version``, ``round``, ``kind`` for a human key's,
            ``source`` naming the commit),
            first seen first; empty outside a git repository or before the ledger was ever
            committed. Lines of a version that are not complete entries witness nothing.

        Raises
        ------
        ProtocolError
            git cannot be run, or fails (:func:`relgrade.io.githistory.committed_versions`).
        """
        from relgrade.protocol import ledger as ledger_mod

        path = self.path("ledger")
        versions = githistory.committed_versions(path)
        out, seen = [], set()
        for commit, data in reversed(versions or []):
            for raw in data.decode("utf-8", "replace").splitlines():
                try:
                    e = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                if not isinstance(e, dict) or any(k not in e for k in ledger_mod.LEDGER_KEYS):
                    continue
                use = {"key_sha256": e["key_sha256"], "pool_version": e["pool_version"],
                       "rubric_version": e["rubric_version"], "round": e["round"]}
                if ledger_mod.entry_kind(e) != ledger_mod.KEY:  # a human key's use
                    use["kind"] = ledger_mod.entry_kind(e)
                key = tuple(str(v) for v in use.values())
                if key in seen:
                    continue
                seen.add(key)
                out.append({**use, "source": f"commit {commit[:12]} of {path.as_posix()}"})
        return out

    def dvc_files(self) -> tuple[Path, Path | None]:
        """The experiment's ``dvc.lock`` and the DVC repository's ``.dvc/tmp/rwlock``.

        Returns
        -------
        lock : pathlib.Path
            ``dvc.lock`` beside the params file.
        rwlock : pathlib.Path or None
            ``.dvc/tmp/rwlock`` of the nearest folder at or above the root holding ``.dvc``;
            None outside a DVC repository.
        """
        root = self.root.resolve()
        for folder in (root, *root.parents):
            if (folder / ".dvc").is_dir():
                top = self.root if folder == root else folder  # as given when it is the root
                return self.root / "dvc.lock", top / ".dvc" / "tmp" / "rwlock"
        return self.root / "dvc.lock", None

    # --- comparing arms --------------------------------------------------------------

    def compare_inputs(self, *, full: bool = True, stacked=None) -> dict:
        """Everything :func:`relgrade.evaluation.compare.full_report` needs, read from the files.

        Parameters
        ----------
        full : bool, default True
            True (the stage): every input must exist. False (the CLI): only the per-query
            files are required; the key, runs, grades and audit are used when present, the
            pool-bias inputs never. With a sampled tail (params ``pool.tail_sample`` > 0)
            the pool table's inclusion probabilities (``paths.pool``) are passed as
            ``inclusion``, for the inferred measures.
        stacked : callable, optional
            Given an iterator of ``(arm, per-query table)`` (``query_id``, ``measure``,
            ``value``; arms in sorted order, each file read as the iterator reaches it), it
            returns what is passed as ``per_query`` (the stage codes the tables as they come,
            :meth:`relgrade.evaluation.per_query_codes.PerQueryCodes.from_tables`). Default:
            the tables stacked into one frame with an ``arm`` column.

        Returns
        -------
        dict
            Keyword arguments for :func:`relgrade.evaluation.compare.full_report`. Its
            ``grades`` (when the grades table and the audit exist) hold the auditor's rows
            alone (params ``grading.auditor``; every row when none is named), columns
            ``query_id``, ``chunk_id``, ``grader``, ``round``, ``grade``: the label-noise
            band reads nothing else.

        Raises
        ------
        InputError
            A required file is missing or malformed, or a params entry is missing.
        ProtocolError
            The key's hash differs from its record.
        """
        import pandas as pd

        p = self.params
        settings = p.compare_settings()
        metrics = p.need("metrics")
        arms = sorted(map(str, p.arms or {}))
        pq_dir = self.path("per_query")

        def tables():
            for arm in arms:
                path = pq_dir / f"{arm}.parquet"
                if not path.exists():
                    raise InputError("per-query values missing", path=path,
                                     item=f"arm {arm}",
                                     fix="Run the metrics stage first: "
                                         f"{repro_command(self, 'metrics')}")
                yield arm, io.read_table(path, columns=["query_id", "measure", "value"])

        if not arms:
            raise InputError("params lists no arms", path=p.source, item="arms")
        if stacked is not None:  # each arm's table handed over as read, never stacked here
            per_query = stacked(tables())
        else:
            per_query = pd.concat([t.assign(arm=a) for a, t in tables()], ignore_index=True)
        kwargs = {"per_query": per_query, "settings": settings,
                  "ties": p.runs.ties,
                  "relevant_min": p.scale.relevant_min if p.scale is not None else 1,
                  "cutoffs": list(metrics.cutoffs),
                  "round": p.grading.round,
                  "auditor": p.grading.auditor}
        if metrics.weighted:
            q = io.read_table(self.path("queries"), columns=["query_id", "weight"])
            kwargs["weights"] = dict(zip(q["query_id"].astype(str), q["weight"].astype(float)))
        have = (lambda name: True) if full else (lambda name: self.path(name).exists())
        if have("key") and have("record"):
            if full:  # the stage: the key is read a block of whole queries at a time
                files, record = self._checked_key()
            else:
                key, record = self.read_key()
                kwargs["qrels"] = key
            kwargs["record"] = {"key_sha256": record.get("key_sha256"),
                                "pool_version": record.get("pool_version"),
                                "post_hoc": bool(record.get("post_hoc", False))}
            run_dir = self.path("runs")
            streamed = None
            if full:  # runs in query order are read a block of queries at a time
                streamed = _streamed_runs({a: run_dir / f"{a}.trec" for a in arms})
            if streamed is not None:
                kwargs["run_arms"] = streamed
                kwargs["blocks"] = _key_streamed_blocks(
                    files.key, {a: run_dir / f"{a}.trec" for a in streamed})
            elif full or all((run_dir / f"{a}.trec").exists() for a in arms):
                kwargs["runs"] = pd.concat([read_run(run_dir / f"{a}.trec").assign(arm=a)
                                            for a in arms], ignore_index=True)
                if full:
                    kwargs["blocks"] = _key_run_blocks(files.key, kwargs["runs"])
        if have("grades") and have("audit"):
            # the label-noise band reads the auditor's grades alone: only they are kept, and
            # only the five columns it reads (not the key grader's row of every pool pair)
            columns = ["query_id", "chunk_id", "grader", "round", "grade"]
            if p.grading.auditor is not None:  # read a batch at a time, its rows kept
                from relgrade.io.batches import rows_where_in

                grades = rows_where_in(self.path("grades"), columns, "grader",
                                       [str(p.grading.auditor)])
            else:
                grades = io.read_table(self.path("grades"), columns=columns, only=True)
            kwargs["grades"] = grades
            kwargs["audit_queries"] = self.audit_ids()
        if full:
            # the label-noise band reads the audit queries' key rows alone
            audit = {str(q) for q in kwargs.get("audit_queries") or []}
            if "run_arms" in kwargs:  # and the audit queries' run rows alone
                kwargs["runs"] = _streamed_rows_of(
                    {a: run_dir / f"{a}.trec" for a in kwargs["run_arms"]}, audit)
            kwargs["qrels"] = _key_rows_of(files.key, audit)
            kwargs["provenance"] = _provenance_blocks(self.path("provenance"))
            kwargs["depth"] = p.need("pool").depth
        if p.pool is not None and p.pool.tail_sample and have("pool"):
            # a sampled tail: the inferred measures' label-noise band scores the auditor's
            # key on the same sample, with the pool table's inclusion probabilities
            kwargs["inclusion"] = io.read_table(
                self.path("pool"), columns=["query_id", "chunk_id", "inclusion_prob"])
        return kwargs


def _key_rows_of(path: Path, queries: set[str]) -> pd.DataFrame:
    """The key file's rows of ``queries`` (``query_id``, ``chunk_id``, ``grade``), in its
    order, read a batch at a time."""
    import pandas as pd

    from relgrade.io.batches import iter_key_batches

    parts = [b[b["query_id"].astype(str).isin(queries)] for b in iter_key_batches(path)]
    parts = [b for b in parts if len(b)]
    if not parts:
        return pd.DataFrame({"query_id": pd.Series([], dtype=str),
                             "chunk_id": pd.Series([], dtype=str),
                             "grade": pd.Series([], dtype=np.int64)})
    return pd.concat(parts, ignore_index=True)


def _provenance_blocks(path: Path):
    """A callable giving the provenance table's blocks of whole queries (every column), read
    a block at a time when the table is in query order (the pool stage writes it so: checked
    now, over its ``query_id`` column alone); a table in another order, or not Parquet, as
    one block, read whole. The file is checked now: missing or unreadable, the errors of
    :func:`relgrade.io.files.read_table`."""
    from relgrade.io import batches

    names = None
    if path.suffix.lower() == ".parquet" and path.exists():
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(path).names
        except Exception:  # not Parquet: read_table words the error
            names = None
    if names is not None and "query_id" in names:
        try:
            for _ in batches.iter_query_blocks(path, ["query_id"]):
                pass
        except batches.QueryOrderError:
            names = None
        else:
            return lambda: batches.iter_query_blocks(path, names)
    table = io.read_table(path)  # the errors, or a table read whole
    return lambda: iter([table])


def _streamed_runs(paths: dict) -> list[str] | None:
    """The arms (sorted) whose run has a row, when every run of ``paths`` (arm -> file) is a
    TREC file in query order that :func:`relgrade.io.runtable.trec_query_blocks` reads
    (checked now, in one pass each); else None: the runs are read whole."""
    from relgrade.io.runtable import RunNotInBlocks, trec_query_blocks

    arms = []
    for arm, path in sorted(paths.items()):
        try:
            rows = sum(len(b) for b in trec_query_blocks(path))
        except RunNotInBlocks:
            return None
        if not rows:
            return None
        arms.append(arm)
    return arms


def _stacked_runs(tables: list[tuple[str, "pa.Table"]]) -> pd.DataFrame:
    """Runs' rows as the stacked DataFrame ``read_run(...).assign(arm=a)`` of each arm in
    turn gives them (``query_id``, ``chunk_id``, ``rank``, ``score``, ``arm``)."""
    import pandas as pd

    frames = [t.to_pandas().assign(arm=a) for a, t in tables]
    return pd.concat(frames, ignore_index=True)


def _streamed_rows_of(paths: dict, queries: set[str]) -> pd.DataFrame:
    """The stacked runs' rows of ``queries`` (arms in ``paths``' order, file order), read a
    block at a time, with the index of those rows in the whole stacked table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from relgrade.io.runtable import trec_query_blocks

    wanted = pa.array(sorted(queries), type=pa.large_string())
    tables, index, offset = [], [], 0
    for arm, path in paths.items():
        for block in trec_query_blocks(path):
            keep = pc.is_in(block["query_id"], value_set=wanted).to_numpy(zero_copy_only=False)
            rows = np.flatnonzero(keep)
            if len(rows):
                tables.append((arm, block.take(pa.array(rows))))
                index.append(rows + offset)
            offset += len(block)
    if not tables:
        from relgrade.io.runtable import RUN_SCHEMA

        return _stacked_runs([(next(iter(paths)), RUN_SCHEMA.empty_table())])
    out = _stacked_runs(tables)
    out.index = np.concatenate(index)
    return out


def _key_streamed_blocks(path: Path, paths: dict):
    """:func:`_key_run_blocks` of runs in query order (arm -> file), each read a block of
    queries at a time beside the key's blocks: the same ``(key rows, run rows)``."""
    from relgrade.io import batches
    from relgrade.io.runtable import RunCursor, trec_query_blocks

    def blocks():
        cursors = {a: RunCursor(trec_query_blocks(p)) for a, p in paths.items()}
        held = None
        keyed = batches.whole_query_blocks(batches.iter_key_batches(path), path=path,
                                           writer="the key stage")
        for key in keyed:
            last = str(key["query_id"].iloc[-1])
            runs = [(a, c.upto(last)) for a, c in cursors.items()]
            if held is not None:
                yield held[0], _stacked_runs(held[1])
            held = (key, runs)
        if held is not None:  # the last block takes the runs' queries after the key's
            import pyarrow as pa

            key, runs = held
            runs = [(a, pa.concat_tables([t, cursors[a].rest()])) for a, t in runs]
            yield key, _stacked_runs(runs)
    return blocks


def _key_run_blocks(path: Path, runs: pd.DataFrame):
    """A callable giving ``(key rows, run rows)`` per block of whole queries of the key file
    (in its query order, checked as it is read), the run rows those of the same queries and
    of the run's queries the key lacks that sort between them (before the first, after the
    last), so each run row is in one block; within a block, rows in the runs' order."""
    import pandas as pd

    from relgrade.io import batches

    codes, ids = pd.factorize(runs["query_id"].astype(str), sort=True)
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate(([0], np.cumsum(np.bincount(codes, minlength=len(ids)))))
    ids = np.asarray(ids, dtype=object)

    def rows_by_block():
        done, pending = 0, None
        keyed = batches.whole_query_blocks(batches.iter_key_batches(path), path=path,
                                           writer="the key stage")
        for key in keyed:
            if pending is not None:
                yield pending
            upto = int(np.searchsorted(ids, str(key["query_id"].iloc[-1]), side="right"))
            pending = (key, order[starts[done]:starts[upto]])
            done = upto
        if pending is not None:  # the last block takes the run's queries after the key's
            yield pending[0], np.concatenate([pending[1], order[starts[done]:]])

    def blocks():
        for key, rows in rows_by_block():
            yield key, runs.iloc[np.sort(rows)].reset_index(drop=True)
    return blocks


def _codes_of(ids: pd.Series, table: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Each id's value in ``table`` (a Series indexed by id, as ``Series.get`` finds it) as
    a code into the table's distinct values, -1 for an id the table lacks."""
    import pandas as pd

    import pyarrow as pa
    import pyarrow.compute as pc

    values = table.to_numpy(dtype=object)
    words = pd.Index(values, dtype=object).unique()
    codes = words.get_indexer(values)
    at = pc.index_in(pa.array(ids, type=pa.large_string()),
                     value_set=pa.array(table.index.to_numpy(dtype=object),
                                        type=pa.large_string()))
    at = pc.fill_null(at, -1).to_numpy(zero_copy_only=False)
    return np.where(at >= 0, codes[np.maximum(at, 0)] if len(codes) else -1, -1), words
