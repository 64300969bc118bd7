"""What the twenty-fifth round's public logs of platforms and stacks showed (issue 30, helper i30-cases25c: Ascend,
Intel SYCL, TPU, Dynamo, llm-d, Ray, read from the engines' and libraries' source and pinned on the real log that
showed it (tests/fixtures/corpus/llamacpp and vllm)."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS
from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict

from watchdog.follow.replay import replay_path

_SERVING = "vllm-0.8.4-ray-tp16-request-added-cgraph-timeout-set-serving-issue16692"


def test_cann_error_message_not_implemented_is_unsupported_and_the_cause() -> None:
    """ggml_cann_error (ggml/src/ggml-cann/ggml-cann.cpp) logs 'CANN error: <aclGetRecentErrMsg()>', the device and
    the call, then GGML_ABORT('CANN error'), whose 'file:line: CANN error' may come first in the log. llama.cpp#18133
    (b7447, 2025-12, Ascend 910: 'EZ9903 ... support for Ascend910 is not implemented'): the abort's wrapper line and
    cuda before."""
    out = _verdict("llamacpp", "llamacpp-2025-12-cann-ascend910-ez9903-not-implemented-fit-params-issue18133")
    assert (out["engine"], out["state"], out["phase"]) == ("llamacpp", "crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "unsupported"
    assert "CANN error: EZ9903:" in str(found["summary"])
    assert "support for Ascend910 is not implemented" in str(found["summary"])


def test_cann_error_message_is_the_cause_over_the_runtime_traceback_lines() -> None:
    """The same ggml_cann_error with the runtime's own report after its message (indented 'Solution:' and CANN's
    'TraceBack' lines, rtMemcpyAsync's 'driver error:invalid handle'): the 'CANN error: EL0003 ...' line is the
    message, an accelerator runtime's failure. llama.cpp#16695 (b6765, 2025-10, Ascend 310P): a TraceBack line was
    the root cause before."""
    out = _verdict("llamacpp", "llamacpp-b6765-cann-310p-el0003-rtmemcpyasync-invalid-handle-issue16695")
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "cuda"
    assert "CANN error: EL0003: [PID: 1445] 2025-10-21-03:40:09.141.920 The argument is invalid." in str(
        found["summary"]
    )


def test_sycl_exception_caught_line_is_a_fatal_device_error() -> None:
    """ggml-sycl.cpp's catch blocks print exc.what() followed by 'Exception caught at file:..., line:N' and call
    std::exit(1) (ggml_sycl_compute_forward's also 'Error OP <op>'): no abort, no backtrace. llama.cpp#20338 (2026,
    Arc A770, the warm-up's 'No kernel named ... was found'): a launch still warming up before."""
    out = _verdict("llamacpp", "llamacpp-2026-sycl-arc-a770-warmup-no-kernel-named-error-op-mul-issue20338")
    assert (out["engine"], out["state"], out["phase"]) == ("llamacpp", "crashed", "capturing_graphs")
    found = _error(out)
    assert found["category"] == "cuda"
    assert str(found["summary"]).startswith("No kernel named _ZTSZN14bin_bcast_sycl")


def test_deepgemm_host_assert_through_a_quantization_frame_is_an_assertion() -> None:
    """DeepGEMM's DG_HOST_ASSERT throws DGException('Assertion', file, line, cond), 'Assertion error (file:line):
    cond' (csrc/utils/exception.hpp), a RuntimeError once pybind11 translates it: class and template say what failed,
    so vLLM's rule for a RuntimeError raised under model_executor/layers/quantization/ (unsupported) gives way.
    llm-d#1269 (2026-04, llm-d-cuda 0.6.0, under fp8_utils.run_deepgemm): unsupported before."""
    out = _verdict("vllm", "vllm-2026-llm-d-cuda-0.6-deepgemm-jit-assertion-nested-worker-prefix-llmd1269")
    assert (out["engine"], out["state"]) == ("vllm", "crashed")
    found = _error(out)
    assert found["category"] == "assertion"
    assert "Assertion error (csrc/apis/../jit_kernels/impls/../../jit/kernel_runtime.hpp:45)" in str(
        found["summary"]
    )


def test_tpu_inference_mesh_larger_than_the_chips_is_config() -> None:
    """tpu-inference's TPUModelRunner._create_2d_mesh (tpu_inference/runner/tpu_runner.py) raises 'Insufficient
    devices for 2D mesh: found N, expected M for mesh shape (dp, tp).' when the parallel sizes asked for need more
    chips than the host shows. ARahim3/kaggle-tpu-lab#6 (2026, a Kaggle session given one device): other before."""
    name = "vllm-tpu-inference-2026-kaggle-insufficient-devices-2d-mesh-apiserver-traceback-cut-kaggletpulab6"
    out = _verdict("vllm", name)
    assert (out["engine"], out["state"], out["phase"]) == ("vllm", "crashed", "starting")
    found = _error(out)
    assert found["category"] == "config"
    assert "Insufficient devices for 2D mesh: found 1, expected 8" in str(found["summary"])


def test_kv_connector_register_kv_caches_frame_is_the_kv_cache_phase() -> None:
    """GPUModelRunner.initialize_kv_cache calls get_kv_transfer_group().register_kv_caches(kv_caches) right after
    allocating the tensors (vLLM V1, v1/worker/gpu_model_runner.py): a traceback through a KV connector's
    register_kv_caches is of the KV-cache step. ai-dynamo/dynamo#1519 (2025-06, NIXL's NIXL_ERR_NOT_FOUND under it):
    starting before."""
    out = _verdict("vllm", "vllm-2025-dynamo-v1-nixl-register-kv-caches-nixl-not-found-tail-dynamo1519")
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    assert "nixl._bindings.nixlNotFoundError: NIXL_ERR_NOT_FOUND" in str(_error(out)["summary"])


def test_request_log_lines_are_a_serving_vllm(tmp_path: Path) -> None:
    """RequestLogger.log_inputs' 'Received request <id>: prompt: ...' (vllm/entrypoints/logger.py, the OpenAI server's
    handlers) and the engine's 'Added request <id>.' (V0 async/multiprocessing engines, V1 AsyncLLM.add_request) are
    logged only for clients' requests: a crop of them is of a serving server. vllm#16692 (0.8.4, TP16 on Ray): a
    launch still starting before."""
    out = _verdict("vllm", _SERVING)
    assert (out["engine"], out["state"], out["phase"], out["error"]) == ("vllm", "ready", "ready", None)
    lines = (CORPUS / "vllm" / f"{_SERVING}.log").read_text(encoding="utf-8").splitlines(keepends=True)
    # each rule on its own: the request logger's line (that line names no engine: the follower is told it is vLLM)
    log = tmp_path / "received.log"
    log.write_text(lines[0], encoding="utf-8")
    received = replay_path(log, "vllm")[1].to_json()
    assert (received["state"], received["phase"]) == ("ready", "ready")
    # the engine's 'Added request' line and the executor's after it; those alone are a launch still starting
    added = _replay_text(tmp_path, "".join(lines[1:]))
    assert (added["engine"], added["state"]) == ("vllm", "ready")
    assert _replay_text(tmp_path, "".join(lines[2:]))["state"] == "starting"
