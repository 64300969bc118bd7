"""What the thirty-first round's public logs of the six engines and their wrappers showed (issue 30, helper
i30-cases31), read from the engines' own source and pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict

# vllm-project/vllm#16997 (2025-04, 0.8.4 V1, TP 4): a worker's traceback cut in GPUModelRunner.execute_model
_EXECUTE = "vllm-2025-v1-worker-execute-model-cut-during-inference-issue16997"
# kubeai-project/kubeai#533 (2025-05, vLLM 0.8.3 in a KubeAI pod): V0's logger.exception(e), the traceback cut
_INPUT_SCALE = "vllm-2025-kubeai-pod-v0-mq-engine-no-attribute-input-scale-cut-kubeai533"
# ollama/ollama#10175 (2025-04, journald): the runner opening Mistral-small3.1's GGUF, the excerpt cut there
_GGML_HEADER = "ollama-2025-journald-runner-mistral3-ggml-header-cut-issue10175"


def test_a_traceback_cut_in_the_v1_model_runners_execute_model_was_serving() -> None:
    """V1's GPUModelRunner.execute_model is called only by Worker.execute_model for a scheduler's output (startup runs
    the model through _dummy_run: profile_run, the capture, the sampler warm-up), so a worker's traceback cut inside it
    crashed after ready. vllm#16997 was a crash while starting."""
    out = _verdict("vllm", _EXECUTE)
    assert (out["state"], out["phase"]) == ("crashed", "ready")


def test_v0s_logged_attribute_error_on_a_vllm_layer_is_the_cause_while_loading_weights() -> None:
    """V0's run_mp_engine logs the engine's error with logger.exception(e): its message alone, then the traceback,
    here cut. The message is AttributeError's template on a vLLM layer ('ColumnParallelLinear'), which exists only once
    the loader built the model: the cause (other: the engine's own programming error), at least loading_weights.
    kubeai#533 was a cut traceback while starting."""
    out = _verdict("vllm", _INPUT_SCALE)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert "'ColumnParallelLinear' object has no attribute 'input_scale'" in str(found["summary"])
    assert found["category"] == "other"


def test_ollamas_ggml_backend_header_is_the_models_load() -> None:
    """The ollama engine's ggml backend logs the model file's header (ml/backend/ggml/ggml.go New: architecture,
    file_type, ..., num_tensors, num_key_values) as the runner's model load begins: a log cut after it is loading the
    weights, not starting (the runner's 'Server listening on ...' before it is only its endpoint for the load)."""
    out = _verdict("ollama", _GGML_HEADER)
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")
