"""Sharding: rendezvous hashing gives every launch one owner, moves few launches on a resize, parses "i/n"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchdog.config.shard import MAX_SHARDS, InvalidShard, Shard, owner, parse_shard

LAUNCHES = [f"launch-{i:05d}" for i in range(5000)]


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 5, 8, 16])
def test_shards_cover_each_launch_exactly_once(shards: int) -> None:
    """Shards 0/n .. n-1/n together own every launch, and no launch is owned by two of them."""
    owners = {name: [i for i in range(shards) if Shard(i, shards).owns(name)] for name in LAUNCHES}
    assert all(len(found) == 1 for found in owners.values())


@pytest.mark.parametrize("shards", [2, 3, 4, 5, 8])
def test_launches_spread_evenly(shards: int) -> None:
    """No shard owns more than 15% above or below its fair share of 5,000 launches."""
    counts = [0] * shards
    for name in LAUNCHES:
        counts[owner(name, shards)] += 1
    fair = len(LAUNCHES) / shards
    assert min(counts) > 0.85 * fair
    assert max(counts) < 1.15 * fair


def test_growing_from_4_to_5_shards_moves_about_a_fifth() -> None:
    """From 4 to 5 shards, 15% to 25% of the launches move (ideal 20%), and each one moves to the new shard."""
    moved = [name for name in LAUNCHES if owner(name, 4) != owner(name, 5)]
    assert 0.15 * len(LAUNCHES) <= len(moved) <= 0.25 * len(LAUNCHES)
    assert {owner(name, 5) for name in moved} == {4}


@given(st.text(max_size=64), st.integers(min_value=1, max_value=12))
def test_growing_only_moves_launches_to_the_new_shard(name: str, shards: int) -> None:
    """Adding shard n keeps every launch where it was unless the new shard wins it."""
    assert owner(name, shards + 1) in (owner(name, shards), shards)


def test_owner_is_stable_across_processes() -> None:
    """Another interpreter with another hash seed gives the same owners (the hash is not Python's `hash()`)."""
    names = LAUNCHES[:200]
    code = (
        "import sys; from watchdog.config.shard import owner; "
        "print(','.join(str(owner(n, 7)) for n in sys.stdin.read().split()))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input="\n".join(names),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert result.stdout.strip() == ",".join(str(owner(n, 7)) for n in names)


def test_owner_pins_known_values() -> None:
    """The owners of a few names are fixed: a change of hash would silently reshuffle every deployment."""
    assert [owner(name, 3) for name in ("kimi-ep", "llama-vllm", "local-llamacpp", "")] == [2, 2, 1, 0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("0/1", Shard(0, 1), id="single"),
        pytest.param("1/3", Shard(1, 3), id="middle"),
        pytest.param("2/3", Shard(2, 3), id="last"),
        pytest.param(" 4 / 8 ", Shard(4, 8), id="spaces"),
        pytest.param("07/10", Shard(7, 10), id="leading-zero"),
        pytest.param(f"0/{MAX_SHARDS}", Shard(0, MAX_SHARDS), id="max"),
    ],
)
def test_parse_shard_accepts(text: str, expected: Shard) -> None:
    """A spec "INDEX/COUNT" with 0 <= INDEX < COUNT parses to that shard, and prints back as "i/n"."""
    shard = parse_shard(text)
    assert shard == expected
    assert str(shard) == f"{expected.index}/{expected.count}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "INDEX/COUNT", id="empty"),
        pytest.param("3", "INDEX/COUNT", id="no-slash"),
        pytest.param("1/", "INDEX/COUNT", id="no-count"),
        pytest.param("/3", "INDEX/COUNT", id="no-index"),
        pytest.param("a/3", "INDEX/COUNT", id="not-a-number"),
        pytest.param("-1/3", "INDEX/COUNT", id="negative"),
        pytest.param("1.0/3", "INDEX/COUNT", id="float"),
        pytest.param("1/3/4", "INDEX/COUNT", id="two-slashes"),
        pytest.param("\u0661/3", "INDEX/COUNT", id="arabic-digit"),
        pytest.param(
            "3/3", 'from 0 to 2: shards are numbered from 0 (the last of 3 is "2/3")', id="one-based"
        ),
        pytest.param("0/0", "from 1 to 1024", id="zero-count"),
        pytest.param(f"0/{MAX_SHARDS + 1}", "from 1 to 1024", id="too-many"),
    ],
)
def test_parse_shard_rejects(text: str, message: str) -> None:
    """A wrong spec raises InvalidShard (a ValueError) quoting the text and saying what is allowed."""
    with pytest.raises(InvalidShard) as info:
        parse_shard(text)
    assert message in str(info.value)
    assert str(info.value).startswith(repr(text))
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("index", "count"),
    [
        pytest.param(3, 3, id="index-too-big"),
        pytest.param(-1, 3, id="negative"),
        pytest.param(0, 0, id="none"),
    ],
)
def test_shard_rejects_out_of_range(index: int, count: int) -> None:
    """A Shard cannot be built with an index outside 0..count-1 or a count outside 1..MAX_SHARDS."""
    with pytest.raises(InvalidShard):
        Shard(index, count)


@pytest.mark.parametrize("shards", [0, -2, MAX_SHARDS + 1])
def test_owner_rejects_a_bad_count(shards: int) -> None:
    """owner() refuses a shard count outside 1..MAX_SHARDS instead of returning a meaningless index."""
    with pytest.raises(InvalidShard, match="shard count"):
        owner("kimi-ep", shards)
