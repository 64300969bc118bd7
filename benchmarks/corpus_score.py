"""Per-field accuracy of `replay` over labelled real logs: the corpus (tuning set) and the held-out cases.

    python benchmarks/corpus_score.py [DIR ...] [--misses] [--others] [--slow]

Each case is NAME.log with its hand-written label NAME.json (tests/fixtures/corpus/SCHEMA.md). Fields:
outcome (ready/crashed/incomplete from the exit code, stopped for a launch stopped before ready), phase,
category (crashes only), root cause (the label's exact substring is in the verdict's summary; only where the
label names one) and engine (where the log names it), overall and per engine; the share of crashes called
`other`, overall and per engine, and among the crashes whose label names a category (not null, not `other`:
the log shows what failed); and how long a live follower takes to call each labelled crash
(`follow_at_pace`, on a manual clock: at the log's recorded pace where NAME.timing has it, else the whole log
at once), from its error line to the verdict: the share under 1 s, p50 and p90. Corrections to labels in
DIR/CORRECTIONS.json are applied, each with its evidence.

With no DIR, two sections: "corpus" (tests/fixtures/corpus and tests/fixtures/cases, the cases the tool is
tuned on) and "held out" (tests/fixtures/heldout, cases never used for tuning: their score says how the tool
reads logs it was not built on). With DIRs, one section over them. With --others, the crashes called `other`,
per engine, each with its decisive line (the ones to read when adding a rule). With --slow, the crashes a live
follower does not call under 1 s, each with its decisive line (what the verdict waited on). --misses, --others and
--slow list the tuning set's cases only, never the held-out ones (their figures only), unless a DIR names them. Exit 0 always: this prints a figure, the tests hold the line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from watchdog.core.lifecycle import State
from watchdog.core.verdict import exit_code
from watchdog.follow.replay import replay_path
from watchdog.follow.testing import follow_at_pace

__all__ = ["FIELDS", "SECTIONS", "CaseScore", "Section", "crash_latency", "main", "score_case", "score_dirs"]

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
OUTCOME = {0: "ready", 1: "crashed", 3: "incomplete"}
FIELDS = ("outcome", "phase", "category", "root_cause", "engine")
# The default sections: the tuning set, then the held-out cases (tests/fixtures/heldout/README.md).
SECTIONS = {
    "corpus": [FIXTURES / "corpus", FIXTURES / "cases"],
    "held out": [FIXTURES / "heldout"],
}


@dataclass
class CaseScore:
    """One case's fields (True right, False wrong, None not judged) and what its crash verdict took."""

    name: str
    engine: str
    fields: dict[str, bool | None]
    crashed: bool
    called_other: bool = False
    # a crash whose label names its category (not null, not `other`): what failed is in the log
    known: bool = False
    latency: float | None = None
    live_state: str | None = None
    # the crash verdict's decisive line (its error's summary), where it has one
    summary: str | None = None
    # the category the label gives a crash (None: the label names none, the log does not show what failed)
    labelled: str | None = None


@dataclass
class Section:
    """The scores of every case under some directories."""

    title: str
    cases: list[CaseScore] = field(default_factory=list)


def _corrections(dirs: list[Path]) -> tuple[dict[str, Any], set[str]]:
    corrected: dict[str, Any] = {}
    no_engine: set[str] = set()
    for d in dirs:
        f = d / "CORRECTIONS.json"
        if f.is_file():
            data = json.loads(f.read_text(encoding="utf-8"))
            corrected.update(data.get("corrected", {}))
            no_engine.update(data.get("engine_not_in_log", {}))
    return corrected, no_engine


def _label(label_path: Path, corrected: dict[str, Any]) -> dict[str, Any]:
    return {**json.loads(label_path.read_text(encoding="utf-8")), **corrected.get(label_path.stem, {})}


def score_case(label_path: Path, corrected: dict[str, Any], no_engine: set[str]) -> dict[str, bool | None]:
    """Each field of one case: True (right), False (wrong) or None (the label does not say)."""
    label = _label(label_path, corrected)
    v = replay_path(label_path.with_suffix(".log"))[1].to_json()
    err = v["error"] or {}
    crashed = label["outcome"] == "crashed"
    outcome = OUTCOME.get(exit_code(State(v["state"]), v["phase"]), "other")
    if v["state"] == State.STOPPED.value and outcome == "incomplete":
        outcome = "stopped"
    return {
        "outcome": outcome == label["outcome"],
        "phase": v["phase"] == label["phase"],
        "category": (err.get("category") == label["category"]) if crashed and label["category"] else None,
        "root_cause": (label["root_cause"] in (err.get("summary") or "")) if label["root_cause"] else None,
        "engine": (v["engine"] == label["engine"])
        if label["engine"] != "other" and label_path.stem not in no_engine
        else None,
    }


def crash_latency(log: Path) -> tuple[str | None, float | None]:
    """A live follower's verdict on the log at its recorded pace, and its seconds from error line to verdict."""
    timing = log.with_suffix(".timing")
    times = [float(t) for t in timing.read_text(encoding="utf-8").split()] if timing.is_file() else None
    run = anyio.run(follow_at_pace, log.read_bytes(), times)
    return (run.last or {}).get("state"), run.verdict_after


def score_dirs(title: str, dirs: list[Path]) -> Section:
    """Score every labelled case (NAME.json beside NAME.log) under DIRS; the engine is the case's folder."""
    corrected, no_engine = _corrections(dirs)
    section = Section(title)
    for path in sorted(p for d in dirs for p in d.rglob("*.json") if p.with_suffix(".log").is_file()):
        label = _label(path, corrected)
        case = CaseScore(
            path.stem, path.parent.name, score_case(path, corrected, no_engine), label["outcome"] == "crashed"
        )
        if case.crashed:
            v = replay_path(path.with_suffix(".log"))[1].to_json()
            case.called_other = bool(v["error"]) and v["error"]["category"] == "other"
            case.summary = v["error"]["summary"] if v["error"] else None
            case.known = label.get("category") not in (None, "other")
            case.labelled = label.get("category")
            case.live_state, case.latency = crash_latency(path.with_suffix(".log"))
        section.cases.append(case)
    return section


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "    -"


def _print(section: Section, misses: bool, others: bool = False, slow: bool = False) -> None:
    cases = section.cases
    engines = sorted({c.engine for c in cases})
    print(f"== {section.title} ==")
    wrong = {c.name: [f for f, ok in c.fields.items() if ok is False] for c in cases}
    if misses:
        for c in cases:
            if wrong[c.name]:
                print(f"  {c.engine}/{c.name}: {', '.join(wrong[c.name])}")
    if misses or slow:
        late = [
            c
            for c in cases
            if c.crashed and (c.live_state != "crashed" or c.latency is None or c.latency >= 1.0)
        ]
        if late:
            print("crash verdicts at 1 s or later:")
        for c in late:
            said = f"{c.latency:.2f} s" if c.live_state == "crashed" and c.latency is not None else None
            print(f"  {c.engine}/{c.name}: {said or f'no crash verdict live ({c.live_state})'}")
            if slow:
                # the decisive line the verdict names (replay's): what the live verdict waited on
                print(f"      {c.summary}")
    if others:
        for e in engines:
            called = [c for c in cases if c.engine == e and c.crashed and c.called_other]
            if called:
                print(f"crashes called other, {e}:")
            for c in called:
                print(f"  {c.name} (label: {c.labelled or 'null'})\n      {c.summary}")
    print(f"{len(cases)} labelled logs; {sum(not w for w in wrong.values())} right on every field")
    print(f"  {'field':<11} {'all':>15}  " + "  ".join(f"{e:>9}" for e in engines))
    for f in FIELDS:
        judged = [c for c in cases if c.fields[f] is not None]
        right = sum(bool(c.fields[f]) for c in judged)
        pct = 100.0 * right / len(judged) if judged else 100.0
        cells = []
        for e in engines:
            mine = [c for c in judged if c.engine == e]
            cells.append(f"{_pct(sum(bool(c.fields[f]) for c in mine), len(mine)):>9}")
        print(f"  {f:<11} {right:>4}/{len(judged):<4} {pct:5.1f}%  " + "  ".join(cells))
    crashes = [c for c in cases if c.crashed]
    other = sum(c.called_other for c in crashes)
    print(f"  crashes called other: {other}/{len(crashes)} ({_pct(other, len(crashes)).strip()})")
    per = {e: [c for c in crashes if c.engine == e] for e in engines}
    print(
        "  crashes called other, per engine: "
        + ", ".join(f"{e} {sum(c.called_other for c in per[e])}/{len(per[e])}" for e in engines)
    )
    # the others are crashes whose label says `other` or none: the log does not show what failed
    known = [c for c in crashes if c.known]
    other = sum(c.called_other for c in known)
    print(
        f"  of them with a category the label knows: {other}/{len(known)} ({_pct(other, len(known)).strip()})"
    )
    latencies = [c.latency for c in crashes if c.live_state == "crashed" and c.latency is not None]
    if latencies:
        under = sum(t < 1.0 for t in latencies)
        p90 = sorted(latencies)[int(0.9 * (len(latencies) - 1))]
        print(
            f"  crash verdict, live at the log's pace: {under}/{len(crashes)} under 1 s"
            f" ({_pct(under, len(crashes)).strip()}), p50 {statistics.median(latencies):.2f} s, p90 {p90:.2f} s"
        )


def main(argv: list[str] | None = None) -> int:
    """Print the per-field accuracy per section (with --misses, each case that misses a field; with --others,
    each crash called `other`)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="score these directories as one section")
    ap.add_argument("--misses", action="store_true", help="list the cases that miss a field")
    ap.add_argument(
        "--others",
        action="store_true",
        help="list the crashes called `other`, per engine, with their decisive line",
    )
    ap.add_argument(
        "--slow",
        action="store_true",
        help="list the crashes not called live under 1 s, each with its decisive line",
    )
    args = ap.parse_args(argv)
    sections = {", ".join(map(str, args.dirs)): args.dirs} if args.dirs else SECTIONS
    for title, dirs in sections.items():
        # the held-out cases' names and lines are not listed by default: reading them would tune on them (name
        # their directory to list them on purpose)
        listed = dirs is not SECTIONS.get("held out")
        _print(score_dirs(title, dirs), args.misses and listed, args.others and listed, args.slow and listed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
