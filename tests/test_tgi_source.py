"""TGI read from its source (issue 30): each rule of tgi.toml added this round, pinned on the source's own wording.

A line is written from the source's own format string and the exception's own form (server/text_generation_server or
the Rust launcher and router at the v3.0.0-v3.3.7 tags; the file and function named in each test's docstring),
inside the launch the same release prints: the launcher's Args, the shard's 'Error when initializing model' and its
traceback through server.py serve_inner, the launcher's 'Shard 0 failed to start'. The values a format string fills
in are plausible ones.
"""

from __future__ import annotations

from pathlib import Path

from publiccases import crash_category as _category
from publiccases import error as _error
from publiccases import replay_text as _replay

_SERVER = "/usr/src/server/text_generation_server"
_ARGS = '2026-01-20T10:02:11.000000Z  INFO text_generation_launcher: Args { model_id: "/models/m", num_shard: None }\n'


def _shard_failed(file: str, function: str, line: str) -> str:
    # server.py serve_inner (v3.3.7:266) -> get_model_with_lora_adapters -> ... -> the raise in `file`; the shard logs
    # 'Error when initializing model' with its traceback, the launcher reports the shard and exits
    return _ARGS + (
        "2026-01-20T10:02:12.000000Z  INFO text_generation_launcher: Starting shard rank=0\n"
        "2026-01-20T10:02:31.000000Z ERROR text_generation_launcher: Error when initializing model\n"
        "Traceback (most recent call last):\n"
        f'  File "{_SERVER}/server.py", line 266, in serve_inner\n'
        "    model = get_model_with_lora_adapters(\n"
        f'  File "{_SERVER}/{file}", line 120, in {function}\n'
        "    raise ValueError(\n"
        f"{line}\n"
        "2026-01-20T10:02:32.000000Z ERROR text_generation_launcher: Shard 0 failed to start\n"
        "2026-01-20T10:02:32.000000Z  INFO text_generation_launcher: Shutting down shards\n"
        "Error: ShardCannotStart\n"
    )


def test_a_shard_refusing_a_feature_or_platform_is_unsupported(tmp_path: Path) -> None:
    """layers/attention/kv_cache.py KVCache.__init__ (v3.3.7:74-84): raise ValueError("FP8 KV cache is currently only
    supported for flashinfer on CUDA and paged attention on ...") and "float8_e5m2 FP8 KV cache is not supported on AMD
    ROCm"; models/mamba.py Mamba.__init__ (v3.3.7:419) RuntimeError("Mamba does not support Tensor Parallelism (TP)").
    Each refuses a capability (they were `other`); a ValueError with no such words raised in the same shard
    (models/custom_modeling/opt_modeling.py forward: 'Head mask for a single layer should be of size 4, but is 8') stays
    `other`."""
    for file, function, line in [
        (
            "layers/attention/kv_cache.py",
            "__init__",
            "ValueError: FP8 KV cache is currently only supported for flashinfer on CUDA and paged attention on CUDA, "
            "ROCm and INTEL IPEX and flashdecoding in Intel IPEX ",
        ),
        (
            "layers/attention/kv_cache.py",
            "__init__",
            "ValueError: float8_e5m2 FP8 KV cache is not supported on AMD ROCm",
        ),
        ("models/mamba.py", "__init__", "RuntimeError: Mamba does not support Tensor Parallelism (TP)"),
    ]:
        words = line.split(": ", 1)[1][:30]
        assert _category(tmp_path, _shard_failed(file, function, line), words) == "unsupported", line
    request = "ValueError: Head mask for a single layer should be of size 4, but is 8"
    text = _shard_failed("models/custom_modeling/opt_modeling.py", "forward", request)
    assert _category(tmp_path, text, "Head mask") == "other"


def test_marlins_refused_bit_width_is_unsupported_not_config(tmp_path: Path) -> None:
    """layers/marlin/gptq.py repack_gptq_for_marlin (v3.3.7:298-306): raise RuntimeError(f"Repacking {bits}-bit GPTQ
    weights as Marlin is not supported, must be one of: {supported_bits}"): the kernel lists the variants it has, and
    the bits are the checkpoint's (it was `config`, from the phrase 'must be one of')."""
    line = "RuntimeError: Repacking 3-bit GPTQ weights as Marlin is not supported, must be one of: [4, 8]"
    text = _shard_failed("layers/marlin/gptq.py", "repack_gptq_for_marlin", line)
    assert _category(tmp_path, text, "Repacking 3-bit GPTQ") == "unsupported"


def test_a_checkpoint_without_what_the_shard_reads_is_model_load(tmp_path: Path) -> None:
    """layers/exl2.py Exl2WeightsLoader.get_weights (v3.3.7:44): RuntimeError("Cannot load `exl2`-quantized weight, make
    sure the model is already quantized."); layers/compressed_tensors/loader.py CompressedTensorsLoader.__init__
    (v3.3.7:44): ValueError("Checkpoint does not have compressed-tensors configuration"); utils/hub.py weight_files
    (v3.3.7:142): FileNotFoundError(f"No local weights found in {model_id} with extension {extension}"). The model's
    files (they were `other`)."""
    for file, function, line in [
        (
            "layers/exl2.py",
            "get_weights",
            "RuntimeError: Cannot load `exl2`-quantized weight, make sure the model is already quantized.",
        ),
        (
            "layers/compressed_tensors/loader.py",
            "__init__",
            "ValueError: Checkpoint does not have compressed-tensors configuration",
        ),
        (
            "utils/hub.py",
            "weight_files",
            "FileNotFoundError: No local weights found in /models/m with extension .bin",
        ),
    ]:
        words = line.split(": ", 1)[1][:30]
        assert _category(tmp_path, _shard_failed(file, function, line), words) == "model_load", line


def test_the_launchers_options_refused_by_the_shard_are_config(tmp_path: Path) -> None:
    """models/__init__.py get_model (v3.3.7:514): RuntimeError(f"Unknown kv_cache_dtype: {kv_cache_dtype}"), (v3.3.7:
    530) RuntimeError(f"Speculate is set to `{speculate}` but this medusa models only has `{n}` heads, please make them
    match"); models/globals.py (v3.3.7:53) RuntimeError(f"Could not parse cuda graphs {cuda_graphs}, expected comma
    separated list for batch sizes to run on: {e}"). --kv-cache-dtype, --speculate, --cuda-graphs (they were
    `other`)."""
    for file, function, line in [
        ("models/__init__.py", "get_model", "RuntimeError: Unknown kv_cache_dtype: fp8_e5m3"),
        (
            "models/__init__.py",
            "get_model",
            "RuntimeError: Speculate is set to `3` but this medusa models only has `2` heads, please make them match",
        ),
        (
            "models/globals.py",
            "<module>",
            "RuntimeError: Could not parse cuda graphs 1;2, expected comma separated list for batch sizes to run on: "
            "invalid literal for int() with base 10: '1;2'",
        ),
    ]:
        words = line.split(": ", 1)[1][:20]
        assert _category(tmp_path, _shard_failed(file, function, line), words) == "config", line


def test_router_not_enough_memory_for_max_total_tokens_is_oom_in_the_kv_cache(tmp_path: Path) -> None:
    """backends/v3/src/lib.rs connect_backend's check_max_batch_total_tokens (v3.0.0-v3.3.7): return
    Err(V3Error::NotEnoughMemory(shard_max_total_tokens)) when the warm-up's KV cache holds fewer tokens than
    --max-total-tokens; the router's main prints 'Error: Backend(NotEnoughMemory(N))' (Rust's Debug of RouterError)
    and exits (it was no verdict: the log ended in the warm-up)."""
    text = _ARGS + (
        "2026-01-20T10:02:50.000000Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:125: Warming up model\n"
        "Error: Backend(NotEnoughMemory(32768))\n"
    )
    out = _replay(tmp_path, text)
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    assert _error(out)["category"] == "oom"


def test_the_3x_steps_lines_name_their_phase(tmp_path: Path) -> None:
    """models/globals.py at import (v3.3.7:16-21): log_master(logger.info, f'Using prefix caching = {PREFIX_CACHING}'),
    f'Using Attention = {ATTENTION}' (starting); models/model.py Model.__init__ (v3.3.7:92) f'Using prefill chunking =
    {support_chunking}' once the model is built and loaded, and launcher/src/main.rs 'Starting Webserver' (v3.3.7:
    1842) once every shard is ready (loading_weights); flash_causal_lm.py FlashCausalLM.warmup's f'Warming up TunableOp
    for seqlen={seqlen}' and 'Cuda Graphs are disabled (CUDA_GRAPHS=...)', backends/v3/src/lib.rs 'Using backend V3'
    after the warm-up (capturing_graphs). Each was no phase."""
    stamp = "2026-01-20T10:02:50.000000Z  INFO "
    expected = {
        "text_generation_launcher: Using Attention = flashinfer": "starting",
        "text_generation_launcher: Using prefill chunking = True": "loading_weights",
        "text_generation_launcher: Starting Webserver": "loading_weights",
        "text_generation_launcher: Warming up TunableOp for seqlen=4096": "capturing_graphs",
        "text_generation_launcher: Cuda Graphs are disabled (CUDA_GRAPHS=None).": "capturing_graphs",
        "text_generation_router_v3: backends/v3/src/lib.rs:166: Using backend V3": "capturing_graphs",
    }
    # each after a line of the step before it, so that the phase reached is the line's own
    before = {
        "starting": "",
        "loading_weights": f"{stamp}text_generation_launcher: Starting shard rank=0\n",
        "capturing_graphs": f"{stamp}text_generation_router_v3: backends/v3/src/lib.rs:125: Warming up model\n",
    }
    got = {
        line: _replay(tmp_path, _ARGS + before[state] + stamp + line + "\n")["state"]
        for line, state in expected.items()
    }
    assert got == expected
