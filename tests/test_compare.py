"""Comparison with the launch before (`watchdog.core.compare`): what changed between two incarnations, in the
verdict of `replay` (two launches in one log, or `--compare-with` a previous log), its text and its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from watchdog.cli.app import main
from watchdog.core.arguments import Argument
from watchdog.core.compare import ArgumentChange, Baseline, Changes, FactChange, PhaseChange, compare

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
# SGLang 0.4.1, ready: its `server_args=ServerArgs(...)` has mem_fraction_static=0.88 and random_seed=809822282
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"


def _arg(name: str, value: str) -> Argument:
    return Argument(name, "--" + name.replace("_", "-"), value)


def _relaunch(tmp_path: Path, *, also: tuple[tuple[bytes, bytes], ...] = ()) -> Path:
    """A log holding the ready launch, then its relaunch with --mem-fraction-static 0.92 (and `also` changed)."""
    first = READY.read_bytes()
    second = first.replace(b"mem_fraction_static=0.88", b"mem_fraction_static=0.92")
    for old, new in also:
        second = second.replace(old, new)
    path = tmp_path / "relaunch.log"
    path.write_bytes(first + second)
    return path


def test_compare_names_changed_added_and_removed_arguments() -> None:
    """Each argument that differs, was added or was removed is named, with its flag, in this launch's order;
    those alike are not."""
    before = Baseline(
        1, arguments=(_arg("tp_size", "8"), _arg("mem_fraction_static", "0.78"), _arg("old", "x"))
    )
    after = Baseline(
        2,
        arguments=(
            _arg("mem_fraction_static", "0.92"),
            _arg("tp_size", "8"),
            _arg("moe_a2a_backend", "flashinfer"),
        ),
    )
    changes = compare(before, after)
    assert changes.arguments == (
        ArgumentChange("mem_fraction_static", "--mem-fraction-static", "0.78", "0.92"),
        ArgumentChange("moe_a2a_backend", "--moe-a2a-backend", None, "flashinfer"),
        ArgumentChange("old", "--old", "x", None),
    )
    assert [c.text() for c in changes.arguments] == [
        "--mem-fraction-static 0.78 -> 0.92",
        "--moe-a2a-backend flashinfer added",
        "--old x removed",
    ]
    assert changes.since_incarnation == 1
    assert changes.compared_arguments


def test_volatile_arguments_and_object_addresses_are_not_changes() -> None:
    """A value that differs at every launch by nature (a profile's volatile argument, an object's address in
    a repr) is no change."""
    before = Baseline(1, arguments=(_arg("random_seed", "1"), _arg("hook", "<Hook object at 0x7f00aa>")))
    after = Baseline(2, arguments=(_arg("random_seed", "2"), _arg("hook", "<Hook object at 0x7f11bb>")))
    changes = compare(before, after, volatile=("random_seed",))
    assert changes.arguments == ()
    assert changes.compared_arguments
    assert compare(before, after).arguments == (ArgumentChange("random_seed", "--random-seed", "1", "2"),)


def test_a_relaunch_holding_the_same_arguments_leaves_the_remembered_comparisons_alone() -> None:
    """A relaunch with the same arguments (one tuple, as the lifecycle keeps it) has none changed, and takes no
    place among the comparisons remembered: a daemon's thousands of crash-looping launches do not push out the
    comparison of a launch whose arguments did change."""
    before = Baseline(1, arguments=(_arg("tp_size", "8"), _arg("mem_fraction_static", "0.78")))
    after = Baseline(2, arguments=(_arg("tp_size", "8"), _arg("mem_fraction_static", "0.92")))
    found = compare(before, after).arguments
    assert [c.name for c in found] == ["mem_fraction_static"]
    for i in range(2000):
        same = (_arg("tp_size", "8"), _arg("port", str(30000 + i)))
        changes = compare(Baseline(1, arguments=same), Baseline(2, arguments=same))
        assert changes.compared_arguments
        assert changes.arguments == ()
    assert compare(before, after).arguments is found  # still remembered, not compared again


def test_arguments_are_not_compared_when_one_launch_showed_none() -> None:
    """A launch whose log showed no argument dump (warning level) is not taken as one with every argument
    removed."""
    changes = compare(Baseline(1, arguments=(_arg("tp_size", "8"),)), Baseline(2))
    assert changes.arguments == ()
    assert not changes.compared_arguments
    assert changes.summary() == ""


def test_phases_time_to_ready_and_memory_facts() -> None:
    """Each startup phase either went through is said before -> after (in phase order), time to ready when
    either was ready, and the memory facts both found that differ."""
    before = Baseline(
        3,
        phases=(("loading_weights", 250.0), ("starting", 10.0)),
        time_to_ready=662.0,
        facts=(("avail_mem_after_weights_gb", 16.3), ("kv_cache_tokens", 812345), ("note", "x")),
    )
    after = Baseline(
        4,
        phases=(("starting", 9.0), ("loading_weights", 125.0), ("capturing_graphs", 60.0)),
        time_to_ready=580.0,
        facts=(("avail_mem_after_weights_gb", 9.1), ("kv_cache_tokens", 812345), ("note", "y")),
    )
    changes = compare(before, after)
    assert changes.phases == (
        PhaseChange("starting", 10.0, 9.0),
        PhaseChange("loading_weights", 250.0, 125.0),
        PhaseChange("capturing_graphs", None, 60.0),
    )
    assert changes.time_to_ready == (662.0, 580.0)
    assert changes.facts == (FactChange("avail_mem_after_weights_gb", 16.3, 9.1),)
    assert changes.facts[0].text() == "avail_mem_after_weights_gb 16.3 GB -> 9.1 GB"
    assert changes.summary() == "changed since #3: time to ready 11m02s -> 9m40s"


def test_summary_names_a_few_arguments_then_how_many_more() -> None:
    """The one-line summary (alerts) names the first changed arguments and counts the rest."""
    before = Baseline(1, arguments=tuple(_arg(f"a{i}", "0") for i in range(5)))
    after = Baseline(2, arguments=tuple(_arg(f"a{i}", "1") for i in range(5)))
    assert (
        compare(before, after).summary()
        == "changed since #1: --a0 0 -> 1, --a1 0 -> 1, --a2 0 -> 1 and 2 more"
    )


def test_changes_json_reads_back() -> None:
    """The `changes` object reads back into the value it was written from (a stored verdict, for `history`)."""
    changes = Changes(
        7,
        arguments=(ArgumentChange("x", "--x", "", "1"),),
        phases=(PhaseChange("starting", 1.0, None),),
        time_to_ready=(None, 3.5),
        facts=(FactChange("kv_cache_tokens", 10, 20),),
        compared_arguments=True,
    )
    assert Changes.from_json(json.loads(json.dumps(changes.to_json()))) == changes
    with pytest.raises(ValueError, match="not a changes object"):
        Changes.from_json({"arguments": []})


def test_replay_of_a_relaunch_names_the_changed_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay --json` of a log with a launch and its relaunch with one changed flag says, for the relaunch,
    that flag before -> after and nothing else of its ~90 arguments (the random seed, new at every SGLang
    launch, not either), each phase before -> after, and time to ready."""
    log = _relaunch(tmp_path, also=((b"random_seed=809822282", b"random_seed=17"),))
    assert main(["replay", str(log), "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["incarnation"], verdict["incarnations"]) == (2, 2)
    changes = verdict["changes"]
    assert changes["since_incarnation"] == 1
    assert changes["arguments"] == [
        {"name": "mem_fraction_static", "flag": "--mem-fraction-static", "before": "0.88", "after": "0.92"}
    ]
    assert [p["phase"] for p in changes["phases"]] == [
        "starting",
        "loading_weights",
        "allocating_kv_cache",
        "capturing_graphs",
    ]
    assert all(p["before_seconds"] == p["after_seconds"] for p in changes["phases"])
    assert changes["time_to_ready"] == {"before_seconds": 38.0, "after_seconds": 38.0}
    assert "arguments" not in verdict  # the whole dump stays out of the verdict object


def test_replay_text_says_what_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text report of a relaunch has a block "changed since launch #1" naming the flag."""
    assert main(["replay", str(_relaunch(tmp_path))]) == 0
    out = capsys.readouterr().out
    block = out[out.index("changed since launch #1:") :]
    assert "  --mem-fraction-static 0.88 -> 0.92" in block
    assert "  time to ready 38s -> 38s" in block


def test_replay_compare_with_a_previous_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`replay NEW --compare-with OLD`: the new log's launch is numbered after the old one's and compared
    with it; a first launch (no --compare-with, one incarnation) has no `changes`."""
    new = tmp_path / "new.log"
    new.write_bytes(READY.read_bytes().replace(b"disable_cuda_graph=False", b"disable_cuda_graph=True"))
    assert main(["replay", str(new), "--json", "--compare-with", str(READY)]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["incarnation"] == 2
    assert verdict["changes"]["since_incarnation"] == 1
    assert verdict["changes"]["arguments"] == [
        {"name": "disable_cuda_graph", "flag": "--disable-cuda-graph", "before": "False", "after": "True"}
    ]
    assert main(["replay", str(READY), "--json"]) == 0
    assert "changes" not in json.loads(capsys.readouterr().out)


def test_watch_compare_with_a_previous_log(tmp_path: Path) -> None:
    """`watch NEW --compare-with OLD` follows NEW as launch #2 and its verdict names the flag changed since OLD."""
    new = tmp_path / "new.log"
    new.write_bytes(READY.read_bytes().replace(b"disable_cuda_graph=False", b"disable_cuda_graph=True"))
    done = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "watch", str(new), "--json", "--compare-with", str(READY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert (verdict["state"], verdict["incarnation"]) == ("ready", 2)
    assert [a["flag"] for a in verdict["changes"]["arguments"]] == ["--disable-cuda-graph"]


def test_a_verdict_without_changes_is_the_verdict_less_its_changes(tmp_path: Path) -> None:
    """`build_verdict(..., changes=False)` (what the state store keeps of a transition) is the whole verdict
    with no `changes`, and nothing else different."""
    from dataclasses import replace  # noqa: PLC0415

    from watchdog.core.analyzer import Analyzer  # noqa: PLC0415
    from watchdog.core.verdict import build_verdict  # noqa: PLC0415
    from watchdog.profiles.loader import load_engine  # noqa: PLC0415

    analyzer = Analyzer(load_engine(None))
    analyzer.feed(_relaunch(tmp_path).read_bytes(), 0.0)
    analyzer.finish(0.0)
    whole = build_verdict(analyzer)
    assert whole.changes is not None
    assert build_verdict(analyzer, changes=False) == replace(whole, changes=None)


def test_a_relaunch_is_compared_with_the_launch_before_as_it_is_now(tmp_path: Path) -> None:
    """A relaunch's verdict compares it with the launch before as that launch stands when the verdict is built:
    built again with nothing changed, it is the same verdict (the launch before's baseline is remembered, not
    made again); once the launch before changed (a fact read late, a timeline entry replaced), the changes say
    so, as a verdict built with nothing remembered does."""
    from dataclasses import replace  # noqa: PLC0415

    import watchdog.core.verdict as verdicts  # noqa: PLC0415
    from watchdog.core.analyzer import Analyzer  # noqa: PLC0415
    from watchdog.profiles.loader import load_engine  # noqa: PLC0415

    analyzer = Analyzer(load_engine(None))
    analyzer.feed(_relaunch(tmp_path).read_bytes(), 0.0)
    analyzer.finish(0.0)
    first = verdicts.build_verdict(analyzer)
    assert first.changes is not None
    assert first.changes.facts == ()
    assert verdicts.build_verdict(analyzer) == first

    [before] = [h for h in analyzer.lifecycle.history if h.number == 1]
    t, seconds = before.timeline[1]
    before.timeline[1] = (replace(t, now=t.now), None if seconds is None else seconds - 7.0)  # replaced
    replaced = verdicts.build_verdict(analyzer)
    assert replaced.changes is not None
    assert replaced.changes.phases != first.changes.phases
    tokens = before.facts["kv_cache_tokens"]
    assert isinstance(tokens, int | float)
    before.facts["kv_cache_tokens"] = tokens + 1000  # read late
    changed = verdicts.build_verdict(analyzer)
    assert changed.changes is not None
    assert [f.name for f in changed.changes.facts] == ["kv_cache_tokens"]
    verdicts._BASELINES.clear()
    assert changed == verdicts.build_verdict(analyzer)


def test_the_launch_befores_baseline_stays_remembered_however_many_launches(tmp_path: Path) -> None:
    """A daemon of many launches (a crash loop of 2,000) builds each launch's verdicts in turn: the baseline of
    each launch's incarnation before is made once and found again at its next verdict, whatever the number of
    launches; a verdict with changes leaves its own incarnation's baseline made for the next one; and what is
    remembered goes with the incarnations it was made of."""
    import gc  # noqa: PLC0415

    import watchdog.core.verdict as verdicts  # noqa: PLC0415
    from watchdog.core.analyzer import Analyzer  # noqa: PLC0415
    from watchdog.core.lifecycle import Incarnation  # noqa: PLC0415
    from watchdog.profiles.loader import load_engine  # noqa: PLC0415

    log = _relaunch(tmp_path).read_bytes()
    analyzers = []
    for _ in range(600):
        analyzer = Analyzer(load_engine(None))
        analyzer.feed(log, 0.0)
        analyzer.finish(0.0)
        analyzers.append(analyzer)
    verdicts._BASELINES.clear()

    def made(inc: Incarnation) -> Baseline:
        return verdicts.verdict_of(inc, engine=None, lines_read=0, bytes_read=0).baseline()

    first: list[tuple[Baseline, Baseline]] = []
    for analyzer in analyzers:
        [before] = analyzer.lifecycle.history
        now = analyzer.lifecycle.current
        verdict = verdicts.build_verdict(analyzer)
        assert verdict.changes is not None
        assert verdict.changes.since_incarnation == before.number
        assert id(now) in verdicts._BASELINES  # made by the verdict itself
        first.append((verdicts._baseline(before), verdicts._baseline(now)))
    for analyzer, (before_base, now_base) in zip(analyzers, first, strict=True):
        [before] = analyzer.lifecycle.history
        now = analyzer.lifecycle.current
        assert verdicts.build_verdict(analyzer).changes is not None
        assert verdicts._baseline(before) is before_base  # not made again, 599 launches later
        assert verdicts._baseline(now) is now_base  # its own verdicts found it made
        assert now_base == made(now)  # as it would be made anew
        assert before_base == made(before)

    keys = {
        id(inc) for analyzer in analyzers for inc in (*analyzer.lifecycle.history, analyzer.lifecycle.current)
    }
    assert keys <= set(verdicts._BASELINES)
    del analyzers, analyzer, before, now
    gc.collect()
    assert not keys & set(verdicts._BASELINES)
