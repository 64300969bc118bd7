"""The serving hang: a ready server's requests wait and no token comes for hang_after (stalled), on real lines."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_receiver import Receiver
from hypothesis import given
from hypothesis import strategies as st

from watchdog.alerts.senders import ConsoleAlerts, ServiceNotifier
from watchdog.core.analyzer import Analyzer
from watchdog.core.envelope import parse
from watchdog.core.findings import ServingSeen
from watchdog.core.resume import restore, to_record
from watchdog.core.serving import NO_REQUESTS, TOKENS_AGAIN, Serving
from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.exceptions import ConfigError
from watchdog.follow.follower import LaunchFollower, LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.follow.testing import ManualClock, ScriptedSource, follow_at_pace
from watchdog.profiles.loader import load_engine
from watchdog.profiles.model import parse_profile
from watchdog.vocabulary import ENGINES, State

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
SERVING = FIXTURES / "serving"  # real serving lines of public threads (SOURCES.md)
CORPUS = FIXTURES / "corpus"
DEADLINE = 30.0


def _lines(name: str) -> list[bytes]:
    return (SERVING / name).read_bytes().splitlines(keepends=True)


def _until(path: Path, marker: bytes) -> bytes:
    """A real launch's log up to and with its first line that holds `marker` (where it became ready)."""
    data = path.read_bytes()
    end = data.index(b"\n", data.index(marker)) + 1
    return data[:end]


VLLM_READY = _until(CORPUS / "vllm" / "captured-vllm-ready-cpu.log", b"Application startup complete")
TGI_READY = (CORPUS / "tgi" / "tgi-ready-connected-t5-issue1349.log").read_bytes()
LLAMACPP = (CORPUS / "llamacpp" / "captured-llamacpp-ctx-zero-cpu.log").read_bytes().splitlines(keepends=True)
LLAMACPP_READY = b"".join(LLAMACPP[:9])  # listening on ..., a slot selected: ready
LLAMACPP_TASK = LLAMACPP[9]  # slot launch_slot_: id  3 | task 0 | processing task
LLAMACPP_DONE = b"".join(LLAMACPP[10:15])  # its timings, then release: stop processing


def _replay(engine: str, data: bytes, hang_after: float) -> Analyzer:
    analyzer = Analyzer(load_engine(engine), hang_after=hang_after)
    analyzer.feed(data, 0.0)
    analyzer.finish(0.0)
    return analyzer


def _seen(request: str = "", **kw: Any) -> ServingSeen:
    return ServingSeen(1, None, None, request=request, **kw)


# -- the pure part ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seen", "resumed", "timed"),
    [
        pytest.param(_seen(running=8, waiting=3, tokens=0.0), None, True, id="counts-no-tokens"),
        pytest.param(_seen(running=8, waiting=3, tokens=12.5), TOKENS_AGAIN, True, id="counts-tokens"),
        pytest.param(_seen(running=0, waiting=0, tokens=0.0), NO_REQUESTS, False, id="counts-idle"),
        pytest.param(_seen("started", key="0"), None, True, id="request-started"),
        pytest.param(_seen("idle"), NO_REQUESTS, False, id="all-idle"),
    ],
)
def test_a_serving_line_starts_or_ends_the_hang_clock(
    seen: ServingSeen, resumed: str | None, timed: bool
) -> None:
    """Requests with no token start the hang clock; tokens restart it (they came now); no request stops it."""
    serving = Serving()
    assert serving.observe(seen, 5.0) == resumed
    assert (serving.since == 5.0) is timed


def test_a_request_told_open_stays_open_until_its_end_line() -> None:
    """llama.cpp's slots: two start, one ends (tokens came), one is left; `idle` ends them all."""
    serving = Serving()
    serving.observe(_seen("started", key="0"), 1.0)
    serving.observe(_seen("started", key="1"), 2.0)
    assert serving.since == 1.0
    assert serving.observe(_seen("finished", key="0"), 3.0) == TOKENS_AGAIN
    assert (serving.running, serving.since) == (1, 3.0)
    assert serving.observe(_seen("idle"), 4.0) == NO_REQUESTS
    assert (serving.load, serving.since) == (0, None)


def test_overdue_by_the_logs_clock_or_the_callers() -> None:
    """The log's seconds decide when both lines have them (a replay's only clock); else the caller's clock."""
    serving = Serving()
    serving.observe(ServingSeen(1, "t0", 1000.0, running=1, tokens=0.0), 0.0)
    assert not serving.overdue(0.0, 1299.0, 300.0)
    assert serving.overdue(0.0, 1300.0, 300.0)
    assert serving.overdue(300.0, None, 300.0)
    assert not serving.overdue(299.0, None, 300.0)
    assert "1 running, 0 waiting, 0 tokens/s since t0 (over 5m00s)" in serving.reason(300.0)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        pytest.param({"match": "Decode batch", "regex": r"gen (?P<tokens>\d+)"}, "regex", id="no-requests"),
        pytest.param({"match": "x", "regex": r"(?P<queued>\d+)"}, "regex", id="unknown-group"),
        pytest.param({"match": "x", "request": "maybe"}, "request", id="unknown-request"),
    ],
)
def test_a_bad_serving_rule_is_refused_naming_its_key(table: dict[str, str], key: str) -> None:
    """A `[[serving]]` rule must say requests (a count group, or `request`), with known groups and words."""
    with pytest.raises(ConfigError, match=key):
        parse_profile({"name": "x", "serving": [table]}, "x.toml")


def test_request_is_only_a_serving_rules_key() -> None:
    """`request` on another kind of rule is refused."""
    with pytest.raises(ConfigError, match="only on a"):
        parse_profile(
            {"name": "x", "phase": [{"match": "x", "state": "starting", "request": "idle"}]}, "x.toml"
        )


# -- each engine's real serving lines -----------------------------------------------------------------------


def test_sglang_decode_and_prefill_lines_give_requests_and_tokens() -> None:
    """SGLang's decode batch line gives running, queued and generated tokens/s; its prefill line prompt tokens."""
    lines = _lines("sglang-grok2-idle-zero-throughput-blog.log")
    analyzer = Analyzer(load_engine("sglang"))
    analyzer.feed(b"".join(lines[:15]), 0.0)  # up to the decode line of 0.00 tokens/s after a night idle
    serving = analyzer.lifecycle.current.serving
    assert (serving.running, serving.waiting, serving.since_at) == (1, 0, "2025-09-12T07:18:14")


def test_sglang_zero_throughput_after_an_idle_night_is_no_hang() -> None:
    """SGLang prints 0.00 tokens/s for the first decode after an idle night, then the request is done and
    nothing follows for 9 minutes: replayed, and followed at the log's pace, the server stays ready."""
    data = (SERVING / "sglang-grok2-idle-zero-throughput-blog.log").read_bytes()
    analyzer = _replay("sglang", data, 300.0)
    assert analyzer.state == State.READY
    assert [t.state for t, _ in analyzer.lifecycle.current.timeline][-1] == State.READY
    times = _pace(data)
    run = anyio.run(lambda: follow_at_pace(data, times, engine="sglang", linger=600.0))
    assert run.status["state"] == "ready"


def _pace(data: bytes) -> list[float]:
    # each line's offset from the first, by its `[YYYY-MM-DD HH:MM:SS ...]` time
    from datetime import datetime  # noqa: PLC0415

    stamps = [datetime.strptime(line[1:20].decode(), "%Y-%m-%d %H:%M:%S") for line in data.splitlines()]
    return [(s - stamps[0]).total_seconds() for s in stamps]


def test_tgi_allocation_retried_with_no_request_done_is_a_hang() -> None:
    """TGI's radix allocator retrying one request for seconds with no request finished (issue 2842) is a
    serving hang by the log's own times, after the router was ready."""
    data = TGI_READY + b"".join(_lines("tgi-radix-retry-2842.log"))
    analyzer = _replay("tgi", data, 2.0)
    assert analyzer.state == State.STALLED
    reason = analyzer.lifecycle.current.timeline[-1][0].reason
    assert reason.startswith("serving hang: 1 running, 0 waiting, 0 tokens/s since 2024-12-14T03:44:28")
    assert _replay("tgi", data, 60.0).state == State.READY  # 3 s of it is under a minute's hang_after


def test_vllm_v0_stats_of_no_tokens_then_prompt_tokens_is_no_hang() -> None:
    """vLLM V0's workers wait on the shared-memory broadcast, one stats line shows a request and 0 tokens/s,
    the next prompt tokens (issue 6614): no hang, and the broadcast warning alone starts nothing."""
    lines = _lines("vllm-v0-shm-broadcast-6614.log")
    analyzer = _replay("vllm", VLLM_READY + b"".join(lines[:8]), 1.0)
    assert analyzer.lifecycle.current.serving.since_at == "07-28T21:01:40"
    analyzer = _replay("vllm", VLLM_READY + b"".join(lines), 1.0)
    assert analyzer.state == State.READY
    assert analyzer.lifecycle.current.serving.since_at == "07-28T21:01:45"  # tokens came then


def test_vllm_idle_stats_are_no_hang() -> None:
    """vLLM V1's stats line with no request running or waiting (issue 16361) is idle, whatever the time."""
    analyzer = _replay("vllm", VLLM_READY + b"".join(_lines("vllm-v1-idle-16361.log")), 1.0)
    assert analyzer.state == State.READY
    assert analyzer.lifecycle.current.serving.since is None


def test_llamacpp_slot_lines_open_and_close_requests() -> None:
    """llama.cpp's slots (issues 14073, 14829): a task launched is open until its release; all idle is none."""
    analyzer = _replay(
        "llamacpp", LLAMACPP_READY + b"".join(_lines("llamacpp-slots-freeze-14073.log")), 300.0
    )
    assert analyzer.lifecycle.current.serving.open == {"0"}  # task 172, launched and never released
    analyzer = _replay("llamacpp", LLAMACPP_READY + b"".join(_lines("llamacpp-idle-14829.log")), 300.0)
    assert analyzer.lifecycle.current.serving.open == set()


# -- live: a follower on a manual clock ---------------------------------------------------------------------


class _Run:
    """A follower of a scripted source on a manual clock."""

    def __init__(self, engine: str, hang_after: float) -> None:
        self.clock = ManualClock()
        self.source = ScriptedSource()
        spec = LaunchSpec(name="t", target=parse_target("/x.log"), engine=engine, hang_after=hang_after)
        self.follower = LaunchFollower(spec, source=self.source, clock=self.clock)

    async def drain(self) -> None:
        with self.follower.updates:
            async for _ in self.follower.updates:
                pass

    async def write(self, data: bytes) -> None:
        await self.source.append(data)
        await self.source.catch_up()
        await self.source.settle()

    @property
    def state(self) -> str:
        return str(self.follower.status().to_json()["state"])


async def test_vllm_hang_is_stalled_after_hang_after_and_resolves_when_tokens_flow() -> None:
    """vLLM's stats every 10 s show a request and 0 tokens/s (PR 45649): stalled at the first line past
    hang_after (30 s), not before; tokens again (issue 48005) make it ready; idle stats then never stall it."""
    run = _Run("vllm", 30.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.follower.run)
        tg.start_soon(run.drain)
        await run.source.followed.wait()
        await run.write(VLLM_READY)
        assert run.state == "ready"
        hang = _lines("vllm-v1-cpu-worker-hang-45649.log")
        for line in hang[:3]:  # 0 s, 10 s, 20 s
            await run.write(line)
            await run.clock.advance(10.0)
        assert run.state == "ready"
        await run.clock.advance(60.0)  # silence says nothing: counts need a later line
        assert run.state == "ready"
        await run.write(hang[3])
        assert run.state == "stalled"
        verdict = run.follower.status().to_json()
        assert verdict["phase"] == "ready"
        assert verdict["timeline"][-1]["state"] == "stalled"
        await run.write(_lines("vllm-v1-tokens-flow-48005.log")[2])  # 53.9 tokens/s, 1 running
        assert run.state == "ready"
        for line in _lines("vllm-v1-idle-16361.log"):
            await run.write(line)
            await run.clock.advance(3600.0)
        assert run.state == "ready"
        tg.cancel_scope.cancel()
    reasons = [t.reason for t, _ in run.follower.analyzer.lifecycle.current.timeline]
    assert reasons[-2:] == [
        # vLLM's `MM-DD hh:mm:ss` behind its path-style file prefix ([v1/metrics/loggers.py:273]) says since when
        "serving hang: 1 running, 0 waiting, 0 tokens/s since 06-22T17:39:49 (over 30s)",
        TOKENS_AGAIN,
    ]


async def test_llamacpp_task_open_in_silence_is_a_hang_and_its_release_ends_it() -> None:
    """A llama.cpp task launched and never released (its end line always comes) is a hang after hang_after
    of silence by the follower's clock; the release of the task ends it; an idle server never stalls."""
    run = _Run("llamacpp", 120.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.follower.run)
        tg.start_soon(run.drain)
        await run.source.followed.wait()
        await run.write(LLAMACPP_READY)
        await run.clock.advance(3600.0)
        assert run.state == "ready"  # idle: nothing asked
        await run.write(LLAMACPP_TASK)
        await run.clock.advance(119.0)
        assert run.state == "ready"
        await run.clock.advance(1.5)
        assert run.state == "stalled"
        await run.write(LLAMACPP_DONE)
        assert run.state == "ready"
        await run.clock.advance(3600.0)
        assert run.state == "ready"
        tg.cancel_scope.cancel()


def test_a_hang_survives_a_restart_of_the_daemon() -> None:
    """The hang's state is in the resume record: restored, the launch is still stalled by it, and the release
    line read after the restart ends it."""
    analyzer = Analyzer(load_engine("llamacpp"), hang_after=60.0)
    analyzer.feed(LLAMACPP_READY + LLAMACPP_TASK, 0.0)
    analyzer.tick(61.0)
    assert analyzer.state == State.STALLED
    record = json.loads(json.dumps(to_record(analyzer)))
    again = Analyzer(load_engine("llamacpp"), hang_after=60.0)
    restore(again, record)
    assert again.state == State.STALLED
    assert again.lifecycle.current.serving.hung
    again.feed(LLAMACPP_DONE, 70.0)
    assert again.state == State.READY


# -- the daemon: the alert and its resolution ---------------------------------------------------------------


def _kinds(got: list[Any]) -> list[str]:
    return [g.json()["kind"] for g in got]


async def test_the_daemon_alerts_a_serving_hang_and_resolves_it(tmp_path: Path, receiver: Receiver) -> None:
    """A ready llama.cpp launch whose task gets no token for hang_after: a webhook gets a stalled alert that
    says it hangs while serving, then its resolution when the task is released; the console says the same."""
    log = tmp_path / "serve.log"
    out = io.StringIO()
    hook = ServiceNotifier(name="hook", kind="webhook", urls=(receiver.url("/hook"),), timeout=5.0)
    spec = LaunchSpec(name="serve", target=parse_target(str(log)), engine="llamacpp", hang_after=0.5)
    daemon = Daemon({"serve": LaunchPlan(spec, alerts=(hook, ConsoleAlerts(out=out)))}, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(LLAMACPP_READY)
            await daemon.wait_until(lambda s: s[0]["state"] == "ready")
            with log.open("ab") as f:
                f.write(LLAMACPP_TASK)
            await receiver.wait_until(lambda got: "stalled" in _kinds(got))  # the hang
            with log.open("ab") as f:
                f.write(LLAMACPP_DONE)
            await receiver.wait_until(lambda got: "resolved" in _kinds(got))  # its resolution
            tg.cancel_scope.cancel()
    by_kind = {g.json()["kind"]: g.json() for g in receiver.delivered()}
    hang, resolved = by_kind["stalled"], by_kind["resolved"]
    assert hang["kind"] == "stalled"
    assert hang["serving_hang"] is True
    assert hang["title"] == "serve hangs while serving (stalled in ready)"
    assert hang["summary"].startswith("serving hang: 1 running, 0 waiting, 0 tokens/s")
    assert resolved["kind"] == "resolved"
    assert resolved["serving_hang"] is True
    assert resolved["detail"] == f"progress again: ready: {TOKENS_AGAIN}"
    said = [line for line in out.getvalue().splitlines() if not line.startswith("serve: ready")]
    assert said[0].startswith("serve: hangs while serving: serving hang: 1 running")
    assert said[1] == f"serve: stalled resolved: progress again: ready: {TOKENS_AGAIN}"


@pytest.mark.parametrize(
    ("lines", "since_at", "running"),
    [
        pytest.param(slice(16, 29), "2025-09-12T07:27:18", 1, id="tokens-at-the-end"),
        pytest.param(slice(11, 15), "2025-09-12T07:18:14", 1, id="no-tokens-at-the-end"),
    ],
)
def test_a_block_of_serving_lines_tells_the_clock_what_each_line_would(
    lines: slice, since_at: str, running: int
) -> None:
    """A block of serving lines (read at once, as replay reads a busy server's log) leaves the hang's clock as
    reading them one by one does: since the last line with tokens, or the first without after it."""
    data = _lines("sglang-grok2-idle-zero-throughput-blog.log")
    whole = Analyzer(load_engine("sglang"))
    whole.feed(b"".join(data[: lines.start]), 0.0)
    whole.feed(b"".join(data[lines]), 0.0)
    one_by_one = Analyzer(load_engine("sglang"))
    for line in data[: lines.stop]:
        one_by_one.feed(line, 0.0)
    for analyzer in (whole, one_by_one):
        analyzer.tick(0.0)  # the last line of a run with tokens waits to be read until anything else comes
        serving = analyzer.lifecycle.current.serving
        assert (serving.since_at, serving.running) == (since_at, running)


def _fed_one_by_one(lines: list[bytes], start: int) -> Analyzer:
    # a ready SGLang server (its log to `start` read at once), then its serving lines one a second, one a read
    analyzer = Analyzer(load_engine("sglang"), hang_after=300.0)
    analyzer.feed(b"".join(lines[:start]), 0.0)
    for n, line in enumerate(lines[start:], 1):
        analyzer.feed(line, float(n))
    return analyzer


def test_a_run_of_serving_lines_with_tokens_read_one_by_one_is_read_through_its_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Serving lines with tokens flowing, each a read of its own (a live server's), are not read whole one by one:
    only the run's last is, once anything else comes (here a tick), and the hang's clock is as if each was."""
    import watchdog.core.analyzer as module  # noqa: PLC0415 - its `parse`, counted

    lines = _lines("sglang-grok2-idle-zero-throughput-blog.log")[:29]
    parsed: list[str] = []
    analyzer = _fed_one_by_one(lines[:16], 16)  # ready
    monkeypatch.setattr(module, "parse", lambda text, **kw: parsed.append(text) or parse(text, **kw))
    for n, line in enumerate(lines[16:], 1):
        analyzer.feed(line, float(n))
    assert parsed == []  # 13 decode lines with tokens, none read yet
    assert analyzer.last_relevant.startswith("Decode batch. #running-req: 1, #token: 484")
    assert analyzer.tick(14.0) == []
    assert len(parsed) == 2  # the run's last line, read (and the look at it above)
    whole = Analyzer(load_engine("sglang"), hang_after=300.0)
    whole.feed(b"".join(lines), 0.0)
    whole.tick(0.0)
    serving, expected = analyzer.lifecycle.current.serving, whole.lifecycle.current.serving
    assert (serving.running, serving.waiting, serving.since) == (1, 0, 13.0)  # the last line's clock
    assert (serving.since_seconds, serving.since_at) == (expected.since_seconds, expected.since_at)
    assert serving.since_at == "2025-09-12T07:27:18"


def test_a_block_s_last_serving_line_with_tokens_waits_as_a_line_read_alone_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A block that ends in serving lines with tokens (a burst, a replay's chunk) is read through its last line as
    before, and that line too waits until anything else comes: the clock is then the block's."""
    import watchdog.core.analyzer as module  # noqa: PLC0415 - its `parse`, counted

    lines = _lines("sglang-grok2-idle-zero-throughput-blog.log")[:29]
    parsed: list[str] = []
    analyzer = _fed_one_by_one(lines[:16], 16)  # ready
    monkeypatch.setattr(module, "parse", lambda text, **kw: parsed.append(text) or parse(text, **kw))
    assert analyzer.feed(b"".join(lines[16:]), 1.0) == []
    assert parsed == []
    assert analyzer.tick(2.0) == []
    assert len(parsed) == 1
    serving = analyzer.lifecycle.current.serving
    assert (serving.running, serving.since, serving.since_at) == (1, 1.0, "2025-09-12T07:27:18")


def test_a_serving_line_that_waits_to_be_read_is_in_the_resume_record() -> None:
    """A restart while the last serving line with tokens waits to be read goes on as if it had never stopped:
    a line with requests and no tokens 12 s after it (by the log's times) is no hang, restored or not."""
    lines = _lines("sglang-grok2-idle-zero-throughput-blog.log")[:29]
    stuck = lines[14].replace(b"2025-09-12 07:18:14", b"2025-09-12 07:27:30")  # its 0.00 tokens/s, later
    assert b"gen throughput (token/s): 0.00" in stuck
    analyzer = _fed_one_by_one(lines, 16)
    again = Analyzer(load_engine("sglang"), hang_after=300.0)
    restore(again, json.loads(json.dumps(to_record(analyzer))))
    assert again.last_relevant == analyzer.last_relevant
    for each in (analyzer, again):
        assert each.feed(stuck, 20.0) == []
        assert each.state == State.READY
        assert each.lifecycle.current.serving.since_at == "2025-09-12T07:27:18"


def _seen_as_summed(groups: dict[str, str]) -> tuple[Any, ...]:
    # a serving line's counts as the scanner read them before its one pass: `_number` of each, tokens by `sum`
    from watchdog.core.scanner import _number  # noqa: PLC0415 - the reference's own part

    values = {k: _number(v) for k, v in groups.items() if k in ("running", "waiting", "tokens", "prompt")}
    made = [float(v) for k, v in values.items() if k in ("tokens", "prompt") and isinstance(v, (int, float))]
    count = {
        k: int(v) if isinstance(v, (int, float)) else None
        for k, v in values.items()
        if k in ("running", "waiting")
    }
    return (count.get("running"), count.get("waiting"), sum(made) if made else None, groups.get("slot", ""))


_COUNT = st.sampled_from(["0", "7", "1,024", "-0.0", "0.00", "59.62", "1e3", "x", "12.5.1", ""])


@given(st.dictionaries(st.sampled_from(["running", "waiting", "tokens", "prompt", "slot"]), _COUNT))
def test_a_serving_line_s_counts_read_as_each_was_summed(groups: dict[str, str]) -> None:
    """The scanner reads a serving rule's groups (those that took part) into the same counts as taking each with
    `_number` and summing the tokens and the prompt with `sum`: the same requests and the same zero."""
    from watchdog.core.envelope import parse  # noqa: PLC0415
    from watchdog.core.scanner import _serving  # noqa: PLC0415
    from watchdog.profiles.model import Rule  # noqa: PLC0415

    seen = _serving(Rule("serving", "x"), groups, 1, parse("x"))
    expected = _seen_as_summed(groups)
    assert (seen.running, seen.waiting, seen.tokens, seen.key) == expected
    if expected[2] is not None:
        assert str(seen.tokens) == str(expected[2])  # -0.0 summed from 0 is 0.0


def test_a_lazy_gap_before_a_literal_character_is_written_to_skip_to_it() -> None:
    """`lazy_gaps` writes each `.*?` that one literal character follows (plain or escaped) as a gap that skips to
    each place of that character, and leaves every other `.*?` (escaped, in a class, before a class or a
    quantified character) and a pattern with inline flags as they are."""
    from watchdog.core.analyzer import lazy_gaps  # noqa: PLC0415

    assert lazy_gaps(rb"a.*?b") == rb"a[^b\n]*+(?:b[^b\n]*+)*?b"
    assert lazy_gaps(rb"a.*?\(b") == rb"a[^\(\n]*+(?:\([^\(\n]*+)*?\(b"
    assert lazy_gaps(rb"a\\.*?#") == rb"a\\[^\#\n]*+(?:\#[^\#\n]*+)*?#"  # an escaped backslash, then the gap
    assert lazy_gaps(rb"[.*?x].*?y") == rb"[.*?x][^y\n]*+(?:y[^y\n]*+)*?y"
    assert lazy_gaps(rb"[].*?]z") == rb"[].*?]z"  # "]" first is the class's own
    for kept in (
        rb"a\.*?b",
        rb"a.*?b*",
        rb"a.*?\d",
        rb"a.*?.b",
        rb"a.*?(b)",
        rb"a.*?[b]",
        rb"(?s)a.*?b",
        rb"a.*?",
    ):
        assert lazy_gaps(kept) == kept


_GAP_PIECES = [rb"a", rb"b", rb"#", rb"\(", rb".*?", rb".*?", rb"(a+)", rb"(b|ab)", rb"(\d+)", rb"\d"]
_GAP_TEXT = [b"a", b"b", b"#", b"(", b"1", b"22", b"\n", b"ab", b"#a(", b" "]


@given(
    st.lists(st.sampled_from(_GAP_PIECES), min_size=1, max_size=8),
    st.lists(st.sampled_from(_GAP_TEXT), max_size=30),
)
def test_a_pattern_written_with_skipping_gaps_matches_as_written(
    pieces: list[bytes], words: list[bytes]
) -> None:
    """Every match of a pattern as `lazy_gaps` writes it is the pattern's own: the same span and groups (the gaps
    try the same places in the same order, backtracking included)."""
    from watchdog.core.analyzer import lazy_gaps  # noqa: PLC0415

    pattern, text = b"".join(pieces), b"".join(words)
    written = lazy_gaps(pattern)
    found, found_written = re.search(pattern, text), re.search(written, text)
    assert (found is None) == (found_written is None)
    if found is not None and found_written is not None:
        assert (found.span(), found.groups()) == (found_written.span(), found_written.groups())


def test_every_profile_s_serving_counts_match_as_written_on_the_fixture_lines() -> None:
    """The serving rules' regexes of every bundled profile, as the analyzer's quick look reads them (`lazy_gaps`),
    match each fixture log's line that holds the rule's literal as the regex written in the profile does."""
    from watchdog.core.analyzer import lazy_gaps  # noqa: PLC0415

    rules = [r for engine in ENGINES for r in load_engine(engine).rules if r.kind == "serving" and r.regex]
    assert rules
    lines = [
        line
        for log in sorted(FIXTURES.rglob("*.log"))
        if "heldout" not in log.relative_to(FIXTURES).parts
        for line in log.read_bytes().splitlines()
    ]
    compared = 0
    for rule in rules:
        pattern = rule.regex.pattern.encode()  # type: ignore[union-attr]  # a serving rule's regex
        regex, written = re.compile(pattern), re.compile(lazy_gaps(pattern))
        literal = rule.match.encode()
        for line in lines:
            if literal in line:
                found, found_written = regex.search(line), written.search(line)
                assert (found is None) == (found_written is None), line
                if found is not None and found_written is not None:
                    assert (found.span(), found.groups()) == (found_written.span(), found_written.groups())
                    compared += 1
    assert compared > 100
