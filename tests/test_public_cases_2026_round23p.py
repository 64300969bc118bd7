"""Accelerator platforms' own startup lines and error templates, from the twenty-third crop of public 2025-2026 logs
of vLLM's and SGLang's platforms (issue 30, part P): vLLM-Ascend's ACL graph and torchair lines, torch_npu's graph
capture, vLLM-Gaudi's warm-up and memory lines, tpu-inference's precompilation, Mosaic's refusals, and the platform
plugins' own validation, each read from the plugin's source and pinned on the real log that showed it
(tests/fixtures/corpus) where the tuning crop has one."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS, crash_category, replay_text
from publiccases import error as _error
from publiccases import verdict as _verdict

_ACL_BAR = "vllm-ascend-2025-glm45v-capturing-acl-graphs-0pct-workerproc-hit-exception-cut-vllmascend2516"
_CAPTURE_BEGIN = "vllm-ascend-2026-v0.18.0rc1-a3-mtp-npumodelrunner-capture-begin-207005-failed-to-apply-for-memory-vllmascend8393"
_MOSAIC = (
    "vllm-tpu-2025-gke-v6e-gemma3-workerproc-mosaic-failed-to-compile-not-implemented-line-only-jax29520"
)
_TPU_CAPTURE = (
    "vllm-tpu-inference-2026-torchax-multimodal-precompile-input-embeddings-merger-enginecore-failed-to-start-cut-"
    "tpuinference2313"
)
_TPU_KV = (
    "vllm-tpu-inference-2026-dsv2-lite-fp8-precompile-gather-logprobs-before-kv-cache-cut-tpuinference1729"
)

_WORKER_FAILED = (
    "(VllmWorker TP0 pid=19108) ERROR 08-25 04:33:08 [multiproc_executor.py:596] WorkerProc hit an exception.\n"
    "(VllmWorker TP0 pid=19108) ERROR 08-25 04:33:08 [multiproc_executor.py:596] Traceback (most recent call last):\n"
)


def _text(name: str) -> str:
    return (CORPUS / "vllm" / f"{name}.log").read_text(encoding="utf-8")


def test_vllm_ascends_acl_graph_bar_is_the_graph_capture(tmp_path: Path) -> None:
    """vLLM-Ascend v0.10.1rc1-v0.11 draws its own capture bar, 'Capturing ACL graphs (mixed prefill-decode,
    PIECEWISE)' (vllm_ascend/worker/model_runner_v1.py _capture_aclgraphs, :3496 in v0.11.0), after the KV cache:
    vllm-ascend#2516 (GLM-4.5V, 2025-08) dies at its 0% (a cut WorkerProc traceback), a crash in capturing_graphs,
    not in the KV cache's step. Its ACL graph wrapper's DEBUG line and the torchair runner's compiled batch sizes say
    the same."""
    out = _verdict("vllm", _ACL_BAR)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    sized = "(EngineCore_0 pid=18650) INFO 08-25 04:33:08 [kv_cache_utils.py:849] GPU KV cache size: 582,528 tokens\n"
    for line in (
        "(VllmWorker TP0 pid=19108) DEBUG 08-25 04:33:08 [acl_graph.py:128] Capturing a aclgraph on "
        "(PIECEWISE,BatchDescriptor(num_tokens=128, uniform_decode=False))\n",
        "(VllmWorker TP0 pid=19108) INFO 08-25 04:33:08 [torchair_model_runner.py:247] Batchsize 128 is compiled "
        "successfully: 1/4.\n",
        "(VllmWorker TP0 pid=19108) INFO 08-25 04:33:08 [torchair_model_runner.py:283] Capturing torchair graph, "
        "this usually takes 2.0~6.0 mins.\n",
    ):
        out = replay_text(tmp_path, sized + line + _WORKER_FAILED)
        assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs"), line
    out = replay_text(tmp_path, sized + _WORKER_FAILED)
    assert out["phase"] == "allocating_kv_cache"


def test_a_failed_npu_graph_capture_begin_is_in_the_graph_capture(tmp_path: Path) -> None:
    """torch_npu's NPUGraph::capture_begin / capture_end check their ACL call and name themselves in the message
    ('capture_begin:<file>:<line> NPU function error: c10_npu::acl::AclmdlRICaptureBegin(capture_stream_,
    capture_mode), error code is 207005'): vllm-ascend#8393 (v0.18.0rc1, A3, 2026-04) relays it through 'Worker failed
    with error' with no traceback frame, and torch_npu's '[Error]: Failed to apply for memory.' under it; the crash is
    in the graph capture, oom. The line without the capture's function says nothing of the phase."""
    out = _verdict("vllm", _CAPTURE_BEGIN)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    assert _error(out)["category"] == "oom"
    text = _text(_CAPTURE_BEGIN)
    assert "capture_begin:" in text
    other = replay_text(
        tmp_path, text.replace("capture_begin:", "Initialize:").replace("AclmdlRICaptureBegin", "SetDevice")
    )
    assert other["phase"] != "capturing_graphs"


def test_mosaic_refusing_a_kernel_is_unsupported(tmp_path: Path) -> None:
    """Mosaic, the TPU kernel compiler under jax's Pallas, words a case it has no lowering for 'Mosaic failed to
    compile TPU kernel: Not implemented: ...' (jax's Pallas TPU notes: an unimplemented case in the compiler) or
    'Unsupported ...': vLLM on a v6e under GKE (jax-ml/jax#29520, 2025-06) stops on 'The last dim size is not 128 in
    original base memref', unsupported. Its other refusals (an index it cannot prove aligned) are no such word."""
    out = _verdict("vllm", _MOSAIC)
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "unsupported"
    assert "Not Implemented: The last dim size is not 128" in str(found["summary"])
    line = _text(_MOSAIC).splitlines()[0]
    refused = "Not Implemented: The last dim size is not 128 in original base memref"
    matmul = line.replace(f"ValueError: Mosaic failed to compile TPU kernel: {refused}", "")
    matmul += "jax.errors.JaxRuntimeError: INTERNAL: Mosaic failed to compile TPU kernel: Unsupported matmul RHS type"
    assert crash_category(tmp_path, matmul, "Unsupported matmul RHS type") == "unsupported"
    proof = line.replace(
        "Not Implemented: The last dim size is not 128 in original base memref",
        "cannot statically prove that index in dimension 1 is a multiple of 128",
    )
    assert crash_category(tmp_path, proof, "cannot statically prove") != "unsupported"


def test_tpu_inference_precompiles_around_the_kv_cache(tmp_path: Path) -> None:
    """tpu-inference's compilation manager logs 'Precompile <name> --> {shape}' for each XLA program: capture_model
    ('Precompile all the subgraphs with possible input shapes.') runs after the KV cache (capturing_graphs: the torchax
    multimodal failure at input_embeddings_merger, tpu-inference#2313, 2026-04), while from v0.13 the worker's
    initialize_from_config precompiles sampling and gather_logprobs before it allocates the KV cache (tpu_worker.py
    :401-411 at d544f83): the DeepSeek-V2-Lite log of tpu-inference#1729 (2026-02) stops there, in the KV cache's
    step. 'Memory statistics |' and 'Init kv-cache |' are that step's own lines."""
    out = _verdict("vllm", _TPU_CAPTURE)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    out = _verdict("vllm", _TPU_KV)
    assert (out["state"], out["phase"]) == ("allocating_kv_cache", "allocating_kv_cache")
    prefix = "(EngineCore_DP0 pid=86218) INFO 02-14 02:31:11 "
    for line, phase in (
        ("[model_loader.py:653] Loading model with MODEL_IMPL_TYPE=flax_nnx", "loading_weights"),
        ("[tpu_runner.py:1264] Init model | hbm=[(1.11, 30.75)]GiB", "loading_weights"),
        (
            "[tpu_worker.py:557] Memory statistics | total_hbm_limit_gb=30.75GiB | total_hbm_limit_cap_gb=27.67GiB | "
            "total_hbm_used_gb=1.11GiB | total_hbm_avail_gb=26.56GiB",
            "allocating_kv_cache",
        ),
        (
            "[kv_cache_manager.py:966] Init kv-cache | num_total_layers=27 | num_blocks=[4096]",
            "allocating_kv_cache",
        ),
        (
            "[compilation_manager.py:236] Precompile all the subgraphs with possible input shapes.",
            "capturing_graphs",
        ),
        (
            "[compilation_manager.py:137] Precompile worker0 backbone --> {'num_tokens': 16}",
            "capturing_graphs",
        ),
    ):
        out = replay_text(tmp_path, prefix + line + "\n")
        assert out["phase"] == phase, line


def test_gaudis_memory_profile_and_bucket_warmup(tmp_path: Path) -> None:
    """vLLM-Gaudi's worker sizes the KV cache from its own memory profile ('Free device memory: ..., ... usable
    (gpu_memory_utilization=U), ... reserved for HPUGraphs ...', hpu_worker.py:423; 'Usable num_blocks: N, ...',
    :541), then warms up every bucket, compiling and capturing its HPU graphs ('[Warmup][Graph/prompt][i/n]
    batch_size:... free_mem:...', hpu_model_runner.py log_warmup :5226; 'Warmup finished in N secs, allocated ...',
    :6306; HabanaAI's vllm-fork prints the same warm-up lines): allocating_kv_cache, then capturing_graphs. The lines
    are the source's format strings filled in (the crop's Gaudi warm-up logs are held out)."""
    head = "(Worker_TP0 pid=1051) INFO 01-27 11:09:40 "
    memory = (
        "[hpu_worker.py:423] Free device memory: 89.5 GiB, 80.55 GiB usable (gpu_memory_utilization=0.9), "
        "8.055 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), 2 MiB reserved for KV cache dummy block "
        "72.49 GiB reserved for usable KV cache\n"
    )
    blocks = "[hpu_worker.py:541] Usable num_blocks: 4636, actual allocated num_blocks: 4637 (_PAD_BLOCK_ID=4636)\n"
    warm = "[Warmup][Graph/prompt][1/352] batch_size:1 query_len:128 num_blocks:0 free_mem:7.476 GiB\n"
    done = "[hpu_model_runner.py:6306] Warmup finished in 312 secs, allocated 6.2 GiB of device memory\n"
    assert replay_text(tmp_path, head + memory)["phase"] == "allocating_kv_cache"
    assert replay_text(tmp_path, head + blocks)["phase"] == "allocating_kv_cache"
    engine = "[hpu_worker.py:547] Initializing cache engine took 72.49 GiB of device memory\n"
    assert replay_text(tmp_path, head + engine)["phase"] == "allocating_kv_cache"
    assert replay_text(tmp_path, head + memory + warm)["phase"] == "capturing_graphs"
    assert replay_text(tmp_path, head + memory + head + done)["phase"] == "capturing_graphs"
    fork = "INFO 05-02 12:09:01 hpu_model_runner.py:1730] [Warmup][Decode][203/416] batch_size:96 num_blocks:896 "
    assert replay_text(tmp_path, fork + "free_mem:14.93 GiB\n")["phase"] == "capturing_graphs"


def test_the_ascend_plugins_own_option_checks_are_config(tmp_path: Path) -> None:
    """vLLM-Ascend validates its --additional-config and its combination with vLLM's arguments in
    vllm_ascend/ascend_config.py (AscendConfig and its _validate* steps) and vllm_ascend/platform.py
    (check_and_update_config's validators), raising ValueError or TypeError on purpose: config, as vLLM's own
    config/ is; a wording there that refuses a feature, and the plugins' (Ascend, Gaudi, tpu-inference) refusals
    anywhere, are unsupported."""
    site = "/vllm-workspace/vllm-ascend/vllm_ascend"
    head = "ERROR 08-06 06:15:24 [core.py:1108] Traceback (most recent call last):\n"

    def raised(path: str, fn: str, exc: str) -> str:
        return (
            head
            + f'ERROR 08-06 06:15:24 [core.py:1108]   File "{site}/{path}", line 88, in {fn}\n'
            + "ERROR 08-06 06:15:24 [core.py:1108]     raise ValueError(\n"
            + f"ERROR 08-06 06:15:24 [core.py:1108] {exc}\n"
        )

    config = raised(
        "ascend_config.py", "__init__", "ValueError: additional_config.rl_config must be a dict, got str."
    )
    assert crash_category(tmp_path, config, "rl_config must be a dict") == "config"
    check = raised(
        "platform.py",
        "_check_ascend_config",
        "ValueError: ShortRequestFirst scheduling requires scheduler_config.policy='fcfs', but got priority.",
    )
    assert crash_category(tmp_path, check, "ShortRequestFirst") == "config"
    refused = raised(
        "platform.py",
        "_validate_parallel_config",
        "ValueError: PCP (Prefill Context Parallelism) is not supported by vLLM Ascend. Please set "
        "--prefill-context-parallel-size to 1.",
    )
    assert crash_category(tmp_path, refused, "is not supported by vLLM Ascend") == "unsupported"
    tpu = refused.replace(
        f"{site}/platform.py", "/workspace/tpu_inference/tpu_inference/runner/tpu_runner.py"
    )
    tpu = tpu.replace(
        "PCP (Prefill Context Parallelism) is not supported by vLLM Ascend. Please set "
        "--prefill-context-parallel-size to 1.",
        "prompt_logprobs is not supported with speculative decoding.",
    )
    assert crash_category(tmp_path, tpu, "prompt_logprobs is not supported") == "unsupported"
