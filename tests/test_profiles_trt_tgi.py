"""TensorRT-LLM and TGI profiles: executor-init failures, C++ error messages, and TGI's launcher lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import watchdog
from watchdog.follow.replay import replay_path
from watchdog.profiles.loader import load_profile_file

_PROFILES = Path(watchdog.__file__).parent / "profiles"


def _replay(tmp_path: Path, engine: str, lines: list[str]) -> dict[str, Any]:
    log = tmp_path / "launch.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return replay_path(log, engine=engine)[1].to_json()


_TRT_MESSAGES = {
    "[TensorRT-LLM][ERROR] Assertion failed: mTokensPerBlock > 0 (/src/cpp/kvCacheManager.cpp:12)": "assertion",
    "[TensorRT-LLM][ERROR] Assertion failed: Failed: MPI error /src/mpiUtils.cpp:211 '6' (/src/mpiUtils.cpp:211)": "nccl",
    "[TensorRT-LLM][ERROR] Assertion failed: Failed, NCCL error /src/ncclCommunicator.cpp:90 'unhandled cuda error'": "nccl",
    "[TensorRT-LLM][ERROR] CUDA runtime error in cudaMalloc(&ptr, n): out of memory (/src/cudaAllocator.cpp:9)": "oom",
    "[TensorRT-LLM][ERROR] CUDA runtime error in cublasLtMatmul(h, d): CUBLAS_STATUS_NOT_SUPPORTED (/src/x.cpp:1)": "cuda",
    "[TensorRT-LLM][ERROR] CUDA driver error in cuModuleLoadData(&m, d): CUDA_ERROR_ILLEGAL_ADDRESS: an illegal": "cuda",
    "[TensorRT-LLM][ERROR] CUDA runtime error in cudaDeviceGetDefaultMemPool(&memPool, device): operation no": (
        "unsupported"
    ),
}


@pytest.mark.parametrize(("message", "category"), list(_TRT_MESSAGES.items()))
def test_trtllm_message_rules_give_one_category(message: str, category: str) -> None:
    """The profile's message rules classify a C++ error wherever it is quoted, one category per message."""
    errors = load_profile_file(_PROFILES / "trtllm.toml").rules_of("error")
    for line in (f"  what():  {message}", f"Failed to initialize executor on rank 3: {message}", message):
        cats = {r.category for r in errors if r.category and r.apply(line) is not None}
        assert cats == {category}, line


def test_trtllm_executor_init_failure_is_the_workers_last_words(tmp_path: Path) -> None:
    """'Failed to initialize executor' ends the launch at once; a trtllm-gen kernel failing there means the
    warm-up (the first forward passes of executor creation) had been reached."""
    v = _replay(
        tmp_path,
        "trtllm",
        [
            "[06/21/2025-01:30:10] [TRT-LLM] [I] Use 40.1 GB for model weights.",
            "[06/21/2025-01:30:42] [TRT-LLM] [RANK 0] [E] Failed to initialize executor on rank 0: [TensorRT-LLM]"
            "[ERROR] Assertion failed: Error occurred when running GEMM! "
            "(/src/tensorrt_llm/cpp/tensorrt_llm/kernels/trtllmGenKernels/batchedGemm/KernelRunner.cpp:180)",
            "1       0x7fac7ac778fd tensorrt_llm::common::throwRuntimeError(char const*, int, char const*) + 97",
        ],
    )
    assert (v["state"], v["phase"], v["error"]["category"]) == ("crashed", "capturing_graphs", "assertion")
    assert v["timeline"][-1]["line"] == 2  # fatal: decided on the line, not at the end of the log


@pytest.mark.parametrize(
    ("component", "phase"),
    [("KV cache", "allocating_kv_cache"), ("Model", "loading_weights"), ("Sampler", "allocating_kv_cache")],
)
def test_trtllm_memory_report_component_tells_the_phase(tmp_path: Path, component: str, phase: str) -> None:
    """The executor's OOM report names the component it could not create; that is where startup stood."""
    v = _replay(
        tmp_path,
        "trtllm",
        [
            "[07/08/2025-19:47:15] [TRT-LLM] [RANK 1] [E] Failed to initialize executor on rank 1: "
            "Executor creation failed due to insufficient GPU memory.",
            "",
            f"The following component could not be created: {component}",
            "Total GPU memory (GiB): 140.06",
        ],
    )
    assert (v["phase"], v["error"]["category"]) == (phase, "oom")
    assert "Executor creation failed due to insufficient GPU memory." in v["error"]["summary"]


def test_trtllm_plugin_initialize_frame_is_engine_load(tmp_path: Path) -> None:
    """An uncaught C++ exception whose backtrace runs through a plugin's initialize(): the engine was loading."""
    v = _replay(
        tmp_path,
        "trtllm",
        [
            "terminate called after throwing an instance of 'tensorrt_llm::common::TllmException'",
            "  what():  [TensorRT-LLM][ERROR] Assertion failed: Failed: MPI error /src/mpiUtils.cpp:211 '6'",
            "1       0x7fb4aebbeb71 tensorrt_llm::common::throwRuntimeError(char const*, int, std::string const&) + 82",
            "4       0x7fb4614edcec tensorrt_llm::plugins::AllreducePlugin::initialize() + 204",
        ],
    )
    assert (v["state"], v["phase"], v["error"]["category"]) == ("crashed", "loading_weights", "nccl")
    assert "Failed: MPI error" in v["error"]["summary"]


_SHARD_DIED = [
    "2024-03-06T17:53:22.336246Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0",
    "2024-03-06T17:53:31.052367Z ERROR shard-manager: text_generation_launcher: Shard complete standard error output:",
]
_LAUNCHER_EXIT = [
    "2024-03-06T17:53:31.149443Z ERROR text_generation_launcher: Shard 0 failed to start",
    "2024-03-06T17:53:31.149481Z  INFO text_generation_launcher: Shutting down shards",
    "Error: ShardCannotStart",
]


@pytest.mark.parametrize(
    ("signal", "category", "hint"),
    [(9, "killed", "(SIGKILL)"), (4, "unsupported", "SIGILL"), (11, "killed", "memory fault")],
)
def test_tgi_signal_line_is_the_cause_when_stderr_says_nothing(
    tmp_path: Path, signal: int, category: str, hint: str
) -> None:
    """An empty (or warnings-only) stderr dump is not the cause: the signal line is, `killed` (a death whose
    cause is not in the log) but for SIGILL, which says what failed (an instruction this CPU lacks); the hint
    names the signal. No phase is claimed for a shard that died before its socket with no evidence of loading."""
    v = _replay(
        tmp_path,
        "tgi",
        [
            *_SHARD_DIED,
            "  warn('The installed version of bitsandbytes was compiled without GPU support.') rank=0",
            "2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was signaled "
            f"to shutdown with signal {signal} rank=0",
            *_LAUNCHER_EXIT,
        ],
    )
    assert (v["state"], v["phase"], v["error"]["category"]) == ("crashed", "starting", category)
    assert f"signaled to shutdown with signal {signal}" in v["error"]["summary"]
    assert hint in v["error"]["hint"]


def test_tgi_python_exception_in_stderr_beats_the_kill(tmp_path: Path) -> None:
    """A shard OOM printed in its stderr is the cause (and says the weights were loading), not the SIGKILL after."""
    v = _replay(
        tmp_path,
        "tgi",
        [
            *_SHARD_DIED,
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; 15.77 GiB total)",
            "2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was signaled "
            "to shutdown with signal 9 rank=0",
            *_LAUNCHER_EXIT,
        ],
    )
    assert (v["phase"], v["error"]["category"]) == ("loading_weights", "oom")
    assert v["error"]["summary"].startswith("torch.cuda.OutOfMemoryError")


def test_tgi_webserver_failed_means_the_shards_were_ready(tmp_path: Path) -> None:
    """The launcher returns WebserverFailed only after every shard was ready and the router was spawned."""
    v = _replay(
        tmp_path,
        "tgi",
        [
            "2024-12-11T18:26:38.687423Z  INFO shard-manager: text_generation_launcher: Terminating shard rank=0",
            "2024-12-11T18:26:40.793289Z  INFO shard-manager: text_generation_launcher: shard terminated rank=0",
            "Error: WebserverFailed",
        ],
    )
    assert (v["state"], v["phase"]) == ("crashed", "allocating_kv_cache")
