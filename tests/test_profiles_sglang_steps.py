"""SGLang's startup steps read from its source (issue 30): each marker names its step in a crop that begins there."""

from __future__ import annotations

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.lifecycle import State
from watchdog.profiles.loader import load_engine


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        pytest.param(
            # real: tests/fixtures/corpus/sglang/sglang-2025-tp2-capture-end-piecewise-num-tokens-dynamo-warning-cut-
            # pr12978.log (custom_all_reduce.py register_graph_buffers)
            "[2025-11-10 19:59:08 TP0] Registering 3492 cuda graph addresses",
            State.CAPTURING_GRAPHS,
            id="registering-cuda-graph-addresses",
        ),
        pytest.param(
            # built from http_server.py lifespan's logger.info("Warmup ended") (0.4.10, 0.5.23); no corpus log has it
            "[2026-05-01 10:00:00] Warmup ended",
            State.CAPTURING_GRAPHS,
            id="custom-warmups-ended",
        ),
        pytest.param(
            # built from 0.4.10's http_server.py _wait_and_warmup f"Start of prefill warmup ..."; no corpus log has it
            "[2025-08-01 10:00:00] Start of prefill warmup ...",
            State.CAPTURING_GRAPHS,
            id="prefill-warmup-start",
        ),
        pytest.param(
            # built from 0.4.10's f"End of prefill warmup with status {res.status_code}, resp: {res.json()}"
            "[2025-08-01 10:00:05] End of prefill warmup with status 200, resp: {'text': ' the'}",
            State.READY,
            id="prefill-warmup-end-200",
        ),
        pytest.param(
            # built from 0.5.23's _execute_server_warmup "Disaggregation warmup requests completed for all %s DP ranks"
            "[2026-05-01 10:00:05] Disaggregation warmup requests completed for all 2 DP ranks",
            State.READY,
            id="disaggregation-warmup-completed",
        ),
        pytest.param(
            # built from load_model's logger.info (0.4.10 model_runner.py, 0.5.23 load_model_utils.py); no corpus log
            "[2025-08-01 10:00:00 TP0] Compute capability below sm80. Use float16 due to lack of bfloat16 support.",
            State.LOADING_WEIGHTS,
            id="legacy-gpu-float16",
        ),
        pytest.param(
            # built from load_kv_cache_scales' logger.info("Loaded KV cache scaling factors from %s", path)
            "[2025-08-01 10:00:00 TP0] Loaded KV cache scaling factors from /models/kv_scales.json",
            State.LOADING_WEIGHTS,
            id="kv-cache-scales-loaded",
        ),
        pytest.param(
            # built from model_loader/loader.py RemoteModelLoader "Loaded weights from remote storage in %.2f seconds."
            "[2025-08-01 10:00:00 TP0] Loaded weights from remote storage in 12.34 seconds.",
            State.LOADING_WEIGHTS,
            id="remote-storage-loaded",
        ),
        pytest.param(
            # built from 0.5.23 model_loader/loader.py ModelOptModelLoader "ModelOptModelLoader: Loading base model..."
            "[2026-05-01 10:00:00 TP0] ModelOptModelLoader: Loading base model...",
            State.LOADING_WEIGHTS,
            id="modelopt-loader",
        ),
        pytest.param(
            # built from 0.4.10 model_runner.py _get_attention_backend_from_str "Intel AMX attention backend is enabled."
            "[2025-08-01 10:00:00 TP0] Intel AMX attention backend is enabled.",
            State.ALLOCATING_KV_CACHE,
            id="intel-amx-attention-backend",
        ),
    ],
)
def test_an_sglang_startup_step_line_names_its_step(line: str, phase: State) -> None:
    """The custom all-reduce's graph buffers registered at the end of a capture, the operator's --warmups done,
    a PD prefill server's warm-up started (0.4.10) and answered 200, every DP rank's disaggregation warm-up done
    (0.5.23), load_model's lines between 'Load weight begin' and 'Load weight end', the Intel AMX attention backend
    made after the memory pool (0.4.10): each line names its step."""
    a = Analyzer(load_engine("sglang"))
    a.feed(f"{line}\n".encode(), now=0.0)
    assert a.state == phase
    assert a.lifecycle.current.error is None


def test_an_sglang_prefill_warmup_that_did_not_answer_200_is_not_ready() -> None:
    """0.4.10 prints 'End of prefill warmup with status N' whatever the status: only a 200 is a server up."""
    a = Analyzer(load_engine("sglang"))
    a.feed(b"[2025-08-01 10:00:00] Start of prefill warmup ...\n", now=0.0)
    a.feed(b"[2025-08-01 10:00:05] End of prefill warmup with status 500, resp: {}\n", now=5.0)
    assert a.state == State.CAPTURING_GRAPHS
