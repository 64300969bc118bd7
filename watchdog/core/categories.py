"""Error categories and hints: the class of failure an error line names, what an operator can do (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from watchdog.profiles.model import Profile
from watchdog.vocabulary import Category, State

__all__ = ["categorize", "fill", "hint_for", "phase_from_error", "phase_from_frames"]

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
# repeated here). A pydantic validation error is the engine's arguments or model config refused (vLLM
# validates its engine args as pydantic dataclasses); the Hugging Face hub's errors are a model or repository
# that cannot be found or opened.
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
    return "ready" if m and int(m.group(1)) >= _SERVING_SEQ_NUM else None


_ORDER = {s.value: i for i, s in enumerate(State)}


def phase_from_frames(traceback: str, profile: Profile) -> str | None:
    """The phase that a traceback's innermost frame known to `profile` (its `[[frame]]` tables) belongs to."""
    found = [(m.start(), phase) for phase, pattern in profile.frames for m in pattern.finditer(traceback)]
    # of frames at one place, the later phase's
    return max(found, key=lambda f: (f[0], _ORDER[f[1]]))[1] if found else None


def hint_for(category: str, summary: str, phase: str, facts: Mapping[str, object], profile: Profile) -> str:
    """One line an operator can act on: the first of `profile`'s hints for the category that fits the phase and
    the summary, filled in with the facts and what the log told (free memory, port, compute capability)."""
    for hint in profile.hints:
        if (
            hint.category == category
            and (not hint.phases or phase in hint.phases)
            and (hint.when is None or hint.when.search(summary))
        ):
            return fill(hint.text, {**facts, **_told(summary, facts)})
    return "see the traceback for the failing call"


def fill(template: str, values: Mapping[str, object]) -> str:
    """A hint's template with `values` put in; a name it has no value for stays as written."""
    try:
        return template.format_map(_Values(values))
    except (IndexError, ValueError):
        return template


class _Values(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return f"{{{key}}}"


def _told(summary: str, facts: Mapping[str, object]) -> dict[str, str]:
    # the values a hint may name besides the facts: what the error's message and the facts tell
    after_weights = _fact(facts, "avail_mem_after_weights_gb")
    kv_gib = _fact(facts, "kv_cache_memory_gb")
    port = _first(r"port[ =:'\"]+(\d{2,5})", summary) or _fact(facts, "port")
    cc = _first(r"capability:? (\d+\.\d+)", summary) or _first(r"sm_?(\d{2,3})", summary)
    missing = _first(r"(lib[\w.+-]+\.so[\w.]*)", summary) or _first(r"No module named '([^']+)'", summary)
    return {
        "free": f" ({after_weights} GB free after weights)"
        if after_weights
        else (f" ({kv_gib} GiB for the KV cache)" if kv_gib else ""),
        "where": f"port {port}" if port else "the port",
        "what": f"compute capability {cc}" if cc else "this GPU",
        "thing": missing or "a library",
        "args": summary.split("unrecognized arguments:", 1)[1].strip()
        if "unrecognized arguments:" in summary
        else "",
    }


def _first(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _fact(facts: Mapping[str, object], name: str) -> str | None:
    value = facts.get(name)
    return None if value is None else f"{value:g}" if isinstance(value, float) else str(value)
