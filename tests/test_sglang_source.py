"""SGLang read from its source (issue 30): each rule of sglang.toml added this round, pinned on a real line.

A line is written from the source's own format string and the exception's own form (the wheel's file and function
named in the test's docstring: `pip download sglang==0.5.9 --no-deps`, and 0.4.10.post2 where it says so), inside the
traceback the same release prints: its launcher's or its scheduler's frames around the check. The values a format
string fills in are plausible ones (a model's sizes, an option's value).
"""

from __future__ import annotations

from pathlib import Path

from publiccases import crash_category as _category
from publiccases import replay_text as _replay

_SITE = "/usr/local/lib/python3.12/dist-packages/sglang"
_ARGS = "[2026-01-20 10:02:11] server_args=ServerArgs(model_path='/models/m', tp_size=2, port=30000)\n"


def _launcher(frames: str, line: str) -> str:
    # sglang/launch_server.py main: prepare_server_args(sys.argv[1:]) -> ServerArgs.from_cli_args -> the dataclass's
    # __init__ -> __post_init__ (0.5.9 line numbers); the exception escapes to the interpreter
    return (
        "Traceback (most recent call last):\n"
        '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
        f'  File "{_SITE}/launch_server.py", line 32, in <module>\n'
        "    server_args = prepare_server_args(sys.argv[1:])\n"
        f'  File "{_SITE}/srt/server_args.py", line 5590, in prepare_server_args\n'
        "    return ServerArgs.from_cli_args(raw_args)\n"
        f'  File "{_SITE}/srt/server_args.py", line 5078, in from_cli_args\n'
        "    return cls(**{attr: getattr(args, attr) for attr in attrs})\n"
        '  File "<string>", line 318, in __init__\n'
        f'  File "{_SITE}/srt/server_args.py", line 776, in __post_init__\n'
        f"{frames}{line}\n"
    )


def _scheduler(frames: str, line: str) -> str:
    # managers/scheduler.py run_scheduler_process: the scheduler's constructor builds the model worker, whose model
    # runner loads the model (0.5.9); the child logs the traceback and SIGQUITs the launcher
    return _ARGS + (
        "[2026-01-20 10:02:30 TP0] Load weight begin. avail mem=78.50 GB\n"
        "[2026-01-20 10:02:31 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{_SITE}/srt/managers/scheduler.py", line 2841, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        f'  File "{_SITE}/srt/model_executor/model_runner.py", line 880, in load_model\n'
        "    self.model = get_model(\n"
        f"{frames}{line}\n"
        "\n"
        "[2026-01-20 10:02:31] Received sigquit from a child process. It usually means the child failed.\n"
    )


def _frames(*calls: tuple[str, int, str, str]) -> str:
    # a traceback's frames under sglang/: (file under sglang/, line, function, the source line shown)
    return "".join(f'  File "{_SITE}/{path}", line {n}, in {fn}\n    {code}\n' for path, n, fn, code in calls)


def _raised(tmp_path: Path, calls: tuple[tuple[str, int, str, str], ...], line: str, words: str) -> str:
    # the category of `line` raised under the scheduler's model load, through `calls`
    return _category(tmp_path, _scheduler(_frames(*calls), line), words)


def test_server_args_check_refusing_options_is_config(tmp_path: Path) -> None:
    """srt/server_args.py ServerArgs._handle_encoder_disaggregation (0.5.9, called from __post_init__): raise
    ValueError("Cannot set --encoder-only and --language-only together"). SGLang's own validation of its launch
    arguments raised it: config (it was `other`). A check in the same file worded as a capability ('Spec v2 currently
    only supports topk = 1 for speculative decoding.', _handle_speculative_decoding) is unsupported, and so stays
    'TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a different backend.'
    (_handle_attention_backend_compatibility)."""
    refused = _launcher(
        f'  File "{_SITE}/srt/server_args.py", line 2579, in _handle_encoder_disaggregation\n'
        '    raise ValueError("Cannot set --encoder-only and --language-only together")\n',
        "ValueError: Cannot set --encoder-only and --language-only together",
    )
    assert _category(tmp_path, _ARGS + refused, "Cannot set --encoder-only") == "config"
    for fn, line in (
        (
            "_handle_speculative_decoding",
            "Spec v2 currently only supports topk = 1 for speculative decoding.",
        ),
        (
            "_handle_attention_backend_compatibility",
            "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a different backend.",
        ),
    ):
        text = _ARGS + _launcher(
            f'  File "{_SITE}/srt/server_args.py", line 2381, in {fn}\n    raise ValueError(\n',
            f"ValueError: {line}",
        )
        assert _category(tmp_path, text, line) == "unsupported"


def test_config_file_refused_by_its_parser_is_config(tmp_path: Path) -> None:
    """srt/server_args_config_parser.py ConfigArgumentMerger._validate_yaml_file (0.5.9, --config FILE): raise
    ValueError(f"Config file not found: {config_path}"), from prepare_server_args before ServerArgs is made: config
    (it was `other`)."""
    text = (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/launch_server.py", line 32, in <module>\n'
        "    server_args = prepare_server_args(sys.argv[1:])\n"
        f'  File "{_SITE}/srt/server_args.py", line 5585, in prepare_server_args\n'
        "    raw_args = config_merger.merge_config_with_args(argv)\n"
        f'  File "{_SITE}/srt/server_args_config_parser.py", line 61, in merge_config_with_args\n'
        "    self._validate_yaml_file(config_file_path)\n"
        f'  File "{_SITE}/srt/server_args_config_parser.py", line 120, in _validate_yaml_file\n'
        '    raise ValueError(f"Config file not found: {config_path}")\n'
        "ValueError: Config file not found: /etc/sglang/serve.yaml\n"
    )
    assert _category(tmp_path, text, "Config file not found") == "config"


def test_model_config_refusing_a_quantization_is_config(tmp_path: Path) -> None:
    """srt/configs/model_config.py ModelConfig._verify_quantization (0.5.9 :962, 0.4.10.post2 :469): raise
    ValueError(f"Unknown quantization method: {self.quantization}. Must be one of {supported_quantization}.") on
    --quantization: config (it was `other`)."""
    frames = (
        ("srt/configs/model_config.py", 206, "__init__", "self._verify_quantization()"),
        ("srt/configs/model_config.py", 962, "_verify_quantization", "raise ValueError("),
    )
    line = "ValueError: Unknown quantization method: fp6. Must be one of ['awq', 'fp8', 'gptq', 'marlin']."
    assert _raised(tmp_path, frames, line, "Unknown quantization method: fp6") == "config"


def test_a_quantization_method_refusing_the_checkpoint_is_unsupported(tmp_path: Path) -> None:
    """srt/layers/quantization/marlin_utils.py verify_marlin_supports_shape (0.5.9 :178): raise ValueError(f"Weight
    output_size_per_partition = {output_size_per_partition} is not divisible by  min_thread_n = {...}. Consider
    reducing tensor_parallel_size or running with --quantization gptq.") (its two spaces as the f-strings join):
    the Marlin kernels cannot take this shard's shape at this TP size, unsupported (it was `other`)."""
    frames = (
        ("srt/layers/quantization/awq.py", 485, "create_weights", "verify_marlin_supports_shape("),
        ("srt/layers/quantization/marlin_utils.py", 178, "verify_marlin_supports_shape", "raise ValueError("),
    )
    line = (
        "ValueError: Weight output_size_per_partition = 1408 is not divisible by  min_thread_n = 64. Consider "
        "reducing tensor_parallel_size or running with --quantization gptq."
    )
    assert _raised(tmp_path, frames, line, "min_thread_n = 64") == "unsupported"


def test_a_quantization_config_without_its_key_is_the_checkpoints(tmp_path: Path) -> None:
    """srt/layers/quantization/base_config.py QuantizationConfig.get_from_keys (0.5.9 :195, 0.4.10.post2 :171):
    raise ValueError(f"Cannot find any of {keys} in the model's quantization config."), from a method's from_config
    (gptq.py GPTQConfig.from_config reading "bits"): the checkpoint's quantization config lacks it, model_load (not
    the quantization modules' unsupported; it was `other`). And srt/layers/quantization/petit_utils.py
    prepare_nvfp4_layer_for_petit: raise ValueError("Petit is not installed. Please install it with `pip install
    petit-kernel`."): the environment lacks a package, import."""
    frames = (
        (
            "srt/layers/quantization/gptq.py",
            215,
            "from_config",
            'weight_bits = cls.get_from_keys(config, ["bits"])',
        ),
        ("srt/layers/quantization/base_config.py", 195, "get_from_keys", "raise ValueError("),
    )
    line = "ValueError: Cannot find any of ['bits'] in the model's quantization config."
    assert _raised(tmp_path, frames, line, "Cannot find any of ['bits']") == "model_load"
    petit = (
        ("srt/layers/quantization/petit_utils.py", 30, "prepare_nvfp4_layer_for_petit", "raise ValueError("),
    )
    line = "ValueError: Petit is not installed. Please install it with `pip install petit-kernel`."
    assert _raised(tmp_path, petit, line, "Petit is not installed") == "import"


def test_the_loader_refusing_the_checkpoint_is_model_load(tmp_path: Path) -> None:
    """srt/model_loader/weight_utils.py get_quant_config (0.5.9 :248, 0.4.10.post2 :197): raise ValueError(f"Cannot
    find the config file for {model_config.quantization}"), and srt/models/grok.py Grok1ForCausalLM.load_weights
    (0.5.9 :855): raise ValueError(f"load_weights failed because some weights are missing: {missing_exclude_scales=}.
    "): the checkpoint does not hold what the model needs, model_load (both were `other`)."""
    loader = (
        ("srt/model_loader/loader.py", 223, "_get_quantization_config", "quant_config = get_quant_config("),
        (
            "srt/model_loader/weight_utils.py",
            248,
            "get_quant_config",
            'raise ValueError(f"Cannot find the config file for {model_config.quantization}")',
        ),
    )
    line = "ValueError: Cannot find the config file for awq"
    assert _raised(tmp_path, loader, line, "Cannot find the config file for awq") == "model_load"
    grok = (
        ("srt/model_loader/loader.py", 680, "load_model", "self.load_weights_and_postprocess("),
        ("srt/models/grok.py", 855, "load_weights", "raise ValueError("),
    )
    line = "ValueError: load_weights failed because some weights are missing: missing_exclude_scales={'lm_head.weight'}."
    assert _raised(tmp_path, grok, line, "some weights are missing") == "model_load"
    # the rule names ValueError only: a RuntimeError in the loader's frames may be torch's, whose own template
    # decides (torch's 'CUDA error: out of memory' from a copy inside the loader is oom, not model_load)
    torch_copy = (loader[0], (*loader[1][:3], "x.copy_(y)"))
    assert _raised(tmp_path, torch_copy, "RuntimeError: CUDA error: out of memory", "CUDA error") == "oom"


def test_the_loader_refusing_a_way_of_loading_is_unsupported(tmp_path: Path) -> None:
    """srt/model_loader/loader.py BitsAndBytesModelLoader._load_weights (0.5.9 :1847, 0.4.10.post2 :1127): raise
    ValueError(f"BitsAndBytes loader does not support {quant_method} quantization"): a way of loading the loader
    refuses, unsupported before the loader's model_load (it was `other`); srt/models/registry.py's refusal of an
    architecture ('Model architectures [...] are not supported for now.', the corpus's GLM-4 case) stays config."""
    frames = (
        ("srt/model_loader/loader.py", 1930, "load_model", "self._load_weights(model_config, model)"),
        ("srt/model_loader/loader.py", 1847, "_load_weights", "raise ValueError("),
    )
    line = "ValueError: BitsAndBytes loader does not support awq quantization"
    assert _raised(tmp_path, frames, line, "does not support awq") == "unsupported"
    registry = (("srt/models/registry.py", 62, "_raise_for_unsupported", "raise ValueError("),)
    line = "ValueError: Model architectures ['Glm4ForCausalLM'] are not supported for now. Supported architectures: []"
    assert _raised(tmp_path, registry, line, "are not supported for now") == "config"


def test_an_openai_requests_error_after_ready_is_that_requests(tmp_path: Path) -> None:
    """srt/entrypoints/openai/serving_base.py OpenAIServingBase.handle_request (0.4.10.post2 :53, 0.5.9 :128): `except
    Exception as e: logger.exception(f"Error in request: {e}")`, then the request is answered 500 ('Internal server
    error: ...') and the server serves on. After "The server is fired up and ready to roll!" such an error is a
    request error, counted, not a crash (it was a crash of the ready server); the same words cut from their
    traceback, or the traceback alone through the chat handler's frames, are too."""
    ready = (
        Path(__file__).parent / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
    )
    head = ready.read_text(encoding="utf-8")
    error = "[2025-01-23 19:36:00] Error in request: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    trace = (
        "Traceback (most recent call last):\n"
        + _frames(
            (
                "srt/entrypoints/openai/serving_base.py",
                110,
                "handle_request",
                "return await self._handle_non_streaming_request(",
            ),
            (
                "srt/entrypoints/openai/serving_chat.py",
                700,
                "_handle_non_streaming_request",
                "ret = await self.tokenizer_manager.generate_request(",
            ),
            (
                "srt/managers/tokenizer_manager.py",
                500,
                "generate_request",
                "async for response in self._wait_one_response(obj, state, request):",
            ),
        )
        + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    answered = '[2025-01-23 19:36:00] INFO:     127.0.0.1:47230 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n'
    for text in (error + trace + answered, error + answered, trace + answered):
        out = _replay(tmp_path, head + text)
        assert (out["state"], out["phase"]) == ("ready", "ready"), text
        facts = out["facts"]
        assert isinstance(facts, dict)
        assert facts["request_errors"] == 1
        assert "CUDA out of memory" in str(facts["last_request_error"])


_POOLED = _ARGS + (
    "[2026-01-20 10:02:30 TP0] Load weight begin. avail mem=78.50 GB\n"
    "[2026-01-20 10:02:50 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=20.00 GB, "
    "mem usage=58.50 GB.\n"
    "[2026-01-20 10:02:51 TP0] KV Cache is allocated. #tokens: 100000, KV size: 10.00 GB\n"
    "[2026-01-20 10:02:51 TP0] Memory pool end. avail mem=9.50 GB\n"
)
_CUT = "[2026-01-20 10:02:53 TP0] Scheduler hit an exception: Traceback (most recent call last):\n" + _frames(
    ("srt/managers/scheduler.py", 2841, "run_scheduler_process", "scheduler = Scheduler(")
)


def test_the_kernels_warm_up_after_the_pool_is_the_capture_step(tmp_path: Path) -> None:
    """srt/model_executor/model_runner.py ModelRunner.initialize (0.5.9) runs kernel_warmup after the memory pool and
    the attention backend, before init_device_graphs: _flashinfer_autotune logs 'Running FlashInfer autotune...'.
    srt/layers/deep_gemm_wrapper/compile_utils.py _maybe_compile_deep_gemm_one_type_all (0.4.10.post2-0.5.9) logs
    'Try DeepGEMM JIT Compiling for <{kernel}> N={n}, K={k}, num_groups={g} with all Ms.' at a GEMM shape's first
    forward (the capture's or the warm-up's), and _compile_deep_gemm_one_type_all's tqdm bar is 'DeepGEMM warmup'.
    Each is the warm-up step (capturing_graphs), not the KV cache's (they were allocating_kv_cache)."""
    autotune = _POOLED + "[2026-01-20 10:02:52 TP0] Running FlashInfer autotune...\n" + _CUT
    out = _replay(tmp_path, autotune)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    jit = _POOLED + (
        "[2026-01-20 10:02:52 TP0] Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=7168, K=2048, num_groups=1 with "
        "all Ms. It only takes a little time (typically 1 sec) if you have run `python3 -m sglang.compile_deep_gemm`. \n"
    )
    assert _replay(tmp_path, jit)["phase"] == "capturing_graphs"
    bar = _POOLED + "DeepGEMM warmup:  50%|█████     | 2048/4096 [00:10<00:10, 200.00it/s]\n"
    out = _replay(tmp_path, bar)
    assert out["phase"] == "capturing_graphs"
    # a traceback through DeepGEMM's compile, cut before its phase lines, says the same step
    compile_frames = (
        (
            "srt/layers/deep_gemm_wrapper/compile_utils.py",
            325,
            "deep_gemm_execution_hook",
            "_maybe_compile_deep_gemm_one_type_all(kernel_type, n, k, num_groups)",
        ),
        (
            "srt/layers/deep_gemm_wrapper/compile_utils.py",
            140,
            "_maybe_compile_deep_gemm_one_type_all",
            "_compile_deep_gemm_one_type_all(",
        ),
    )
    failed = _POOLED + _CUT + _frames(*compile_frames) + "RuntimeError: Failed to compile kernel\n"
    out = _replay(tmp_path, failed)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")


def test_sglangs_own_runtime_errors_say_what_failed(tmp_path: Path) -> None:
    """SGLang's RuntimeErrors of its own wording (0.4.6.post5-0.5.9 wheels), each raised where it is checked, were
    `other`: srt/model_executor/model_runner.py load_model 'SGLang only supports sm75 and above.' (unsupported);
    srt/layers/quantization/fp8.py _process_mxfp8_moe_weights 'MXFP8 MoE quantization requires SM100.' (0.5.9,
    unsupported); srt/disaggregation/mooncake/conn.py 'PD Disaggregation does NOT support PD different TP sizes for
    non-MLA {state_type} hybrid models yet.' (unsupported); srt/distributed/device_communicators/
    mooncake_transfer_engine.py MooncakeTransferEngine.initialize 'Mooncake Transfer Engine initialization failed.'
    and mooncake/conn.py's transfer worker 'Transfer thread failed because of {e}. Prefill instance with
    bootstrap_port={port} is dead.' (the KV transfer layer: nccl); srt/distributed/parallel_state.py
    initialize_model_parallel 'world_size (8) is not equal to tensor_model_parallel_size (4) x
    pipeline_model_parallel_size (1)' (config); custom_all_reduce_utils.py gpu_p2p_access_check 'Error happened when
    batch testing peer-to-peer access from 0 to 1:' (cuda)."""
    cases = (
        (
            "srt/model_executor/model_runner.py",
            "load_model",
            "SGLang only supports sm75 and above.",
            "unsupported",
        ),
        (
            "srt/layers/quantization/fp8.py",
            "_process_mxfp8_moe_weights",
            "MXFP8 MoE quantization requires SM100.",
            "unsupported",
        ),
        (
            "srt/disaggregation/mooncake/conn.py",
            "send_kvcache_slice",
            "PD Disaggregation does NOT support PD different TP sizes for non-MLA MAMBA hybrid models yet.",
            "unsupported",
        ),
        (
            "srt/distributed/device_communicators/mooncake_transfer_engine.py",
            "initialize",
            "Mooncake Transfer Engine initialization failed.",
            "nccl",
        ),
        (
            "srt/disaggregation/mooncake/conn.py",
            "transfer_worker",
            "Transfer thread failed because of [Errno 111] Connection refused. Prefill instance with bootstrap_port=8998 "
            "is dead.",
            "nccl",
        ),
        (
            "srt/distributed/parallel_state.py",
            "initialize_model_parallel",
            "world_size (8) is not equal to tensor_model_parallel_size (4) x pipeline_model_parallel_size (1)",
            "config",
        ),
        (
            "srt/distributed/device_communicators/custom_all_reduce_utils.py",
            "gpu_p2p_access_check",
            "Error happened when batch testing peer-to-peer access from 0 to 1:",
            "cuda",
        ),
    )
    for path, fn, message, category in cases:
        calls = ((path, 100, fn, "raise RuntimeError("),)
        assert _raised(tmp_path, calls, f"RuntimeError: {message}", message[:30]) == category, message
