"""The literal pass: a line read whole is matched only with the rules whose literal it holds (Hyperscan finds
them), and a serving line the prefilter passed over is read by the serving rules alone."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.core.analyzer import _rule_set
from watchdog.core.envelope import parse, unglue
from watchdog.core.framing import clean
from watchdog.core.prefilter import ENGINE, Literals
from watchdog.core.scanner import Scanner
from watchdog.profiles.loader import ENGINES, load_profile
from watchdog.vocabulary import State

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted(p for p in FIXTURES.rglob("*.log") if "heldout" not in p.relative_to(FIXTURES).parts)
LITERALS = ("ab", "b", "Error", "é", "()", "batch. #")


def _hyperscan() -> None:
    if ENGINE != "hyperscan":
        if os.environ.get("WATCHDOG_REQUIRE_HYPERSCAN") == "1":
            pytest.fail("WATCHDOG_REQUIRE_HYPERSCAN=1 but hyperscan cannot be imported")
        pytest.skip("hyperscan is not installed here: the rules are looked at one by one")


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="abErorx()é. #\n", max_size=40))
def test_the_literals_found_are_those_the_text_holds(text: str) -> None:
    """Each literal the text holds is found once, and no other (a non-ASCII one too: its UTF-8 bytes)."""
    _hyperscan()
    found = Literals(LITERALS).found(text)
    assert found is not None
    assert sorted(found) == [i for i, literal in enumerate(LITERALS) if literal in text]


def test_literals_pickle_as_what_they_are_made_of() -> None:
    """A pickled set of literals (an analyzer's checkpoint carries its scanner) finds what the original finds."""
    literals = Literals(LITERALS)
    again = pickle.loads(pickle.dumps(literals))
    assert again.engine == literals.engine
    assert again.found("xx Error ab") == literals.found("xx Error ab")


def test_without_hyperscan_nothing_is_ruled_out() -> None:
    """The regex engine names no literal: the scanner then looks at every rule's, as before."""
    assert Literals(LITERALS, engine="re").found("ab") is None


def _records(log: Path) -> list[tuple[bytes, str]]:
    out = []
    for raw in log.read_bytes().split(b"\n"):
        if b"\r" in raw or not raw.isascii():
            continue
        text = clean(raw)
        out += [(raw, piece) for piece in unglue(text)]
    return out


def _logs_of(engine: str) -> list[Path]:
    # the engine's corpus logs, and the other fixture folders' (formats, stories, serving) for the generic profile
    return [p for p in LOGS if p.parent.name == engine or (engine == "generic" and p.parts[-3] != "corpus")]


@pytest.mark.parametrize("engine", [e for e in ENGINES if _logs_of(e)])
def test_the_literal_pass_matches_as_every_rule_looked_at(engine: str) -> None:
    """On every fixture line of the engine, a scanner that matches only the rules whose literal the line holds
    gives the events (and the state) of one that looks at every rule, with each rule set of the engine."""
    _hyperscan()
    profile = load_profile(engine)
    records = [parse(piece) for log in _logs_of(engine) for _, piece in _records(log)]
    for settled in ("startup", "serving", "settled"):
        rules = _rule_set(profile, settled).rules
        fast, slow = Scanner(), Scanner(literal_pass=False)
        for scanner in (fast, slow):
            scanner.profile, scanner.benign, scanner.rules = profile, profile.rules_of("benign"), rules
        for number, rec in enumerate(records, 1):
            assert fast.scan(rec, number, State.LOADING_WEIGHTS) == slow.scan(
                rec, number, State.LOADING_WEIGHTS
            )
        assert (fast.last_relevant, fast.error_lines, fast.benign_lines) == (
            slow.last_relevant,
            slow.error_lines,
            slow.benign_lines,
        )


@pytest.mark.parametrize("engine", ["sglang", "vllm", "llamacpp", "tgi"])
def test_a_serving_line_passed_over_reads_as_every_rule_reads_it(engine: str) -> None:
    """A line that holds a serving rule's literal and no literal the prefilter looks for, read by the serving
    rules alone (`scan_serving`), gives the events and the state of `scan`, or is handed back to it."""
    profile = load_profile(engine)
    read = 0
    for settled in ("startup", "serving", "settled"):
        rule_set = _rule_set(profile, settled)
        if not rule_set.serving:
            continue
        lines = [
            (raw, piece)
            for log in _logs_of(engine)
            for raw, piece in _records(log)
            if any(match in raw for _, match, _ in rule_set.serving) and not rule_set.others.lines(raw)
        ]
        fast, slow = Scanner(), Scanner()
        for scanner in (fast, slow):
            scanner.profile, scanner.benign, scanner.rules = (
                profile,
                profile.rules_of("benign"),
                rule_set.rules,
            )
        for number, (_, piece) in enumerate(lines, 1):
            rec = parse(piece)
            events = fast.scan_serving(rec, number)
            if events is None:
                events = fast.scan(rec, number, State.READY)
            else:
                read += 1
            assert events == slow.scan(rec, number, State.READY)
            assert (fast.last_relevant, fast.error_lines, fast.reads_all) == (
                slow.last_relevant,
                slow.error_lines,
                slow.reads_all,
            )
    assert read or engine != "sglang"  # SGLang's batch lines: the serving rules alone read them
