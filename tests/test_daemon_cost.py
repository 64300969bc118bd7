"""What keeps the daemon's CPU per followed line low (issue 31) gives the same answers as the slow way did:
checkpoint saves of a growing log spaced out, the profile's hash kept, engine detection's marker searches,
quoted argument values read without `literal_eval`, /status written by orjson where it is installed."""

from __future__ import annotations

import ast
import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import unavailable
from hypothesis import given
from hypothesis import strategies as st
from snapshots import verdict_from_json

from watchdog import jsontext
from watchdog.core.analyzer import Analyzer
from watchdog.core.arguments import _unquote
from watchdog.core.detection import EngineDetector
from watchdog.core.recordtext import RecordText
from watchdog.core.resume import record_values, to_record
from watchdog.core.verdict import Remembered, Status, build_verdict
from watchdog.daemon import http
from watchdog.follow.checkpoint import (
    CHECKPOINT_INTERVAL,
    GROWING_INTERVAL,
    GROWING_SPREAD,
    TRANSITION_INTERVAL,
    Checkpointer,
)
from watchdog.follow.follower import LaunchFollower
from watchdog.follow.sources import parse_target
from watchdog.follow.spec import LaunchSpec
from watchdog.follow.testing import ManualClock, ScriptedSource
from watchdog.profiles.loader import catalogue, load_engine
from watchdog.vocabulary import State

CORPUS = Path(__file__).parent / "fixtures" / "corpus" / "sglang"
CRASH = CORPUS / "postready-scheduler-valueerror-lmcache-tp2-pr869.log"
STARTUP = CORPUS / "ready-llama31-8b-single-gpu-docs-v041.log"


class _Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _NoStore:
    """A store no save reaches (the test only looks at which saves are started)."""

    async def load_checkpoint(self, launch: str) -> bytes | None:
        return None

    async def save_checkpoint(self, launch: str, offset: int, blob: bytes) -> None:
        raise AssertionError("no save runs in this test")


def _checkpointer() -> tuple[Checkpointer, _Clock, list[Any]]:
    clock = _Clock()
    spec = LaunchSpec(name="costly", target=parse_target("/var/log/server.log"))
    return Checkpointer(_NoStore(), spec, clock), clock, []


def test_a_growing_log_is_saved_every_growing_interval_and_once_quiet_as_before() -> None:
    """While chunks keep coming, a save is due only `GROWING_INTERVAL` after the last one; once the log is
    quiet, after `CHECKPOINT_INTERVAL` (`TRANSITION_INTERVAL` after a transition), as before."""
    checkpointer, clock, started = _checkpointer()
    analyzer = Analyzer(catalogue())
    checkpointer.fed(b"a line\n")
    clock.now += CHECKPOINT_INTERVAL + 1.0
    checkpointer.save_due(analyzer, lambda: 0.0, lambda *args: started.append(args), quiet=False)
    assert started == []  # growing: not yet
    checkpointer.save_due(analyzer, lambda: 0.0, lambda *args: started.append(args), quiet=True)
    assert len(started) == 1  # quiet: due
    assert checkpointer.next_save(quiet=False) - checkpointer.next_save(quiet=True) == pytest.approx(
        checkpointer.growing_interval - CHECKPOINT_INTERVAL
    )
    checkpointer.transitioned()
    assert (
        checkpointer.next_save(quiet=True)
        == checkpointer.next_save(quiet=False) - (checkpointer.growing_interval) + TRANSITION_INTERVAL
    )


def test_a_growing_log_is_saved_once_its_growing_interval_passed() -> None:
    """A log that never pauses is still checkpointed: `GROWING_INTERVAL` after the last save, on a chunk."""
    checkpointer, clock, started = _checkpointer()
    analyzer = Analyzer(catalogue())
    checkpointer.fed(b"a line\n")
    clock.now += GROWING_INTERVAL
    checkpointer.save_due(analyzer, lambda: 0.0, lambda *args: started.append(args), quiet=False)
    assert len(started) == (checkpointer.growing_interval == GROWING_INTERVAL)
    clock.now += checkpointer.growing_interval - GROWING_INTERVAL
    checkpointer.save_due(analyzer, lambda: 0.0, lambda *args: started.append(args), quiet=False)
    assert len(started) == 1


def test_launches_started_together_save_their_growing_logs_apart() -> None:
    """200 launches started in the same moment (a daemon's start) do not all save a growing log a minute later in
    the same moment: each launch's interval is `GROWING_INTERVAL` spread by its name, over a quarter minute and
    more, at most a few in any tenth of a second, and the same for the same name."""
    clock = _Clock()
    intervals = [
        Checkpointer(
            _NoStore(), LaunchSpec(name=f"node{i:03d}", target=parse_target("/l")), clock
        ).growing_interval
        for i in range(200)
    ]
    assert all(
        GROWING_INTERVAL <= interval < GROWING_INTERVAL * (1 + GROWING_SPREAD) for interval in intervals
    )
    assert max(intervals) - min(intervals) > 25.0
    assert max(Counter(int(interval * 10) for interval in intervals).values()) <= 4
    again = Checkpointer(_NoStore(), LaunchSpec(name="node007", target=parse_target("/l")), clock)
    assert again.growing_interval == intervals[7]


def test_a_profile_hashes_as_its_fields_and_once() -> None:
    """A profile's hash is that of its fields (equal profiles, equal hashes; a changed one, another), kept from
    the first time it is asked."""
    profile = load_engine("sglang", ())
    same = dataclasses.replace(profile)
    other = dataclasses.replace(profile, name="other")
    assert same == profile
    assert hash(same) == hash(profile)
    assert other != profile
    assert hash(other) != hash(profile)
    assert profile._hash == hash(profile)


_PIECES = ["sglang", "vllm", "srt/", "ab", "abc", "b", "x", " ", "-"]


@given(
    markers=st.lists(
        st.tuples(st.sampled_from(["e1", "e2", "e3"]), st.text(alphabet="abcx/", min_size=1, max_size=4)),
        min_size=1,
        max_size=12,
    ),
    lines=st.lists(st.lists(st.sampled_from(_PIECES), max_size=8).map("".join), max_size=10),
)
def test_engine_detection_counts_each_marker_as_the_plain_loop_did(
    markers: list[tuple[str, str]], lines: list[str]
) -> None:
    """The detector's trie searches (one for any marker, one per engine's run of markers) count every
    (engine, marker) a line holds exactly as looking for each marker with `in` does, markers that are
    prefixes of others and one engine's markers split by another's included."""
    detector = EngineDetector(tuple(markers))
    expected: dict[str, int] = {}
    for line in lines:
        detector.feed(line)
        for engine, marker in markers:
            if marker in line:
                expected[engine] = expected.get(engine, 0) + 1
    assert detector.score == expected


def _literal(text: str) -> str:
    # what `_unquote` gave before its shortcut: `literal_eval` of a quoted text
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text[1:-1]
        if isinstance(value, str):
            return value
    return text


@given(st.sampled_from("'\""), st.text(alphabet="ab'\"\\n \t\n\x00é", max_size=8))
def test_a_quoted_value_is_unquoted_as_literal_eval_reads_it(quote: str, inner: str) -> None:
    """A quoted argument value without an escape or an inner quote is unquoted by slicing, with the value
    `literal_eval` gives (and every other one still by `literal_eval`)."""
    text = quote + inner + quote
    assert _unquote(text) == _literal(text)


def _payload() -> list[dict[str, Any]]:
    analyzer = Analyzer(catalogue())
    analyzer.feed(CRASH.read_bytes(), 1.0)
    analyzer.finish(2.0)
    verdict = build_verdict(analyzer, analyzer.lifecycle.verdict_incarnation()).redacted()
    return http.status_payload([Status(verdict, name="l1", target=str(CRASH), elapsed=3.0, last_line="x")])


def test_status_written_by_orjson_reads_as_json_writes_it() -> None:
    """/status's body from orjson (the `fast` extra) parses to what json writes, a crash's verdict and all."""
    if not jsontext.HAS_ORJSON:
        unavailable("orjson is not installed (the `fast` extra)", "WATCHDOG_REQUIRE_ORJSON")
    payload = _payload()
    body = http._dumps(payload)
    assert json.loads(body) == json.loads(json.dumps(payload, ensure_ascii=False, default=str))
    # a key that is not a text (orjson refuses it) is written by json, as before
    assert json.loads(http._dumps({1: "one"})) == {"1": "one"}


def test_status_is_written_by_json_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without orjson the daemon writes /status with json: the extra is optional."""
    monkeypatch.setattr(jsontext, "_ORJSON", None)
    payload = _payload()
    assert (
        http._dumps(payload) == json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str).encode()
    )


def _crash_lines() -> bytes:
    return b"".join(CRASH.read_bytes().splitlines(True)[1:])


def _crash_loop(starts: int) -> Analyzer:
    # an SGLang launch started, crashed and started again `starts` times
    startup, crash = STARTUP.read_bytes(), _crash_lines()
    analyzer = Analyzer(catalogue())
    for k in range(starts):
        analyzer.feed(startup + crash, float(k))
        analyzer.caught_up(float(k))
    return analyzer


def test_a_crash_loop_keeps_the_arguments_of_its_newest_past_incarnations_only() -> None:
    """A crash-looping launch's past incarnations beyond the newest four drop their arguments (each SGLang
    dump weighs ~6 KB on every checkpoint); the newest keep them, so a relaunch is still compared with the one
    before it, argument by argument."""
    analyzer = _crash_loop(8)
    history = analyzer.lifecycle.history
    assert len(history) >= 6
    assert all(not inc.arguments for inc in history[:-4])
    assert all(inc.arguments for inc in history[-4:])
    verdict = build_verdict(analyzer, analyzer.lifecycle.current)
    assert verdict.changes is not None
    assert verdict.changes.compared_arguments


def test_a_crash_loop_s_relaunches_with_the_same_arguments_hold_one_tuple_of_them() -> None:
    """A relaunch that dumps the arguments of the start before holds that start's tuple (a checkpoint's writer
    then keeps one text of it, not one a past incarnation: SGLang's is ~6 KB); one started with other arguments
    holds its own, and its verdict says what changed."""
    analyzer = _crash_loop(6)
    lc = analyzer.lifecycle
    kept = [inc.arguments for inc in lc.history[-4:]] + [lc.current.arguments]
    assert kept[0]
    assert all(arguments is kept[0] for arguments in kept)
    writer = RecordText()
    writer.dumps(record_values(analyzer))
    assert sum(type(value) is tuple and value is kept[0] for value, _, _ in writer._before.values()) == 1
    startup = STARTUP.read_bytes()
    other = startup.replace(b"mem_fraction_static=0.88", b"mem_fraction_static=0.8")
    assert other != startup
    analyzer.feed(other + _crash_lines(), 6.0)
    newest = lc.current
    assert newest.arguments != kept[0]
    verdict = build_verdict(analyzer, newest)
    assert verdict.changes is not None
    assert any(c.name == "mem_fraction_static" for c in verdict.changes.arguments)


def test_checkpoint_writers_share_the_text_of_a_record_s_keys() -> None:
    """The names of a record's parts (and of its facts and progress), the same at every launch's every save, are
    written from one text for every writer: none keeps its own (200 launches' writers kept ~4 MB of them)."""
    analyzers = [Analyzer(catalogue()) for _ in range(2)]
    for analyzer in analyzers:
        analyzer.feed(CRASH.read_bytes(), 0.0)
    for analyzer in analyzers:
        writer, values = RecordText(), record_values(analyzer)
        text, _ = writer.dumps(values)
        assert json.loads(text) == json.loads(json.dumps(to_record(analyzer)))
        kept = {value for value, _, _ in writer._before.values() if type(value) is str}
        assert not kept & set(values)


@pytest.mark.anyio
async def test_a_follower_s_timing_is_its_status_clock_and_line_without_a_verdict_built() -> None:
    """What an alert adds to a verdict (`LaunchFollower.timing`) is `status()`'s clock and last line while the
    follower reports the verdict's incarnation, and nothing once it reports another."""
    clock, source = ManualClock(), ScriptedSource()
    follower = LaunchFollower(LaunchSpec(name="t", target=parse_target("/t.log")), source=source, clock=clock)
    with anyio.fail_after(30), follower.updates:
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            await source.append(CRASH.read_bytes())
            await source.catch_up()
            await source.settle()
            while follower.concluded is None:
                await clock.advance(0.05)
            await clock.advance(1.0)
            number = follower.concluded.verdict.incarnation
            status = follower.status()
            assert follower.timing(number) == (status.elapsed, status.last_line)
            assert status.last_line
            assert follower.timing(number + 1) is None
            tg.cancel_scope.cancel()


def test_a_redacted_verdict_makes_again_only_the_timeline_entries_whose_text_changed() -> None:
    """Redaction (at every status snapshot) masks a credential in a timeline entry's reason and keeps the other
    entries as they are, not copies of them."""
    verdict = verdict_from_json(
        {
            "state": "loading_weights",
            "timeline": [
                {"state": "starting", "line": 1, "reason": "launch started"},
                {"state": "loading_weights", "line": 2, "reason": "token hf_AbCdEfGhIjKlMnOpQrStUvWx read"},
            ],
        }
    )
    redacted = verdict.redacted()
    assert redacted.timeline[0] is verdict.timeline[0]
    assert "hf_AbCd" not in redacted.timeline[1].reason
    assert redacted.timeline[1].state is State.LOADING_WEIGHTS


def test_a_verdict_with_no_credential_is_its_own_redaction() -> None:
    """A verdict none of whose texts holds a credential is redacted as itself (no copy at every snapshot); one
    whose traceback holds one is a copy with it masked."""
    analyzer = Analyzer(catalogue())
    analyzer.feed(CRASH.read_bytes(), 1.0)
    analyzer.finish(2.0)
    verdict = build_verdict(analyzer, analyzer.lifecycle.verdict_incarnation())
    assert verdict.error is not None
    assert verdict.error.traceback
    assert verdict.redacted() is verdict
    error = dataclasses.replace(
        verdict.error, traceback=(*verdict.error.traceback, "token=hf_AbCdEfGhIjKlMnOpQrStUvWx")
    )
    secret = dataclasses.replace(verdict, error=error)
    redacted = secret.redacted()
    assert redacted is not secret
    assert redacted.error is not None
    assert redacted.error.traceback[:-1] == verdict.error.traceback
    assert "hf_AbCd" not in redacted.error.traceback[-1]


def test_a_followers_error_is_redacted_once_and_as_every_redaction_makes_it() -> None:
    """The error a follower's statuses redact (`Remembered`, kept by the follower) is redacted once while it stays
    the verdict's error, to what a redaction without it makes; another error is redacted anew."""
    analyzer = Analyzer(catalogue())
    analyzer.feed(CRASH.read_bytes(), 1.0)
    analyzer.finish(2.0)
    verdict = build_verdict(analyzer, analyzer.lifecycle.verdict_incarnation())
    assert verdict.error is not None
    error = dataclasses.replace(
        verdict.error, traceback=(*verdict.error.traceback, "--api-key sk-AbCdEfGhIjKlMnOpQrStUv")
    )
    remembered = Remembered()
    first = dataclasses.replace(verdict, error=error).redacted(remembered=remembered)
    again = dataclasses.replace(verdict, error=error).redacted(remembered=remembered)
    assert first.error is again.error
    assert first == dataclasses.replace(verdict, error=error).redacted()
    assert first.error is not None
    assert "sk-AbCd" not in first.error.traceback[-1]
    other = verdict.redacted(remembered=remembered)
    assert other.error is verdict.error


@pytest.mark.parametrize(
    "logs",
    [
        pytest.param([CRASH], id="crash"),
        pytest.param([CORPUS / "ready-llama31-8b-single-gpu-docs-v041.log"] * 3 + [CRASH], id="relaunches"),
        *(
            pytest.param([log], id=log.stem[:40])
            for log in sorted((CORPUS.parent / "vllm").glob("*.log"))[:60:6]
        ),
    ],
)
def test_a_followers_remembered_verdict_parts_make_the_verdict_every_build_makes(logs: list[Path]) -> None:
    """Corpus logs read a few lines at a time, as a follower reads them (the log as it was, then each line seen
    live, a tick after each read, relaunches): at every step the verdict built and redacted with what the
    follower remembers (`Remembered`) is the one built without, and the timeline's entries are made again only
    when the timeline changed."""
    analyzer = Analyzer(catalogue())
    remembered, other = Remembered(), Remembered()  # the verdict's incarnation's, another's
    lines = [line for log in logs for line in log.read_bytes().splitlines(True)]
    now, changed, kept = 0.0, 0, 0
    previous = None
    for start in range(0, len(lines), 7):
        now += 0.5
        analyzer.feed(b"".join(lines[start : start + 7]), now)
        if start == 7 * 3:
            analyzer.caught_up(now)  # what follows is seen live: durations from the clock
        analyzer.tick(now + 0.1)
        current = build_verdict(analyzer, remembered=remembered)
        assert current.redacted(remembered=remembered) == build_verdict(analyzer).redacted()
        for inc in analyzer.lifecycle.history[-2:]:
            made = build_verdict(analyzer, inc, remembered=other).redacted(remembered=other)
            assert made == build_verdict(analyzer, inc).redacted()
        if previous is not None:
            same = current.timeline == previous.timeline
            assert (current.timeline is previous.timeline) == same
            changed, kept = changed + (not same), kept + same
        previous = current
    assert kept
    assert changed or len(logs) == 1  # a relaunch's timeline is another


@pytest.mark.anyio
async def test_a_follower_whose_reader_leaves_and_cancels_it_at_once_ends_cancelled_not_failed() -> None:
    """An update is put on the stream without a pass of the event loop, but a reader gone is met as the stream's
    `send` meets it: `watch`, done with its verdict, closes the updates and cancels the follower in one step; a
    follower woken by its source in that step, with transitions to publish, ends cancelled, not failed."""
    from watchdog.follow.follower import Transitioned  # noqa: PLC0415
    from watchdog.follow.sources import Chunk  # noqa: PLC0415

    startup = (CORPUS / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes()
    clock, source = ManualClock(), ScriptedSource()
    follower = LaunchFollower(LaunchSpec(name="w", target=parse_target("/w.log")), source=source, clock=clock)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            await source.append(startup)
            await source.catch_up()
            with follower.updates:
                assert isinstance(await follower.updates.receive(), Transitioned)
                await source.settle()  # the follower waits for its source's next item
            # in one step, the reader gone already: the source gives the follower a relaunch (transitions to
            # publish; it is woken, not yet run) and the reader cancels it
            source._send.send_nowait(Chunk(source.offset, startup))
            tg.cancel_scope.cancel()
    assert tg.cancel_scope.cancelled_caught
