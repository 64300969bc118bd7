"""What the twenty-fifth round's public logs of SGLang and vLLM showed (issue 30, helper i30-cases25a), read from
the engines' and the CUDA driver's own words and pinned on the real log that showed it (tests/fixtures/corpus/sglang
and vllm)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict

# sglang#29796 (2026-07): the Ascend TP16/EP16 launch's Uvicorn lines and warm-up, as posted (cut at its 16th line)
_EP_RANKED = "sglang-2026-ascend-glm52-uvicorn-running-then-warmup-get-env-hostname-no-fired-up-issue29796"


def test_sglang_ep_rank_prefix_names_sglang_so_uvicorn_before_warmup_is_not_ready() -> None:
    """SGLang's scheduler logs with the prefix '[time TPn EPn]' when --ep-size > 1 (managers/scheduler.py
    run_scheduler_process: ' TP{tp_rank}' then ' EP{moe_ep_rank}'), and its chat layer says 'Using default chat
    sampling params from model generation config' (serving_chat.py): both name SGLang, whose 'Uvicorn running on'
    comes before the warm-up request; sglang#29796 (2026-07) was read as an unknown engine, ready at Uvicorn."""
    out = _verdict("sglang", _EP_RANKED)
    assert (out["engine"], out["state"], out["phase"], out["error"]) == (
        "sglang",
        "capturing_graphs",
        "capturing_graphs",
        None,
    )


def test_sglang_ep_rank_prefix_alone_names_sglang(tmp_path: Path) -> None:
    """The expert-parallel rank prefix alone, with no other SGLang marker, detects SGLang (two lines of sglang#29796,
    as posted)."""
    text = (
        "[2026-07-01 02:42:56 TP2 EP2] get env HOSTNAME = hostname-npich.foreman.pxe\n"
        "[2026-07-01 02:42:56 TP1 EP1] get env HOSTNAME = hostname-npich.foreman.pxe\n"
    )
    assert _replay_text(tmp_path, text)["engine"] == "sglang"


def test_vllm_quantization_scheme_refusal_logged_before_its_cut_traceback_is_unsupported() -> None:
    """vLLM's compressed-tensors check raises RuntimeError('Quantization scheme is not supported for ', 'the current
    GPU. Min capability: N. ', 'Current capability: M.') (compressed_tensors.py _check_scheme_supported), which the V0
    engine logs as its own line before the traceback (engine/multiprocessing/engine.py run_mp_engine:
    logger.exception(e)); vllm#20216 (2025-07) cut the traceback and was read as 'other', a traceback cut before its
    exception."""
    out = _verdict(
        "vllm",
        "vllm-0.9.2-v0-mq-engine-quantization-scheme-unsupported-tuple-message-traceback-cut-issue20216",
    )
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "unsupported"
    assert "('Quantization scheme is not supported for ', 'the current GPU. Min capability: 80. '" in str(
        found["summary"]
    )


def test_cuda_driver_coredump_line_is_the_gpu_fault_behind_a_cut_scheduler_traceback() -> None:
    """The NVIDIA driver announces a GPU exception's core dump ('Starting GPU coredump generation, set the
    CUDA_COREDUMP_SHOW_PROGRESS environment variable ...', CUDA_ENABLE_COREDUMP_ON_EXCEPTION): sglang#6590 (2025-05,
    a PD decode worker) printed it before its scheduler's traceback, cut before the exception, read as 'other'."""
    out = _verdict(
        "sglang", "sglang-2025-pd-decode-gpu-coredump-line-then-scheduler-exception-synchronize-cut-issue6590"
    )
    assert (out["state"], out["phase"]) == ("crashed", "ready")
    found = _error(out)
    assert found["category"] == "cuda"
    assert "Starting GPU coredump generation" in str(found["summary"])
