"""The public cases' tests read a corpus log's replayed verdict: the shared look-ups of tests/test_public_cases_*."""

from __future__ import annotations

from pathlib import Path

from watchdog.follow.replay import replay_path

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def verdict(engine: str, name: str) -> dict[str, object]:
    """The JSON verdict of `replay` on tests/fixtures/corpus/ENGINE/NAME.log."""
    return replay_path(CORPUS / engine / f"{name}.log")[1].to_json()


def error(out: dict[str, object]) -> dict[str, object]:
    """A verdict's `error` object (a crash's)."""
    found = out["error"]
    assert isinstance(found, dict)
    return found


def replay_text(folder: Path, text: str) -> dict[str, object]:
    """The JSON verdict of `replay` on `text`, written as a log in `folder` (the engine detected from it)."""
    log = folder / "launch.log"
    log.write_text(text, encoding="utf-8")
    return replay_path(log)[1].to_json()


def crash_category(folder: Path, text: str, words: str) -> str:
    """The category of the crash `text` replays to, whose summary holds `words` (the decisive line is the one meant)."""
    out = replay_text(folder, text)
    assert out["state"] == "crashed"
    found = error(out)
    assert words in str(found["summary"])
    return str(found["category"])
