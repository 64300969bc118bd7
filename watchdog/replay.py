"""`watchdog replay`: read a whole log file and give the verdict."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from watchdog.analyzer import Analyzer
from watchdog.exceptions import UsageError
from watchdog.verdict import to_json

__all__ = ["CHUNK", "replay_path"]

CHUNK = 1 << 20  # bytes read at a time: big enough for C-speed scanning, small enough for a flat RSS


def replay_path(
    path: Path, engine: str | None = None, profiles: Sequence[Path] = ()
) -> tuple[Analyzer, dict[str, Any]]:
    """Replay the log at `path`; return the analyzer and the verdict object."""
    analyzer = Analyzer(engine, profiles=profiles)
    try:
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                analyzer.feed(chunk, 0.0)
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise UsageError(f"{path}: is a directory, not a log file") from exc
    except PermissionError as exc:
        raise UsageError(f"{path}: permission denied") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    analyzer.finish(0.0)
    lc = analyzer.lifecycle
    verdict = to_json(
        lc.verdict_incarnation(),
        engine=analyzer.engine,
        lines_read=analyzer.lines_read,
        bytes_read=analyzer.bytes_read,
        incarnations=len(lc.history) + 1,
    )
    if verdict["state"] == "crashed" and verdict["error"] is not None and not verdict["error"]["traceback"]:
        verdict["error"]["context"] = analyzer.tail()
    return analyzer, verdict
