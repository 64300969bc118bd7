"""Per-field accuracy of `replay` over labelled real logs (the corpus and the cases of tests/fixtures).

    python benchmarks/corpus_score.py [DIR ...] [--misses]

Each case is NAME.log with its hand-written label NAME.json (tests/fixtures/corpus/SCHEMA.md). Fields:
outcome (ready/crashed/incomplete, from the exit code), phase, category (crashes only), root cause (the label's
exact substring is in the verdict's summary; only where the label names one) and engine (where the log names
it). Corrections to labels in DIR/CORRECTIONS.json are applied, each with its evidence. Exit 0 always: this
prints a figure, the tests hold the line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from watchdog.core.lifecycle import State
from watchdog.core.verdict import exit_code
from watchdog.follow.replay import replay_path

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
    _, v = replay_path(label_path.with_suffix(".log"))
    err = v["error"] or {}
    crashed = label["outcome"] == "crashed"
    outcome = OUTCOME.get(exit_code(State(v["state"]), v["phase"]), "other")
    return {
        "outcome": outcome == label["outcome"],
        "phase": v["phase"] == label["phase"],
        "category": (err.get("category") == label["category"]) if crashed and label["category"] else None,
        "root_cause": (label["root_cause"] in (err.get("summary") or "")) if label["root_cause"] else None,
        "engine": (v["engine"] == label["engine"])
        if label["engine"] != "other" and label_path.stem not in no_engine
        else None,
    }


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
    misses: list[str] = []
    for path in labels:
        fields = score_case(path, corrected, no_engine)
        wrong = [f for f, ok in fields.items() if ok is False]
        for f, ok in fields.items():
            if ok is not None:
                judged[f] += 1
                right[f] += ok
        if wrong:
            misses.append(f"  {path.parent.name}/{path.stem}: {', '.join(wrong)}")
    if args.misses and misses:
        print("\n".join(misses))
    print(f"{len(labels)} labelled logs; {len(labels) - len(misses)} right on every field")
    for f in FIELDS:
        pct = 100.0 * right[f] / judged[f] if judged[f] else 100.0
        print(f"  {f:<11} {right[f]:>4}/{judged[f]:<4} {pct:6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
