"""Every labelled real log of the corpus (tests/fixtures/corpus) gets the verdict its label gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from watchdog.replay import replay_path
from watchdog.verdict import exit_code
from watchdog.lifecycle import State

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CASES = sorted(CORPUS.glob("*/*.json"))
OUTCOME_EXIT = {"ready": 0, "crashed": 1, "incomplete": 3}


def _label(path: Path) -> dict[str, object]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("label_path", [pytest.param(p, id=p.stem) for p in CASES])
def test_corpus_case(label_path: Path) -> None:
    """The replay verdict matches the hand-written label: outcome, phase, category, root cause, exit code."""
    label = _label(label_path)
    _, v = replay_path(label_path.with_suffix(".log"))
    code = exit_code(State(v["state"]))
    got = {
        "exit": code,
        "phase": v["phase"],
        "category": v["error"]["category"] if v["error"] else None,
    }
    want = {
        "exit": OUTCOME_EXIT[str(label["outcome"])],
        "phase": label["phase"],
        "category": label["category"] if label["outcome"] == "crashed" else None,
    }
    if label["outcome"] == "crashed" and label["category"] is None:
        got["category"] = None
    assert got == want, v.get("error")
    if label["root_cause"]:
        assert v["error"] is not None
        assert str(label["root_cause"]) in v["error"]["summary"]
    if label["engine"] != "other":
        assert v["engine"] == label["engine"]


def test_corpus_is_complete() -> None:
    """The fixtures hold every case of the corpus, each a log with its label."""
    assert len(CASES) >= 89
    for case in CASES:
        assert case.with_suffix(".log").is_file()
