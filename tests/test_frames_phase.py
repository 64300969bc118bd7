"""A traceback's frames tell the startup step it died in, from each engine's own call path (issue 30, frames).

Public logs are often crops around a traceback that lost the step markers before it; the frames a crop keeps are
the innermost ones, so each step's own callees are in the profiles' `[[frame]]` tables (read from the engines'
source by release). Each case is a real corpus log's traceback cut as a crop keeps it, or, where no corpus log
has the frame, a traceback written from the source's real call path (file, line and function as the release has
them), said so in its id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchscripts import load_script

from watchdog.core.categories import phase_from_frames
from watchdog.profiles.loader import load_profile

crop_score = load_script("crop_score.py")
CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"


def _before_root(case: str, lines: int) -> str:
    # the corpus case ENGINE/NAME's `lines` lines up to its label's root-cause line (its first), that line included:
    # the traceback's innermost frames and its exception, as a crop around the root cause keeps them
    label = json.loads((CORPUS / f"{case}.json").read_text(encoding="utf-8"))
    text = (CORPUS / f"{case}.log").read_text(encoding="utf-8", errors="replace").splitlines()
    at = next(i for i, line in enumerate(text) if label["root_cause"] in line)
    return "\n".join(text[max(0, at - lines) : at + 1])


_SGLANG_0523 = "/usr/local/lib/python3.12/dist-packages/sglang/srt"
# SGLang 0.5.23's call path ModelRunner.init_attention_backends -> build_attention_backends (attention_backend_setup.py
# lines 137, 256, 269, 283 in the wheel) -> FlashInferAttnBackend.__init__ allocating its workspace (line 466)
_SGLANG_ATTENTION_BACKEND = f"""\
  File "{_SGLANG_0523}/model_executor/model_runner_components/attention_backend_setup.py", line 137, in build_attention_backends
    attn_backend = _build_resolved_backend(
                   ^^^^^^^^^^^^^^^^^^^^^^^^
  File "{_SGLANG_0523}/model_executor/model_runner_components/attention_backend_setup.py", line 256, in _build_resolved_backend
    attn_backend = _build_backend_from_str(
                   ^^^^^^^^^^^^^^^^^^^^^^^^
  File "{_SGLANG_0523}/model_executor/model_runner_components/attention_backend_setup.py", line 269, in _build_backend_from_str
    _build_full_attention_backend_from_str(
  File "{_SGLANG_0523}/model_executor/model_runner_components/attention_backend_setup.py", line 283, in _build_full_attention_backend_from_str
    return ATTENTION_BACKENDS[backend_str](model_runner)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{_SGLANG_0523}/layers/attention/flashinfer_backend.py", line 466, in __init__
    self.workspace_buffer = torch.empty(
                            ^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 301.56 MiB is free."""

_VLLM = "/usr/local/lib/python3.12/dist-packages/vllm"
# vLLM 0.11.0's engine core: EngineCore._initialize_kv_caches -> Executor.initialize_from_config (v1/executor/
# abstract.py line 73) -> MultiprocExecutor.collective_rpc's get_response (multiproc_executor.py lines 264, 248)
_VLLM_INITIALIZE_FROM_CONFIG = f"""\
  File "{_VLLM}/v1/executor/abstract.py", line 73, in initialize_from_config
    self.collective_rpc("initialize_from_config",
  File "{_VLLM}/v1/executor/multiproc_executor.py", line 264, in collective_rpc
    result = get_response(w, dequeue_timeout,
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{_VLLM}/v1/executor/multiproc_executor.py", line 248, in get_response
    raise RuntimeError(
RuntimeError: Worker failed with error 'CUDA out of memory. Tried to allocate 2.00 GiB', please check the stack trace above for the root cause"""


_TRTLLM = "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/_torch"
# TensorRT-LLM's PyTorch backend, main 004b733: ModelLoader.load -> AutoModelForCausalLM.from_config -> the model
# class's constructor, cut (as a crop is) below ModelLoader.load's frame (the files and functions of the source's
# call path; the line numbers are placeholders)
_TRTLLM_MODEL_CONSTRUCTOR = f"""\
  File "{_TRTLLM}/models/modeling_auto.py", line 40, in from_config
    model = cls(config)
  File "{_TRTLLM}/models/modeling_qwen3_moe.py", line 380, in __init__
    super().__init__(
AssertionError: num_experts must be divisible by the expert-parallel size"""

# vLLM 0.8.5's V0 engine serving: MQLLMEngine.start -> run_engine_loop -> engine_step (engine/multiprocessing/
# engine.py lines 158, 221, 230) -> LLMEngine.step (engine/llm_engine.py line 1412) -> the executor's forward
_VLLM_V0_SERVING = f"""\
  File "{_VLLM}/engine/multiprocessing/engine.py", line 221, in run_engine_loop
    request_outputs = self.engine_step()
  File "{_VLLM}/engine/multiprocessing/engine.py", line 230, in engine_step
    return self.engine.step()
  File "{_VLLM}/engine/llm_engine.py", line 1412, in step
    outputs = self.model_executor.execute_model(
RuntimeError: CUDA error: an illegal memory access was encountered"""


@pytest.mark.parametrize(
    ("engine", "traceback", "phase"),
    [
        pytest.param(
            "vllm",
            _before_root("vllm/captured-vllm-shard-missing-cpu", 15),
            "loading_weights",
            id="vllm-weight-iterators-are-loading",
        ),
        pytest.param(
            "vllm",
            _VLLM_INITIALIZE_FROM_CONFIG,
            "allocating_kv_cache",
            id="vllm-rpc-initialize-from-config-from-source",
        ),
        pytest.param("vllm", _VLLM_V0_SERVING, "ready", id="vllm-v0-engine-loop-is-serving-from-source"),
        pytest.param(
            "sglang",
            _SGLANG_ATTENTION_BACKEND,
            "allocating_kv_cache",
            id="sglang-0.5.23-attention-backend-setup-from-source",
        ),
        pytest.param(
            "trtllm",
            _before_root(
                "trtllm/trtllm-2026-serve-kimi-k25-guided-decoder-vocab-size-padded-attributeerror-cut-issue15179",
                15,
            ),
            "allocating_kv_cache",
            id="trtllm-create-py-executor-guided-decoder-line",
        ),
        pytest.param(
            "trtllm",
            _TRTLLM_MODEL_CONSTRUCTOR,
            "loading_weights",
            id="trtllm-model-constructor-from-source",
        ),
        pytest.param(
            "tgi",
            _before_root("tgi/tgi-num-heads-not-divisible-num-shards-issue1354", 15),
            "loading_weights",
            id="tgi-model-constructor-is-loading",
        ),
        pytest.param(
            "tgi",
            _before_root("tgi/tgi-3.2.1-gemma3-27b-warmup-not-enough-memory-prefill-one-line-3130", 15),
            "allocating_kv_cache",
            id="tgi-warmup-prefill-oom-is-kv-sizing",
        ),
    ],
)
def test_frames_name_the_step(engine: str, traceback: str, phase: str) -> None:
    """The innermost frames a crop keeps name the startup step from the engine's own call path."""
    assert phase_from_frames(traceback, load_profile(engine)) == phase


def test_tgi_warmup_prefill_line_beats_the_warmup_frame() -> None:
    """TGI's FlashCausalLM.warmup measures memory with a prefill before it sizes the KV cache: a traceback through
    its generate_token line is the KV cache's step, though the frame's name (warmup) is the graphs' elsewhere; a
    traceback through its cuda_graph_warmup is still the graphs'. (TGI 3.3.7's flash_causal_lm.py, lines 1548 and
    1665: the source's call path.)"""
    site = "/usr/src/server/text_generation_server/models/flash_causal_lm.py"
    prefill = (
        f'  File "{site}", line 1548, in warmup\n    _, _batch, _ = self.generate_token(batch)\n'
        f'  File "{site}", line 1980, in generate_token\n    out, speculative_logits = self.forward(batch, adapter_data)\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB"
    )
    graphs = (
        f'  File "{site}", line 1665, in warmup\n    self.cuda_graph_warmup(bs, max_total_tokens, max_total_tokens)\n'
        f'  File "{site}", line 1410, in cuda_graph_warmup\n    self.model.forward(\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB"
    )
    tgi = load_profile("tgi")
    assert phase_from_frames(prefill, tgi) == "allocating_kv_cache"
    assert phase_from_frames(graphs, tgi) == "capturing_graphs"


def _last_15(case: str) -> dict[str, object]:
    # the verdict on the last 15 lines of the corpus case ENGINE/NAME, as crop_score.py cuts them
    label = json.loads((CORPUS / f"{case}.json").read_text(encoding="utf-8"))
    lines = crop_score.log_lines(CORPUS / f"{case}.log")
    start, end = crop_score.crops(lines, label["root_cause"])["last 15"]
    verdict: dict[str, object] = crop_score.replay_bytes(b"".join(lines[start:end]))
    return verdict


def test_tgi_prefill_rpc_is_serving() -> None:
    """TGI's shard serves through its Prefill / Decode RPCs, called only after the router's warm-up (the Warmup
    RPC): a traceback through them is serving, whatever generate_token below it raised. (TGI 3.3.7's server.py
    line 181 and flash_causal_lm.py: the source's call path; generate_token's line is a placeholder.)"""
    server = "/usr/src/server/text_generation_server"
    prefill = (
        f'  File "{server}/server.py", line 181, in Prefill\n'
        "    generations, next_batch, timings = self.model.generate_token(batch)\n"
        f'  File "{server}/models/flash_causal_lm.py", line 1980, in generate_token\n'
        "    out, speculative_logits = self.forward(batch, adapter_data)\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert phase_from_frames(prefill, load_profile("tgi")) == "ready"


def test_vllm_crop_of_static_lora_failure_is_after_the_engine() -> None:
    """The last 15 lines of a vLLM launch whose --lora-modules adapter is missing: the API server's traceback
    through init_app_state -> init_static_loras, run once the engine (its KV cache and warm-up) is built, before
    Uvicorn serves: the phase the engine's last step left, not `starting`."""
    verdict = _last_15("vllm/captured-vllm-lora-modules-missing-cpu")
    assert (verdict["state"], verdict["phase"]) == ("crashed", "capturing_graphs")


def test_trtllm_crop_of_guided_decoder_failure_is_kv_step() -> None:
    """The last 15 lines of a trtllm-serve launch that died building the guided decoder (after the model, with the
    KV cache's managers): the verdict's phase comes from create_py_executor's source line alone."""
    verdict = _last_15(
        "trtllm/trtllm-2026-serve-kimi-k25-guided-decoder-vocab-size-padded-attributeerror-cut-issue15179"
    )
    assert (verdict["state"], verdict["phase"]) == ("crashed", "allocating_kv_cache")
