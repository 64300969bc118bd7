"""Tests for watchdog.profiles.loader: bundled engine profiles, user profile validation, merging and engine detection."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.core.detection import EngineDetector, detect_engine
from watchdog.exceptions import ConfigError
from watchdog.profiles.loader import ENGINES, RULE_KINDS, catalogue, load_profile, load_profile_file


@pytest.mark.parametrize("engine", [pytest.param(e, id=e) for e in ENGINES])
def test_bundled_engine_loads(engine: str) -> None:
    """Every bundled engine profile loads, names itself, and has only known rule kinds with digit-free literals."""
    profile = load_profile(engine)
    assert profile.name == engine
    assert profile.rules
    assert {r.kind for r in profile.rules} <= set(RULE_KINDS)
    assert not any(ch.isdigit() for r in profile.rules for ch in r.match)
    assert f"watchdog/profiles/{engine}.toml" in profile.source


def test_unknown_engine_is_config_error() -> None:
    """An unknown engine name is a ConfigError that lists the allowed engines."""
    with pytest.raises(ConfigError, match=r"unknown engine 'nope'.*sglang"):
        load_profile("nope")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "key", "problem"),
    [
        pytest.param(
            '[[phase]]\nmatch = "Load weight 1"\nstate = "loading_weights"\n',
            "phase[0].match",
            "may not contain digits",
            id="digit-in-match",
        ),
        pytest.param('[[bogus]]\nmatch = "x"\n', "bogus", "unknown table", id="unknown-table"),
        pytest.param(
            '[[ready]]\nmatch = "ok"\n[[ready]]\nmatch = "up"\ncolour = "red"\n',
            "ready[1].colour",
            "unknown key",
            id="unknown-key",
        ),
        pytest.param(
            '[[error]]\nmatch = "x"\nregex = "("\n',
            "error[0].regex",
            "invalid regular expression",
            id="bad-regex",
        ),
        pytest.param(
            '[[phase]]\nmatch = "x"\nstate = "cooking"\n', "phase[0].state", "is not a phase", id="bad-state"
        ),
        pytest.param(
            '[[phase]]\nmatch = "x"\n', "phase[0].state", "required for a phase", id="phase-without-state"
        ),
        pytest.param(
            '[[progress]]\nmatch = "x"\nname = "weights"\nregex = "(?P<done>\\\\d+)"\n',
            "progress[0].regex",
            "needs named groups",
            id="progress-without-total",
        ),
        pytest.param(
            '[[progress]]\nmatch = "x"\nname = "weights"\n',
            "progress[0].regex",
            "needs named groups",
            id="progress-no-regex",
        ),
        pytest.param(
            '[[error]]\nmatch = "x"\ncategory = "weird"\n', "error[0].category", "unknown", id="bad-category"
        ),
        pytest.param('[[error]]\nmatch = "x"\nrole = "boss"\n', "error[0].role", "unknown", id="bad-role"),
        pytest.param('[[ready]]\nmatch = ""\n', "ready[0].match", "required", id="empty-match"),
        pytest.param('ready = "x"\n', "ready", "array of tables", id="not-an-array"),
        pytest.param(
            '[[phase]]\nmatch = "x"\nstate = "starting"\nearly = true\n',
            "phase[0].early",
            "only on a [[ready]] rule",
            id="early-not-on-ready",
        ),
        pytest.param(
            '[[error]]\nmatch = "x"\nconfirm_due = true\n',
            "error[0].confirm_due",
            "only on a [[ready]] rule",
            id="confirm-due-not-on-ready",
        ),
        pytest.param(
            '[[ready]]\nmatch = "x"\nconfirm_due = "yes"\n',
            "ready[0].confirm_due",
            "true or false",
            id="confirm-due-not-a-bool",
        ),
        pytest.param(
            '[[phase]]\nmatch = "x"\nstate = "starting"\nsurvivable = true\n',
            "phase[0].survivable",
            "only for an error rule that is not fatal",
            id="survivable-not-on-error",
        ),
        pytest.param(
            '[[error]]\nmatch = "x"\nfatal = true\nsurvivable = true\n',
            "error[0].survivable",
            "only for an error rule that is not fatal",
            id="survivable-and-fatal",
        ),
        pytest.param(
            '[[error]]\nmatch = "x"\nfatal = "starting"\nsurvivable = true\n',
            "error[0].survivable",
            "only for an error rule that is not fatal",
            id="survivable-and-fatal-while-starting",
        ),
        pytest.param(
            '[[error]]\nmatch = "x"\nfatal = "yes"\n',
            "error[0].fatal",
            'true, false, or "starting"',
            id="fatal-not-a-bool",
        ),
        pytest.param(
            '[[stop]]\nmatch = "x"\nfatal = "starting"\n',
            "stop[0].fatal",
            "only for an error rule",
            id="fatal-while-starting-not-on-error",
        ),
        pytest.param(
            '[[error]]\nmatch = "x"\nclean_exit = true\n',
            "error[0].clean_exit",
            "only for a dying rule",
            id="clean-exit-not-on-dying",
        ),
        pytest.param(
            '[[dying]]\nmatch = "x"\nclean_exit = "yes"\n',
            "dying[0].clean_exit",
            "true or false",
            id="clean-exit-not-a-bool",
        ),
        pytest.param(
            "early_health = true\nhealth_means_ready = true\n",
            "health_means_ready",
            "not with early_health",
            id="health-both-ways",
        ),
    ],
)
def test_invalid_user_profile(tmp_path: Path, body: str, key: str, problem: str) -> None:
    """Each invalid user profile raises a ConfigError naming the file and the key path."""
    path = _write(tmp_path, 'extends = "vllm"\n' + body)
    with pytest.raises(ConfigError) as info:
        load_profile_file(path)
    err = info.value
    assert (err.path, err.key) == (str(path), key)
    assert problem in err.problem
    assert str(err).startswith(f"{path}: {key}: ")


def test_profile_without_name(tmp_path: Path) -> None:
    """A profile with neither `name` nor `extends` is rejected at key `name`."""
    with pytest.raises(ConfigError) as info:
        load_profile_file(_write(tmp_path, '[[ready]]\nmatch = "x"\n'))
    assert info.value.key == "name"


def test_invalid_toml_names_file(tmp_path: Path) -> None:
    """Unparseable TOML is a ConfigError naming the file."""
    path = _write(tmp_path, "[[ready]\n")
    with pytest.raises(ConfigError, match="invalid TOML") as info:
        load_profile_file(path)
    assert info.value.path == str(path)


def test_missing_file_names_file(tmp_path: Path) -> None:
    """An unreadable profile file is a ConfigError naming the file."""
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match="cannot read profile") as info:
        load_profile_file(path)
    assert info.value.path == str(path)


def test_fatal_role_shorthand(tmp_path: Path) -> None:
    """`role = "fatal"` is a cause that ends the launch at once."""
    profile = load_profile_file(
        _write(tmp_path, 'extends = "vllm"\n[[error]]\nmatch = "boom"\nrole = "fatal"\n')
    )
    (rule,) = profile.rules
    assert (rule.role, rule.fatal) == ("cause", True)


def test_user_rules_extend_engine_and_come_first(tmp_path: Path) -> None:
    """User rules with `extends = "vllm"` are merged before the bundled rules, and their detect markers too."""
    path = _write(
        tmp_path,
        'extends = "vllm"\ndetect = ["my-wrapper"]\n[[ready]]\nmatch = "my server is up"\n',
    )
    bundled = load_profile("vllm")
    merged = load_profile("vllm", [path])
    assert (merged.rules[0].kind, merged.rules[0].match) == ("ready", "my server is up")
    assert merged.rules[1:] == bundled.rules
    assert merged.detect[0] == "my-wrapper"
    assert str(path) in merged.source


def test_user_rules_for_other_engine_not_merged(tmp_path: Path) -> None:
    """A user profile extending sglang adds nothing to vllm."""
    path = _write(tmp_path, 'extends = "sglang"\n[[ready]]\nmatch = "my server is up"\n')
    assert load_profile("vllm", [path]).rules == load_profile("vllm").rules


def test_rule_apply() -> None:
    """A rule matches on its literal, then returns its regex's named groups, or None when the regex misses."""
    profile = load_profile("ollama")
    (rule,) = [r for r in profile.rules_of("progress") if r.match == "model load progress"]
    assert rule.apply('"model load progress 0.18"') == {"percent": "18"}
    assert rule.apply("model load progress 1.00") is None
    assert rule.apply("unrelated") is None


@pytest.mark.parametrize(
    ("lines", "engine"),
    [
        pytest.param(["server_args=ServerArgs(model_path='x', tp_size=8)"], "sglang", id="sglang"),
        pytest.param(
            ["INFO 08-19 07:51:03 api_server.py:1] vLLM API server version 0.6.3"], "vllm", id="vllm"
        ),
        pytest.param(["hello world", "nothing to see"], None, id="unrelated"),
        pytest.param([], None, id="empty"),
        pytest.param(
            [
                "Aug 20 16:47:54 anubis gemma4.server[56265]: /snap/gemma4/components/252/llamacpp-rocm/lib/"
                "libllama-server-impl.so(_Z12llama_serveriPPc+0x2f0e)[0x7a7f35f3243e]",
                "Aug 20 16:47:54 anubis gemma4.server[56265]: llama-server(+0x1315)[0x5e5bf7c3a315]",
            ],
            "llamacpp",
            id="llamacpp-2026-server-library-in-a-backtrace",
        ),
        pytest.param(
            [
                "RuntimeError: CUDA error: operation failed due to a previous error during capture",
                "Error: Backend(Warmup(Generation(\"Unexpected <class 'RuntimeError'>: captures_underway.empty()\")))",
                "Error: WebserverFailed",
            ],
            "tgi",
            id="tgi-router-and-launcher-errors-alone",
        ),
    ],
)
def test_detect_engine(lines: list[str], engine: str | None) -> None:
    """detect_engine names the engine whose markers appear in the first lines, or None."""
    assert detect_engine(lines, catalogue()) == engine


def test_detect_engine_counts_markers() -> None:
    """An SGLang log with one vLLM-looking line is still SGLang: markers are counted, not first-hit."""
    lines = [
        "vLLM API server version 0.6.3",
        "server_args=ServerArgs(model_path='x')",
        "[2025-07-02 07:31:02 TP0] Load weight begin. avail mem=78.5 GB",
        "The server is fired up and ready to roll!",
    ]
    assert detect_engine(lines, catalogue()) == "sglang"


def test_detect_engine_user_markers(tmp_path: Path) -> None:
    """A user profile's detect markers take part in detection."""
    path = _write(tmp_path, 'extends = "tgi"\ndetect = ["acme-inference-gw"]\n[[ready]]\nmatch = "gw up"\n')
    assert detect_engine(["starting acme-inference-gw"], catalogue([load_profile_file(path)])) == "tgi"


# Lines that move detection: markers of two engines, in and out of traceback frames, chain markers, plain text.
_HEAD_LINES = st.sampled_from(
    [
        "server_args=ServerArgs(model_path='x')",
        "vLLM API server version 0.6.3",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/site-packages/vllm/model_executor/layers/linear.py", line 1, in f',
        '  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 9, in run',
        "    x = f()",
        "During handling of the above exception, another exception occurred:",
        "RuntimeError: boom",
        "",
        "hello world",
    ]
)


@settings(
    max_examples=200, deadline=None
)  # a property, not a timing: a loaded CI machine took 448 ms for one
@given(lines=st.lists(_HEAD_LINES, max_size=30))
def test_engine_detector_fed_line_by_line_agrees_with_detect_engine(lines: list[str]) -> None:
    """Asked after each line (and on a copy that tries one more), the incremental detector names what
    detect_engine names for the lines so far, so a growing head can be read once."""
    detector = EngineDetector(catalogue().markers)
    for i, line in enumerate(lines):
        trial = detector.copy()
        trial.feed(line)
        assert trial.engine() == detect_engine(lines[: i + 1], catalogue())
        assert detector.engine() == detect_engine(
            lines[:i], catalogue()
        )  # the copy left the original as it was
        detector.feed(line)
    assert detector.count == len(lines)
    assert detector.engine() == detect_engine(lines, catalogue())


def test_the_catalogue_merges_each_engine_once() -> None:
    """Every launch (and each relaunch) of an engine gets the same merged profile object: not a copy per launch
    (memory), and the analyzer's caches keyed by the profile find it by identity (issue 31)."""
    known = catalogue()
    assert known.profile("sglang") is known.profile("sglang")
    assert known.profile("vllm") is not known.profile("sglang")
    assert known.profile("sglang") == load_profile("sglang")


def test_an_error_rule_fatal_while_starting(tmp_path: Path) -> None:
    """`fatal = "starting"` makes an error rule fatal only while the launch starts: not `fatal`, but marked so."""
    profile = load_profile_file(
        _write(tmp_path, 'extends = "vllm"\n[[error]]\nmatch = "x"\nfatal = "starting"\n')
    )
    (rule,) = (r for r in profile.rules if r.kind == "error" and r.match == "x")
    assert (rule.fatal, rule.fatal_starting) == (False, True)
