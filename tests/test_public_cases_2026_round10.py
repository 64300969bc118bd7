"""Rules read from the engines' sources for what the tenth crop of public 2025-2026 logs showed (issue 30,
thirteenth round), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict


def test_trtllm_traceback_in_create_py_executor_instance_is_the_warm_up() -> None:
    """TensorRT-LLM's create_py_executor_instance (_torch/pyexecutor/_util.py) builds the scheduler around the
    managers create_py_executor made and returns PyExecutor(...), whose __init__ runs model_engine.warmup (the
    autotuner, torch.compile, the CUDA graphs). An executor worker's traceback cut in that frame (1.2.0rc1, a
    piecewise CUDA graph with inductor) failed in the warm-up, after the weights and the KV cache."""
    out = _verdict(
        "trtllm", "trtllm-1.2.0rc1-pytorch-worker-main-create-py-executor-instance-traceback-cut-issue8784"
    )
    assert out["engine"] == "trtllm"
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    assert "create_py_executor_instance" in str(_error(out)["summary"])


def test_llamacpp_verbosity_line_names_llama_cpp_behind_a_wrapper() -> None:
    """llama.cpp's common_params_print_info ('log_info: verbosity = 3 (adjust with the `-lv N` CLI arg)') is the
    first line its own programs print at the default verbosity since early 2026. Lemonade prefixes llama-server's
    lines with its own time and '(Process)'; an excerpt cut at the device list is llama.cpp, still starting."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-lemonade-10.6-vulkan-starting-llama-server-device-info-cut-issue2113"
    )
    assert out["engine"] == "llamacpp"
    assert (out["state"], out["phase"]) == ("starting", "starting")
    assert out["error"] is None
