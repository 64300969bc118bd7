"""Error categories and hints: what class of failure an error line names, and what an operator can do (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from watchdog.vocabulary import STARTUP_PHASES, Category

__all__ = ["categorize", "hint_for", "phase_from_error", "phase_from_frames"]

# Ordered: the first category whose pattern is found wins ("CUDA error: out of memory" is oom, not cuda;
# "no kernel image is available" is unsupported, not cuda).
_CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE if name != "config" else 0))
    for name, pattern in (
        (
            "oom",
            r"out of memory|OutOfMemory|Not enough (?:GPU |CPU |host |device )?memory|"
            r"No available memory for the cache|less than desired (?:GPU|CPU) memory|"
            r"less than requested memory for kv|exceed allowed memory|insufficient memory|"
            r"Cannot allocate memory|std::bad_alloc|^(?:\w+\.)*MemoryError\b|failed to allocate (?:\w+ )?buffer|"
            r"cudaErrorMemoryAllocation|larger than the available KV cache memory|"
            r"unable to allocate (?:CUDA|ROCm|Metal)\d* buffer|"
            r"max seq len .* is larger than the maximum number of tokens that can be stored in KV cache",
        ),
        (
            "unsupported",
            r"Unsupported compute capability|no kernel image is available|out of resource: shared memory|"
            r"requires? (?:a )?(?:GPU with )?compute capability|not supported on (?:this|your) (?:GPU|device)|"
            r"is only supported on|unsupported (?:GPU|architecture|gpu arch)|not supported yet|"
            r"(?:is|are) invalid or not supported|GPU archs? .* not supported|"
            r"not (?:available|supported) (?:on|for) (?:this|your|the current) (?:GPU|device|platform|hardware|"
            r"driver|architecture)|invalid kernel config|invalid device function|unknown model architecture|"
            r"requires? Flash ?Attention|CUBLAS_STATUS_NOT_SUPPORTED|operation not supported|"
            r"^(?:\w+\.)*NotImplementedError\b|^(?:[\w.]+: )?Unsupported \w+",
        ),
        (
            "port_in_use",
            r"Address already in use|Errno 98|address in use|port .* is (?:already )?in use|EADDRINUSE|"
            r"failed to listen on any local network address|is not available in \d+ seconds|"
            r"used by (?:a|another) process already|Only one usage of each socket address|"
            r"port \d+ is (?:not available|occupied)",
        ),
        (
            "nccl",
            r"NCCL|ProcessGroupNCCL|collective operation timeout|MPI error|\[c10d\]|DistNetworkError|DistStoreError|"
            r"Duplicate GPU detected",
        ),
        (
            "import",
            r"ImportError|ModuleNotFoundError|undefined symbol|cannot open shared object file|cannot find -l\w+",
        ),
        (
            "cuda",
            r"CUDA error|CUDA driver error|cudaError|AcceleratorError|CUBLAS_STATUS|cuDNN error|CUDNN_STATUS|"
            r"illegal memory access|device-side assert|NVML|no CUDA-capable device|Error 802|"
            r"Found no NVIDIA driver|CUDA initialization|HIP error|hipError|ROCm error|MUSA error|synStatus=|HSA_STATUS_ERROR|CUDA_ERROR_\w+|"
            r"Assertion `[^'`]*` failed",
        ),
        ("timeout", r"timed out|TimeoutError|Watchdog timeout|deadline exceeded|\btimeout\b"),
        (
            "config",
            r"are not supported for now|does not recognize this architecture|is not compatible with|"
            r"must be divisible|unrecognized arguments|invalid choice|the following arguments are required|"
            r"^TypeError|got an unexpected keyword argument|Invalid (?:argument|value|config)|"
            r"is not a valid(?! JSON)|must be (?:set|specified|greater|less|one of)|not supported when|cannot be used with|"
            r"requires you to execute the configuration file|trust_remote_code|"
            r"Quantization method specified in the model config .* does not match|"
            r"(?:is greater than|exceeds) the (?:derived|maximum)|Cannot find model module|is not a registered model",
        ),
        (
            "model_load",
            r"error loading model|failed to load model|failed to be inspected|Cannot find any model weights|"
            r"HeaderTooLarge|SafetensorError|didn't finish loading|does not appear to have a file|"
            r"Repository Not Found|not a valid model|invalid magic|failed to read magic|"
            r"Invalid repository ID or local directory|Repo id must|is not a local folder and is not a valid model|"
            r"(?:No such file or directory|does not exist)\W.*(?:model|\.gguf|\.safetensors|config\.json)|"
            r"failed to open (?:GGUF file )?'[^']*\.gguf'|failed to apply lora adapter|"
            r"config file at .* is not a valid JSON file|Couldn't instantiate the backend tokenizer|"
            r"Can't load tokenizer|"
            r"^KeyError: '[\w.]*(?:weight|bias|scale|layers?\.)",
        ),
        ("assertion", r"^(?:\w+\.)*AssertionError|Assertion failed|Assertion `.*' failed"),
        (
            "killed",
            r"(?:^|\W)Killed(?:\W|$)|SIGKILL|signal 9\b|exit code:? -?9\b|exitcode\s*:\s*-9|signal: killed",
        ),
    )
)

# Functions whose frame in a traceback tells which startup phase the error happened in, innermost wins.
_PHASE_FRAMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ready",
        re.compile(
            r"in (?:event_loop\w*|process_batch_result\w*|handle_generate_request|run_batch|forward_batch_generation|"
            r"run_busy_loop|_process_engine_step|step_with_batch_queue|execute_model_with_error_logging|"
            r"alloc_for_extend|alloc_for_decode|process_output_sockets?|output_handler|_handle_client_request|"
            r"reconstruct_on_target_device|process_input_sockets?)\b"
        ),
    ),
    (
        "capturing_graphs",
        re.compile(
            r"in (?:init_cuda_graphs|capture\w*|_capture\w*|_wait_and_warmup|warmup\w*|_warm_up_model|"
            r"compile_or_warm_up_model|_dummy_sampler_run|init_piecewise_cuda_graphs|kernel_warmup|"
            r"\w*autotune\w*)\b|"
            r"cuda_graph_runner\.py"
        ),
    ),
    (
        "allocating_kv_cache",
        re.compile(
            r"in (?:init_memory_pool|profile_max_num_token|profile_run|determine_available_memory|"
            r"determine_num_available_blocks|_initialize_kv_caches|initialize_kv_cache\w*|init_cache_engine|"
            r"raise_if_cache_size_invalid|_init_cache|init_kv_cache\w*|_?check_enough_kv_cache_memory|"
            r"get_kv_cache_configs?|_check_if_kv_cache_fits|initialize_cache)\b|"
            r"method (?:initialize_cache|determine_num_available_blocks|determine_available_memory)\b"
        ),
    ),
    (
        "loading_weights",
        re.compile(
            r"in (?:load_model|load_weights|_load_weights|weight_loader\w*|load_weights_and_postprocess|"
            r"create_weights|process_weights_after_loading|\w*_repack|_?initialize_model|get_model|"
            r"_?cached_get_attn_backend|get_attn_backend|which_attn_to_use|load_single_module)\b"
        ),
    ),
)


# A shape or size check that failed inside a weight loader: the checkpoint does not fit the model.
_WEIGHT_LOADER = re.compile(r"in (?:weight_loader\w*|\w*load_weights\w*|_load_\w*weight\w*)\b")
_SHAPE_ERROR = re.compile(
    r"^(?:\w+\.)*AssertionError\s*:?\s*(?:assert\b.*)?$|shape|size mismatch|size of tensor|must match the size"
)


def categorize(summary: str, traceback: str = "") -> Category:
    """The category of an error from its decisive line (and its traceback's frames: a KeyError or a shape
    check inside a weight loader is a model-loading error)."""
    if traceback and _SHAPE_ERROR.search(summary) and _innermost_is_weight_loader(traceback):
        return Category.MODEL_LOAD
    # what the message says may follow ("This may lead to ... CUDA errors") is no part of what happened
    summary = _HYPOTHETICAL.split(summary, maxsplit=1)[0]
    for name, pattern in _CATEGORIES:
        if pattern.search(summary):
            return Category(name)
    if summary.startswith("KeyError") and re.search(r"load_weights|weight_loader", traceback):
        return Category.MODEL_LOAD
    m = _EXCEPTION_CLASS.match(summary)
    category = Category(_CATEGORY_OF_CLASS.get(m.group(1), Category.OTHER)) if m else Category.OTHER
    if category == Category.OTHER and _IMPORTING.search(traceback):
        # raised while a module was being imported (an extension's operators missing, a package built for
        # another torch): the environment's packages do not fit together
        return Category.IMPORT
    return category


_HYPOTHETICAL = re.compile(r"\. (?:This|It|That|Which) (?:may|might|can|could|will|would) ")

# A frame whose source line is an import statement: the exception was raised while importing.
_IMPORTING = re.compile(r"\n\s+(?:from [\w.]+ import\b|import [\w.]+)")

# What raised, where the message says nothing known: the exception's class (classes the patterns above name,
# MemoryError, SafetensorError, TimeoutError, ..., and those with a profile rule, HFValidationError, are not
# repeated here). A pydantic validation error is the
# engine's arguments or model config refused (vLLM validates its engine args as pydantic dataclasses); the
# Hugging Face hub's errors are a model or repository that cannot be found or opened.
_EXCEPTION_CLASS = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)(?::|$)")
_CATEGORY_OF_CLASS: dict[str, str] = {
    "ValidationError": "config",
    "PackageNotFoundError": "import",
    "ArgumentError": "config",
    "ArgumentTypeError": "config",
    "RepositoryNotFoundError": "model_load",
    "RevisionNotFoundError": "model_load",
    "EntryNotFoundError": "model_load",
    "LocalEntryNotFoundError": "model_load",
    "GatedRepoError": "model_load",
    "DistBackendError": "nccl",
}


def _innermost_is_weight_loader(traceback: str) -> bool:
    frames = list(re.finditer(r'File "[^"]*", line \d+, in \w+', traceback))
    return any(_WEIGHT_LOADER.search(m.group(0)) for m in frames[-4:])


# NCCL numbers each collective of a process group: startup (init, profiling, graph capture) runs a few
# hundred to a few thousand; tens of thousands mean the server had been serving for a while.
_SEQ_NUM = re.compile(r"SeqNum=(\d+)")
_SERVING_SEQ_NUM = 10_000


def phase_from_error(summary: str) -> str | None:
    """The phase an error line itself proves (evidence that beats the markers around it), if any."""
    m = _SEQ_NUM.search(summary)
    if m and int(m.group(1)) >= _SERVING_SEQ_NUM:
        return "ready"
    return None


def phase_from_frames(traceback: str) -> str | None:
    """The startup phase that a traceback's innermost recognizable frame belongs to, if any."""
    found = [(m.start(), phase) for phase, pattern in _PHASE_FRAMES for m in pattern.finditer(traceback)]
    return max(found, key=lambda f: f[0])[1] if found else None  # the first of equals, in _PHASE_FRAMES order


def hint_for(category: Category, summary: str, phase: str, facts: Mapping[str, object], engine: str) -> str:
    """One line an operator can act on, using what the log told (free memory, port, compute capability)."""
    if category == "oom":
        return _oom_hint(summary, phase, facts, engine)
    if category == "port_in_use":
        port = _first(r"port[ =:'\"]+(\d{2,5})", summary) or _fact(facts, "port")
        where = f"port {port}" if port else "the port"
        return (
            f"{where} is already taken: stop the other server on it (ss -ltnp) or start with another --port"
        )
    if category == "unsupported":
        cc = _first(r"capability:? (\d+\.\d+)", summary) or _first(r"sm_?(\d{2,3})", summary)
        what = f"compute capability {cc}" if cc else "this GPU"
        if "shared memory" in summary:
            return (
                f"a Triton kernel needs more shared memory than {what} has: use a smaller-block config, "
                "another attention/MoE backend, or a GPU of the kind the kernel was tuned for"
            )
        return f"this build has no kernels for {what}: use a build compiled for it, or another backend"
    if category == "import":
        missing = _first(r"(lib[\w.+-]+\.so[\w.]*)", summary) or _first(r"No module named '([^']+)'", summary)
        thing = missing or "a library"
        return (
            f"{thing} does not match this environment: install the engine build for this CUDA/driver version"
        )
    if category == "config" and "unrecognized arguments:" in summary:
        args = summary.split("unrecognized arguments:", 1)[1].strip()
        return f"this version does not accept {args}: check the option's spelling and the engine version (--help)"
    if category == "killed" and summary.startswith("process exited"):
        # a probe sees that the process is gone, not how: a SIGKILL leaves no words, and neither does an exit
        # after a line no rule knows
        return (
            "the process is gone and its log does not say why: a SIGKILL (often the kernel's OOM killer: check "
            "`dmesg -T` and host RAM) leaves no words, or it exited after the last lines shown"
        )
    return _HINTS.get(category, "see the traceback for the failing call")


# The hints that need nothing from the message or the facts.
_HINTS: dict[str, str] = {
    Category.NCCL: "a collective failed or timed out: check that every rank/node started and can reach the "
    "others (NCCL_SOCKET_IFNAME, firewall, --dist-init-addr), then rerun with NCCL_DEBUG=INFO",
    Category.CUDA: "the CUDA runtime failed: check nvidia-smi, the driver version, CUDA_VISIBLE_DEVICES and "
    "the container's GPU access; rerun with CUDA_LAUNCH_BLOCKING=1 to locate the failing kernel",
    Category.TIMEOUT: "the engine gave up waiting: look for the rank or step that hung (py-spy dump), or raise "
    "its timeout",
    Category.MODEL_LOAD: "the checkpoint does not match what the engine expects: check the model path, revision "
    "and quantization",
    Category.CONFIG: "a launch option or the model's config is invalid or unsupported: fix the option the "
    "message names",
    Category.ASSERTION: "an internal check of the engine failed: the failing assert is the summary; search the "
    "engine's issues for it",
    Category.KILLED: "the process was killed (SIGKILL), often by the kernel's OOM killer: check `dmesg -T` and "
    "host RAM",
}


def _oom_hint(summary: str, phase: str, facts: Mapping[str, object], engine: str) -> str:
    after_weights = _fact(facts, "avail_mem_after_weights_gb")
    kv_gib = _fact(facts, "kv_cache_memory_gb")
    free = (
        f" ({after_weights} GB free after weights)"
        if after_weights
        else (f" ({kv_gib} GiB for the KV cache)" if kv_gib else "")
    )
    if "mem-fraction-static" in summary or "mem_fraction_static" in summary:
        return f"raise --mem-fraction-static{free}, or lower --max-running-requests / --chunked-prefill-size"
    if "gpu_memory_utilization" in summary or "gpu-memory-utilization" in summary:
        if "Free memory on device" in summary:
            return (
                "other processes hold GPU memory: free the GPU (nvidia-smi) or lower --gpu-memory-utilization"
            )
        return f"raise --gpu-memory-utilization or lower --max-model-len / --max-num-seqs{free}"
    if phase in {s.value for s in STARTUP_PHASES[:2]}:  # the KV cache not begun: the weights do not fit
        return (
            "the weights do not fit on the GPUs given: use more GPUs (tensor parallel), a quantized checkpoint, "
            "or check that no other process holds GPU memory (nvidia-smi)"
        )
    if phase == "capturing_graphs":
        knob = (
            "--cuda-graph-max-bs or --mem-fraction-static"
            if engine == "sglang"
            else "--max-num-seqs, or --gpu-memory-utilization"
        )
        return f"graph capture ran out of memory{free}: lower {knob}, or disable CUDA graphs to confirm"
    if engine == "sglang":
        return f"lower --mem-fraction-static or --max-total-tokens to leave room for activations{free}"
    if engine == "vllm":
        return f"lower --max-model-len or --max-num-seqs, or tune --gpu-memory-utilization{free}"
    if engine == "llamacpp" and phase == "allocating_kv_cache":
        return (
            "the KV cache of --ctx-size tokens does not fit in the memory left after the weights: lower "
            "--ctx-size / --parallel, quantize the cache (-ctk q8_0 -ctv q8_0), or offload fewer layers (-ngl)"
        )
    return f"the GPU ran out of memory{free}: use a smaller context / batch, or more GPUs"


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _fact(facts: Mapping[str, object], name: str) -> str | None:
    value = facts.get(name)
    if value is None:
        return None
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
