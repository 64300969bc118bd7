"""benchmarks/source_raises.py: an engine's own raise sites, found in its source and read with its profile."""

from __future__ import annotations

from pathlib import Path

from benchscripts import load_script

source_raises = load_script("source_raises.py")


def test_each_raise_is_found_once_and_read_where_it_is_raised(tmp_path: Path) -> None:
    """A `raise ValueError(f"...")` in a package's server_args.py is found with its function and its message (each
    f-string hole as 8), a repeat of the same message is counted once, and replayed in its own frame it gets the
    category sglang.toml gives a check of that file (config); a raise of no string is skipped."""
    root = tmp_path / "sglang"
    (root / "srt").mkdir(parents=True)
    (root / "srt" / "server_args.py").write_text(
        "def _handle_encoder_disaggregation(self):\n"
        "    if self.a and self.b:\n"
        '        raise ValueError(f"Cannot set --encoder-only and --language-only together ({self.a})")\n'
        '    raise ValueError(f"Cannot set --encoder-only and --language-only together ({self.a})")\n'
        "\n"
        "def other():\n"
        "    raise RuntimeError(code)\n",
        encoding="utf-8",
    )
    sites = source_raises.raise_sites(root, "srt/")
    assert [(s.path, s.line, s.function, s.cls, s.message) for s in sites] == [
        (
            "sglang/srt/server_args.py",
            3,
            "_handle_encoder_disaggregation",
            "ValueError",
            "Cannot set --encoder-only and --language-only together (8)",
        )
    ]
    assert [s.category for s in source_raises.categorize_sites(sites, "sglang")] == ["config"]


def test_a_raise_is_replayed_in_each_engines_own_launch(tmp_path: Path) -> None:
    """With --engine tgi a raise is placed under a TGI shard's serve_inner (its 'Error when initializing model' and
    the launcher's 'Shard 0 failed to start'), with --engine trtllm under TensorRT-LLM's worker_main ('Failed to
    initialize executor on rank 0: ...'): each replayed with its engine's profile is a crash at startup, read by the
    place the raise is in (a shard's get_model refusing --kv-cache-dtype is config; TensorRT-LLM's model loader
    refusing the KV cache dtype against the checkpoint is config too); sglang keeps srt/ as its default folder."""
    tgi = tmp_path / "text_generation_server"
    (tgi / "models").mkdir(parents=True)
    (tgi / "models" / "__init__.py").write_text(
        'def get_model(kv_cache_dtype):\n    raise RuntimeError(f"Unknown kv_cache_dtype: {kv_cache_dtype}")\n',
        encoding="utf-8",
    )
    trt = tmp_path / "tensorrt_llm"
    (trt / "_torch" / "pyexecutor").mkdir(parents=True)
    (trt / "_torch" / "pyexecutor" / "model_loader.py").write_text(
        "def validate_and_set_kv_cache_quant(model_config, dtype):\n"
        "    raise RuntimeError(\n"
        "        f'Attempting to override KV cache quantization {quant} with llm_args.KvCacheConfig.dtype={dtype}.'\n"
        "    )\n",
        encoding="utf-8",
    )
    for root, engine, function in [
        (tgi, "tgi", "get_model"),
        (trt, "trtllm", "validate_and_set_kv_cache_quant"),
    ]:
        sites = source_raises.categorize_sites(source_raises.raise_sites(root), engine)
        assert [(s.function, s.category) for s in sites] == [(function, "config")]
    assert source_raises._UNDER.get("sglang") == "srt/"


def test_a_vllm_raise_is_replayed_where_vllm_runs_it(tmp_path: Path) -> None:
    """With --engine vllm a check of the arguments (config/, engine/arg_utils.py) is placed in the API server's
    create_engine_config traceback, before any engine process; any other in the engine core's 'EngineCore failed to
    start.' traceback and the API server's 'Engine core initialization failed'. Each is a crash read by its place:
    ParallelConfig's range check is config, a loader's missing keys model_load; a request's check in the entrypoints
    (no create_engine_config frame under it) stays other."""
    vllm = tmp_path / "vllm"
    for path, function, raised in [
        (
            "config/parallel.py",
            "__post_init__",
            'f"data_parallel_rank ({rank}) must be in the range [0, {size})"',
        ),
        (
            "model_executor/model_loader/sharded_state_loader.py",
            "load_weights",
            'f"Missing keys {keys} in loaded state!"',
        ),
        (
            "entrypoints/openai/serving_engine.py",
            "_validate_input",
            '"This model\'s maximum context length is 8"',
        ),
    ]:
        (vllm / path).parent.mkdir(parents=True, exist_ok=True)
        (vllm / path).write_text(
            f"def {function}(rank, size, keys):\n    raise ValueError({raised})\n", encoding="utf-8"
        )
    sites = source_raises.categorize_sites(source_raises.raise_sites(vllm), "vllm")
    assert sorted((s.function, s.category) for s in sites) == [
        ("__post_init__", "config"),
        ("_validate_input", "other"),
        ("load_weights", "model_load"),
    ]
    config, loader = sorted((s for s in sites if s.function != "_validate_input"), key=lambda s: s.path)
    assert "create_engine_config" in source_raises._vllm_launch(config)
    assert "EngineCore failed to start." in source_raises._vllm_launch(loader)
