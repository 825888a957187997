"""Rubric sections and revisions: which grades a rubric revision makes stale.

A rubric is a Markdown file. Its **sections** are its headings of level 2 and below
(``##``, ``###``, ...); the level-1 heading is the title, and the text between the title and
the first section is the section ``preamble``. A section's **id** is its heading text in
lower case with a leading number (``5.``, ``4.2``) dropped and every run of other characters
than letters and digits turned into one ``-``: ``## 5. Boundary cases`` is
``boundary-cases``, ``### Header only or table of contents`` is
``header-only-or-table-of-contents``. Two headings with one id are refused. A section's text
is the lines under its heading up to the next heading of any level (its subsections are
sections of their own).

Sections are **general** or **cases**. A level-2 section with subsections is a catalogue of
cases (the query forms, the boundary cases): the catalogue and every section inside it are
*case* sections, which apply only to the grades that name them. Every other section (the
preamble, the scale, the output row ...) is *general*: it applies to every grade.

The file opens with a block of ``key: value`` lines (up to the first blank line). ``version``
names the rubric; a **revision** adds ``revises`` (the version it replaces, whose file
``VERSION.md`` stays in the same folder), ``changes`` (the ids of the sections it changed,
added or removed, comma-separated) and optionally ``settles`` (the ids of the disputes it
settles, comma-separated). The declared changes are checked against the two files: every
section whose text differs must be named, and every name must be a section that differs.

A grade made under an earlier rubric of the chain stays **current** when every revision since
changed only case sections, and the sections the grade names (``§id`` in its reason, or a
dispute filed on its pair) are all known and none of them is changed, nor inside a changed
catalogue, nor the catalogue of a changed case. A grade naming no section stays stale: it
says nothing about which rules it applied, so every change may concern it.

Everything here works on text and tables; reading the files is the caller's job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from relgrade.canonical import sha256_bytes
from relgrade.errors import InputError

#: The id of the text between the title and the first section.
PREAMBLE = "preamble"

#: How a grade reason names a rubric section: ``§`` followed by the section's id.
CITE = re.compile(r"§([a-z0-9]+(?:-[a-z0-9]+)*)")

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FRONT = re.compile(r"^([a-z_]+):[ \t]*(.*)$")
_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.?[ \t]+")


def section_id(heading: str) -> str:
    """The id of a section from its heading text.

    Examples
    --------
    >>> section_id("5. Boundary cases"), section_id("Right symbol, wrong behaviour")
    ('boundary-cases', 'right-symbol-wrong-behaviour')
    """
    text = _NUMBER.sub("", heading.strip()).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


@dataclass(frozen=True)
class Section:
    """One section of a rubric.

    Attributes
    ----------
    id : str
        :func:`section_id` of the heading (``preamble`` for the text before the first one).
    heading : str
        The heading text as written.
    level : int
        2 for ``##``, 3 for ``###``...; 1 for the preamble.
    line : int
        1-based line of the heading in the file.
    parent : str or None
        The id of the enclosing section.
    sha256 : str
        sha256 of the section's own text (lines under the heading up to the next heading,
        outer blank lines dropped).
    general : bool
        True when the section applies to every grade (see the module's notes).
    """

    id: str
    heading: str
    level: int
    line: int
    parent: str | None
    sha256: str
    general: bool


@dataclass(frozen=True)
class Rubric:
    """A rubric file read into its front matter and sections."""

    front: dict
    sections: dict = field(default_factory=dict)

    @property
    def version(self) -> str | None:
        return self.front.get("version")

    def ancestors(self, sid: str) -> list[str]:
        """The ids of the sections enclosing ``sid``, innermost first."""
        out, cur = [], self.sections[sid].parent
        while cur is not None:
            out.append(cur)
            cur = self.sections[cur].parent
        return out

    def descendants(self, sid: str) -> list[str]:
        """The ids of the sections inside ``sid``, in file order."""
        return [s for s in self.sections if sid in self.ancestors(s)]


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse(text: str, *, source=None) -> Rubric:
    """A rubric's front matter and sections.

    Parameters
    ----------
    text : str
        The rubric file's text.
    source : str or os.PathLike, optional
        The file, named in errors.

    Returns
    -------
    Rubric
        ``front``: ``version``, ``revises`` (str) and ``changes``, ``settles`` (lists of str)
        as given; ``sections``: id → :class:`Section`, in file order.

    Raises
    ------
    InputError
        Two headings share an id (naming the file and the second heading's line), or a
        heading has no id (no letter or digit).

    Examples
    --------
    >>> r = parse("version: v2\\nrevises: v1\\nchanges: b\\n\\n# T\\nintro\\n## 1. A\\nx\\n"
    ...           "## 2. Cases\\n### B\\ny\\n")
    >>> r.front["changes"], list(r.sections), r.sections["b"].general, r.sections["a"].general
    (['b'], ['preamble', 'a', 'cases', 'b'], False, True)
    """
    lines = text.splitlines()
    front: dict = {}
    i = 0
    while i < len(lines) and lines[i].strip():
        m = _FRONT.match(lines[i].strip())
        if not m:
            break
        key, value = m.group(1), m.group(2).strip()
        front[key] = _list(value) if key in ("changes", "settles") else value
        i += 1
    heads: list[tuple[int, int, str]] = []  # (line index, level, heading)
    fenced = False
    for j in range(i, len(lines)):
        if lines[j].lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(lines[j])
        if m:
            heads.append((j, len(m.group(1)), m.group(2)))
    body_start = i
    title = next((h for h in heads if h[1] == 1), None)
    raw: list[tuple[str, str, int, int, list[str]]] = []
    first_section = next((h for h in heads if h[1] >= 2), None)
    pre_end = first_section[0] if first_section else len(lines)
    pre = [ln for k, ln in enumerate(lines[body_start:pre_end], start=body_start)
           if not (title and k == title[0])]
    raw.append((PREAMBLE, "", 1, body_start + 1, pre))
    sections_heads = [h for h in heads if h[1] >= 2]
    for n, (j, level, heading) in enumerate(sections_heads):
        nxt = next((h[0] for h in heads if h[0] > j), len(lines))
        sid = section_id(heading)
        if not sid:
            raise InputError("a rubric heading needs a letter or digit to make its section id",
                             path=source, line=j + 1, found=heading)
        raw.append((sid, heading, level, j + 1, lines[j + 1:nxt]))
    sections: dict[str, Section] = {}
    stack: list[tuple[int, str]] = []
    parents: dict[str, str | None] = {}
    for sid, heading, level, line, body in raw:
        if sid in sections or sid in parents:
            first = next(r for r in raw if r[0] == sid)
            raise InputError(f"two rubric sections have the id {sid} (the first on line "
                             f"{first[3]})", path=source, line=line, found=heading,
                             fix="Give each heading its own wording")
        while stack and stack[-1][0] >= level:
            stack.pop()
        parent = stack[-1][1] if stack and sid != PREAMBLE else None
        if sid != PREAMBLE:
            stack.append((level, sid))
        parents[sid] = parent
        text_body = "\n".join(body).strip("\n")
        sections[sid] = Section(sid, heading, level, line, parent,
                                sha256_bytes(text_body.encode("utf-8")), True)
    # a level-2 section with subsections is a catalogue: it and everything inside are cases
    top_of = {}
    for sid in sections:
        cur = sid
        while parents.get(cur) is not None:
            cur = parents[cur]
        top_of[sid] = cur
    catalogues = {parents[s] for s in sections if parents.get(s) is not None}
    catalogues = {top_of[c] for c in catalogues}
    out = {sid: Section(s.id, s.heading, s.level, s.line, s.parent, s.sha256,
                        top_of[sid] not in catalogues)
           for sid, s in sections.items()}
    return Rubric(front=front, sections=out)


def changed_sections(old: Rubric, new: Rubric) -> list[str]:
    """The ids of the sections whose text differs between two rubrics, added or removed.

    Examples
    --------
    >>> a = parse("# T\\n## A\\nx\\n## B\\ny\\n")
    >>> changed_sections(a, parse("# T2\\n## A\\nx\\n## B\\nz\\n## C\\n"))
    ['b', 'c']
    """
    ids = list(dict.fromkeys([*old.sections, *new.sections]))
    return [s for s in ids if s not in old.sections or s not in new.sections
            or old.sections[s].sha256 != new.sections[s].sha256]


def touched(old: Rubric, new: Rubric, changes: Iterable[str]) -> frozenset[str] | None:
    """The section ids whose grades a revision makes stale, or None for every grade.

    A change of a general section touches every grade (None). A changed case section
    touches itself, the catalogue around it and every case inside it.

    Examples
    --------
    >>> a = parse("# T\\n## A\\n## Cases\\n### B\\n### C\\n")
    >>> sorted(touched(a, a, ["b"])), touched(a, a, ["a"])
    (['b', 'cases'], None)
    """
    out: set[str] = set()
    for sid in changes:
        for r in (old, new):
            if sid not in r.sections:
                continue
            if r.sections[sid].general:
                return None
            out.update([sid, *r.ancestors(sid), *r.descendants(sid)])
    return frozenset(out)


def check_revision(old: Rubric, new: Rubric, *, source, old_source) -> None:
    """Refuse a revision whose declared changes are missing, unknown or untrue.

    Raises
    ------
    InputError
        Naming ``source`` and its ``changes:`` line: the revision names no section; a name
        is no section of either file (an unknown section id); a section whose text differs
        is not named; a named section did not change.
    """
    changes = new.front.get("changes") or []
    line = _front_line(new, "changes")
    if not changes:
        raise InputError("a rubric revision names the sections it changed", path=source,
                         line=line, item="changes",
                         found=f"revises {new.front.get('revises')}, no section named",
                         fix="Add a line `changes: SECTION-ID, ...` (ids: `relgrade disputes "
                             "sections`)")
    known = set(old.sections) | set(new.sections)
    unknown = [c for c in changes if c not in known]
    if unknown:
        raise InputError("unknown section id in a rubric revision's changes", path=source,
                         line=line, item="changes", found=", ".join(unknown),
                         fix="Name sections by their ids (`relgrade disputes sections`)")
    differ = changed_sections(old, new)
    # the version revised: its own version line, else the one the revision names
    since = old.version or new.front.get("revises") or old_source
    missing = [c for c in differ if c not in changes]
    if missing:
        raise InputError(f"sections changed since {since} but not named in the "
                         "revision's changes", path=source, line=line, item="changes",
                         found=", ".join(missing),
                         fix=f"Name them, or undo the edit (compare with {old_source})")
    same = [c for c in changes if c not in differ]
    if same:
        raise InputError(f"sections named in the revision's changes are unchanged since "
                         f"{since}", path=source, line=line, item="changes",
                         found=", ".join(same), fix="Name only the sections the revision changed")


def _front_line(r: Rubric, key: str) -> int:
    return list(r.front).index(key) + 1 if key in r.front else len(r.front) + 1


@dataclass(frozen=True)
class Revision:
    """One step of a rubric's chain: ``version`` revises ``revises``."""

    version: str
    revises: str
    changes: tuple
    settles: tuple
    source: str


@dataclass(frozen=True)
class Carry:
    """Which grades made under earlier rubrics are still current.

    Attributes
    ----------
    touched : dict of str to frozenset
        For each earlier rubric file of the chain (its sha256), the section ids whose grades
        the revisions since have made stale; an earlier rubric whose revisions changed a
        general section is absent (every grade made under it is stale).
    known : dict of str to frozenset
        For the same files, every section id they have.
    disputed : dict of (str, str) to frozenset
        The section ids disputes name per pair (``query_id``, ``chunk_id``).
    revisions : tuple of Revision
        The chain, newest first.
    """

    touched: Mapping = field(default_factory=dict)
    known: Mapping = field(default_factory=dict)
    disputed: Mapping = field(default_factory=dict)
    revisions: tuple = ()

    def with_disputes(self, disputes: pd.DataFrame) -> "Carry":
        """This carry with the sections ``disputes`` (``query_id``, ``chunk_id``,
        ``section``) name per pair."""
        out: dict = {}
        for q, c, s in zip(disputes["query_id"].astype(str), disputes["chunk_id"].astype(str),
                           disputes["section"].astype(str)):
            out.setdefault((q, c), set()).add(s)
        return Carry(self.touched, self.known, {k: frozenset(v) for k, v in out.items()},
                     self.revisions)

    def settled(self) -> dict[str, str]:
        """Dispute id → the version whose revision settled it."""
        return {d: r.version for r in self.revisions for d in r.settles}

    def carried(self, bank: pd.DataFrame) -> pd.Series:
        """Which ``bank`` rows (``query_id``, ``chunk_id``, ``reason``, ``rubric_sha256``)
        are current under the newest rubric through this carry.

        Examples
        --------
        >>> c = Carry(touched={"r1": frozenset({"b"})}, known={"r1": frozenset({"a", "b"})})
        >>> bank = pd.DataFrame({"query_id": ["q"] * 4, "chunk_id": list("wxyz"),
        ...     "reason": ["§a fine", "§b", "none named", "§a"],
        ...     "rubric_sha256": ["r1", "r1", "r1", "r0"]})
        >>> c.carried(bank).tolist()
        [True, False, False, False]
        """
        out = []
        for q, ch, reason, sha in zip(bank["query_id"].astype(str),
                                      bank["chunk_id"].astype(str),
                                      bank["reason"].fillna("").astype(str),
                                      bank["rubric_sha256"].astype(str)):
            hit = self.touched.get(sha)
            if hit is None:
                out.append(False)
                continue
            named = set(cited(reason)) | set(self.disputed.get((q, ch), ()))
            out.append(bool(named) and named <= self.known[sha] and not (named & hit))
        return pd.Series(out, index=bank.index, dtype=bool)


def cited(reason: str) -> list[str]:
    """The section ids a grade reason names (``§id``), in order.

    Examples
    --------
    >>> cited("§duplicates second copy of the docstring"), cited("no section")
    (['duplicates'], [])
    """
    return CITE.findall(str(reason))


def carry(chain: Sequence[tuple[str, Rubric, str]]) -> Carry:
    """What each earlier rubric of a chain carries over to the newest one.

    Parameters
    ----------
    chain : sequence of (str, Rubric, str)
        ``(sha256 of the file's bytes, parsed rubric, file name)``, newest first; each one's
        ``revises`` is the next one's ``version`` (already checked by
        :func:`check_revision`).

    Returns
    -------
    Carry
        Without disputes (:meth:`Carry.with_disputes` adds them).
    """
    touched_by: dict[str, frozenset] = {}
    known: dict[str, frozenset] = {}
    revisions = []
    acc: set[str] | None = set()
    for (_, new, src), (sha, old, _) in zip(chain, chain[1:]):
        t = touched(old, new, new.front.get("changes") or [])
        acc = None if acc is None or t is None else acc | t
        revisions.append(Revision(str(new.version), str(new.front.get("revises")),
                                  tuple(new.front.get("changes") or ()),
                                  tuple(new.front.get("settles") or ()), src))
        known[sha] = frozenset(old.sections)
        if acc is not None:
            touched_by[sha] = frozenset(acc)
    return Carry(touched=touched_by, known=known, revisions=tuple(revisions))


def revision_record(c: Carry) -> list[dict]:
    """The chain as the key's record lists it: newest first, each revision's version, the
    version it revised, the sections it changed and the disputes it settled."""
    return [{"version": r.version, "revises": r.revises, "changes": list(r.changes),
             "settles": list(r.settles)} for r in c.revisions]
