"""Per-field accuracy of the verdict on crops of the labelled tuning logs, as public excerpts are cropped.

    python benchmarks/crop_score.py [DIR ...] [--misses] [--k K ...] [--only ENGINE]

An operator who pastes a log pastes the last screenful, or the part around the traceback: the start banner,
the version line and most phase markers are gone. For each labelled case (NAME.json beside NAME.log, with the
label corrections of DIR/CORRECTIONS.json applied as `corpus_score.py` does), this replays crops of its log
in memory, in one process:

- `last K`: the log's last K lines (K = 15, 30, 60, 120); only logs longer than K lines (a shorter one is its
  whole log, which `corpus_score.py` scores);
- `middle`: from 40 lines before the line that holds the label's root cause (its last) to 10 lines after it,
  where the label names one and the crop is not the whole log.

Each field is judged against the label where the crop still holds its evidence: outcome where the crop holds
a line that is not the interpreter's exit noise (`launch_lines`: a `[[dying]]` rule's line; a crop of that alone
is the end of a process, after a clean stop as after a death, and no field of it is judged); phase where one of its lines is one that some profile's rule
reads a phase from (`phase_lines`: a phase, progress, start, ready, served, serving or arguments line, an
error line with its own `state`, a `[[frame]]` or `[[request]]` frame; of any engine, not only the one
detected); category (crashes whose label names one) when the root-cause line is in the crop or the label names
none; root cause only when its line is in the crop; engine unless CORRECTIONS.json says the log does not name
it. The table is per crop and field, overall and per engine, and `all` rows count the outcome, phase and
engine of every crop, judged or not, so that nothing is hidden. With --misses, each miss, with the crop's
verdict, and each crop whose outcome or phase is not judged (the held-out cases are never read: only the
tuning directories are scored by default). Exit 0 always: this prints a figure, tests/test_crops.py holds the
line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpus_score import OUTCOME, SECTIONS, _corrections, _label, _pct  # noqa: E402 - beside this script

from watchdog.core.analyzer import Analyzer  # noqa: E402 - the tree's own package, not an installed one
from watchdog.core.envelope import parse  # noqa: E402
from watchdog.core.framing import clean  # noqa: E402
from watchdog.core.lifecycle import State  # noqa: E402
from watchdog.core.verdict import build_verdict, exit_code  # noqa: E402
from watchdog.profiles.loader import load_engine, load_profile  # noqa: E402
from watchdog.vocabulary import ENGINES  # noqa: E402

__all__ = [
    "AFTER",
    "BEFORE",
    "CROPS",
    "EVERY",
    "FIELDS",
    "CropScore",
    "crops",
    "launch_lines",
    "log_lines",
    "main",
    "overall",
    "phase_lines",
    "replay_bytes",
    "score_crop",
    "score_dirs",
]

FIELDS = ("outcome", "phase", "category", "root_cause", "engine")
EVERY = ("outcome", "phase", "engine")  # the fields also counted on every crop, judged or not
LAST = (15, 30, 60, 120)
# the middle crop: the lines around the root cause an operator pastes with its traceback
BEFORE, AFTER = 40, 10
CROPS = (*(f"last {k}" for k in LAST), "middle")


@dataclass
class CropScore:
    """One crop of one case: its fields (True right, False wrong, None not judged) and the crop's verdict."""

    name: str
    engine: str
    crop: str
    lines: int
    fields: dict[str, bool | None]
    said: dict[str, Any]
    # outcome, phase and engine right or not (None: not asked) on every crop, judged or not (a crop of exit
    # noise, or with no line that tells a phase): the figure that hides nothing
    every: dict[str, bool | None]


def _root_lines(lines: list[bytes], root: str | None) -> list[int]:
    # the lines that hold the label's root cause: ranks repeat it, and a survived traceback may word it first
    # (vLLM's model-info cache that cannot be saved, then the same OSError that ends the launch)
    needle = (root or "").encode()
    return [i for i, line in enumerate(lines) if needle in line] if root else []


# the rule kinds whose line tells a phase reached (a start and an argument dump: the process's start; served and
# serving lines: a server's). A stop tells none: it comes in any phase
_PHASE_KINDS = frozenset({"start", "phase", "progress", "ready", "served", "serving", "arguments"})


class _Readers:
    """What every bundled profile reads a phase from, and its exit noise (`[[dying]]`): loaded once; what a line's
    content tells is kept (the crops of one log share their lines)."""

    def __init__(self) -> None:
        profiles = [load_profile(e) for e in ENGINES]
        rules = {r for p in profiles for r in p.rules}
        self.phase = [r for r in rules if r.kind in _PHASE_KINDS or (r.kind == "error" and r.state)]
        self.dying = [r for r in rules if r.kind == "dying"]
        # frames are searched in a traceback's text: a frame's line alone holds what one looks for
        self.frames = {pattern for p in profiles for _, pattern in p.frames} | {
            pattern for p in profiles for pattern in p.requests
        }
        self._told: dict[str, tuple[bool, bool]] = {}

    def told(self, content: str) -> tuple[bool, bool]:
        """Whether `content` tells a phase, and whether it is exit noise."""
        known = self._told.get(content)
        if known is None:
            phase = any(r.apply(content) is not None for r in self.phase) or any(
                f.search(content) for f in self.frames
            )
            known = self._told[content] = (phase, any(r.apply(content) is not None for r in self.dying))
        return known


_READERS: list[_Readers] = []


def _told(lines: Iterable[bytes]) -> Iterator[tuple[bool, bool]]:
    # for each content of `lines` as the rules read them (each redraw of a progress bar, wrappers peeled): whether
    # it tells a phase, and whether it is exit noise
    if not _READERS:
        _READERS.append(_Readers())
    readers = _READERS[0]
    for raw in lines:
        for part in raw.rstrip(b"\n").split(b"\r"):
            if part.strip():
                yield readers.told(parse(clean(part)).content)


def phase_lines(lines: Iterable[bytes]) -> bool:
    """Whether one of `lines` is one some bundled profile's rule reads a phase from (any engine's): without
    one, the crop cannot tell the phase it was in (a wrapper whose frames span every step, exit noise)."""
    return any(phase for phase, _ in _told(lines))


def launch_lines(lines: Iterable[bytes]) -> bool:
    """Whether one of `lines` is more than the interpreter's exit noise (a `[[dying]]` rule's line) or blank: a
    crop of that alone is a process's end, a clean stop's as a death's, and tells no outcome."""
    return any(not noise for _, noise in _told(lines))


def crops(lines: list[bytes], root: str | None, last: Iterable[int] = LAST) -> dict[str, tuple[int, int]]:
    """The crops of a log of `lines` as [start, end) line ranges, by name; none that is the whole log."""
    out = {f"last {k}": (len(lines) - k, len(lines)) for k in last if len(lines) > k}
    at = _root_lines(lines, root)
    if at:
        # around its last line: the decisive traceback's, where an earlier one was survived
        start, end = max(0, at[-1] - BEFORE), min(len(lines), at[-1] + AFTER + 1)
        if (start, end) != (0, len(lines)):
            out["middle"] = (start, end)
    return out


def log_lines(path: Path) -> list[bytes]:
    """The lines of the log at `path`, each with its newline; lines end at \\n only, so a progress bar's \\r
    redraws stay one line, as the log's reader sees them."""
    parts = path.read_bytes().split(b"\n")
    return [line + b"\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def replay_bytes(data: bytes) -> dict[str, Any]:
    """The verdict (`--json`'s object) on a log of `data`, the engine detected as `replay` does."""
    analyzer = Analyzer(load_engine(None))
    analyzer.feed(data, 0.0)
    analyzer.finish(0.0)
    verdict: dict[str, Any] = build_verdict(analyzer).to_json()
    return verdict


def score_crop(
    label: dict[str, Any], lines: list[bytes], span: tuple[int, int], engine_named: bool
) -> tuple[dict[str, bool | None], dict[str, Any]]:
    """Each field of the crop `span` of a case's `lines` against its `label`, and the crop's verdict."""
    start, end = span
    v = replay_bytes(b"".join(lines[start:end]))
    err = v["error"] or {}
    crashed = label["outcome"] == "crashed"
    root_in = any(start <= at < end for at in _root_lines(lines, label["root_cause"]))
    outcome = OUTCOME.get(exit_code(State(v["state"]), v["phase"]), "other")
    if v["state"] == State.STOPPED.value and outcome == "incomplete":
        outcome = "stopped"
    said = {
        "outcome": outcome,
        "phase": v["phase"],
        "category": err.get("category"),
        "root_cause": err.get("summary"),
        "engine": v["engine"],
    }
    crop = lines[start:end]
    # what the crop cannot tell: nothing but exit noise tells no field; no line of a phase, no phase
    blind = {"outcome", "phase", "category", "engine"} if not launch_lines(crop) else set()
    if not blind and not phase_lines(crop):
        blind.add("phase")
    said["blind"] = sorted(blind)
    fields: dict[str, bool | None] = {
        "outcome": outcome == label["outcome"],
        "phase": v["phase"] == label["phase"],
        "category": (err.get("category") == label["category"])
        if crashed and label["category"] and (root_in or not label["root_cause"])
        else None,
        "root_cause": (label["root_cause"] in (err.get("summary") or "")) if root_in else None,
        "engine": (v["engine"] == label["engine"]) if engine_named and label["engine"] != "other" else None,
    }
    said["every"] = {f: fields[f] for f in EVERY}  # judged or not
    for f in blind:
        fields[f] = None
    return fields, said


def score_dirs(
    dirs: list[Path],
    only: str | None = None,
    last: Iterable[int] = LAST,
    names: Collection[str] | None = None,
    middle: bool = True,
) -> list[CropScore]:
    """Score every crop of every labelled case under DIRS (of engine `only`, of the cases `names`, where given;
    the middle crop unless `middle` is False)."""
    corrected, no_engine = _corrections(dirs)
    out = []
    last = tuple(last)
    for path in sorted(p for d in dirs for p in d.rglob("*.json") if p.with_suffix(".log").is_file()):
        if path.name == "CORRECTIONS.json" or (only and path.parent.name != only):
            continue
        if names is not None and path.stem not in names:
            continue
        label = _label(path, corrected)
        lines = log_lines(path.with_suffix(".log"))
        for crop, span in crops(lines, label["root_cause"] if middle else None, last).items():
            fields, said = score_crop(label, lines, span, path.stem not in no_engine)
            every = said.pop("every")
            out.append(CropScore(path.stem, path.parent.name, crop, span[1] - span[0], fields, said, every))
    return out


def overall(scores: list[CropScore], crop: str) -> float:
    """The share of judged fields right over every crop named `crop` (all fields together), in percent."""
    judged = [ok for s in scores if s.crop == crop for ok in s.fields.values() if ok is not None]
    return 100.0 * sum(judged) / len(judged) if judged else 100.0


def _print(scores: list[CropScore], misses: bool) -> None:
    engines = sorted({s.engine for s in scores})
    names = [c for c in CROPS if any(s.crop == c for s in scores)]
    if misses:
        for s in scores:
            wrong = [f for f, ok in s.fields.items() if ok is False]
            if wrong:
                got = ", ".join(f"{f}={s.said[f]!r}"[:160] for f in wrong)
                print(f"  [{s.crop}] {s.engine}/{s.name}: {got}")
            unjudged = [f for f in EVERY if f in s.said["blind"]]
            if unjudged:
                said = ", ".join(f"{f}={s.said[f]!r}" + ("" if s.every[f] else " (wrong)") for f in unjudged)
                print(f"  [{s.crop}] {s.engine}/{s.name}: not judged, the crop cannot tell: {said}")
    for crop in names:
        mine = [s for s in scores if s.crop == crop]
        right = sum(all(ok is not False for ok in s.fields.values()) for s in mine)
        print(
            f"== {crop}: {len(mine)} crops; {right} right on every field; all fields {overall(scores, crop):.1f}%"
        )
        print(f"  {'field':<11} {'all':>15}  " + "  ".join(f"{e:>9}" for e in engines))
        for f in FIELDS:
            print(_row(f, engines, [(s.engine, s.fields[f]) for s in mine]))
            if f in EVERY:
                print(_row(f + " all", engines, [(s.engine, s.every[f]) for s in mine]))


def _row(name: str, engines: list[str], results: list[tuple[str, bool | None]]) -> str:
    # one field's row: right of judged (None: not judged), overall and per engine
    judged = [(e, ok) for e, ok in results if ok is not None]
    ok = sum(bool(r) for _, r in judged)
    cells = []
    for e in engines:
        theirs = [r for engine, r in judged if engine == e]
        cells.append(f"{_pct(sum(bool(r) for r in theirs), len(theirs)):>9}")
    return f"  {name:<11} {ok:>4}/{len(judged):<4} {_pct(ok, len(judged))}  " + "  ".join(cells)


def main(argv: list[str] | None = None) -> int:
    """Print the per-field accuracy per crop (with --misses, each crop that misses a field)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="score these directories (default: the tuning corpus)")
    ap.add_argument(
        "--misses", action="store_true", help="list the crops that miss a field, with the verdict"
    )
    ap.add_argument(
        "--k", type=int, nargs="*", default=list(LAST), help="the last-K crops (default 15 30 60 120)"
    )
    ap.add_argument("--only", help="one engine's folder only")
    ap.add_argument("--json", action="store_true", help="one object: per crop, the overall figure")
    args = ap.parse_args(argv)
    scores = score_dirs(args.dirs or SECTIONS["corpus"], args.only, args.k)
    if args.json:
        print(
            json.dumps({c: round(overall(scores, c), 2) for c in CROPS if any(s.crop == c for s in scores)})
        )
    else:
        _print(scores, args.misses)
    return 0


if __name__ == "__main__":
    sys.exit(main())
