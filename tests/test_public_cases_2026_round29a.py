"""What the twenty-ninth round's public logs of vLLM and its wrappers (production-stack, LMCache) showed (issue 30,
helper i30-cases29a), read from the engines' and libraries' own source and pinned on the real log that showed it
(tests/fixtures/corpus/vllm)."""

from __future__ import annotations

from pathlib import Path

import anyio
from publiccases import CORPUS, replay_text
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.follow.testing import follow_at_pace

# LMCache PR 2293 (2025-12): LMCache's connector shutdown around vLLM's 'Shutting down FastAPI HTTP server.'
_STOP = "vllm-2025-lmcache-connector-shutdown-offload-thread-timeout-warning-after-serving-pr2293"
# LMCache#1981 (2025-11): a worker's traceback through LMCache's store into its local disk backend, cut
_STORE = "vllm-2025-lmcache-worker-tp0-local-disk-put-traceback-cut-lmcache1981"
# production-stack#292 (2025-03): a V0 worker SIGKILLed in a pod while LMCache was being set up
_KILLED = "vllm-2025-production-stack-v0-lmcache-worker-died-exit-minus-9-after-engine-creation-issue292"


def _text(name: str) -> str:
    return (CORPUS / "vllm" / f"{name}.log").read_text(encoding="utf-8")


def test_the_fastapi_servers_shutdown_line_is_a_served_launch_stopped(tmp_path: Path) -> None:
    """vLLM's serve_http logs 'Shutting down FastAPI HTTP server.' only in the except-CancelledError branch its
    SIGINT/SIGTERM handler reaches (vllm/entrypoints/launcher.py), after the engine client and the routes are up: an
    excerpt that keeps only the stop (LMCache's connector teardown and its offload-thread WARNING around it) is of a
    ready server stopped, not of a startup. LMCache PR 2293's log stayed at starting, no verdict."""
    out = _verdict("vllm", _STOP)
    assert (out["state"], out["phase"]) == ("ready", "ready")
    assert out["error"] is None
    line = "Shutting down FastAPI HTTP server."
    text = _text(_STOP)
    assert line in text
    without = replay_text(tmp_path, text.replace(line, "Shutting down the FastAPI server."))
    assert without["state"] == "starting"


def test_lmcaches_store_frames_place_a_workers_failure_in_serving() -> None:
    """LMCache's engine stores and retrieves KV only for the requests of a scheduled step (its vLLM adapter's
    wait_for_save loops over connector_metadata.requests calling lmcache_engine.store; start_load_kv calls retrieve):
    a worker that fails under lmcache/v1/cache_engine.py's store was serving. LMCache#1981's cut traceback was a crash
    while starting."""
    out = _verdict("vllm", _STORE)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    assert "Worker_TP0" in _error(out)["ranks"]


def test_a_v0_worker_sigkilled_is_a_fatal_kill_at_once(tmp_path: Path) -> None:
    """vLLM V0's WorkerMonitor logs 'Worker NAME pid N died, exit code: -9' only for a worker that died while the
    executor was not closing, then kills the other workers and closes the result queue (vllm/executor/
    multiproc_worker_utils.py): the engine cannot run again, so a follower says 'crashed (killed)' at once, not after
    the crash grace (production-stack#292 took 5 s). A SIGTERM's -15, also what an operator's stop of the process
    group gives the workers, keeps the grace."""
    out = _verdict("vllm", _KILLED)
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "killed"
    assert "Worker VllmWorkerProcess pid 320 died, exit code: -9" in str(found["summary"])
    run = anyio.run(follow_at_pace, _text(_KILLED).encode())
    assert run.verdict is not None
    assert run.verdict["state"] == "crashed"
    assert run.verdict_after is not None
    assert run.verdict_after < 1.0
    stopped = _text(_KILLED).replace("exit code: -9", "exit code: -15")
    run = anyio.run(follow_at_pace, stopped.encode())
    assert run.verdict_after is None or run.verdict_after >= 1.0
