"""Line templates: a digit-blind pattern finds in a line what it finds in the line's template, and the analyzer's
serving lines read by their template say what each line would."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchdog.core import envelope, framing
from watchdog.core.analyzer import Analyzer, _plain, _plain_line, _rule_set, lazy_gaps
from watchdog.core.envelope import ERROR_LEVEL_MARKS, unglue
from watchdog.core.framing import clean
from watchdog.core.templates import TEMPLATE_BYTES, digit_blind, has_digit, template
from watchdog.profiles.loader import catalogue, load_engine
from watchdog.vocabulary import ENGINES, State

_DECODE = rb"#running-req: (?P<running>\d+).*?gen throughput \(token/s\): (?P<tokens>[\d.]+).*?#queue-req: (?P<waiting>\d+)"


@pytest.mark.parametrize(
    ("pattern", "blind"),
    [
        *(pytest.param(mark, True, id=f"error-mark-{i}") for i, mark in enumerate(ERROR_LEVEL_MARKS)),
        pytest.param(_DECODE, True, id="sglang-decode"),
        pytest.param(lazy_gaps(_DECODE), True, id="sglang-decode-skipping-gaps"),
        pytest.param(rb"\w+\s\S+\W(?=x)(?<!y)(?>z)a++", True, id="categories-and-groups"),
        pytest.param(rb"[^g\n]*", True, id="class-without-digits"),
        pytest.param(rb"TP0\]", False, id="a-digit-of-its-own"),
        pytest.param(rb"[1-9]", False, id="some-digits"),
        pytest.param(rb"[^0-5]", False, id="some-digits-negated"),
        pytest.param(rb"(\d)\1", False, id="back-reference"),
        pytest.param(rb"(a)?(?(1)b|c)", False, id="conditional"),
        pytest.param(rb"(", False, id="not-a-pattern"),
    ],
)
def test_a_pattern_is_digit_blind_when_it_tells_no_digit_from_another(pattern: bytes, blind: bool) -> None:
    """A pattern with no digit of its own, whose classes hold every digit or none, and no back-reference, is
    digit-blind; any other is not."""
    assert digit_blind(pattern) is blind


_BLIND = [re.compile(p) for p in (*ERROR_LEVEL_MARKS, lazy_gaps(_DECODE), _DECODE)]


_PIECES = [
    b"0",
    b"7",
    b"42",
    b"3.50",
    b" ",
    b":",
    b"E",
    b"F",
    b"[",
    b"] ",
    b"level=e",
    b", ",
    b"x",
    b"\xe2\x80\x99",
]
_PIECES += [b"#running-req: ", b"gen throughput (token/s): ", b"#queue-req: "]


@given(st.lists(st.sampled_from(_PIECES), max_size=24).map(b"".join))
def test_a_digit_blind_pattern_matches_a_line_as_it_matches_its_template(line: bytes) -> None:
    """Each digit-blind pattern matches a line exactly where it matches the line's template, with the same groups
    taking part at the same places."""
    for regex in _BLIND:
        a, b = regex.search(line), regex.search(template(line))
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert a.regs == b.regs


def test_every_profile_s_rule_sets_read_serving_lines_by_their_template() -> None:
    """The shipped profiles' literals and patterns tell no digit from another: every rule set reads a line's
    findings and counts by its template."""
    cat = catalogue()
    for engine in ENGINES:
        for settled in ("startup", "serving", "settled"):
            assert _rule_set(cat.profile(engine), settled).plans is not None, (engine, settled)


def test_lines_of_one_template_are_read_by_their_own_counts() -> None:
    """Decode lines of one template (the same but for their digits), tokens flowing then none with requests
    running, read a line a read: the hang is said as when every line is read whole, at the same line."""
    startup = b"".join(
        line
        for line in (
            b"[2025-09-12 07:20:00] server_args=ServerArgs(model_path='m')\n",
            b"[2025-09-12 07:20:30] The server is fired up and ready to roll!\n",
        )
    )
    lines = [
        b"[2025-09-12 07:27:%02d] Decode batch. #running-req: %d, #token: 484, token usage: 0.01, "
        b"gen throughput (token/s): %s, #queue-req: 0\n" % (s, r, t)
        for s, r, t in [
            (10, 3, b"5.62"),
            (11, 3, b"7.10"),
            (12, 3, b"0.00"),
            (13, 2, b"0.00"),
            (59, 2, b"0.00"),
        ]
    ]
    assert len({template(line) for line in lines}) == 1
    out = []
    for prefilter in (True, False):
        analyzer = Analyzer(load_engine("sglang"), hang_after=30.0, prefilter=prefilter)
        analyzer.feed(startup, 0.0)
        analyzer.caught_up(0.0)
        said = [(t.state, t.line) for n, line in enumerate(lines, 1) for t in analyzer.feed(line, float(n))]
        said += [(t.state, t.line) for t in analyzer.tick(10.0)]
        out.append((said, analyzer.state, analyzer.lifecycle.current.serving.since_at))
    assert out[0] == out[1]
    assert out[0][0] == [(State.STALLED, 7)]  # no token since 07:27:11 with 2 running, 48 s > 30 s
    assert out[0][2] == "2025-09-12T07:27:11"


def test_a_line_longer_than_a_template_is_read_as_it_is_and_not_kept() -> None:
    """A line past `TEMPLATE_BYTES` (an argument dump, mostly one of a kind) is read as a short line is, and no
    cache keeps its template."""
    analyzer = Analyzer(load_engine("sglang"), hang_after=30.0)
    analyzer.feed(b"[2025-09-12 07:20:30] The server is fired up and ready to roll!\n", 0.0)
    analyzer.caught_up(0.0)
    plans = analyzer._rules.plans
    assert plans is not None
    pad = b"x" * TEMPLATE_BYTES
    long = (
        b"[2025-09-12 07:27:10] Decode batch. #running-req: 3, #token: 484, "
        + pad
        + b", gen throughput (token/s): 0.00, #queue-req: 0\n"
    )
    short = long.replace(pad, b"token usage: 0.01")
    analyzer.feed(long, 1.0)
    assert template(long) not in plans
    assert analyzer.lifecycle.current.serving.since_at == "2025-09-12T07:27:10"  # read: 3 running, no token
    short = short.replace(b"07:27:10", b"07:27:11")
    analyzer.feed(short, 2.0)
    assert template(short) in plans


@pytest.mark.parametrize(
    ("text", "holds"),
    [(" TP0] ", True), (b":11434", True), ("Avg prompt throughput", False), ("°C ٣", False), (b"", False)],
)
def test_a_literal_holds_a_digit_only_where_it_holds_an_ascii_digit(text: bytes | str, holds: bool) -> None:
    """Which literals tell one line of a template from another (the analyzer's and the detector's markers with
    digits): those with an ASCII digit; a non-ASCII digit is kept by `template`, so it does not."""
    assert has_digit(text) is holds


_SHIFTED = bytes.maketrans(b"0123456789", b"3456789012")
_FIXTURES = Path(__file__).parent / "fixtures"


def test_what_clean_and_unglue_look_for_is_digit_blind() -> None:
    """The regexes `clean` and `unglue` search a line with find in it what they find in its template (`_plain`
    vouches for a line by its template on that ground)."""
    for pattern in (
        framing._SGR_TAIL,
        envelope._GLUE,
        envelope._GLUE_BRACKET,
        envelope._GLUE_DATE,
        envelope._GLUE_LEVEL,
    ):
        assert digit_blind(pattern.pattern), pattern.pattern


def test_a_template_vouched_plain_reads_each_of_its_lines_as_its_bytes_decoded() -> None:
    """Every fixture line whose template `_plain` vouches for (and the same line with its digits shifted, of the
    same template) is cleaned to its bytes decoded and is one record to `unglue`; most lines of a log are so. A
    line read in a block asks by its template kept (`_plain_line`, for a line shorter than a kept template): the
    same answer, the second time from what it kept."""
    vouched = seen = 0
    for log in sorted(p for p in _FIXTURES.rglob("*.log") if "heldout" not in p.relative_to(_FIXTURES).parts):
        for line in log.read_bytes().split(b"\n"):
            seen += 1
            plain = _plain(template(line))
            if len(line) < TEMPLATE_BYTES:
                assert _plain_line(line) == _plain_line(line.translate(_SHIFTED)) == plain, line
            if not plain:
                continue
            vouched += 1
            for each in (line, line.translate(_SHIFTED)):
                text = each.decode("ascii")
                assert clean(each) == text, each
                assert unglue(text) == [text], each
    assert vouched > seen // 2, (vouched, seen)


@pytest.mark.parametrize("line", [b"x #033M y", b"[2025-01-23 19:35:14] #033[K ready"])
def test_syslog_s_escape_is_not_vouched_for_by_its_template(line: bytes) -> None:
    """Syslog's octal ESC ("#033") is what `clean` looks for with digits in it: its template ("#000") tells it not
    from other digits, so no line that may hold it is vouched plain, though `clean` changes it."""
    assert clean(line) != line.decode("ascii")
    assert not _plain(template(line))
