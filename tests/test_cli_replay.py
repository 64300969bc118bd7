"""`watchdog replay`: exit codes, JSON shape, and bad input that never shows the user a traceback."""

from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from watchdog.cli.app import main
from watchdog.follow.replay import replay_path

ROOT = Path(__file__).parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
CRASHED = CORPUS / "vllm" / "vllm-kv-cache-no-memory-compose-issue10439.log"
INCOMPLETE = CORPUS / "vllm" / "vllm-v1-incomplete-starting-qwen3vl-issue27466.log"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        pytest.param(READY, 0, id="ready"),
        pytest.param(CRASHED, 1, id="crashed"),
        pytest.param(INCOMPLETE, 3, id="no-verdict"),
    ],
)
def test_exit_codes(path: Path, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    """0 ready, 1 crashed, 3 no verdict."""
    assert main(["replay", str(path), "--json"]) == code
    capsys.readouterr()


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints one object with the keys of DESIGN.md."""
    main(["replay", str(CRASHED), "--json"])
    v = json.loads(capsys.readouterr().out)
    assert {
        "engine",
        "state",
        "phase",
        "error",
        "timeline",
        "progress",
        "facts",
        "lines_read",
        "bytes_read",
    } <= set(v)
    assert set(v["error"]) >= {"category", "summary", "exception", "hint", "ranks", "line", "traceback"}
    assert v["error"]["category"] == "oom"
    assert v["timeline"][0]["state"] == "starting"


def test_human_output_has_root_cause_and_hint(capsys: pytest.CaptureFixture[str]) -> None:
    """The text output names the error, the hint and the whole traceback."""
    main(["replay", str(CRASHED)])
    out = capsys.readouterr().out
    assert "error [oom]" in out
    assert "hint: raise --gpu-memory-utilization" in out
    assert "raise_if_cache_size_invalid" in out


def test_missing_file_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing file exits 64 with a message that names it."""
    assert main(["replay", str(tmp_path / "nope.log")]) == 64
    assert "nope.log: no such file" in capsys.readouterr().err


def test_bad_option_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown option is a usage error (64), not argparse's 2 (which means stalled here)."""
    with pytest.raises(SystemExit) as exc:
        main(["replay", str(READY), "--no-such-option"])
    assert exc.value.code == 64
    capsys.readouterr()


def test_unknown_engine_is_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An engine no bundled profile and no --profile file names exits 78, and the message says what is allowed."""
    assert main(["replay", str(READY), "--engine", "nope"]) == 78
    err = capsys.readouterr().err
    assert "unknown engine 'nope'" in err
    assert "sglang" in err
    assert "--profile file's `name`" in err


def test_bad_profile_is_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A broken user profile exits 78 and names the file and key path."""
    prof = tmp_path / "mine.toml"
    prof.write_text('extends = "sglang"\n[[phase]]\nmatch = "step 3 done"\nstate = "starting"\n')
    assert main(["replay", str(READY), "--engine", "sglang", "--profile", str(prof)]) == 78
    assert "mine.toml: phase[0].match: may not contain digits" in capsys.readouterr().err


def test_user_profile_adds_a_ready_marker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A user profile file, without code, makes a custom line the ready marker."""
    log = tmp_path / "srv.log"
    log.write_text("boot\nmy server: all shards warm, serving\n")
    prof = tmp_path / "mine.toml"
    prof.write_text('extends = "generic"\n[[ready]]\nmatch = "all shards warm, serving"\n')
    assert main(["replay", str(log), "--engine", "generic", "--profile", str(prof)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(bytes(range(256)) * 400, id="binary-garbage"),
        pytest.param(b"\x00" * 100_000 + b"\nTraceback\x00 (most\x00\n", id="nul-bytes"),
        pytest.param(b"\xff\xfe\xfd invalid utf-8 \xc3\x28 line\n" * 50, id="invalid-utf8"),
    ],
)
def test_bad_bytes_give_a_verdict_not_a_traceback(tmp_path: Path, content: bytes) -> None:
    """Garbage, NUL bytes, bad UTF-8 and an empty file give exit 3 and a normal report on stdout."""
    log = tmp_path / "bad.log"
    log.write_bytes(content)
    proc = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "replay", str(log)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "no verdict" in proc.stdout


def test_hundred_megabyte_line_is_cut_not_buffered(tmp_path: Path) -> None:
    """A 100 MB line with no newline replays in bounded memory and counts every byte."""
    log = tmp_path / "huge.log"
    with log.open("wb") as f:
        f.write(b"[2025-01-01 00:00:00] server_args=ServerArgs(model_path='x')\n")
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            f.write(chunk)
    # The peak RSS of the child's own memory (VmHWM): not getrusage's ru_maxrss, which Linux carries over
    # exec from the parent's memory (a pytest process of 150 MB made this child look 150 MB).
    code = (
        "import sys; from pathlib import Path; from watchdog.follow.replay import replay_path; "
        "_, v = replay_path(Path(sys.argv[1])); "
        "hwm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')); "
        "print(v.bytes_read, v.lines_read, hwm)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(log)], capture_output=True, text=True, check=True
    ).stdout
    bytes_read, lines, rss_kib = (int(x) for x in out.split())
    assert bytes_read == log.stat().st_size
    assert lines == 2
    assert rss_kib < 150 * 1024


def test_example_replays_the_bundled_oom_log(capsys: pytest.CaptureFixture[str]) -> None:
    """`replay --example` replays the log shipped in the package: exit 1, OOM on 4 of the 8 EP ranks."""
    assert main(["replay", "--example"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("sglang-ep8-oom.log: sglang crashed during allocating_kv_cache")
    assert "error [oom] on ranks TP1, TP3, TP5, TP6" in out
    assert "hint: raise --mem-fraction-static" in out


def test_example_ships_inside_the_package() -> None:
    """The example is a data file of the `watchdog` package (so the wheel has it), the same as examples/'s."""
    bundled = resources.files("watchdog") / "examples" / "sglang-ep8-oom.log"
    assert bundled.is_file()
    assert bundled.read_bytes() == (ROOT / "examples" / "sglang-ep8-oom.log").read_bytes()


def test_a_count_fact_is_an_integer_in_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    """The KV cache's token count is a count: 2261377 in JSON and in text (it was 2261377.0 and 2.26138e+06)."""
    log = CORPUS / "sglang" / "incomplete-uvicorn-up-warmup-pending-pr11830.log"
    main(["replay", str(log), "--json"])
    facts = json.loads(capsys.readouterr().out)["facts"]
    assert facts["kv_cache_tokens"] == 2261377
    assert isinstance(facts["kv_cache_tokens"], int)
    main(["replay", str(log)])
    assert "kv_cache_tokens=2261377" in capsys.readouterr().out


def _shifted(first: str, rest: str) -> str:
    """The SGLang ready log with its first line's time written as `first` and the others' date as `rest`."""
    lines = READY.read_text(encoding="utf-8").splitlines(keepends=True)
    head = lines[0].replace("[2025-01-23 19:34:55]", first)
    return head + "".join(line.replace("[2025-01-23 ", f"[{rest} ") for line in lines[1:])


@pytest.mark.parametrize(
    ("first", "rest"),
    [
        pytest.param("[1995-01-23 19:34:55]", "2025-01-23", id="decades-apart"),
        pytest.param("[2025-01-23 21:34:55]", "2025-01-23", id="first-line-2h-ahead"),
        pytest.param("[2025-01-23T19:34:55-07:00]", "2025-01-23", id="an-offset-then-local-time"),
    ],
)
def test_durations_from_off_clocks_are_never_negative_nor_decades(
    tmp_path: Path, first: str, rest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log whose times jump (a line decades back, one hours ahead, an offset on one line only): no phase
    lasts a negative time or years, time to ready is unknown rather than -7200 s, and the text never says
    "ready after -"."""
    log = tmp_path / "off.log"
    log.write_text(_shifted(first, rest), encoding="utf-8")
    assert main(["replay", str(log), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    durations = [e["duration_seconds"] for e in v["timeline"] if "duration_seconds" in e]
    assert all(0 <= d <= 31 * 86400 for d in durations), durations
    ttr = v.get("time_to_ready_seconds")
    assert ttr is None or 0 <= ttr < 3600, ttr
    main(["replay", str(log)])
    assert "after -" not in capsys.readouterr().out


def test_a_transport_clock_in_utc_around_a_program_clock_with_an_offset_gives_no_timezone_jump(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An Ollama log read with `docker logs -t` (each line stamped in UTC, "Z") whose own lines say "-07:00" and
    whose runner's lines have no time of their own: every phase lasts the second it took, not 7 hours."""
    log = tmp_path / "ollama.log"
    log.write_text(
        '2025-01-27T00:48:20.000000000Z time=2025-01-26T17:48:20.000-07:00 level=INFO source=routes.go:1187 msg="server config" env="map[]"\n'
        "2025-01-27T00:48:21.000000000Z llm_load_tensors: offloading 32 repeating layers to GPU\n"
        '2025-01-27T00:48:22.000000000Z time=2025-01-26T17:48:22.000-07:00 level=INFO source=routes.go:1238 msg="Listening on 127.0.0.1:11434 (version 0.5.7)"\n',
        encoding="utf-8",
    )
    assert main(["replay", str(log), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert [(e["state"], e.get("duration_seconds")) for e in v["timeline"]] == [
        ("starting", 1.0),
        ("loading_weights", 1.0),
        ("ready", None),
    ]
    assert v["time_to_ready_seconds"] == 2.0
    main(["replay", str(log)])
    assert "7h00m" not in capsys.readouterr().out


def _doc_profile(tmp_path: Path) -> Path:
    # docs/profiles.md's new-engine example, word for word
    doc = (ROOT / "docs" / "profiles.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(# myengine\.toml\n.*?)```", doc, re.S)
    assert block is not None
    path = tmp_path / "myengine.toml"
    path.write_text(block.group(1), encoding="utf-8")
    return path


_MYENGINE_LOG = (
    "MyEngine v1.4 starting on myengine.server:8000\n"
    "loading checkpoint /models/m\n"
    "loaded shard 1 of 2\n"
    "loaded shard 2 of 2\n"
    "KV cache: 81920 tokens, 10.0 GiB\n"
)


@pytest.mark.parametrize("engine", [["--engine", "myengine"], []], ids=["named", "detected"])
def test_the_documented_user_engine_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: list[str]
) -> None:
    """docs/profiles.md's new engine, given with --profile (and named with --engine, or detected by its markers),
    reads a log of it: its phases, progress, facts, ready line and fatal error line."""
    profile = _doc_profile(tmp_path)
    ready, crash = tmp_path / "ready.log", tmp_path / "crash.log"
    ready.write_text(_MYENGINE_LOG + "serving on http://0.0.0.0:8000\n", encoding="utf-8")
    crash.write_text(_MYENGINE_LOG + "engine halted: device lost\n", encoding="utf-8")
    assert main(["replay", str(ready), *engine, "--profile", str(profile), "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["engine"], verdict["state"]) == ("myengine", "ready")
    assert verdict["progress"]["weights"] == {"done": 2, "total": 2}
    assert verdict["facts"]["kv_cache_tokens"] == 81920
    assert main(["replay", str(crash), *engine, "--profile", str(profile), "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["state"], verdict["phase"]) == ("crashed", "loading_weights")
    assert verdict["error"]["summary"] == "engine halted: device lost"
    assert "--" not in verdict["error"]["hint"]  # the common hint: no other engine's flags


def test_a_user_engine_needs_its_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--engine with a user engine's name but without its --profile file is a configuration error (78)."""
    log = tmp_path / "x.log"
    log.write_text(_MYENGINE_LOG, encoding="utf-8")
    assert main(["replay", str(log), "--engine", "myengine"]) == 78
    assert "unknown engine 'myengine'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["cri-oom.log", "docker-json-file-oom.log", "journald-json-oom.log", "journald-short-iso-oom.log"]
)
def test_replay_of_a_log_stored_by_a_platform_prints_the_plain_logs_verdict(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`watchdog replay` of the bundled example as a CRI runtime, Docker's json-file driver or journald stored it
    exits 1 and prints the plain log's verdict: the phase, the oom category, the ranks and the message."""
    example = ROOT / "examples" / "sglang-ep8-oom.log"
    assert main(["replay", str(example), "--json"]) == 1
    plain = json.loads(capsys.readouterr().out)
    stored_path = ROOT / "tests" / "fixtures" / "formats" / name
    assert main(["replay", str(stored_path), "--json"]) == 1
    stored = json.loads(capsys.readouterr().out)
    assert (stored["state"], stored["phase"], stored["error"]) == (
        plain["state"],
        plain["phase"],
        plain["error"],
    )
    assert main(["replay", str(stored_path)]) == 1
    text = capsys.readouterr().out
    assert "sglang crashed during allocating_kv_cache" in text
    assert "error [oom] on ranks TP1, TP3, TP5, TP6 (line 53)" in text


@pytest.mark.parametrize(
    ("args", "code"), [pytest.param(["--json"], 1, id="json"), pytest.param([], 1, id="text")]
)
def test_the_programs_replay_ends_with_its_output_flushed_and_no_teardown(args: list[str], code: int) -> None:
    """The program's own replay (`main()` of the command line) prints its whole verdict into a pipe, exits with its
    code, and ends there: the interpreter's teardown (exit hooks, modules) is skipped."""
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('torn down', file=sys.stderr))\n"
        "from watchdog.cli import main\n"
        "sys.exit(main())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, "replay", str(CRASHED), *args], capture_output=True, check=False
    )
    assert proc.returncode == code
    assert b"torn down" not in proc.stderr
    returns = "import sys\nfrom watchdog.cli import main\nsys.exit(main(sys.argv[1:]))"
    inside = subprocess.run(
        [sys.executable, "-c", returns, "replay", str(CRASHED), *args],
        capture_output=True,
        check=False,
    )
    assert proc.stdout == inside.stdout  # as a caller's main([...]), which returns: the same output, whole
    assert proc.stdout.endswith(b"\n")


def test_the_programs_replay_runs_without_the_cycle_collector() -> None:
    """The program's own replay turns the cyclic garbage collector off (it makes no cycles: the test below); a
    caller's `main([...])` leaves it as it was."""
    script = (
        "import gc, sys\n"
        "from watchdog.cli import app\n"
        "end = app._exit_now\n"
        "app._exit_now = lambda code: (print(gc.isenabled(), file=sys.stderr), end(code))\n"
        "app.main(sys.argv[2:] if sys.argv[1] == 'caller' else None)\n"
        "print(gc.isenabled(), file=sys.stderr)\n"
    )
    own = subprocess.run(
        [sys.executable, "-c", script, "replay", str(CRASHED)], capture_output=True, check=False
    )
    assert own.returncode == 1
    assert own.stderr.split() == [b"False"]
    caller = subprocess.run(
        [sys.executable, "-c", script, "caller", "replay", str(CRASHED)], capture_output=True, check=False
    )
    assert caller.stderr.split() == [b"True"]


@pytest.mark.parametrize(
    "log",
    [
        pytest.param(p, id=str(p.relative_to(CORPUS.parent)))
        for folder in (CORPUS, CORPUS.parent / "cases")
        for p in sorted(folder.rglob("*.log"))
    ],
)
def test_a_replay_makes_no_reference_cycles(log: Path) -> None:
    """A replay's objects are all freed by their reference counts: the program's replay runs without the cycle
    collector, so a cycle made per line or per block would be memory never given back."""
    replay_path(log)  # the first: the caches of a process (profiles, compiled rules) filled
    gc.freeze()  # what the test process holds so far is not looked at: the collection below is the replay's
    gc.disable()
    try:
        replay_path(log)
        assert gc.collect() == 0
    finally:
        gc.enable()
        gc.unfreeze()
