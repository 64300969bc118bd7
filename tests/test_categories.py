"""Tests for watchdog.core.categories' reading of `[[category]]` tables: class, where raised, template, phrase."""

from __future__ import annotations

import pytest

from watchdog.core.categories import categorize
from watchdog.exceptions import ConfigError
from watchdog.profiles.categoryrules import TIERS
from watchdog.profiles.loader import load_profile
from watchdog.profiles.model import parse_profile
from watchdog.vocabulary import Category

_RULES = load_profile("generic").categories  # common.toml's tables


def _tb(*frames: str, last: str) -> str:
    # a traceback of (path, function) frames ending in the exception line `last`
    lines = ["Traceback (most recent call last):"]
    for frame in frames:
        path, fn = frame.split(":")
        lines += [f'  File "{path}", line 1, in {fn}', "    call()"]
    return "\n".join([*lines, last])


# Each line is as published in the thread its id names (github.com/<owner>/<repo>/issues/<n>).
@pytest.mark.parametrize(
    ("line", "category"),
    [
        pytest.param(
            "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
            "cuda",
            id="illegal-memory-access-vllm-27571",
        ),
        pytest.param(
            "CUDA error: an illegal memory access was encountered",
            "cuda",
            id="illegal-memory-access-ollama-10265",
        ),
        pytest.param(
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "cuda",
            id="no-kernel-image-llm-d-84",
        ),
        pytest.param(
            "python: /project/lib/Analysis/Allocation.cpp:43: std::pair<llvm::SmallVector<unsigned int>, "
            "llvm::SmallVector<unsigned int> > mlir::triton::getCvtOrder(mlir::Attribute, mlir::Attribute): "
            'Assertion `!(srcMmaLayout && dstMmaLayout && !srcMmaLayout.isAmpere()) && "mma -> mma layout '
            "conversion is only supported on Ampere\"' failed.",
            "assertion",
            id="c-assert-triton-sglang-913",
        ),
        pytest.param(
            "/tmp/eng/llama_cpp_python-0.3.36/vendor/llama.cpp/ggml/src/ggml.c:5515: "
            "GGML_ASSERT(ggml_can_mul_mat(k, q)) failed",
            "assertion",
            id="ggml-assert-captured-bad-heads",
        ),
        pytest.param(
            "llama_model_load: error loading model: error loading model vocabulary: unknown pre-tokenizer type: "
            "'qwen2'",
            "model_load",
            id="tokenizer-pre-hash-unknown-ollama-2025-02",
        ),
        pytest.param(
            "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
            "unsupported",
            id="flash-attn-ampere-turboquant-t4",
        ),
        pytest.param(
            "ERROR:    [Errno -2] Name or service not known",
            "config",
            id="uvicorn-host-unresolvable-trapi-kp",
        ),
        pytest.param(
            'ValueError("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are '
            "('fp8e4b15', 'fp8e5')\")",
            "unsupported",
            id="triton-fp8e4nv-ampere-vllm-15336",
        ),
        pytest.param(
            "ValueError: Weight input_size_per_partition = 10944 is not divisible by min_thread_k = 128. "
            "Consider reducing tensor_parallel_size or running with --quantization gptq.",
            "unsupported",
            id="marlin-shape-awq-deepseek-v2-lite",
        ),
        pytest.param(
            "RuntimeError: prob_m = 59136 is not divisible by thread_m = 512",
            "unsupported",
            id="marlin24-shape-llm-compressor-54",
        ),
        pytest.param(
            "NotImplementedError: Sharded Llama requires Flash Attention enabled models.",
            "unsupported",
            id="notimplemented-tgi-686",
        ),
        pytest.param(
            "RuntimeError: start (0) + length (1280) exceeds dimension size (1024).",
            "model_load",
            id="narrow-exceeds-llm-compressor-1127",
        ),
        pytest.param(
            "ValueError: Non-consecutive added token '<pad>' found. Should have index 106611 but has index 0 in "
            "saved vocabulary.",
            "model_load",
            id="tokenizer-vocab-mismatch-tgi-1115",
        ),
        pytest.param(
            "Error: Invalid configuration : NUM_MMA_Q=2 NUM_MMA_D_QK=2 NUM_MMA_D_VO=2 NUM_MMA_KV=4 NUM_WARPS_Q=4 ",
            "unsupported",
            id="flashinfer-invalid-configuration-flashinfer-1048",
        ),
        pytest.param(
            'ValueError("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are '
            "('fp8e4b15', 'fp8e5')\")', please check the stack trace above for the root cause",
            "unsupported",
            id="fp8e4nv-wrapper-tail-qwen-flash-next-7",
        ),
        pytest.param(
            "llama.cpp:11968: The current context does not support K-shift",
            "unsupported",
            id="ggml-abort-k-shift-ollama-8492",
        ),
        pytest.param(
            "/src/llama-kv-cache.cpp:812: The current KV cache / model configuration does not support K-shift",
            "unsupported",
            id="ggml-abort-k-shift-2025-wording",
        ),
        pytest.param(
            "torch._dynamo.exc.Unsupported: Logger not supported for non-export cases. To avoid graph breaks "
            "caused by logger in compile-mode, it is recommended to disable logging by adding logging methods to "
            "config.ignore_logger_methods",
            "unsupported",
            id="dynamo-unsupported-sglang-pr19573",
        ),
        pytest.param(
            "AssertionError: Attention sinks are only supported for TRTLLM backend.",
            "unsupported",
            id="only-supported-assert-trtllm-13156",
        ),
    ],
)
def test_category_from_what_failed(line: str, category: str) -> None:
    """A real error line gets the category of what failed: its class, or its library's wording of it."""
    assert categorize(line, rules=_RULES) is Category(category)


@pytest.mark.parametrize(
    ("line", "category"),
    [
        pytest.param(
            "RuntimeError: Worker failed with error 'CUDA error: no kernel image is available for execution on "
            "the device",
            "cuda",
            id="vllm-worker-wrapper",
        ),
        pytest.param(
            "Exception in worker VllmWorkerProcess while processing method load_model: Weight "
            "input_size_per_partition = 7392 is not divisible by min_thread_k = 128., Traceback (most recent call "
            "last):",
            "unsupported",
            id="vllm-worker-process-llm-compressor-54",
        ),
    ],
)
def test_a_message_carried_by_a_wrapper_is_read_from_its_start(line: str, category: str) -> None:
    """A wrapper's line carries the failure's own message, quoted or after a colon: its template is matched
    from there (real vLLM lines)."""
    assert categorize(line, rules=_RULES) is Category(category)


def test_narrow_in_a_weight_loader_is_model_load() -> None:
    """torch's narrow() refusing a shard inside vLLM's weight loader is a checkpoint that does not fit
    (vllm-project/vllm-ascend#3109's frames)."""
    last = "RuntimeError: start (0) + length (6144) exceeds dimension size (3072)."
    tb = _tb(
        "/root/autodl-tmp/vllm/vllm/model_executor/models/qwen2.py:load_weights",
        "/root/autodl-tmp/vllm/vllm/model_executor/layers/linear.py:weight_loader",
        last=last,
    )
    assert categorize(last, tb, rules=_RULES) is Category.MODEL_LOAD


@pytest.mark.parametrize(
    ("line", "traceback", "category"),
    [
        pytest.param(
            "Error: Invalid configuration : NUM_MMA_Q=2 NUM_MMA_D_QK=2 NUM_MMA_D_VO=2 NUM_MMA_KV=4 NUM_WARPS_Q=4 ",
            "",
            "unsupported",
            id="flashinfer-configuration-is-no-option",
        ),
        pytest.param(
            "zmq.error.ZMQError: Operation not supported",
            _tb(
                "/usr/local/lib/python3.10/dist-packages/vllm/engine/multiprocessing/client.py:run_output_handler_loop",
                "/usr/local/lib/python3.10/dist-packages/zmq/_future.py:poll",
                last="zmq.error.ZMQError: Operation not supported",
            ),
            "other",
            id="zmq-operation-not-supported-vllm-10856",
        ),
        pytest.param("TypeError: unhashable type: 'dict'", "", "other", id="unhashable-dict-vllm-30861"),
    ],
)
def test_a_stray_word_does_not_decide(line: str, traceback: str, category: str) -> None:
    """A word of a category inside another library's message does not make that category: FlashInfer's
    "Invalid configuration" is a kernel with no config for the shape (unsupported, not config); ZMQ's
    "Operation not supported" and a grammar backend's TypeError say nothing known (other, not unsupported
    or config)."""
    assert categorize(line, traceback, rules=_RULES) is Category(category)


def test_a_class_beats_a_phrase_and_a_template_beats_a_wrapping_class() -> None:
    """The exception's class decides over a phrase in its message; a class that carries other errors'
    messages (AssertionError, pydantic's ValidationError) gives way to what its message words."""
    assert categorize("torch.OutOfMemoryError: NCCL error while allocating", rules=_RULES) is Category.OOM
    assert categorize("AssertionError: GPU arch gfx1201 is invalid or not supported", rules=_RULES) is (
        Category.UNSUPPORTED
    )
    assert categorize("AssertionError: Expected 4 got 3", rules=_RULES) is Category.ASSERTION
    assert categorize("torch.AcceleratorError: CUDA error: out of memory", rules=_RULES) is Category.OOM


def test_where_it_was_raised_tells_apart_one_class() -> None:
    """One class means what its place says: an AssertionError inside a weight loader is a checkpoint that
    does not fit, the same elsewhere is an assertion."""
    tb = _tb("/v/vllm/model_executor/layers/linear.py:weight_loader", last="AssertionError")
    assert categorize("AssertionError", tb, rules=_RULES) is Category.MODEL_LOAD
    tb = _tb("/v/vllm/engine/core.py:step", last="AssertionError")
    assert categorize("AssertionError", tb, rules=_RULES) is Category.ASSERTION


def test_a_profile_rule_of_an_engine_comes_before_the_common_ones() -> None:
    """An engine's own `[[category]]` table of the same tier is tried before common.toml's (SGLang's JSON
    option read by ModelConfig is config; the same error elsewhere is not)."""
    rules = load_profile("sglang").categories
    last = "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2"
    tb = _tb(
        "/v/sglang/srt/configs/model_config.py:__init__",
        "/usr/lib/python3.11/json/__init__.py:loads",
        last=last,
    )
    assert categorize(last, tb, rules=rules) is Category.CONFIG
    tb = _tb("/v/transformers/configuration_utils.py:_dict_from_json_file", last=last)
    assert categorize(last, tb, rules=rules) is Category.OTHER


def test_nothing_known_is_other() -> None:
    """With no rule that holds, or no rules at all, the category is `other`."""
    assert categorize("RuntimeError: something odd", rules=_RULES) is Category.OTHER
    assert categorize("torch.OutOfMemoryError: x", rules=()) is Category.OTHER


def test_a_rule_names_its_tier_from_its_fields() -> None:
    """A `[[category]]` table's precedence is set by what it names, and a bad table is refused with its key."""
    data = {
        "name": "x",
        "category": [
            {"exceptions": ["FooError"], "template": "bar", "category": "oom"},
            {"modules": ["foo/"], "category": "cuda"},
            {"phrase": ["baz"], "category": "config"},
        ],
    }
    tiers = [TIERS[r.tier] for r in parse_profile(data, "x.toml").categories]
    assert tiers == ["class+template", "where", "phrase"]
    with pytest.raises(ConfigError, match=r"category\[0\]\.category"):
        parse_profile({"name": "x", "category": [{"phrase": ["a"], "category": "nope"}]}, "x.toml")
    with pytest.raises(ConfigError, match=r"category\[0\]\.phrase"):
        parse_profile(
            {"name": "x", "category": [{"phrase": ["a"], "template": "b", "category": "oom"}]}, "x.toml"
        )
