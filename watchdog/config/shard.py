"""Which replica of a sharded daemon follows which launch: rendezvous (HRW) hashing of the launch's name.

Every replica reads the same config and follows only the launches it owns (`Shard.owns`). The owner of a
launch is the shard whose (shard, launch) hash is highest, so:
- every launch has exactly one owner among shards 0..n-1, decided by the name alone (no coordination);
- going from n to n+1 shards moves only the launches the new shard wins, about 1/(n+1) of them, and none
  between the shards that stay (a modulo hash would move about n/(n+1) of them);
- the hash is BLAKE2b of the bytes, not Python's `hash()`, which is salted per process: two replicas, or one
  before and after a restart, always agree.

Shards are numbered from 0, like a StatefulSet's pod ordinals: `--shard 0/3`, `--shard 1/3`, `--shard 2/3`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from watchdog.exceptions import InvalidShard

__all__ = ["MAX_SHARDS", "InvalidShard", "Shard", "owner", "parse_shard"]

MAX_SHARDS = 1024  # far above any need (10,000 launches fit in a handful); bounds a typo like "1/30000"
_SYNTAX = 'give the shard as "INDEX/COUNT", e.g. "1/3": INDEX from 0 to COUNT-1 (a StatefulSet ordinal)'


@dataclass(frozen=True)
class Shard:
    """One replica's share of the launches: shard `index` of `count` (0 <= index < count)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        _check_count(self.count, f"{self.index}/{self.count}")
        if not 0 <= self.index < self.count:
            raise InvalidShard(
                f"{self.index}/{self.count}",
                f"the index must be from 0 to {self.count - 1} (shards are numbered from 0)",
            )

    def owns(self, launch_name: str) -> bool:
        """Whether this shard follows the launch."""
        return owner(launch_name, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def owner(launch_name: str, shards: int) -> int:
    """The shard (0 to shards-1) that follows a launch: the one with the highest rendezvous weight.

    Args:
        launch_name: the launch's name (`[launches.NAME]`).
        shards: how many shards there are (1 to `MAX_SHARDS`).

    Returns:
        The owning shard's index; the same in every process, on every machine and Python version.

    Raises:
        InvalidShard: `shards` is not from 1 to `MAX_SHARDS`.
    """
    _check_count(shards, str(shards))
    if shards == 1:
        return 0
    # max() keeps the first of equal weights: a tie (a 64-bit collision) goes to the lower index
    return max(range(shards), key=lambda index: _weight(index, launch_name))


def parse_shard(text: str) -> Shard:
    """Parse a shard spec such as "1/3" (`--shard 1/3`, or the config's `shard = "1/3"`).

    Args:
        text: "INDEX/COUNT", decimal, spaces around either number allowed.

    Returns:
        The shard.

    Raises:
        InvalidShard: not two decimal numbers around a "/", a count outside 1 to `MAX_SHARDS`, or an
            index outside 0 to count-1.
    """
    index_text, slash, count_text = text.partition("/")
    if not slash:
        raise InvalidShard(text, _SYNTAX)
    index, count = _decimal(index_text), _decimal(count_text)
    if index is None or count is None:
        raise InvalidShard(text, _SYNTAX)
    _check_count(count, text)
    if index >= count:
        raise InvalidShard(
            text,
            f"the index must be from 0 to {count - 1}: shards are numbered from 0 "
            f'(the last of {count} is "{count - 1}/{count}")',
        )
    return Shard(index, count)


def _weight(index: int, launch_name: str) -> int:
    # the index and the name are joined by a byte no launch name holds, so ("1", "2x") != ("12", "x")
    digest = hashlib.blake2b(f"{index}\0{launch_name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _decimal(text: str) -> int | None:
    stripped = text.strip()
    # isdecimal() also admits other scripts' digits; a spec is ASCII
    if not stripped.isascii() or not stripped.isdecimal():
        return None
    return int(stripped)


def _check_count(count: int, text: str) -> None:
    if not 1 <= count <= MAX_SHARDS:
        raise InvalidShard(text, f"the shard count must be from 1 to {MAX_SHARDS}")
