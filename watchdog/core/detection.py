"""Engine detection (pure): which engine wrote a log, from the `detect` markers of the profiles in its
first lines, counted so that one stray line of another engine does not decide."""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from watchdog.core.prefilter import Literals
from watchdog.core.templates import TEMPLATE_BYTES, TEMPLATES_MAX, has_digit, template
from watchdog.profiles.model import Catalogue

__all__ = ["EngineDetector", "detect_engine"]


# Lines between the tracebacks of one chain: its header, exception lines and the chain markers.
_CHAIN_OR_EXCEPTION = re.compile(
    r"Traceback \(most recent call last\)|During handling of the above exception|"
    r"The above exception was the direct cause|(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Interrupt)\b"
)

# the ASCII characters `str.lstrip()` strips (`feed`'s look for a frame, made on a line's template by `feed_template`)
_ASCII_SPACE = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "


def detect_engine(lines: Iterable[str], catalogue: Catalogue) -> str | None:
    """Name the engine whose `detect` markers appear most often in `lines` (a log's first lines), or None:
    an SGLang log may show a line of vLLM's (old SGLang imported vLLM), but its own markers outnumber it."""
    detector = EngineDetector(catalogue.markers)
    detector.feed_lines(list(lines))
    return detector.engine()


class EngineDetector:
    """`detect_engine` one line at a time: a log's head that grows is read once, not again per new line;
    `copy()` lets a caller try a line that may still grow (an unfinished one) without feeding it for good."""

    __slots__ = (
        "_any",
        "_chain",
        "_engine",
        "_frames",
        "_known",
        "_markers",
        "_owner",
        "_seen",
        "count",
        "score",
    )

    def __init__(self, markers: tuple[tuple[str, str], ...]):
        """Look for `markers`, (engine, marker) pairs (a `Catalogue`'s): a tie goes to the first engine."""
        self._markers = markers
        self._any = _any_marker(markers)
        # the templates seen, with the markers of each (Hyperscan's index only: `feed_template`)
        self._seen = None if self._any[1] is None else self._any[1][2].seen
        self.count = 0  # lines fed
        self.score: dict[str, int] = {}
        # A traceback's frames below the engine's own name the libraries it called (old SGLang ran vLLM's
        # layers): those do not count for the library. Python prints a chain of tracebacks ("During handling of
        # the above exception, ...") oldest first; the last one holds the process's own outer frames, so its
        # engine owns the frames of the whole chain (an excerpt may start in the middle of the first one's
        # library frames).
        self._chain: list[tuple[str | None, dict[str, int]]] = []  # (owner, frame counts) of each traceback
        self._owner: str | None = None  # the engine of the outermost engine frame of the traceback being read
        self._frames: dict[str, int] = {}
        self._engine: str | None = None  # what `engine()` said, while `_known`: no line changed it since
        self._known = False

    def copy(self) -> EngineDetector:
        """An independent detector in the same state."""
        other = EngineDetector(self._markers)
        other.count, other.score = self.count, dict(self.score)
        other._chain = [(o, dict(f)) for o, f in self._chain]
        other._owner, other._frames = self._owner, dict(self._frames)
        other._engine, other._known = self._engine, self._known
        return other

    def feed(self, line: str, key: bytes | None = None) -> None:
        """Read the next line of the head. `key`: the line's `template` (of its bytes, its newline last, if it
        is ASCII): the markers it holds are then looked up by it."""
        self.count += 1
        frame: bool | None = None  # whether the line is a frame: asked only where it matters
        if self._owner is not None or self._frames or self._chain:
            stripped = line.lstrip()
            frame = stripped.startswith('File "')
            # not a frame, nor a frame's indented source line: it may end the traceback open
            if not frame and stripped == line:
                self._known = False
                self._end_traceback()
                text = stripped.strip()
                if text and not _CHAIN_OR_EXCEPTION.match(text):
                    self._end_chain(self.score)
        any_marker, index = self._any
        if index is not None:
            # Hyperscan names the markers the line holds in one pass (most lines of a head hold none): the
            # search for any of them would be a second look at the same line
            engines = (
                _engines_found(index[0].found(line), index[1])
                if key is None
                else _engines_by_template(line, key, index)
            )
            if not engines:
                return
        elif not any_marker.holds(line):  # one search for every marker: most lines of a head hold none
            return
        else:
            engines = _engines_of(line, self._markers, index)
        if frame is None:
            frame = line.lstrip().startswith('File "')
        named = self._engine
        if not frame and self._known and named is not None and engines.count(named) == len(engines):
            # only the engine named already gains: it stays the one named (the first of those with the highest
            # score, now higher still), so `engine()` need not count again
            self.score[named] = self.score.get(named, 0) + len(engines)
            return
        self._known = False
        for engine in engines:
            if not frame:
                self.score[engine] = self.score.get(engine, 0) + 1
                continue
            if self._owner is None:
                self._owner = engine
            if engine == self._owner:
                self._frames[engine] = self._frames.get(engine, 0) + 1

    def feed_template(self, data: bytes, key: bytes) -> bool:
        """`feed` of the line `data` whose template (`template`, of its bytes) is `key`, where the template and the
        line's markers with a digit tell all the line does: no traceback is open, the template was seen before (a
        live head's usual line: a crash loop repeats its startup and serving lines), and the line holds no marker,
        or only markers of the engine named already and it is no frame. True: the line was read; False: nothing
        was done (`feed` it, if it is a line). A template is kept only as `feed` was given it: of one line of
        ASCII, its newline last (and, being a line, no other line break): so is `data` where this says True."""
        seen = self._seen
        if seen is None or self._owner is not None or self._frames or self._chain:
            return False
        marked = seen.get(key)
        if marked is None:
            return False
        engines = marked[0]
        # the markers with a digit whose template the template holds: the line itself may hold them
        for text, engine in marked[3]:
            if text in data:
                engines = (*engines, engine)
        if engines:
            named = self._engine
            if (
                not self._known
                or named is None
                or engines.count(named) != len(engines)
                or key.lstrip(_ASCII_SPACE).startswith(b'File "')
            ):
                return False
            self.score[named] = self.score.get(named, 0) + len(engines)
        self.count += 1
        return True

    def feed_lines(
        self, lines: list[str], keys: Sequence[bytes] | None = None, raws: Sequence[bytes] | None = None
    ) -> None:
        """Read the next lines of the head, as `feed` each in turn would: without Hyperscan, one search over them
        all finds the lines that hold a marker, and only those, and the lines that end a traceback holding one,
        are read in Python (a line with no marker changes nothing but the count while no traceback is open).
        `keys`: each line's template, as `feed` takes it (with Hyperscan, the markers of a template seen are
        not looked for again: a crash loop's tracebacks and startups repeat their lines' templates). `raws`, with
        `keys`: each line's bytes, its newline last, of ASCII with no other line break: a line of a template seen is
        read by it (`feed_template`), as a live head's line a read is (a burst of serving lines)."""
        if len(lines) <= 1 or self._any[1] is not None:
            # a live log's block (its one line read as it is), or Hyperscan's: its one pass over each line names
            # the line's markers, about 3x faster over a head than the search over the block and then a pass over
            # each line that holds one (most lines of a startup or a traceback do)
            if keys is None:
                for text in lines:
                    self.feed(text)
            elif raws is None:
                for text, key in zip(lines, keys, strict=True):
                    self.feed(text, key)
            else:
                by_template = self.feed_template
                for text, key, raw in zip(lines, keys, raws, strict=True):
                    # (`feed_template` declines while a traceback is open: not asked then, a crash's frames)
                    if self._owner is not None or self._frames or self._chain or not by_template(raw, key):
                        self.feed(text, key)
            return
        marked = self._any[0].marked(lines)  # the whole block at once: most blocks of a head hold no marker
        pos = 0
        for index in [*marked, len(lines)]:
            while pos < index and (self._owner is not None or self._frames or self._chain):
                self.feed(lines[pos])  # a traceback (or a chain of them) is open: it ends at some line
                pos += 1
            self.count += index - pos
            if index < len(lines):
                self.feed(lines[index])
            pos = index + 1

    def engine(self) -> str | None:
        """The engine the lines fed so far name (as if they were all the lines), or None."""
        if self._known:
            return self._engine  # no line since the last call held a marker or ended a traceback
        score = dict(self.score)
        chain = [
            *self._chain,
            *([(self._owner, self._frames)] if self._owner is not None or self._frames else []),
        ]
        _score_chain(chain, score)
        self._engine = (
            max(score, key=lambda e: score[e]) if score else None
        )  # ties: the engine whose marker came first
        self._known = True
        return self._engine

    def _end_traceback(self) -> None:
        if self._owner is not None or self._frames:
            self._chain.append((self._owner, self._frames))
        self._owner, self._frames = None, {}

    def _end_chain(self, score: dict[str, int]) -> None:
        self._end_traceback()
        _score_chain(self._chain, score)
        self._chain.clear()


_Search = Callable[..., "re.Match[str] | None"]  # a compiled regex's search: (text[, pos])


class _AnyMarker:
    """Which lines hold any of a set of markers, without Hyperscan (with it, `_Index` names a line's markers in
    one pass): one regex search for any of them, compiled when first used (a replay's start with Hyperscan would
    compile an alternation of ~160 markers for nothing)."""

    def __init__(self, words: list[str]) -> None:
        self._words = words

    @functools.cached_property
    def _search(self) -> _Search:
        return _search_any(self._words)

    def holds(self, line: str) -> bool:
        """Whether `line` holds a marker."""
        return self._search(line) is not None

    def marked(self, lines: list[str]) -> list[int]:
        """The indexes of the `lines` that hold a marker, in order: one search over them all."""
        marked: list[int] = []
        text = "\n".join(lines)
        m = self._search(text)
        if m is not None:
            # a marker holds no line break: each match lies in one line, the line it starts in
            starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
            while m is not None:
                line = bisect.bisect_right(starts, m.start()) - 1
                marked.append(line)
                m = self._search(text, starts[line + 1])
        return marked


_Runs = tuple[tuple[str, _Search, tuple[str, ...]], ...]
# the markers as Hyperscan finds them: which of their texts a line holds, and the engines of each text's markers
# (by their places in the catalogue's order)
_Index = tuple[Literals, tuple[tuple[tuple[int, str], ...], ...], "_Templates"]
# what a line's template tells of the markers a line holds (`_engines_by_template`): the engines of those with no
# digit, in their order (and as (place, engine) pairs), and the markers with digits whose template it holds (each
# as its text, place and engine, and again as its text's bytes and engine): the line itself may hold them
_Marked = tuple[
    tuple[str, ...],
    tuple[tuple[int, str], ...],
    tuple[tuple[str, int, str], ...],
    tuple[tuple[bytes, str], ...],
]


class _Templates(NamedTuple):
    """The markers a line holds, by the line's template: kept for the templates seen (one thread at a time)."""

    seen: dict[bytes, _Marked]
    digits: tuple[tuple[str, bytes, int, str], ...]  # the markers with a digit: text, template, place, engine
    undigited: tuple[bool, ...]  # by index of a literal of the index: whether it holds no digit


def _engines_found(found: list[int] | None, of_literal: tuple[tuple[tuple[int, str], ...], ...]) -> list[str]:
    # the engine of each marker of the literals Hyperscan found, in the markers' order
    if not found:
        return []
    if len(found) == 1 and len(hits := of_literal[found[0]]) == 1:
        return [hits[0][1]]  # one marker: a serving line's usual
    return [engine for _, engine in sorted(hit for f in found for hit in of_literal[f])]


def _engines_by_template(line: str, key: bytes, index: _Index) -> Sequence[str]:
    # `_engines_found` of `line`, whose template is `key`: a marker with no digit is in a line exactly when it is in
    # the line's template, so which of those a line holds is found once per template; a marker with a digit is
    # looked for in the line itself, where the template holds its template
    templates = index[2]
    marked = templates.seen.get(key)
    if marked is None:
        found = index[0].found(line) or []
        undigited = templates.undigited
        pairs = tuple(sorted(hit for f in found if undigited[f] for hit in index[1][f]))
        digits = tuple((text, place, engine) for text, mark, place, engine in templates.digits if mark in key)
        marked = (
            tuple(engine for _, engine in pairs),
            pairs,
            digits,
            tuple((text.encode("utf-8", "surrogatepass"), engine) for text, _, engine in digits),
        )
        if len(key) <= TEMPLATE_BYTES:  # (a longer line is mostly one of a kind: not kept)
            if len(templates.seen) >= TEMPLATES_MAX:
                templates.seen.clear()
            templates.seen[key] = marked
    if marked[2]:
        extra = [(place, engine) for text, place, engine in marked[2] if text in line]
        if extra:
            return [engine for _, engine in sorted([*marked[1], *extra])]
    return marked[0]


def _engines_of(line: str, markers: tuple[tuple[str, str], ...], index: _Index | None) -> list[str]:
    # the engine of each marker `line` holds, in the markers' order: with Hyperscan, one pass finds them
    if index is not None:
        literals, of_literal, _ = index
        found = literals.found(line)
        if found is not None:
            return _engines_found(found, of_literal)
    out = []
    for engine, run_has, own in _runs(
        markers
    ):  # each engine's markers, in their order, searched at once first
        if run_has(line) is not None:
            out += [engine for marker in own if marker in line]
    return out


@functools.lru_cache(maxsize=8)
def _any_marker(markers: tuple[tuple[str, str], ...]) -> tuple[_AnyMarker, _Index | None]:
    # A search for any of the markers (the catalogue's, the same for every launch: compiled once), and which
    # engines' markers a line holds, found by Hyperscan in one pass (`_runs` without it).
    literals = Literals(m for _, m in markers if m)
    places: dict[str, list[tuple[int, str]]] = {}
    for place, (engine, marker) in enumerate(markers):
        places.setdefault(marker, []).append((place, engine))
    index = None
    if literals.literals and "" not in places and literals.found("") is not None:
        digits = tuple(
            (marker, template(marker.encode()), place, engine)
            for place, (engine, marker) in enumerate(markers)
            if has_digit(marker)
        )
        undigited = tuple(not has_digit(m) for m in literals.literals)
        index = (
            literals,
            tuple(tuple(places[m]) for m in literals.literals),
            _Templates({}, digits, undigited),
        )
    return _AnyMarker([m for _, m in markers]), index


@functools.lru_cache(maxsize=8)
def _runs(markers: tuple[tuple[str, str], ...]) -> _Runs:
    # Without Hyperscan: the markers in runs of one engine's, in their order, each with a search for any of its
    # own: a line that holds one (a serving line may) is looked at with a dozen searches, not with `in` for each
    # of ~150 markers. Compiled on first use (a replay's start with Hyperscan compiles none of them).
    runs: list[tuple[str, list[str]]] = []
    for engine, marker in markers:
        if not runs or runs[-1][0] != engine:
            runs.append((engine, []))
        runs[-1][1].append(marker)
    return tuple((engine, _search_any(own), tuple(own)) for engine, own in runs)


def _search_any(words: list[str]) -> _Search:
    # one search for any of `words`, as a trie (`a(?:bc|d)`, not `abc|ad`): re tries a plain alternation's every
    # branch at every position, 4x slower
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return re.compile(_trie_pattern(trie) if trie else r"(?!)").search


def _trie_pattern(node: dict[str, Any]) -> str:
    if "" in node:  # a marker ends here: the longer ones through it need not be looked for
        return ""
    branches = [re.escape(char) + _trie_pattern(child) for char, child in sorted(node.items())]
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


def _score_chain(chain: list[tuple[str | None, dict[str, int]]], score: dict[str, int]) -> None:
    chain_owner = next((o for o, _ in reversed(chain) if o is not None), None)
    for _, counts in chain:
        if chain_owner is not None and counts.get(chain_owner):
            score[chain_owner] = score.get(chain_owner, 0) + counts[chain_owner]
