"""vLLM read from its source (issue 30): each `[[category]]` rule of vllm.toml added by i30-vllm-src, pinned on the
source's own wording.

A line is the exception as the source raises it (the 0.10.2, 0.11.2, 0.13.0 and 0.34.0 wheels; the file and function
named in each test's docstring), inside the launch the same releases print: a check of the arguments in the API
server's create_engine_config (a plain traceback), any other in the engine core's 'EngineCore failed to start.'
traceback, one log record per line, then the API server's 'Engine core initialization failed. See root cause above.'.
An f-string's holes are filled with plausible values.
"""

from __future__ import annotations

from pathlib import Path

from publiccases import crash_category as _category

_SITE = "/usr/local/lib/python3.12/dist-packages"
_HEAD = (
    "(APIServer pid=1) INFO 01-20 10:02:11 [api_server.py:1896] vLLM API server version 0.11.2\n"
    "(APIServer pid=1) INFO 01-20 10:02:11 [utils.py:233] non-default args: {'model': '/models/m'}\n"
)


def _engine_core_failed(file: str, function: str, line: str) -> str:
    # v1/engine/core.py run_engine_core -> EngineCoreProc.__init__ -> ... -> the raise in `file`: logged by the engine
    # core record by record, then the API server's wait_for_engine_startup raises
    core = "(EngineCore_DP0 pid=2) ERROR 01-20 10:02:31 [core.py:708] "
    frames = (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/vllm/v1/engine/core.py", line 699, in run_engine_core\n'
        "    engine_core = EngineCoreProc(*args, **kwargs)\n"
        f'  File "{_SITE}/vllm/v1/engine/core.py", line 83, in __init__\n'
        "    self.model_executor = executor_class(vllm_config)\n"
        f'  File "{_SITE}/vllm/{file}", line 120, in {function}\n'
        "    raise ValueError(\n"
        f"{line}\n"
    )
    return (
        _HEAD
        + "(EngineCore_DP0 pid=2) INFO 01-20 10:02:14 [core.py:77] Initializing a V1 LLM engine (v0.11.2) with config\n"
        + f"{core}EngineCore failed to start.\n"
        + "".join(f"{core}{row}\n" for row in frames.splitlines())
        + "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}\n"
    )


def _arguments_refused(file: str, function: str, line: str) -> str:
    # the API server's create_engine_config -> a config's check, before any engine process starts
    return _HEAD + (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/vllm/entrypoints/openai/api_server.py", line 1953, in run_server_worker\n'
        "    async with build_async_engine_client(\n"
        f'  File "{_SITE}/vllm/engine/arg_utils.py", line 1240, in create_engine_config\n'
        "    model_config = self.create_model_config()\n"
        f'  File "{_SITE}/vllm/{file}", line 120, in {function}\n'
        "    raise ValueError(\n"
        f"{line}\n"
    )


def _words(line: str) -> str:
    return line.split(": ", 1)[1].strip()[:30]


def _each_is(
    tmp_path: Path, category: str, cases: list[tuple[str, str, str]], arguments: bool = False
) -> None:
    # each (file, function, exception line) raised in the engine core (in create_engine_config with `arguments`) is a
    # crash of `category`
    make = _arguments_refused if arguments else _engine_core_failed
    for file, function, line in cases:
        assert _category(tmp_path, make(file, function, line), _words(line)) == category, line


def test_an_optional_package_missing_is_import(tmp_path: Path) -> None:
    """v1/executor/ray_utils.py assert_ray_available (0.10.2-0.34.0): ValueError(f"Failed to import Ray: {e}.Please
    install Ray with `pip install ray`."); ray_distributed_executor.py _check_ray_cgraph_install (0.10.2-0.13.0):
    ValueError("Ray Compiled Graph is not installed. Run `pip install ray[cgraph]` to install it."). Both were
    `other`."""
    _each_is(
        tmp_path,
        "import",
        [
            (
                "v1/executor/ray_utils.py",
                "assert_ray_available",
                "ValueError: Failed to import Ray: No module named 'ray'.Please install Ray with `pip install ray`.",
            ),
            (
                "v1/executor/ray_distributed_executor.py",
                "_check_ray_cgraph_install",
                "ValueError: Ray Compiled Graph is not installed. Run `pip install ray[cgraph]` to install it.",
            ),
        ],
    )


def test_a_quantization_config_without_its_key_is_model_load(tmp_path: Path) -> None:
    """model_executor/layers/quantization/base_config.py get_from_keys (0.10.2-0.34.0): ValueError(f"Cannot find any
    of {keys} in the model's quantization config."); model_loader/weight_utils.py get_quant_config: ValueError(f"Cannot
    find the config file for {quant}"). The checkpoint's files lack what the method reads (they were `other`)."""
    _each_is(
        tmp_path,
        "model_load",
        [
            (
                "model_executor/layers/quantization/base_config.py",
                "get_from_keys",
                "ValueError: Cannot find any of ['quant_method'] in the model's quantization config.",
            ),
            (
                "model_executor/model_loader/weight_utils.py",
                "get_quant_config",
                "ValueError: Cannot find the config file for awq",
            ),
        ],
    )


def test_a_feature_that_needs_another_gpu_is_unsupported(tmp_path: Path) -> None:
    """model_executor/layers/quantization/online/nvfp4.py __init__ (0.34.0): ValueError("nvfp4_per_token online
    quantization requires a Blackwell (SM100) GPU."); layers/sparse_mqa_indexer.py __init__ (0.34.0):
    ValueError("SparseMQAIndexer requires an SM100-class GPU and DeepGEMM >= 2.8."), raised while the model is built
    (both were `other`)."""
    _each_is(
        tmp_path,
        "unsupported",
        [
            (
                "model_executor/layers/quantization/online/nvfp4.py",
                "__init__",
                "ValueError: nvfp4_per_token online quantization requires a Blackwell (SM100) GPU.",
            ),
            (
                "model_executor/layers/sparse_mqa_indexer.py",
                "__init__",
                "ValueError: SparseMQAIndexer requires an SM100-class GPU and DeepGEMM >= 2.8.",
            ),
        ],
    )


def test_a_refusal_worded_as_not_supported_is_unsupported(tmp_path: Path) -> None:
    """platforms/interface.py verify_quantization (0.10.2-0.13.0): ValueError(f"{quant} quantization is currently not
    supported in {self.device_name}."); model_executor/model_loader/__init__.py get_model_loader: ValueError(f"Load
    format `{load_format}` is not supported"); v1/worker/lora_model_runner_mixin.py load_lora_model:
    ValueError(f"{model.__class__.__name__} does not support LoRA yet."); model_executor/models/registry.py
    _raise_for_unsupported: ValueError(f"Model architectures {architectures} are not supported for now. ...") (it was
    `config`, from common.toml's phrase). The wording comes before the place: a loader's own refusal is no
    checkpoint's fault."""
    _each_is(
        tmp_path,
        "unsupported",
        [
            (
                "platforms/interface.py",
                "verify_quantization",
                "ValueError: gptq quantization is currently not supported in xpu.",
            ),
            (
                "model_executor/model_loader/__init__.py",
                "get_model_loader",
                "ValueError: Load format `tensorizer2` is not supported",
            ),
            (
                "v1/worker/lora_model_runner_mixin.py",
                "load_lora_model",
                "ValueError: MambaForCausalLM does not support LoRA yet.",
            ),
            (
                "model_executor/models/registry.py",
                "_raise_for_unsupported",
                "ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: "
                "dict_keys(['LlamaForCausalLM'])",
            ),
        ],
    )


def test_the_arguments_checks_are_config(tmp_path: Path) -> None:
    """config/parallel.py ParallelConfig.__post_init__ (0.11.2-0.34.0): ValueError(f"data_parallel_rank
    ({self.data_parallel_rank}) must be in the range [0, {self.data_parallel_size})"); config/speculative.py _verify_args:
    ValueError(f"Expected num_speculative_tokens to be greater than zero ({n})."); engine/arg_utils.py
    create_engine_config (0.13.0): ValueError("attention_backend and attention_config.backend are mutually exclusive").
    They were `other`; the same kind of ValueError raised by a request's check in the entrypoints
    (entrypoints/openai/serving_engine.py) stays `other`."""
    _each_is(
        tmp_path,
        "config",
        [
            (
                "config/parallel.py",
                "__post_init__",
                "ValueError: data_parallel_rank (4) must be in the range [0, 2)",
            ),
            (
                "config/speculative.py",
                "_verify_args",
                "ValueError: Expected num_speculative_tokens to be greater than zero (0).",
            ),
            (
                "engine/arg_utils.py",
                "create_engine_config",
                "ValueError: attention_backend and attention_config.backend are mutually exclusive",
            ),
        ],
        arguments=True,
    )
    request = "ValueError: Prompt token ids and prompt embeds had different lengths"
    text = _engine_core_failed("utils/__init__.py", "length_from_prompt_token_ids_or_embeds", request)
    assert _category(tmp_path, text, "Prompt token ids") == "other"


def test_a_quantization_method_refusing_a_shape_is_unsupported_not_config(tmp_path: Path) -> None:
    """model_executor/layers/quantization/fp8.py Fp8Config / Fp8LinearMethod.__init__ (0.10.2-0.13.0): ValueError(f"The
    quantization block size of weight must have 2 dimensions, but got {n} dimensions") (was `other`); bitblas.py
    create_weights_gptq: ValueError(f"Input size per partition ({n}) must be divisible by group size ({g}).") (was
    `config`, from common.toml's phrase 'must be divisible': a kernel's tile this tensor-parallel split does not
    fit, as Marlin's)."""
    _each_is(
        tmp_path,
        "unsupported",
        [
            (
                "model_executor/layers/quantization/fp8.py",
                "__init__",
                "ValueError: The quantization block size of weight must have 2 dimensions, but got 3 dimensions",
            ),
            (
                "model_executor/layers/quantization/bitblas.py",
                "create_weights_gptq",
                "ValueError: Input size per partition (4000) must be divisible by group size (128).",
            ),
        ],
    )


def test_a_loader_refusing_the_checkpoint_is_model_load(tmp_path: Path) -> None:
    """model_executor/model_loader/sharded_state_loader.py ShardedStateLoader.load_weights (0.10.2-0.34.0):
    ValueError(f"Missing keys {tuple(state_dict)} in loaded state!") (was `other`); layers/fused_moe/layer.py
    FusedMoE.weight_loader: ValueError(f"quant method must be one of {WEIGHT_SCALE_SUPPORTED}") (was `config`, from
    the phrase 'must be one of'); quantization/kv_cache.py BaseKVCacheMethod's weight_loader (0.34.0): ValueError(
    f"KV-cache scale expects a scalar weight, got shape {shape}") stays `model_load`, not the quantization modules'
    `unsupported`."""
    _each_is(
        tmp_path,
        "model_load",
        [
            (
                "model_executor/model_loader/sharded_state_loader.py",
                "load_weights",
                "ValueError: Missing keys ('model.layers.0.mlp.gate_proj.weight',) in loaded state!",
            ),
            (
                "model_executor/layers/fused_moe/layer.py",
                "weight_loader",
                "ValueError: quant method must be one of ['tensor', 'channel', 'group', 'block']",
            ),
            (
                "model_executor/layers/quantization/kv_cache.py",
                "weight_loader",
                "ValueError: KV-cache scale expects a scalar weight, got shape torch.Size([2])",
            ),
        ],
    )


def test_the_models_own_config_files_are_model_load_and_remote_code_is_config(tmp_path: Path) -> None:
    """transformers_utils/config.py get_config (0.10.2-0.34.0): ValueError("Could not detect config format for no
    config file found. With config_format 'auto', ensure your model has either config.json (HF format) or params.json
    (Mistral format). ..."); transformers_utils/configs/nemotron.py _rope_scaling_validation (0.10.2-0.11.2):
    ValueError(f"`rope_scaling`'s type field must be one of ['linear', 'dynamic'], got {t}") (was `config`, by the
    phrase: it reads the model's config.json). transformers' dynamic_module_utils.py resolve_trust_remote_code, under
    the same get_config, says that --trust-remote-code is missing: `config`."""
    _each_is(
        tmp_path,
        "model_load",
        [
            (
                "transformers_utils/config.py",
                "get_config",
                "ValueError: Could not detect config format for no config file found. With config_format 'auto', ensure "
                "your model has either config.json (HF format) or params.json (Mistral format).",
            ),
            (
                "transformers_utils/configs/nemotron.py",
                "_rope_scaling_validation",
                "ValueError: `rope_scaling`'s type field must be one of ['linear', 'dynamic'], got yarn",
            ),
        ],
        arguments=True,
    )
    remote = (
        "ValueError: Loading /models/chatglm3-6b requires you to execute the configuration file in that repo on your "
        "local machine. Make sure you have read the code there to avoid malicious use, then set the option "
        "`trust_remote_code=True` to remove this error."
    )
    text = _arguments_refused("transformers_utils/config.py", "get_config", remote)
    assert _category(tmp_path, text, "Loading /models/chatglm3") == "config"


def test_a_platforms_refusal_is_unsupported(tmp_path: Path) -> None:
    """platforms/xpu.py XPUPlatform.get_attn_backend_cls (0.11.2-0.13.0): ValueError(f"Invalid attention backend for
    {cls.device_name}, with use_mla: {use_mla}"); platforms/rocm.py get_attn_backend_cls: ValueError(f" The selected
    backend, {backend.name},does not support block size {block_size}.") (both were `other`)."""
    _each_is(
        tmp_path,
        "unsupported",
        [
            (
                "platforms/xpu.py",
                "get_attn_backend_cls",
                "ValueError: Invalid attention backend for xpu, with use_mla: True",
            ),
            (
                "platforms/rocm.py",
                "get_attn_backend_cls",
                "ValueError:  The selected backend, ROCM_ATTN,does not support block size 32.",
            ),
        ],
    )


def test_a_kv_transfer_failure_between_instances_is_nccl(tmp_path: Path) -> None:
    """distributed/kv_transfer/kv_connector/v1/mooncake_connector.py MooncakeConnectorWorker._send_blocks
    (0.13.0-0.34.0): RuntimeError(f"Error in batch_transfer_sync_write: {ret_value}"); nixl_connector.py _nixl_handshake
    (0.13.0): RuntimeError(f"Failed to decode NixlHandshakePayload. This likely indicates an incompatibility between
    connector version. Error: {e}") (both were `other`)."""
    for line in [
        "RuntimeError: Error in batch_transfer_sync_write: -1",
        "RuntimeError: Failed to decode NixlHandshakePayload. This likely indicates an incompatibility between "
        "connector version. Error: Expected `object`, got `array`",
    ]:
        file = "distributed/kv_transfer/kv_connector/v1/" + (
            "mooncake_connector.py" if "batch" in line else "nixl_connector.py"
        )
        text = _engine_core_failed(file, "_send_blocks" if "batch" in line else "_nixl_handshake", line)
        assert _category(tmp_path, text, _words(line)) == "nccl", line
