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

Each field is judged against the label where the crop still holds its evidence: outcome and phase always;
category (crashes whose label names one) when the root-cause line is in the crop or the label names none;
root cause only when its line is in the crop; engine always, unless CORRECTIONS.json says the log does not
name it. The table is per crop and field, overall and per engine. With --misses, each miss, with the crop's
verdict (the held-out cases are never read: only the tuning directories are scored by default). Exit 0
always: this prints a figure, tests/test_crops.py holds the line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpus_score import OUTCOME, SECTIONS, _corrections, _label, _pct  # noqa: E402 - beside this script

from watchdog.core.analyzer import Analyzer  # noqa: E402 - the tree's own package, not an installed one
from watchdog.core.lifecycle import State  # noqa: E402
from watchdog.core.verdict import build_verdict, exit_code  # noqa: E402
from watchdog.profiles.loader import load_engine  # noqa: E402

__all__ = [
    "AFTER",
    "BEFORE",
    "CROPS",
    "FIELDS",
    "CropScore",
    "crops",
    "log_lines",
    "main",
    "overall",
    "replay_bytes",
    "score_crop",
    "score_dirs",
]

FIELDS = ("outcome", "phase", "category", "root_cause", "engine")
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


def _root_lines(lines: list[bytes], root: str | None) -> list[int]:
    # the lines that hold the label's root cause: ranks repeat it, and a survived traceback may word it first
    # (vLLM's model-info cache that cannot be saved, then the same OSError that ends the launch)
    needle = (root or "").encode()
    return [i for i, line in enumerate(lines) if needle in line] if root else []


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
    fields: dict[str, bool | None] = {
        "outcome": outcome == label["outcome"],
        "phase": v["phase"] == label["phase"],
        "category": (err.get("category") == label["category"])
        if crashed and label["category"] and (root_in or not label["root_cause"])
        else None,
        "root_cause": (label["root_cause"] in (err.get("summary") or "")) if root_in else None,
        "engine": (v["engine"] == label["engine"]) if engine_named and label["engine"] != "other" else None,
    }
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
            out.append(CropScore(path.stem, path.parent.name, crop, span[1] - span[0], fields, said))
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
    for crop in names:
        mine = [s for s in scores if s.crop == crop]
        right = sum(all(ok is not False for ok in s.fields.values()) for s in mine)
        print(
            f"== {crop}: {len(mine)} crops; {right} right on every field; all fields {overall(scores, crop):.1f}%"
        )
        print(f"  {'field':<11} {'all':>15}  " + "  ".join(f"{e:>9}" for e in engines))
        for f in FIELDS:
            judged = [s for s in mine if s.fields[f] is not None]
            ok = sum(bool(s.fields[f]) for s in judged)
            cells = []
            for e in engines:
                theirs = [s for s in judged if s.engine == e]
                cells.append(f"{_pct(sum(bool(s.fields[f]) for s in theirs), len(theirs)):>9}")
            print(f"  {f:<11} {ok:>4}/{len(judged):<4} {_pct(ok, len(judged))}  " + "  ".join(cells))


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
