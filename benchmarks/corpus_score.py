"""Per-field accuracy of `replay` over labelled real logs (the corpus and the cases of tests/fixtures).

    python benchmarks/corpus_score.py [DIR ...] [--misses]

Each case is NAME.log with its hand-written label NAME.json (tests/fixtures/corpus/SCHEMA.md). Fields:
outcome (ready/crashed/incomplete from the exit code, stopped for a launch stopped before ready), phase,
category (crashes only), root cause (the label's exact substring is in the verdict's summary; only where the
label names one) and engine (where the log names it), overall and per engine; the share of crashes called
`other`, overall and per engine (the `other` row); and how long a live follower takes to call each labelled crash (`follow_at_pace`, on a manual clock:
at the log's recorded pace where NAME.timing has it, else the whole log at once), from its error line to the
verdict: the share under 1 s, p50 and p90. Corrections to labels in DIR/CORRECTIONS.json are applied, each
with its evidence. Exit 0 always: this prints a figure, the tests hold the line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import anyio

from watchdog.core.lifecycle import State
from watchdog.core.verdict import exit_code
from watchdog.follow.replay import replay_path
from watchdog.follow.testing import follow_at_pace

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
OUTCOME = {0: "ready", 1: "crashed", 3: "incomplete"}
FIELDS = ("outcome", "phase", "category", "root_cause", "engine")


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


def score_case(label_path: Path, corrected: dict[str, Any], no_engine: set[str]) -> dict[str, bool | None]:
    """Each field of one case: True (right), False (wrong) or None (the label does not say)."""
    label = {**json.loads(label_path.read_text(encoding="utf-8")), **corrected.get(label_path.stem, {})}
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


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "    -"


def main(argv: list[str] | None = None) -> int:
    """Print the per-field accuracy (and with --misses, each case that misses a field)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, default=[FIXTURES / "corpus", FIXTURES / "cases"])
    ap.add_argument("--misses", action="store_true", help="list the cases that miss a field")
    args = ap.parse_args(argv)
    corrected, no_engine = _corrections(args.dirs)
    labels = sorted(p for d in args.dirs for p in d.rglob("*.json") if p.with_suffix(".log").is_file())
    right: Counter[str] = Counter()
    judged: Counter[str] = Counter()
    per: dict[str, tuple[Counter[str], Counter[str]]] = defaultdict(lambda: (Counter(), Counter()))
    misses: list[str] = []
    crashes = other = 0
    called_other, crashed = Counter[str](), Counter[str]()
    latencies: list[float] = []
    late: list[str] = []
    for path in labels:
        fields = score_case(path, corrected, no_engine)
        label = {**json.loads(path.read_text(encoding="utf-8")), **corrected.get(path.stem, {})}
        engine = path.parent.name
        wrong = [f for f, ok in fields.items() if ok is False]
        for f, ok in fields.items():
            if ok is not None:
                judged[f] += 1
                right[f] += ok
                per[engine][1][f] += 1
                per[engine][0][f] += ok
        if wrong:
            misses.append(f"  {path.parent.name}/{path.stem}: {', '.join(wrong)}")
        if label["outcome"] == "crashed":
            crashes += 1
            v = replay_path(path.with_suffix(".log"))[1].to_json()
            is_other = bool(v["error"]) and v["error"]["category"] == "other"
            other += is_other
            crashed[engine] += 1
            called_other[engine] += is_other
            state, after = crash_latency(path.with_suffix(".log"))
            if state == "crashed" and after is not None:
                latencies.append(after)
                if after >= 1.0:
                    late.append(f"  {path.parent.name}/{path.stem}: {after:.2f} s")
            else:
                late.append(f"  {path.parent.name}/{path.stem}: no crash verdict live ({state})")
    if args.misses and misses:
        print("\n".join(misses))
    if args.misses and late:
        print("crash verdicts at 1 s or later:")
        print("\n".join(late))
    print(f"{len(labels)} labelled logs; {len(labels) - len(misses)} right on every field")
    print(f"  {'field':<11} {'all':>15}  " + "  ".join(f"{e:>9}" for e in sorted(per)))
    for f in FIELDS:
        pct = 100.0 * right[f] / judged[f] if judged[f] else 100.0
        cells = "  ".join(f"{_pct(per[e][0][f], per[e][1][f]):>9}" for e in sorted(per))
        print(f"  {f:<11} {right[f]:>4}/{judged[f]:<4} {pct:5.1f}%  {cells}")
    cells = "  ".join(f"{_pct(called_other[e], crashed[e]):>9}" for e in sorted(per))
    print(f"  {'other':<11} {other:>4}/{crashes:<4} {_pct(other, crashes)}  {cells}   (crashes called other)")
    print(f"  crashes called other: {other}/{crashes} ({_pct(other, crashes).strip()})")
    if latencies:
        under = sum(t < 1.0 for t in latencies)
        p90 = sorted(latencies)[int(0.9 * (len(latencies) - 1))]
        print(
            f"  crash verdict, live at the log's pace: {under}/{crashes} under 1 s ({_pct(under, crashes).strip()}),"
            f" p50 {statistics.median(latencies):.2f} s, p90 {p90:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
