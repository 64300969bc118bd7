"""After ready, on real logs: a crash needs evidence that the server stopped serving (its fatal path, its process
gone, its health check failing); a request's error is counted, teardown after a stop is no crash, and ready
lines are ones the server prints once it can serve (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import http_client
import pytest
from daemon_process import DaemonProcess
from prometheus_client.parser import text_string_to_metric_families

from watchdog.core.analyzer import Analyzer
from watchdog.core.findings import HealthChecked, ProcessExited
from watchdog.core.lifecycle import LAST_REQUEST_ERROR, REQUEST_ERRORS, State
from watchdog.core.verdict import build_verdict
from watchdog.follow.replay import replay_path
from watchdog.follow.testing import follow_at_pace
from watchdog.profiles.loader import load_engine

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def _replay(case: str) -> dict[str, object]:
    return replay_path(CORPUS / f"{case}.log")[1].to_json()


def _times(case: str) -> list[float]:
    return [float(t) for t in (CORPUS / f"{case}.timing").read_text(encoding="utf-8").split()]


def test_sglang_warmup_crash_after_a_prefill_is_a_warmup_crash() -> None:
    """SGLang's warm-up request failing (its `_execute_server_warmup` traceback) is a crash in the warm-up
    (capturing_graphs), never after ready, though a Prefill batch line came before it."""
    v = _replay("sglang/sglang-warmup-502-assert-after-prefill-killed-issue16855")
    assert (v["state"], v["phase"]) == ("crashed", "capturing_graphs")


@pytest.mark.parametrize(
    "case",
    [
        "ollama/ollama-0.15.2-runner-terminated-exit-status-2-post-predict-eof-macos-issue14093",
        "ollama/ollama-0.18.1-runner-died-at-chat-register-dump-post-predict-eof-macos-issue14983",
    ],
)
def test_ollama_runner_dying_under_a_request_is_a_crash_after_ready(case: str) -> None:
    """Ollama's runner dying while it serves (`llama runner terminated`, `post predict ... EOF`) is a crash
    after ready, though the request is answered 500 after it."""
    v = _replay(case)
    assert (v["state"], v["phase"]) == ("crashed", "ready")


def test_llamacpp_stop_after_ready_is_stopped() -> None:
    """llama.cpp's `cleaning up before exit` after ready is the operator's stop: stopped, not ready for ever."""
    v = _replay("llamacpp/captured-llamacpp-sigterm-after-ready-cpu")
    assert (v["state"], v["phase"]) == ("stopped", "ready")


def test_teardown_abort_after_the_stop_is_no_crash() -> None:
    """What a stopped llama-server prints while it frees itself (a second Ctrl-C, then a GGML_ASSERT in a
    destructor and the abort) after the stop line of a real launch is teardown noise, not a crash."""
    log = (CORPUS / "llamacpp/captured-llamacpp-sigterm-after-ready-cpu.log").read_bytes()
    analyzer = Analyzer(load_engine("llamacpp"))
    analyzer.feed(log, now=1.0)
    analyzer.feed(
        b"Received second interrupt, terminating immediately.\n"
        b"/llama.cpp/ggml/src/ggml-backend.cpp:123: GGML_ASSERT(buf) failed\n"
        b"Aborted (core dumped)\n",
        now=2.0,
    )
    analyzer.finish(now=3.0)
    assert analyzer.state == State.STOPPED


def test_cleaning_up_before_a_failed_start_is_no_stop() -> None:
    """The same `cleaning up before exit` printed on the way out of a failed start (before `exiting due to model
    loading error`) is no stop: the launch crashed."""
    v = _replay("llamacpp/captured-llamacpp-model-bad-magic-cpu")
    assert v["state"] == "crashed"


@pytest.mark.parametrize(
    "case", sorted(p.stem for p in (CORPUS / "vllm").glob("captured-vllm-ready*.log")), ids=str
)
def test_vllm_ready_waits_for_the_port(case: str) -> None:
    """Followed at its pace, a vLLM launch is called ready no earlier than Uvicorn's `Application startup
    complete` (the port accepts then), not at `Supported tasks` a second before it."""
    log = (CORPUS / "vllm" / f"{case}.log").read_bytes()
    times = _times(f"vllm/{case}")
    lines = log.decode().split("\n")
    up = next((i for i, line in enumerate(lines) if "Application startup complete" in line), None)
    if up is None:
        pytest.skip("no Uvicorn startup line in this capture")
    run = anyio.run(follow_at_pace, log, times)
    assert run.verdict is not None
    assert run.verdict["state"] == "ready"
    assert run.first_at is not None
    assert run.first_at >= times[up]


def test_health_failing_after_an_error_after_ready_is_a_crash() -> None:
    """An error after ready that nothing served on is decided by the health check: failing, a crash; the
    health probe is wanted only then."""
    log = CORPUS / "ollama/ollama-0.16.1-ready-cpu-rpi5-runner-started-then-500-request-timeouts-josheeg.log"
    analyzer = Analyzer(load_engine("ollama"))
    analyzer.feed(log.read_bytes(), now=1.0)
    lc = analyzer.lifecycle
    assert lc.state == State.READY
    assert not lc.wants_health()
    error = (
        b'time=2026-01-01T00:00:00.000Z level=ERROR source=x.go:1 msg="x" error="CUDA error: out of memory"\n'
    )
    analyzer.feed(error, now=2.0)
    if lc.current.pending_since is None:
        pytest.skip("the line was not read as an error")
    assert lc.wants_health()
    analyzer.probe(HealthChecked(None), now=3.0)
    assert lc.state == State.CRASHED
    assert build_verdict(analyzer).to_json()["phase"] == "ready"


def test_request_error_facts_are_named_once() -> None:
    """The facts of request errors have one name each (the verdict, /status and the metrics read them)."""
    assert (REQUEST_ERRORS, LAST_REQUEST_ERROR) == ("request_errors", "last_request_error")
    assert json.dumps({REQUEST_ERRORS: 1})


LOGIT_BIAS = "llamacpp/captured-llamacpp-python-logit-bias-request-error-served-on-cpu"


def test_request_error_served_on_is_counted_not_a_crash() -> None:
    """llama-cpp-python's server raising in one request's sampler (five IndexError tracebacks after ready), then
    answering it and the next requests 200, was ready all along: the error is one request's, counted."""
    v = _replay(LOGIT_BIAS)
    assert (v["state"], v["phase"], v["error"]) == ("stopped", "ready", None)
    facts = v["facts"]
    assert isinstance(facts, dict)
    assert facts[REQUEST_ERRORS] == 1
    assert str(facts[LAST_REQUEST_ERROR]).startswith("IndexError: index 999999 is out of bounds")


def test_ignored_exceptions_of_two_requests_are_two_request_errors(tmp_path: Path) -> None:
    """The same launch with its sampler's ignored tracebacks (CPython's 'Exception ignored on calling ctypes callback
    function', printed and ignored) printed again under a second request, after the first one was answered 200: two
    runs of them, two request errors, still no crash (a run of them is one request's, one per token)."""
    lines = (CORPUS / f"{LOGIT_BIAS}.log").read_bytes().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith(b"Exception ignored on calling ctypes"))
    answered = next(i for i, line in enumerate(lines) if b'"POST /v1/completions HTTP/1.1" 200' in line)
    log = tmp_path / "two-requests.log"
    log.write_bytes(b"".join([*lines[: answered + 1], *lines[first:answered], *lines[answered:]]))
    v = replay_path(log)[1].to_json()
    assert (v["state"], v["phase"], v["error"]) == ("stopped", "ready", None)
    facts = v["facts"]
    assert isinstance(facts, dict)
    assert facts[REQUEST_ERRORS] == 2


def test_request_error_followed_live_is_no_crash() -> None:
    """Followed live at its recorded pace, the same launch is said ready once, and never crashed."""
    run = anyio.run(follow_at_pace, (CORPUS / f"{LOGIT_BIAS}.log").read_bytes(), _times(LOGIT_BIAS))
    assert run.verdict is not None
    assert run.verdict["state"] == "ready"
    assert run.status["state"] == "stopped"
    assert run.status["facts"][REQUEST_ERRORS] == 1


def test_llama_cpp_python_is_ready_only_once_uvicorn_listens() -> None:
    """llama-cpp-python's server is ready at Uvicorn's `Uvicorn running on`, not at `Application startup
    complete` (printed before the bind): an unresolvable --host after it is a config crash before ready."""
    v = _replay("llamacpp/captured-llamacpp-python-host-unresolvable-cpu")
    error = v["error"]
    assert isinstance(error, dict)
    assert (v["state"], v["phase"], error["category"]) == ("crashed", "allocating_kv_cache", "config")
    assert "ready" not in [t["state"] for t in v["timeline"]]  # type: ignore[index, union-attr]


def test_daemon_counts_request_errors_in_its_metrics(tmp_path: Path) -> None:
    """A running daemon that follows the launch serves `watchdog_request_errors_total{launch,host}` of the
    errors its server served on, and never counts them as crashes."""
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / f"{LOGIT_BIAS}.log").read_bytes())  # the launch's whole log, as it wrote it
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\n\n'
        f'[launches.lcp]\nlog = "{log}"\nengine = "llamacpp"\n'
    )
    daemon = DaemonProcess(config, deadline=30.0)
    try:
        url = daemon.wait(event="http_listening")["url"]
        daemon.wait(event="transition", launch="lcp", state="stopped")
        text = http_client.get(url + "metrics", timeout=30.0).text
        daemon.stop()
    finally:
        daemon.close()
    samples = {
        (s.name, s.labels.get("launch"), s.labels.get("category")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("watchdog_request_errors_total", "lcp", None)] == 1
    assert not [k for k in samples if k[0] == "watchdog_crashes_total" and k[1] == "lcp"]


def test_unknown_python_server_is_ready_when_uvicorn_listens() -> None:
    """A Python server whose log holds only Uvicorn's lines (llama-cpp-python run quiet) is read as generic:
    ready, followed live, no earlier than `Uvicorn running on`, and stopped at Uvicorn's `Finished server process`
    after it served."""
    case = "llamacpp/captured-llamacpp-python-quiet-ready-cpu"
    log = (CORPUS / f"{case}.log").read_bytes()
    times = _times(case)
    listening = next(i for i, line in enumerate(log.decode().split("\n")) if "Uvicorn running on" in line)
    run = anyio.run(follow_at_pace, log, times)
    assert run.verdict is not None
    assert (run.verdict["engine"], run.verdict["state"]) == ("generic", "ready")
    assert run.first_at is not None
    assert run.first_at >= times[listening]
    assert run.status["state"] == "stopped"


def _watched_to_its_end(case: str) -> dict[str, object]:
    """The verdict on a captured launch read whole, then its process's end as the capture recorded it."""
    label = json.loads((CORPUS / f"{case}.json").read_text(encoding="utf-8"))["captured"]
    analyzer = Analyzer(load_engine(None))
    analyzer.feed((CORPUS / f"{case}.log").read_bytes(), now=1.0)
    analyzer.caught_up(now=1.0)
    how = f"killed by {label['signal']}" if label["signal"] else f"exit status {label['exit']}"
    analyzer.probe(ProcessExited(how), now=2.0)
    return build_verdict(analyzer).to_json()


@pytest.mark.parametrize(
    "case",
    [
        "llamacpp/captured-llamacpp-sigint-twice-after-ready-cpu",  # std::terminate in a destructor, SIGABRT
        "llamacpp/captured-llamacpp-sigint-twice-busy-cpu",  # decoding when exit(1) ran: SIGSEGV
        "llamacpp/captured-llamacpp-early2025-sigint-twice-busy-cpu",  # exit status 1
    ],
)
def test_second_ctrl_c_teardown_of_a_real_ready_server_is_no_crash(case: str) -> None:
    """A ready llama-server stopped by Ctrl-C twice (`Received second interrupt, terminating immediately`, then
    exit(1) whose destructors abort or crash beside the shutdown) is the operator's stop: ready when followed
    live, stopped at the end, and no crash with the process's death by its signal watched."""
    run = anyio.run(follow_at_pace, (CORPUS / f"{case}.log").read_bytes(), _times(case))
    assert run.verdict is not None
    assert (run.verdict["state"], run.status["state"], run.status["phase"]) == ("ready", "stopped", "ready")
    v = _watched_to_its_end(case)
    assert (v["state"], v["phase"], v["error"]) == ("stopped", "ready", None)


@pytest.mark.parametrize(
    "case",
    [
        "llamacpp/captured-llamacpp-early2025-sigterm-after-ready-cpu",
        "llamacpp/captured-llamacpp-early2025-sigint-after-ready-cpu",
    ],
)
def test_early_2025_llamacpp_sigabrt_at_a_clean_stop_is_no_kill(case: str) -> None:
    """llama.cpp of March 2025 ends every exit in `terminate called without an active exception` and SIGABRT:
    after the operator's SIGTERM or Ctrl-C of a ready server (a real launch), the process watched dying by
    SIGABRT is a stop, neither a crash nor a kill (for memory or otherwise)."""
    v = _watched_to_its_end(case)
    assert (v["state"], v["phase"], v["error"]) == ("stopped", "ready", None)
