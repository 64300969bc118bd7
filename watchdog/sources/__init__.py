"""Deprecated import path, kept for one release: use `watchdog.follow.sources`."""

from __future__ import annotations

# the same names, each loaded from its module when first used (asyncssh only for the SSH ones)
from watchdog.follow.sources import __all__, __getattr__  # noqa: F401
