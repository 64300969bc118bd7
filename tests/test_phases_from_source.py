"""The startup phase on launches never seen (issue 30): phase markers and traceback frames read from the engines'
source by release (TensorRT-LLM 0.19-1.2, its C++ runtime; SGLang 0.4.6, 0.5.5, 0.5.23), each shown on a crop of a
real log that ends with the line (or the traceback) it is about: the phase is right with the rule, and wrong (an
earlier phase's) without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.lifecycle import State
from watchdog.follow.replay import replay_path
from watchdog.profiles.loader import load_engine


def _state(engine: str, lines: list[str]) -> State:
    # the state a crop of a launch's log leaves the analyzer in
    a = Analyzer(load_engine(engine))
    a.feed("".join(f"{ln}\n" for ln in lines).encode(), now=0.0)
    return a.state


def _crash_phase(tmp_path: Path, engine: str, lines: list[str]) -> object:
    # the phase a crash in a crop of a launch's log is reported in
    log = tmp_path / "launch.log"
    log.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    out = replay_path(log, engine=engine)[1].to_json()
    assert out["state"] == "crashed", out
    return out["phase"]


# -- TensorRT-LLM ------------------------------------------------------------------------------------------------

_TRT_ENGINE_LOADED = "[TensorRT-LLM][INFO] Loaded engine size: 6214 MiB"
_TRT_ATTENTION = (
    "[12/20/2025-04:20:19] [TRT-LLM] [I] ATTENTION RUNTIME FEATURES:  AttentionRuntimeFeatures(chunked_prefill=False, "
    "cache_reuse=True, has_speculative_draft_tokens=False, chunk_size=8192)"
)
_TRT_WEIGHTS_DONE = "Model init total -- 49.14s"


@pytest.mark.parametrize(
    "line",
    [
        # NVIDIA/TensorRT-LLM docs/source/performance/perf-benchmarking.md as of 0.12 (trtllm-bench throughput's
        # output, the C++ executor after 'Loaded engine size: 6214 MiB')
        pytest.param(
            "[TensorRT-LLM][INFO] [MemUsageChange] TensorRT-managed allocation in IExecutionContext creation: CPU +0, "
            "GPU +0, now: CPU 0, GPU 6166 (MiB)",
            id="execution-context",
        ),
        pytest.param(
            "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 1.14 GB GPU memory for runtime buffers.",
            id="runtime-buffers",
        ),
        pytest.param(
            "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 4.35 GB GPU memory for decoder.", id="decoder"
        ),
        pytest.param(
            "[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB, "
            "available: 63.62 GiB",
            id="kv-sizing-memory",
        ),
        pytest.param(
            "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 4607", id="kv-primary-pool"
        ),
        # https://github.com/NVIDIA/TensorRT-LLM/issues/1400 (0.8: the k/v cache's bytes before its tokens)
        pytest.param("[TensorRT-LLM][INFO] Allocate 69524783104 bytes for k/v cache. ", id="kv-bytes-0.8"),
    ],
)
def test_trtllm_cpp_runtime_lines_after_the_engine_load_are_the_kv_cache_step(line: str) -> None:
    """The C++ runtime, once the engine is deserialized, builds the execution context, the runtime buffers and the
    decoder, then sizes the paged KV cache from the memory left: a crop that ends on any of these lines is in the
    KV-cache step, not still loading the engine."""
    assert _state("trtllm", [_TRT_ENGINE_LOADED, line]) == State.ALLOCATING_KV_CACHE


@pytest.mark.parametrize(
    "line",
    [
        # https://github.com/jeansblog/trt_llm (README: trtllm-serve 1.1.0rc3, gpt-oss-120b), also in the corpus
        pytest.param(
            '[12/20/2025-04:20:19] [TRT-LLM] [I] Validating KV Cache config against kv_cache_dtype="auto"',
            id="validating-kv-cache-dtype",
        ),
        pytest.param(
            '[12/20/2025-04:20:19] [TRT-LLM] [I] KV cache quantization set to "auto". Using checkpoint KV quantization.',
            id="kv-cache-quantization",
        ),
        # weight_loader.py's prefetch (format strings 'Prefetching {size:.2f}GB checkpoint files.',
        # 'Prefetching {file_name} to memory...'; NVIDIA/TensorRT-LLM PR 4765 added the heuristic, 2025-06)
        pytest.param(
            "[07/24/2025-08:18:40] [TRT-LLM] [I] Prefetching 15.26GB checkpoint files.", id="prefetch"
        ),
        pytest.param(
            "[07/24/2025-08:18:40] [TRT-LLM] [I] Prefetching /models/Llama-3.1-8B/model-00001-of-00004.safetensors to "
            "memory...",
            id="prefetch-file",
        ),
    ],
)
def test_trtllm_model_loader_lines_are_the_weights_step(line: str) -> None:
    """The PyTorch backend's model loader validates the checkpoint's KV cache dtype, then prefetches and reads the
    checkpoint: a crop that ends there is loading weights (the words 'KV Cache' there are the checkpoint's
    quantization), not still starting."""
    assert _state("trtllm", [_TRT_ATTENTION, line]) == State.LOADING_WEIGHTS


@pytest.mark.parametrize(
    "line",
    [
        # https://github.com/NVIDIA/TensorRT-LLM/issues/6294 (0.21, Llama 3.1 8B FP8 on H100) and #5038 (0.21)
        pytest.param(
            "[07/24/2025-08:18:47] [TRT-LLM] [I] Run autotuning warmup for batch size=1", id="autotuning"
        ),
        pytest.param(
            "[07/24/2025-08:18:47] [TRT-LLM] [I] Autotuner Cache size after warmup 0", id="autotuner-cache"
        ),
        # the same warmup(): torch.compile's requests and each CUDA graph's (0.19-0.21 format strings)
        pytest.param(
            "[07/24/2025-08:18:47] [TRT-LLM] [I] Run warmup for batch size=1, pure context phase",
            id="compile-warmup",
        ),
        pytest.param("[07/24/2025-08:18:48] [TRT-LLM] [I] Run warmup for batch size=64", id="graph-warmup"),
    ],
)
def test_trtllm_0_2x_warmup_lines_are_the_capture_step(line: str) -> None:
    """PyTorchModelEngine.warmup in 0.19-0.21 announces each warm-up forward in words 1.0 changed: a crop that ends
    on one is warming up (capturing_graphs), not still sizing the KV cache."""
    assert _state("trtllm", [_TRT_WEIGHTS_DONE, line]) == State.CAPTURING_GRAPHS


def test_trtllm_llm_api_model_loader_steps_are_the_weights_step() -> None:
    """The LLM API's TensorRT backend builds the engine from a Hugging Face checkpoint in numbered steps before the
    executor exists (NVIDIA/TensorRT-LLM docs/source/performance/perf-benchmarking.md: trtllm-bench build, 0.17)."""
    lines = ["[TensorRT-LLM] TensorRT-LLM version: 0.17.0", "Loading Model: [1/3]    Downloading HF model"]
    assert _state("trtllm", lines) == State.LOADING_WEIGHTS


def test_trtllm_executor_stream_line_is_after_the_weights() -> None:
    """1.2's create_py_executor logs the execution stream it makes after the sampler, right before the KV cache."""
    line = (
        "[01/10/2026-10:00:00] [TRT-LLM] [I] [create_py_executor] Created execution_stream: "
        "<torch.cuda.Stream device=cuda:0 cuda_stream=0x5583c2c0a4d0>"
    )
    assert _state(
        "trtllm", [_TRT_ATTENTION, "Loading weights: 100%|██████████| 801/801 [00:46<00:00, 17.29it/s]", line]
    ) == (State.ALLOCATING_KV_CACHE)


_TRT_WORKER = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/executor/worker.py", line 1006, in worker_main',
    "    worker: GenerationExecutorWorker = worker_cls(",
    '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/executor/worker.py", line 153, in __init__',
    "    self.engine = _create_py_executor(",
    '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/executor/worker.py", line 125, in _create_py_executor',
    "    _executor = create_executor(**args)",
]


def test_trtllm_crash_in_the_kv_cache_estimation_is_the_kv_cache_step(tmp_path: Path) -> None:
    """KvCacheCreator.configure_kv_cache_capacity runs the probe executor (whose __init__ has already warmed up and
    captured graphs), then sizes the final cache: its failure is the KV cache's step, whatever warm-up lines came
    before. Frames as Python prints them from 1.1's source (py_executor_creator.py, _util.py); the warm-up lines
    are jeansblog/trt_llm's (1.1.0rc3)."""
    lines = [
        "[12/20/2025-04:21:49] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=1, draft_len=0",
        "[12/20/2025-04:21:50] [TRT-LLM] [E] Failed to initialize executor on rank 0: dummy requests failed",
        *_TRT_WORKER,
        '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/py_executor_creator.py", '
        "line 611, in create_py_executor",
        "    kv_cache_creator.configure_kv_cache_capacity(py_executor)",
        '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/_util.py", line 328, in '
        "configure_kv_cache_capacity",
        "    raise RuntimeError(response.error_msg)",
        "RuntimeError: dummy requests failed",
    ]
    assert _crash_phase(tmp_path, "trtllm", lines) == "allocating_kv_cache"


def test_trtllm_crash_in_the_model_loader_is_the_weights_step(tmp_path: Path) -> None:
    """1.1 moved the model's construction and checkpoint load from model_engine.py's _load_model to
    model_loader.py's ModelLoader.load: an error raised under it (building the model from its config) is loading
    weights. Frames as Python prints them from 1.1's source."""
    lines = [
        _TRT_ATTENTION,
        *_TRT_WORKER,
        '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/model_engine.py", line 175, '
        "in __init__",
        "    self.model, moe_load_balancer = loader.load(",
        '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/pyexecutor/model_loader.py", line 235, '
        "in load",
        "    model = AutoModelForCausalLM.from_config(config)",
        '  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch/models/modeling_qwen3_moe.py", line 40, '
        "in __init__",
        "    self.num_experts = config.num_experts",
        "AttributeError: 'Qwen3Config' object has no attribute 'num_experts'",
    ]
    assert _crash_phase(tmp_path, "trtllm", lines) == "loading_weights"


# -- SGLang --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "line", "phase"),
    [
        # https://github.com/sgl-project/sglang/issues/21395 (2026-03, 0.5.x): init_memory_pool's first line, after
        # a weight load begun (AgentiviumAI/workflow-aware-prompt-cache's sglang.log, below)
        pytest.param(
            "[2026-09-24 17:32:48] Load weight begin. avail mem=15.08 GB",
            "[2026-03-25 09:32:19] Using KV cache dtype: torch.bfloat16",
            State.ALLOCATING_KV_CACHE,
            id="kv-cache-dtype",
        ),
        # https://github.com/AgentiviumAI/workflow-aware-prompt-cache (sglang.log, 2026, in the corpus): the
        # multi-thread loader's bar, and the snapshot lookup of the weights' download step
        pytest.param(
            "[2026-09-24 17:32:48] Init torch distributed begin.",
            "Multi-thread loading shards:   0% Completed | 0/2 [00:00<?, ?it/s]",
            State.LOADING_WEIGHTS,
            id="multi-thread-loading",
        ),
        pytest.param(
            "[2026-09-24 17:32:48] Init torch distributed begin.",
            "[2026-09-24 17:32:48] Found local HF snapshot for Qwen/Qwen2.5-7B-Instruct-AWQ at /home/john-duong/.cache/"
            "huggingface/hub/models--Qwen--Qwen2.5-7B-Instruct-AWQ/snapshots/b25037543e9394b818fdfca67ab2a00ecc7dd641; "
            "skipping download.",
            State.LOADING_WEIGHTS,
            id="local-snapshot",
        ),
    ],
)
def test_an_sglang_step_line_names_its_step(before: str, line: str, phase: State) -> None:
    """SGLang 0.5's memory pool announces the KV cache's dtype before its pools; its weight loader looks the
    checkpoint up (a local snapshot, or a download) and its multi-thread loader draws its own bar: a crop that ends
    there is in that step."""
    assert _state("sglang", [before, line]) == phase


_SGL_SCHEDULER = [
    "[2025-11-05 14:42:19 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2753, in run_scheduler_process',
    "    scheduler = Scheduler(",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 311, in __init__',
    "    self.tp_worker = TpModelWorker(",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/tp_worker.py", line 235, in __init__',
    "    self._model_runner = ModelRunner(",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 312, in __init__',
    "    self.initialize(min_per_gpu_memory)",
]


def test_sglang_crash_in_init_device_graphs_is_the_capture_step(tmp_path: Path) -> None:
    """0.5's ModelRunner makes its graph runners in init_device_graphs (init_cuda_graphs before and after): an error
    raised there is graph capture. The frame is sglang#11218's ('model_runner.py, line 1825, in
    init_device_graphs', in the corpus); the rest of the stack as 0.5.5 prints it."""
    lines = [
        "[2025-11-05 14:40:02 TP0] Memory pool end. avail mem=10.61 GB",
        *_SGL_SCHEDULER,
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 402, in initialize',
        "    self.init_device_graphs()",
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1825, in '
        "init_device_graphs",
        "    self.graph_runner = graph_runners[self.device](self)",
        "KeyError: 'xpu'",
    ]
    assert _crash_phase(tmp_path, "sglang", lines) == "capturing_graphs"


def test_sglang_crash_in_the_sampling_prewarm_is_the_capture_step(tmp_path: Path) -> None:
    """0.5.23's scheduler warms the sampling path right after the CUDA graphs (Scheduler.init_model_worker ->
    ModelRunner.prewarm_sampling): an error raised there is the warm-up's, in a crop that last showed the memory
    pool. Frames as Python prints them from the 0.5.23 wheel."""
    lines = [
        "[2026-11-02 10:00:00 TP0] Memory pool end. avail mem=10.61 GB",
        "[2026-11-02 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1169, in init_model_worker',
        "    model_runner.prewarm_sampling()",
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1167, in '
        "prewarm_sampling",
        "    self.sampling_prewarm_result = SamplingPrewarmResult()",
        "RuntimeError: CUDA error: out of memory",
    ]
    assert _crash_phase(tmp_path, "sglang", lines) == "capturing_graphs"


@pytest.mark.parametrize(
    "frames",
    [
        pytest.param(
            [
                '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 398, in '
                "initialize",
                "    self.init_attention_backend()",
                '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1905, in '
                "init_attention_backend",
                "    self.attn_backend = self._get_attention_backend()",
            ],
            id="init-attention-backend-0.5.5",
        ),
        pytest.param(
            [
                '  File "/sgl-workspace/sglang/python/sglang/srt/managers/tp_worker.py", line 409, in alloc_memory_pool',
                "    self.model_runner.alloc_memory_pool(",
                '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 982, in '
                "alloc_memory_pool",
                "    result = self.kv_cache_configurator.configure(",
            ],
            id="alloc-memory-pool-0.5.23",
        ),
    ],
)
def test_sglang_crash_after_the_weights_in_the_pool_or_attention_step(
    tmp_path: Path, frames: list[str]
) -> None:
    """The memory pool (0.5.23's alloc_memory_pool) and the attention backends made for it (init_attention_backend)
    come after the weights and before the graphs: an error raised there is the KV cache's step, even in a crop that
    last showed the weights loading. Frames as Python prints them from the wheels' source."""
    lines = [
        "[2025-11-05 14:39:40 TP0] Load weight begin. avail mem=78.66 GB",
        *_SGL_SCHEDULER,
        *frames,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB",
    ]
    assert _crash_phase(tmp_path, "sglang", lines) == "allocating_kv_cache"


# -- vLLM ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "line", "phase"),
    [
        # https://github.com/vllm-project/vllm/issues/18730 (V1, 2025-05, in the corpus): the memory profiling run's
        # first line for a multimodal model
        pytest.param(
            "INFO 05-27 11:47:41 [loader.py:458] Loading weights took 28.05 seconds",
            "INFO 05-27 11:47:41 [gpu_model_runner.py:1620] Encoder cache will be initialized with a budget of 16384 "
            "tokens, and profiled with 29 image items of the maximum feature size.",
            State.ALLOCATING_KV_CACHE,
            id="encoder-cache-profiling",
        ),
        # https://github.com/EuroEval/EuroEval/issues/1178 (V1 TP2, 2025-09, in the corpus): the weights' download,
        # the excerpt's first line of the engine's own
        pytest.param(
            "",
            "(Worker_TP0 pid=3761) INFO 09-15 13:59:06 [weight_utils.py:369] Time spent downloading weights for "
            "google/gemma-2-2b-it: 40.379418 secondsB/s]",
            State.LOADING_WEIGHTS,
            id="weights-downloaded",
        ),
    ],
)
def test_a_vllm_step_line_names_its_step(before: str, line: str, phase: State) -> None:
    """vLLM 0.11's model loader, memory profiling and torch.compile backend print lines the profile did not know:
    a crop that ends on one is in that step, not still in the one before."""
    assert _state("vllm", [ln for ln in (before, line) if ln]) == phase
