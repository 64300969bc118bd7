"""Capture every llama-server scenario again: a ready launch, each failure it can have, kills and stops.

    python benchmarks/real_engines/llamacpp.py --server PATH/llama-server [--models DIR] [--out DIR]
        [--port N] [--only NAME ...] [--gguf-py PATH] [--device cuda --hog PATH/gpu_hog]
        [--name-prefix early2025- --version-note 'llama-cpp-python 0.3.8 sdist (...)']

Makes the tiny models first (tiny_gguf.py; skipped when --models already holds them), then runs each scenario
in turn through capture.py, writing OUT/captured-llamacpp-<scenario>-<device>.{log,timing,json}
(`--device cuda`: the GPU scenarios, run by llamacpp_cuda.sh on a GPU machine with a CUDA build). Another build's
captures (an older release) are named captured-llamacpp-<--name-prefix><scenario>-<device>. A label's hand-written
fields (outcome, phase, category, root_cause, notes) are kept across reruns: read the new log and fix them if
the engine's behaviour changed. The version recorded is what `llama-server --version` prints, plus --version-note
(by default the llama-cpp-python sdist the sources came from). docs/real-engines.md says what each scenario
provokes. Every launch binds 127.0.0.1:--port (not 8080, which other services may hold).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture
import tiny_gguf

VENDOR = Path("/tmp/eng/llama_cpp_python-0.3.36/vendor/llama.cpp")
CORPUS = Path(__file__).resolve().parents[2] / "tests/fixtures/corpus/llamacpp"
# the request a ready launch serves before it is stopped (python, not curl: the GPU machine may have no curl)
REQUEST = (
    "import json, urllib.request as u; "
    "r = u.Request('http://127.0.0.1:{port}/completion', headers={{'Content-Type': 'application/json'}}, "
    "data=json.dumps({{'prompt': 'the cat is on the', 'n_predict': {tokens}, 'ignore_eos': {tokens} > 8}}).encode()); "
    "print(u.urlopen(r, timeout=60).read().decode())"
)
READY = r"listening on"
LOADING = r"load_model: loading model '"  # the last line before the weights load, at the default verbosity
WARMUP = r"warming up the model"  # printed at verbosity 4 (trace) and above
# requests of a scenario's own, once ready: `python -c POSTS PORT PATH BODY [PATH BODY ...]` sends each BODY (raw
# bytes, so a malformed JSON goes out as it is) and prints each answer's status, one a line
POSTS = (
    "import sys, urllib.request as u, urllib.error as e\n"
    "port, rest = sys.argv[1], sys.argv[2:]\n"
    "for path, body in zip(rest[::2], rest[1::2]):\n"
    "    r = u.Request(f'http://127.0.0.1:{port}{path}', data=body.encode(), "
    "headers={'Content-Type': 'application/json'})\n"
    "    try:\n"
    "        with u.urlopen(r, timeout=110) as a: print(a.status, a.read()[:200])\n"
    "    except e.HTTPError as x: print(x.code, x.read()[:300])\n"
)


LONG_PROMPT = "the cat is on the mat and the dog is in the house " * 20  # about 240 tokens of tiny.gguf
# a chat template that refuses one message by raising (minja's raise_exception), and formats any other
RAISING_TEMPLATE = (
    "{% for m in messages %}{% if m['content'] == 'boom' %}{{ raise_exception('this template refuses boom') }}"
    "{% endif %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


def _completion(prompt: str, tokens: int, *, ignore_eos: bool = False) -> str:
    return json.dumps({"prompt": prompt, "n_predict": tokens, "ignore_eos": ignore_eos})


def _chat(content: str) -> str:
    return json.dumps({"messages": [{"role": "user", "content": content}], "max_tokens": 4})


def _oai(prompt: str, tokens: int) -> str:
    # a long one keeps generating: </s> (id 2 of tiny_gguf's vocabulary) is never sampled
    return json.dumps(
        {"prompt": prompt, "max_tokens": tokens, **({"logit_bias": {"2": -100}} if tokens > 16 else {})}
    )


@dataclass
class Scenario:
    """One launch: the server's arguments, what to do to it, and how to wrap it."""

    name: str
    args: list[str]
    kill_at: list[str] = field(default_factory=list)
    term_at: list[str] = field(default_factory=list)
    int_at: list[str] = field(default_factory=list)
    stop_at: list[str] = field(default_factory=list)
    request: bool = False  # run REQUEST once ready, then stop 1 s after it returned
    request_tokens: int = 8  # the tokens asked for; over 8: all of them (ignore_eos), a long request
    ulimit_v_kib: int | None = None  # run under `ulimit -v` (address space limit)
    cgroup_mib: int | None = None  # run in a child memory cgroup of this limit (the kernel's OOM killer)
    hold_port: bool = False  # bind --port first, as another server would
    hog_leave_mib: int | None = None  # start gpu_hog first, leaving this much GPU memory free
    timeout: float = 120.0
    port: int | None = None  # the port the launch binds, where not --port (the request goes there)
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None  # run as this user (setpriv), as a service account without root's rights would
    # (path, raw body) requests sent in turn once ready, instead of REQUEST (then stopped 1 s after the last)
    posts: list[tuple[str, str]] = field(default_factory=list)
    posts_at: str = READY  # the line (and delay) at which `posts` are sent
    # other signals to the group, (signal name, REGEX[+SECONDS]): SIGSTOP then SIGCONT for a hang
    signal_at: list[tuple[str, str]] = field(default_factory=list)


def scenarios(m: str, port: int) -> list[Scenario]:
    """Every CPU scenario; `m` is the model folder."""
    base = ["--host", "127.0.0.1", "--port", str(port)]
    tiny = ["-m", f"{m}/tiny.gguf", *base]
    big = ["-m", f"{m}/big.gguf", *base]
    return [
        Scenario("ready", tiny, request=True),
        Scenario("ready-verbose", [*tiny, "--verbose"], request=True),
        # no --host/--port: the default 127.0.0.1:8080, which adds a notice about the default port changing
        Scenario("ready-default-port", ["-m", f"{m}/tiny.gguf"], request=True, port=8080),
        Scenario("ready-trace", [*tiny, "--log-verbosity", "4"], request=True),
        Scenario("port-in-use", tiny, hold_port=True),
        Scenario("model-missing", ["-m", f"{m}/no-such-model.gguf", *base]),
        Scenario("model-bad-magic", ["-m", f"{m}/badmagic.gguf", *base]),
        Scenario("model-truncated", ["-m", f"{m}/truncated.gguf", *base]),
        Scenario("model-unknown-arch", ["-m", f"{m}/unknownarch.gguf", *base]),
        Scenario("model-missing-key", ["-m", f"{m}/noembd.gguf", *base]),
        Scenario("model-wrong-shape", ["-m", f"{m}/badshape.gguf", *base]),
        Scenario("model-missing-tensor", ["-m", f"{m}/missingtensor.gguf", *base]),
        Scenario("bad-argument", [*tiny, "--frobnicate"]),
        Scenario("bad-argument-value", [*tiny, "--ctx-size", "lots"]),
        # the KV cache of 1M tokens (48 GiB) does not fit the 6 GiB address space: ggml's allocation fails
        Scenario("context-too-large", [*big, "--ctx-size", "1048576"], ulimit_v_kib=6 * 1024 * 1024),
        # the same under a memory cgroup: the pages are touched and the kernel's OOM killer sends SIGKILL
        Scenario("oom-killed", [*big, "--ctx-size", "262144"], cgroup_mib=3072),
        Scenario("killed-loading", [*big, "--load-mode", "none"], kill_at=[LOADING]),
        Scenario("killed-warmup", [*big, "--log-verbosity", "4"], kill_at=[WARMUP]),
        Scenario("killed-after-ready", tiny, kill_at=[READY + "+1"]),
        Scenario("sigterm-loading", [*big, "--load-mode", "none"], term_at=[LOADING]),
        Scenario("sigint-loading", [*big, "--load-mode", "none"], int_at=[LOADING]),
        Scenario("sigterm-after-ready", tiny, stop_at=[READY + "+1"]),
        Scenario("ngl-on-cpu-build", [*tiny, "--n-gpu-layers", "99"], request=True),
        Scenario("lora-missing", [*tiny, "--lora", f"{m}/no-such-lora.gguf"]),
        Scenario("lora-not-an-adapter", [*tiny, "--lora", f"{m}/tiny.gguf"]),
        Scenario("draft-vocab-mismatch", [*tiny, "--model-draft", f"{m}/othervocab.gguf"], request=True),
        Scenario("mmproj-missing", [*tiny, "--mmproj", f"{m}/no-such-mmproj.gguf"]),
        # no route to Hugging Face here: the download fails before anything is loaded
        Scenario("hf-download-offline", ["-hf", "ggml-org/models-tiny-test-GGUF", *base], timeout=90),
        Scenario("bad-chat-template", [*tiny, "--jinja", "--chat-template", "{{ messages[0 }}"]),
        Scenario("context-over-train", [*tiny, "--ctx-size", "16384"], request=True),
        Scenario("model-bad-rope", ["-m", f"{m}/badrope.gguf", *base]),
        # head_count_kv 3 does not divide head_count 4: a GGML_ASSERT while the first graph is built (SIGABRT)
        Scenario("assert-bad-heads", ["-m", f"{m}/badheads.gguf", *base]),
        # a 60 MB address space: the HTTP server's threads cannot be created (std::system_error, SIGABRT)
        Scenario("thread-create-fails", tiny, ulimit_v_kib=60000),
        # the model path is a FIFO nobody writes to: the loader blocks forever; stopped by the timeout's SIGTERM
        Scenario("hang-model-fifo", ["-m", f"{m}/fifo.gguf", *base], timeout=45),
        # launches not seen before the unseen-launch measurement (docs/real-engines.md, "Unseen launches")
        Scenario("mmproj-text-model", [*tiny, "--mmproj", f"{m}/tiny.gguf"]),  # a text model as the projector
        Scenario("model-is-directory", ["-m", m, *base]),
        Scenario("model-empty-file", ["-m", f"{m}/empty.gguf", *base]),
        # the model readable by its owner only, the server run as nobody
        Scenario("model-permission-denied", ["-m", f"{m}/private/private.gguf", *base], user="nobody"),
        Scenario(
            "privileged-port",
            ["-m", f"{m}/private/public.gguf", "--host", "127.0.0.1", "--port", "80"],
            user="nobody",
        ),
        Scenario("host-bad-address", ["-m", f"{m}/tiny.gguf", "--host", "256.1.2.3", "--port", str(port)]),
        Scenario("api-key-file-missing", [*tiny, "--api-key-file", f"{m}/no-such-keys.txt"]),
        Scenario("sigterm-warmup", [*big, "--log-verbosity", "4"], term_at=[WARMUP]),
        Scenario("parallel-huge", [*tiny, "--parallel", "100000"], request=True),
        Scenario("ctx-zero", [*tiny, "-c", "0"], request=True),
        Scenario(
            "split-mode-row-on-cpu", [*tiny, "--n-gpu-layers", "99", "--split-mode", "row"], request=True
        ),
        Scenario("v-cache-quantized-no-fa", [*tiny, "--cache-type-v", "q4_0", "--flash-attn", "off"]),
        Scenario(
            "port-zero",
            ["-m", f"{m}/tiny.gguf", "--host", "127.0.0.1", "--port", "0"],
            stop_at=[READY + "+1"],
        ),
        # captured after the first fixes, to test them on launches they were not written from
        Scenario(
            "k-cache-block-mismatch", [*tiny, "--cache-type-k", "q4_0"]
        ),  # head dim 16 < q4_0's block 32
        Scenario("draft-missing", [*tiny, "--model-draft", f"{m}/no-such-draft.gguf"]),
        Scenario("grammar-file-missing", [*tiny, "--grammar-file", f"{m}/no-such-grammar.gbnf"]),
        Scenario("model-safetensors", ["-m", "/tmp/eng/tiny-llama/model.safetensors", *base]),  # not a GGUF
        Scenario("threads-huge", [*tiny, "--threads", "100000"]),
        Scenario("rerank-pooling-generative", [*tiny, "--embedding", "--pooling", "rank"]),
        Scenario(
            "chat-template-file-missing", [*tiny, "--chat-template-file", f"{m}/no-such-template.jinja"]
        ),
        Scenario("override-kv-bad", [*tiny, "--override-kv", "llama.context_length=int:lots"]),
        Scenario("ctx-one", [*tiny, "-c", "1"], request=True),
        # a third round, captured after all the fixes, to measure the fixed tool on launches it never read
        Scenario("host-not-local", ["-m", f"{m}/tiny.gguf", "--host", "10.255.255.1", "--port", str(port)]),
        Scenario(
            "model-url-offline", ["-mu", "https://huggingface.co/x/y/resolve/main/m.gguf", *base], timeout=90
        ),
        Scenario("batch-zero", [*tiny, "-b", "0", "-ub", "0"], request=True),
        Scenario("static-path-missing", [*tiny, "--path", f"{m}/no-such-dir"], request=True),
        Scenario(
            "ssl-cert-missing", [*tiny, "--ssl-key-file", f"{m}/no.key", "--ssl-cert-file", f"{m}/no.crt"]
        ),
        # the operator's Ctrl-C once ready: one (a clean stop), and two (the second while the first one's
        # shutdown runs: 'Received second interrupt', then exit(1), whose destructors may trip a GGML_ASSERT)
        Scenario("sigint-after-ready", tiny, int_at=[READY + "+1"]),
        Scenario("sigint-twice-after-ready", tiny, int_at=[READY + "+1", "cleaning up before exit"]),
        # the same while a long request is being generated on the bigger model: the server is busy when stopped
        Scenario(
            "sigint-twice-busy",
            big,
            int_at=[READY + "+2", READY + "+2.2"],
            request=True,
            request_tokens=4096,
        ),
        # round 23 (issue 30): request errors after ready while the server serves on, a serving hang, a kill while
        # a request is generated, an unresolvable host, a HOME that cannot be written
        Scenario(
            "request-too-long-then-ok",
            [*tiny, "-c", "64"],
            posts=[("/completion", _completion(LONG_PROMPT, 4)), ("/completion", _completion("the cat", 4))],
        ),
        Scenario(
            "request-bad-json-then-ok",
            tiny,
            posts=[
                ("/completion", '{"prompt": "the cat", "n_predict": 4'),
                ("/completion", _completion("the", 4)),
            ],
        ),
        Scenario(
            "chat-template-raises-per-request",
            [*tiny, "--jinja", "--chat-template", RAISING_TEMPLATE],
            posts=[("/v1/chat/completions", _chat("boom")), ("/v1/chat/completions", _chat("the cat"))],
        ),
        Scenario(
            "request-long-then-cached",
            [*tiny, "-c", "64"],
            posts=[
                ("/completion", _completion("the cat is on the", 200, ignore_eos=True)),
                ("/completion", _completion("the", 4)),
            ],
        ),
        # SIGSTOP 1 s after ready, a request sent while it is stopped (it queues in the socket), SIGCONT 30 s later
        Scenario(
            "hang-sigstop-serving",
            big,
            signal_at=[("SIGSTOP", READY + "+1"), ("SIGCONT", READY + "+31")],
            posts=[("/completion", _completion("the cat", 16))],
            posts_at=READY + "+2",
        ),
        Scenario(
            "killed-while-serving",
            [*big, "--log-verbosity", "4"],
            kill_at=[READY + "+4"],
            posts=[("/completion", _completion("the cat", 4096, ignore_eos=True))],
        ),
        Scenario(
            "host-unresolvable",
            ["-m", f"{m}/tiny.gguf", "--host", "no-such-host.invalid", "--port", str(port)],
        ),
        # as nobody, HOME a folder owned by root, -hf: meant for a cache that cannot be made; a build without HTTPS
        # (-DLLAMA_OPENSSL=OFF) refuses the download first ('HTTPS is not supported. Please rebuild with one of:')
        Scenario(
            "hf-build-without-https",
            ["-hf", "ggml-org/models-tiny-test-GGUF", *base],
            user="nobody",
            env={"HOME": f"{m}/private", "XDG_CACHE_HOME": ""},
            timeout=90,
        ),
        # round 24 (issue 30, i30-real2): request errors the server survives and then a real death, native deaths
        # while serving, a hang that ends in a kill, the operator's double Ctrl-C while loading, memory limits
        # while the weights load, a per-request failure of a file the server writes
        Scenario(
            "request-errors-then-killed",
            [*tiny, "-c", "64"],
            posts=[
                ("/completion", '{"prompt": "the cat", "n_predict": 4'),
                ("/completion", _completion(LONG_PROMPT, 4)),
                ("/embedding", json.dumps({"content": "the cat"})),
                ("/completion", _completion("the cat", 4)),
            ],
            kill_at=[READY + "+8"],
        ),
        Scenario(
            "segv-while-serving",
            big,
            signal_at=[("SIGSEGV", READY + "+3")],
            posts=[("/completion", _completion("the cat", 4096, ignore_eos=True))],
        ),
        Scenario("sigint-twice-loading", [*big, "--load-mode", "none"], int_at=[LOADING, LOADING + "+0.3"]),
        # a 350 MB address space: the 400 MB model cannot be mapped
        Scenario("weights-ulimit-v", big, ulimit_v_kib=350_000),
        # the weights read into memory (no mmap) in a 256 MiB memory cgroup: the OOM killer while loading
        Scenario("no-mmap-oom-cgroup", [*big, "--no-mmap"], cgroup_mib=256),
        Scenario(
            "slot-save-missing-dir",
            [*tiny, "--slot-save-path", f"{m}/no-such-dir"],
            posts=[
                ("/completion", _completion("the cat", 4)),
                ("/slots/0?action=save", json.dumps({"filename": "slot0.bin"})),
                ("/completion", _completion("the", 4)),
            ],
        ),
        # SIGSTOP 1 s after ready, a request queued while it is stopped, never resumed: SIGKILL 30 s later
        Scenario(
            "hang-sigstop-then-killed",
            big,
            signal_at=[("SIGSTOP", READY + "+1")],
            kill_at=[READY + "+31"],
            posts=[("/completion", _completion("the cat", 16))],
            posts_at=READY + "+2",
            timeout=90,
        ),
    ]


def python_scenarios(m: str, port: int, lib: str = "") -> list[Scenario]:
    """llama-cpp-python's own server (`python -m llama_cpp.server`, FastAPI and Uvicorn around its libllama),
    run by the Python given to --python; `lib` is LLAMA_CPP_LIB_PATH (a folder holding libllama.so)."""
    env = {"LLAMA_CPP_LIB_PATH": lib} if lib else {}
    base = ["--host", "127.0.0.1", "--port", str(port)]
    tiny = ["-m", "llama_cpp.server", "--model", f"{m}/tiny.gguf", *base]
    big = ["-m", "llama_cpp.server", "--model", f"{m}/big.gguf", *base]
    ready = "Uvicorn running on"
    return [
        Scenario(
            "prompt-too-long-then-ok",
            [*tiny, "--n_ctx", "64"],
            posts=[("/v1/completions", _oai(LONG_PROMPT, 4)), ("/v1/completions", _oai("the cat", 4))],
            posts_at=ready,
            env=env,
        ),
        Scenario(
            "model-missing", ["-m", "llama_cpp.server", "--model", f"{m}/no-such-model.gguf", *base], env=env
        ),
        Scenario("port-in-use", tiny, hold_port=True, env=env),
        Scenario("killed-loading", big, kill_at=["llama_model_loader: loaded meta data"], env=env),
        # Ctrl-C while a long completion runs (Uvicorn waits for it), then again: Uvicorn's forced exit
        Scenario(
            "sigint-twice-serving",
            big,
            int_at=[ready + "+3", "Waiting for connections to close"],
            posts=[("/v1/completions", _oai("the cat", 4096))],
            posts_at=ready,
            env=env,
        ),
        # a chat format no handler has: accepted at start, each chat request fails (the completions still serve)
        Scenario(
            "chat-format-unknown-per-request",
            [*tiny, "--chat_format", "frobnicate"],
            posts=[("/v1/chat/completions", _chat("the cat")), ("/v1/completions", _oai("the cat", 4))],
            posts_at=ready,
            env=env,
        ),
        Scenario(
            "hang-sigstop-serving",
            big,
            signal_at=[("SIGSTOP", ready + "+1"), ("SIGCONT", ready + "+31")],
            posts=[("/v1/completions", _oai("the cat", 16))],
            posts_at=ready + "+2",
            env=env,
        ),
        Scenario("n-ctx-negative", [*tiny, "--n_ctx", "-5"], env=env),
        # SIGKILL 3 s into a long completion: the one process dies mid-request, no last words
        Scenario(
            "killed-while-serving",
            big,
            kill_at=[ready + "+3"],
            posts=[("/v1/completions", _oai("the cat", 4096))],
            posts_at=ready,
            env=env,
        ),
        Scenario(
            "ssl-files-missing",
            [*tiny, "--ssl_keyfile", f"{m}/no.key", "--ssl_certfile", f"{m}/no.crt"],
            env=env,
        ),
        # round 24 (issue 30, i30-real2)
        Scenario(
            "request-errors-then-killed",
            [*tiny, "--n_ctx", "64"],
            posts=[
                ("/v1/completions", '{"prompt": "the cat", "max_tokens": 4'),
                ("/v1/completions", json.dumps({"prompt": "the cat", "max_tokens": 4, "temperature": "hot"})),
                ("/v1/completions", _oai(LONG_PROMPT, 4)),
                ("/v1/completions", _oai("the cat", 4)),
            ],
            posts_at=ready,
            kill_at=[ready + "+8"],
            env=env,
        ),
        Scenario(
            "model-bad-magic", ["-m", "llama_cpp.server", "--model", f"{m}/badmagic.gguf", *base], env=env
        ),
        Scenario(
            "sigint-twice-loading",
            big,
            int_at=["llama_model_loader: loaded meta data", "llama_model_loader: loaded meta data+0.3"],
            env=env,
        ),
        # a KV cache of 1M tokens (48 GiB) in a 6 GiB address space
        Scenario("kv-cache-ulimit-v", [*big, "--n_ctx", "1048576"], ulimit_v_kib=6 * 1024 * 1024, env=env),
        Scenario(
            "segv-while-serving",
            big,
            signal_at=[("SIGSEGV", ready + "+3")],
            posts=[("/v1/completions", _oai("the cat", 4096))],
            posts_at=ready,
            env=env,
        ),
        Scenario(
            "config-file-missing",
            ["-m", "llama_cpp.server", "--config_file", f"{m}/no-such-config.json"],
            env=env,
        ),
        Scenario("lora-missing", [*tiny, "--lora_path", f"{m}/no-such-lora.gguf"], env=env),
        Scenario(
            "config-file-corrupt",
            ["-m", "llama_cpp.server", "--config_file", f"{m}/corrupt-config.json"],
            env=env,
        ),
    ]


def cuda_scenarios(m: str, port: int) -> list[Scenario]:
    """Every scenario run on the GPU machine with a CUDA build (llamacpp_cuda.sh)."""
    base = ["--host", "127.0.0.1", "--port", str(port)]
    tiny = ["-m", f"{m}/tiny.gguf", *base]
    big = ["-m", f"{m}/big.gguf", *base]
    ngl = ["--n-gpu-layers", "99"]
    return [
        Scenario("ready", [*tiny, *ngl], request=True),
        Scenario("ready-verbose", [*tiny, *ngl, "--verbose"], request=True),
        Scenario("ready-default-layers", tiny, request=True),
        # a KV cache of 4M tokens is 192 GiB: more than the GPU's 141 GB
        Scenario("oom-kv-cache", [*big, *ngl, "--ctx-size", "4194304"]),
        # another process holds all but 1.5 GiB of the GPU; the 6 GiB KV cache no longer fits
        Scenario("gpu-busy-oom", [*big, *ngl, "--ctx-size", "131072"], hog_leave_mib=1536),
        # the same, letting --fit (on by default) choose the layers: it keeps some off the GPU
        Scenario("gpu-busy-fit", [*big, "--ctx-size", "131072"], hog_leave_mib=1536, request=True),
        # another process leaves 700 MiB: the CUDA context fits, the 400 MB of weights may not
        Scenario("gpu-busy-weights-oom", [*big, *ngl], hog_leave_mib=700),
        # another process leaves 100 MiB: not even a CUDA context fits
        Scenario("gpu-full-context-oom", [*tiny, *ngl], hog_leave_mib=100),
        Scenario("killed-loading", [*big, *ngl, "--load-mode", "none"], kill_at=[LOADING]),
        Scenario("killed-warmup", [*big, *ngl, "--log-verbosity", "4"], kill_at=[WARMUP]),
        Scenario("sigterm-loading", [*big, *ngl, "--load-mode", "none"], term_at=[LOADING]),
        Scenario("ready-trace", [*tiny, *ngl, "--log-verbosity", "4"], request=True),
        Scenario("ready-big", [*big, *ngl], request=True),
        Scenario("oom-kv-cache-verbose", [*big, *ngl, "--ctx-size", "4194304", "--verbose"]),
        Scenario("assert-bad-heads", ["-m", f"{m}/badheads.gguf", *base, *ngl]),
        Scenario("killed-after-ready", [*tiny, *ngl], kill_at=[READY + "+1"]),
        Scenario("sigint-loading", [*big, *ngl, "--load-mode", "none"], int_at=[LOADING]),
        # the GPU hidden from the process: a CUDA build with no device
        Scenario("no-visible-gpu", [*tiny, *ngl], env={"CUDA_VISIBLE_DEVICES": ""}, request=True),
        Scenario("bad-device", [*tiny, *ngl, "--device", "CUDA5"]),
        Scenario("bad-main-gpu", [*tiny, *ngl, "--main-gpu", "3"]),
    ]


@contextlib.contextmanager
def gpu_hog(hog: str, leave_mib: int) -> Iterator[None]:
    """Run gpu_hog (gpu_hog.cu, built with nvcc) for the duration: it holds all but leave_mib of GPU 0."""
    proc = subprocess.Popen([hog, str(leave_mib)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    print(proc.stdout.readline().strip(), file=sys.stderr)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()
        time.sleep(1)


@contextlib.contextmanager
def held_port(port: int) -> Iterator[None]:
    """Listen on 127.0.0.1:port for the duration, as an earlier server that is still running would."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(
        socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
    )  # the last launch's connections may be in TIME_WAIT
    s.bind(("127.0.0.1", port))
    s.listen(1)
    try:
        yield
    finally:
        s.close()


@contextlib.contextmanager
def memory_cgroup(limit_mib: int) -> Iterator[Path]:
    """A child memory cgroup (v1) of this process's own, limited to limit_mib; removed afterwards."""
    own = next(
        line.split(":", 2)[2].strip()
        for line in Path("/proc/self/cgroup").read_text().splitlines()
        if line.split(":", 2)[1] == "memory"
    )
    path = Path("/sys/fs/cgroup/memory") / own.lstrip("/") / f"capture-{os.getpid()}"
    path.mkdir()
    try:
        (path / "memory.limit_in_bytes").write_text(str(limit_mib << 20))
        if (path / "memory.memsw.limit_in_bytes").exists():  # no swap either
            (path / "memory.memsw.limit_in_bytes").write_text(str(limit_mib << 20))
        yield path
    finally:
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def run(
    sc: Scenario,
    server: str,
    out: Path,
    port: int,
    versions: dict[str, str],
    device: str = "cpu",
    hog: str = "",
    prefix: str = "",
) -> dict[str, object]:
    """Capture one scenario (named captured-llamacpp-<prefix><scenario>-<device>)."""
    command = [server, *sc.args]
    if sc.user:
        command = [
            "setpriv",
            f"--reuid={sc.user}",
            f"--regid={pwd.getpwnam(sc.user).pw_gid}",
            "--clear-groups",
            *command,
        ]
    if sc.ulimit_v_kib:
        command = ["sh", "-c", f'ulimit -v {sc.ulimit_v_kib} && exec "$@"', "sh", *command]
    with contextlib.ExitStack() as stack:
        if sc.hold_port:
            stack.enter_context(held_port(port))
        if sc.hog_leave_mib is not None:
            stack.enter_context(gpu_hog(hog, sc.hog_leave_mib))
        if sc.cgroup_mib:
            cg = stack.enter_context(memory_cgroup(sc.cgroup_mib))
            procs = cg / "cgroup.procs"
            command = ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *command]
        actions = (
            [capture._action("kill", signal.SIGKILL, s) for s in sc.kill_at]
            + [capture._action("term", signal.SIGTERM, s) for s in sc.term_at]
            + [capture._action("interrupt", signal.SIGINT, s) for s in sc.int_at]
            + [capture._action("stop", signal.SIGTERM, s) for s in sc.stop_at]
            + [capture._action(name.lower(), signal.Signals[name], s) for name, s in sc.signal_at]
        )
        posts = [x for pair in sc.posts for x in pair]
        runs = (
            (
                (
                    capture._action("run", signal.SIGCONT, sc.posts_at),
                    shlex.join([sys.executable, "-c", POSTS, str(sc.port or port), *posts]),
                ),
            )
            if sc.posts
            else (
                (
                    capture._action("run", signal.SIGCONT, READY),
                    shlex.join(
                        [sys.executable, "-c", REQUEST.format(port=sc.port or port, tokens=sc.request_tokens)]
                    ),
                ),
            )
            if sc.request
            else ()
        )
        return capture.capture(
            f"captured-llamacpp-{prefix}{sc.name}-{device}",
            command,
            out,
            engine="llamacpp",
            actions=actions,
            timeout=sc.timeout,
            env=sc.env,
            versions=versions,
            runs=runs,
            # a kill or signal of its own after the requests: wait for it, not 1 s after the last answer
            stop_after_run=1.0 if (sc.request or sc.posts) and not (sc.kill_at or sc.signal_at) else None,
        )


def server_version(server: str) -> str:
    """The first line of `llama-server --version` ('version: 0 (unknown)' style), or ''."""
    res = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=60, check=False)
    lines = [x for x in (res.stdout + res.stderr).splitlines() if re.match(r"version|built with", x)]
    return "; ".join(lines)


def python_package_version(python: str, lib: str) -> str:
    """llama_cpp.__version__ as the given Python imports it."""
    res = subprocess.run(
        [python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **({"LLAMA_CPP_LIB_PATH": lib} if lib else {})},
    )
    return res.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """Make the models, then capture each scenario in turn."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", default=str(VENDOR / "build/bin/llama-server"))
    ap.add_argument("--models", type=Path, default=Path("/tmp/eng/models"))
    ap.add_argument("--gguf-py", type=Path, default=VENDOR / "gguf-py")
    ap.add_argument("--out", type=Path, default=CORPUS)
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("--only", nargs="*")
    ap.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="cuda: the GPU scenarios (CUDA build)"
    )
    ap.add_argument("--hog", default="gpu_hog", help="gpu_hog built from gpu_hog.cu (cuda only)")
    ap.add_argument(
        "--version-note", default="llama-cpp-python 0.3.36 sdist (vendored ggml-org/llama.cpp@0c1e57098)"
    )
    ap.add_argument(
        "--name-prefix",
        default="",
        help="put before each scenario's name (another build: 'early2025-' -> captured-llamacpp-early2025-...)",
    )
    ap.add_argument(
        "--python",
        help="a Python with llama-cpp-python's server installed: its scenarios (captured-llamacpp-python-*)",
    )
    ap.add_argument(
        "--lib", default="", help="LLAMA_CPP_LIB_PATH for --python (a folder holding libllama.so)"
    )
    args = ap.parse_args(argv)
    if not (args.models / "badrope.gguf").exists():
        tiny_gguf.main(["--out", str(args.models), "--gguf-py", str(args.gguf_py)])
    if not (args.models / "fifo.gguf").exists():
        os.mkfifo(args.models / "fifo.gguf")
    (args.models / "empty.gguf").touch()
    (args.models / "corrupt-config.json").write_text('{"models": [{"model": "tiny.gguf"')  # cut short
    private = args.models / "private"  # a folder others may enter, with a model only its owner may read
    private.mkdir(mode=0o755, exist_ok=True)
    for name, mode in (("private.gguf", 0o600), ("public.gguf", 0o644)):
        if not (private / name).exists():
            (private / name).write_bytes((args.models / "tiny.gguf").read_bytes())
        (private / name).chmod(mode)
    if args.python:
        versions = {"llama-cpp-python": python_package_version(args.python, args.lib)}
        table = python_scenarios(str(args.models), args.port, args.lib)
        server, prefix = args.python, "python-" + args.name_prefix
    else:
        versions = {"llama-server": server_version(args.server), "source": args.version_note}
        table = (cuda_scenarios if args.device == "cuda" else scenarios)(str(args.models), args.port)
        server, prefix = args.server, args.name_prefix
    for sc in table:
        if args.only and sc.name not in args.only:
            continue
        record = run(sc, server, args.out, args.port, versions, args.device, args.hog, prefix)
        summary = {k: record[k] for k in ("exit", "signal", "actions", "seconds", "lines")}
        print(f"{sc.name}: {summary}", file=sys.stderr)
        time.sleep(0.5)  # let the port be released
    return 0


if __name__ == "__main__":
    sys.exit(main())
