"""What the thirtieth round's public logs of vLLM, SGLang and TensorRT-LLM and their wrappers (Dynamo, GPUStack) showed
(issue 30, helper i30-cases30a), read from the engines' and wrappers' own source and pinned on the real log that
showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from pathlib import Path

import anyio
from publiccases import CORPUS, replay_text
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.core.envelope import parse
from watchdog.follow.testing import follow_at_pace

# ai-dynamo/dynamo#1422 (2025-06): `dynamo run` relaying a vLLM V0 engine's traceback at DEBUG
_RELAY = "vllm-2025-dynamo-run-subprocess-debug-v0-mq-engine-traceback-cut-dynamo1422"
# ai-dynamo/dynamo#1235 (2025-05): `dynamo serve` starting its TensorRT-LLM graph, the watchers' lines only
_TRTLLM = "trtllm-2025-dynamo-0.2-watcher-debug-tensorrtllmworker-frontend-started-cut-dynamo1235"
# gpustack/gpustack#1916 (2025-04): a vLLM 0.8.4 worker's traceback cut at _dummy_run and the model's forward
_DUMMY = "vllm-2025-gpustack-v1-worker-rank1-dummy-run-model-forward-traceback-cut-gpustack1916"
# vllm-project/vllm#12233 (2025-01): a V0 server in Docker, three 200s, then the model step's input dumped
_DUMPED = "vllm-2025-v0-docker-200s-then-writing-input-of-failed-execution-issue12233"


def _text(engine: str, name: str) -> str:
    return (CORPUS / engine / f"{name}.log").read_text(encoding="utf-8")


def test_dynamo_runs_relay_of_its_engines_lines_is_peeled(tmp_path: Path) -> None:
    """`dynamo run` re-logs each line of its engine subprocess with `tracing::debug!("{}", line)`
    (launch/dynamo-run/src/subprocess.rs), so every line of the engine's traceback comes after the wrapper's time,
    DEBUG and its target 'dynamo_run::subprocess: '. Peeled, the frames are the engine's own, with their indent: a V0
    engine process raising out of run_mp_engine (its 'raise e') while LLMEngine is built is a crash while starting.
    dynamo#1422's log was a launch still starting, no verdict."""
    record = parse("2025-06-06T19:02:34.252Z DEBUG dynamo_run::subprocess:     raise e")
    assert (record.content, record.level) == ("    raise e", "")
    out = _verdict("vllm", _RELAY)
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    assert "self.engine = LLMEngine(*args, **kwargs)" in str(_error(out)["summary"])
    # the same lines under another target are not the relay's: no frame is read
    other = replay_text(
        tmp_path, _text("vllm", _RELAY).replace("dynamo_run::subprocess:", "dynamo_run::other:")
    )
    assert other["state"] == "starting"


def test_dynamos_tensorrt_llm_worker_names_the_engine(tmp_path: Path) -> None:
    """Dynamo 0.1-0.3's TensorRT-LLM services are 'class TensorRTLLMWorker' and 'TensorRTLLMPrefillWorker'
    (examples/tensorrt_llm/components/), named by the SDK's circus watchers ('dynamo_TensorRTLLMWorker started') and
    their '--service-name TensorRTLLMWorker': a 'dynamo serve' log's only word of its engine before the worker
    prints. dynamo#1235's log was a generic launch."""
    out = _verdict("trtllm", _TRTLLM)
    assert (out["engine"], out["state"]) == ("trtllm", "starting")
    renamed = replay_text(tmp_path, _text("trtllm", _TRTLLM).replace("TensorRTLLMWorker", "EngineWorker"))
    assert renamed["engine"] == "generic"


def test_a_traceback_cut_at_v1s_dummy_run_crashed_at_least_in_the_kv_cache_step(tmp_path: Path) -> None:
    """GPUModelRunner._dummy_run runs the loaded model on dummy inputs, first for profile_run (the KV cache's sizing);
    capture_model and the compile warm-up, which call it later, are startup steps of their own whose frames win where
    the traceback keeps them. A worker's traceback cut to _dummy_run and the model's forward (gpustack#1916, vLLM
    0.8.4) crashed at least in the KV-cache step, not while starting."""
    out = _verdict("vllm", _DUMMY)
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    text = _text("vllm", _DUMMY)
    renamed = replay_text(tmp_path, text.replace("in _dummy_run", "in _other_run"))
    assert (renamed["state"], renamed["phase"]) == ("crashed", "starting")
    captured = text.replace(
        "(VllmWorker rank=1 pid=244181) ERROR 04-28 10:31:31 [multiproc_executor.py:380]   File",
        "(VllmWorker rank=1 pid=244181) ERROR 04-28 10:31:31 [multiproc_executor.py:380]   File "
        '"/root/.local/share/pipx/venvs/vllm-v0-8-4/lib/python3.11/site-packages/vllm/v1/worker/gpu_model_runner.py", '
        "line 1593, in capture_model\n"
        "(VllmWorker rank=1 pid=244181) ERROR 04-28 10:31:31 [multiproc_executor.py:380]     self._dummy_run(num_tokens)\n"
        "(VllmWorker rank=1 pid=244181) ERROR 04-28 10:31:31 [multiproc_executor.py:380]   File",
        1,
    )
    assert replay_text(tmp_path, captured)["phase"] == "capturing_graphs"


def test_v0s_dump_of_a_failed_steps_input_is_a_crash(tmp_path: Path) -> None:
    """vLLM V0's dump_input_when_exception (vllm/worker/model_runner_base.py) logs 'Writing input of failed execution
    to ...' only in its except branch around the model runner's execute_model, then re-raises, and a V0 engine does
    not survive an exception out of its step. A log that ends there after three 200s (vllm#12233, a Docker
    container that then crashed) is a crash after ready, its cause not in the log; it was a serving server. The line
    is printed only on the path that ends the engine: a live follower says so at once, not at the log's end."""
    out = _verdict("vllm", _DUMPED)
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert str(found["summary"]).startswith(
        "Writing input of failed execution to /tmp/err_execute_model_input_"
    )
    assert "Error in model execution" in str(found["hint"])
    text = _text("vllm", _DUMPED)
    without = replay_text(
        tmp_path, text.replace("Writing input of failed execution to", "Writing a request's input to")
    )
    assert without["state"] == "ready"
    run = anyio.run(follow_at_pace, text.encode())
    assert run.verdict is not None
    assert run.verdict["state"] == "crashed"
    assert run.verdict_after is not None
    assert run.verdict_after < 1.0
