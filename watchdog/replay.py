"""Deprecated import path, kept for one release: use `watchdog.follow.replay`."""

from __future__ import annotations

from watchdog.follow.replay import CHUNK, replay_path

__all__ = ["CHUNK", "replay_path"]
