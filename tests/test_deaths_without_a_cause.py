"""A death told without its cause is `killed`; dying words that say what failed are read (issue 30, round 5).

Each case is a real log's last lines, from the public thread named above it (or from the corpus case that holds
them): a process's end reported by its exit status or signal, or its runtime's dying words (Go's signal dump, the
shell's report, faulthandler, ggml's abort backtrace), with nothing before them that names a cause. Such a crash is
`killed`, and its hint says that the cause is not in the log and where to look (the kernel's log, the exit
status). SIGILL says what failed (an instruction this CPU lacks: `unsupported`), and an uncaught C++ exception's
`what(): Resource temporarily unavailable` is a thread that could not be made (`oom`). A cause printed before the
dying words stays the cause.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import build_verdict
from watchdog.profiles.loader import load_engine


def _verdict(engine: str | None, lines: list[str]) -> dict[str, object]:
    analyzer = Analyzer(load_engine(engine))
    analyzer.feed(("\n".join(lines) + "\n").encode(), now=0.0)
    analyzer.finish(now=0.0)
    return build_verdict(analyzer).to_json()


CORPUS = Path(__file__).parent / "fixtures" / "corpus"
_NO_CAUSE = "the process died and this log does not say why"
# Ollama's runner is a Go process: exit status 2 follows its panic or fatal-signal dump, printed in the server's log
_RUNNER_EXIT_2 = "the model's runner died (exit status 2"


@pytest.mark.parametrize(
    ("engine", "lines", "summary", "category", "hint"),
    [
        # ollama/ollama#11790 (2025-08, the client's side of three runs)
        pytest.param(
            "ollama",
            ["Error: 500 Internal Server Error: llama runner process has terminated: exit status 2"],
            "llama runner process has terminated: exit status 2",
            "killed",
            _RUNNER_EXIT_2,
            id="ollama-client-exit-status-2",
        ),
        # ollama/ollama#14093 (0.15.2, Feb 2026): the runner died serving a request
        pytest.param(
            "ollama",
            [
                'time=2026-02-05T12:48:27.680+01:00 level=ERROR source=server.go:302 msg="llama runner terminated" '
                'error="exit status 2"',
                'time=2026-02-05T12:48:27.680+01:00 level=ERROR source=server.go:1607 msg="post predict" '
                'error="Post \\"http://127.0.0.1:52208/completion\\": EOF"',
            ],
            'llama runner terminated" error="exit status 2"',
            "killed",
            _RUNNER_EXIT_2,
            id="ollama-runner-terminated-serving",
        ),
        # ollama/ollama#17080 (0.31.1, Jul 2026): llama-server aborted while loading
        pytest.param(
            "ollama",
            [
                'time=2026-07-21T11:33:06.751+08:00 level=INFO source=sched.go:651 msg="Load failed" '
                'model=/usr/share/ollama/.ollama/models/blobs/sha256-6540411d9e4c error="llama-server process has '
                'terminated: signal: aborted"'
            ],
            "llama-server process has terminated: signal: aborted",
            "killed",
            "the process aborted in native code",
            id="ollama-llama-server-signal-aborted",
        ),
        # ollama/ollama#6044 (2024): the CPU runner built for AVX-512 on a CPU without it
        pytest.param(
            "ollama",
            ["Error: llama runner process has terminated: signal: illegal instruction (core dumped)"],
            "signal: illegal instruction (core dumped)",
            "unsupported",
            "SIGILL",
            id="ollama-runner-sigill",
        ),
        # ollama/ollama#9509 (Mar 2025): the Go runtime's dump after an abort in cgo, its message cut above
        pytest.param(
            "ollama",
            [
                "SIGABRT: abort",
                "PC=0x7f0b6a6969fc m=0 sigcode=18446744073709551610",
                "signal arrived during cgo execution",
            ],
            "SIGABRT: abort",
            "killed",
            "the process aborted in native code",
            id="ollama-go-sigabrt-dump",
        ),
        # ollama/ollama#9960 (2025-03, the Windows app's log)
        pytest.param(
            "ollama",
            [
                'time=2025-03-24T14:09:04.628+08:00 level=WARN source=server.go:163 msg="server crash 22 - exit code 1 - '
                'respawning"'
            ],
            "server crash 22 - exit code 1 - respawning",
            "killed",
            _NO_CAUSE,
            id="ollama-app-server-crash-exit-code",
        ),
        # llama.cpp#6723 (a llama-server build with AVX run on a host without it)
        pytest.param(
            "llamacpp",
            ["main: build = 2398 (a0b8d1a6)", "Illegal instruction (core dumped)"],
            "Illegal instruction (core dumped)",
            "unsupported",
            "SIGILL",
            id="shell-illegal-instruction",
        ),
        # lmstudio-ai/lmstudio-bug-tracker#1885 (May 2026): bash's report of the job SIGILL ended
        pytest.param(
            "llamacpp",
            [
                'bash: line 603: 20480 Illegal instruction        (core dumped) "$_lms_installed_path" bootstrap -y'
            ],
            "Illegal instruction",
            "unsupported",
            "SIGILL",
            id="bash-job-illegal-instruction",
        ),
        # vllm-project/vllm#6011 (the issue's own last words, no traceback)
        pytest.param(
            "vllm",
            [
                "INFO 07-01 05:20:47 llm_engine.py:169] Initializing an LLM engine (v0.5.0.post1)",
                "Segmentation fault (core dumped)",
            ],
            "Segmentation fault (core dumped)",
            "killed",
            "memory fault in native code",
            id="shell-segfault",
        ),
        # captured 2026-12-02 (tests/fixtures/corpus/llamacpp/captured-llamacpp-thread-create-fails-cpu): under
        # `ulimit -v 60000` llama-server cannot make its HTTP threads
        pytest.param(
            "llamacpp",
            [
                "0.00.005.899 W srv  llama_server: security: no API key is set and CORS allows all origins",
                "terminate called after throwing an instance of 'std::system_error'",
                "  what():  Resource temporarily unavailable",
            ],
            "Resource temporarily unavailable",
            "oom",
            "could not start a thread",
            id="cpp-system-error-eagain",
        ),
        # huggingface/text-generation-inference#2819 (3.0.0, Dec 2024): the shard went away under the warm-up
        pytest.param(
            "tgi",
            [
                "2024-12-10T21:24:12.849356Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:125: Warming up "
                "model",
                "2024-12-10T21:25:42.531534Z ERROR warmup{max_input_length=None max_prefill_tokens=8192 "
                "max_total_tokens=Some(4096) max_batch_size=None}:warmup: text_generation_router_v3::client: "
                "backends/v3/src/client/mod.rs:45: Server error: transport error",
                'Error: Backend(Warmup(Generation("transport error")))',
                "2024-12-10T21:25:42.679824Z ERROR text_generation_launcher: Webserver Crashed",
            ],
            "Server error: transport error",
            "killed",
            _NO_CAUSE,
            id="tgi-warmup-transport-error",
        ),
        # sgl-project/sglang#3685 (v0.4.3): the launcher's word that a child died, its error not shown
        pytest.param(
            "sglang",
            [
                "[2025-02-19 08:00:00] Received sigquit from a child proces. It usually means the child failed."
            ],
            "Received sigquit from a child proces",
            "killed",
            _NO_CAUSE,
            id="sglang-sigquit-from-child",
        ),
        # vllm-project/vllm#13939 (0.7.2, Feb 2025): the engine process died under the requests
        pytest.param(
            "vllm",
            [
                "CRITICAL 02-25 11:11:34 launcher.py:101] MQLLMEngine is already dead, terminating server process"
            ],
            "MQLLMEngine is already dead",
            "killed",
            _NO_CAUSE,
            id="vllm-v0-engine-already-dead",
        ),
        # vllm-project/vllm#27464 (Oct 2025, ROCm, the Ray executor): the EngineCore's ray.get on a worker actor
        pytest.param(
            "vllm",
            [
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718]     raise value",
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718] ray.exceptions.ActorDiedError: The "
                "actor died unexpectedly before finishing this task.",
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718]   class_name: RayWorkerWrapper",
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718]   actor_id: "
                "7c123675a373133583244f1a08000000",
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718]   pid: 13237",
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718]   namespace: "
                "35d98985-1dcd-4f87-ad59-b0090886aa7c",
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718]   ip: 192.168.23.11",
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718] The actor is dead because its worker "
                "process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with "
                "a connection error code 2. End of file. There are some potential root causes. (1) The process is "
                "killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The "
                "worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.",
            ],
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "killed",
            "died without a word of its own",
            id="vllm-ray-actor-died",
        ),
        # NVIDIA/TensorRT-LLM#1700 (0.11.0.dev, May 2024): mpirun's report of a rank ended by SIGKILL
        pytest.param(
            "trtllm",
            [
                "-" * 74,
                "Primary job  terminated normally, but 1 process returned",
                "a non-zero exit code. Per user-direction, the job has been aborted.",
                "-" * 74,
                "-" * 74,
                "mpirun noticed that process rank 6 with PID 0 on node xxxxxxxx exited on signal 9 (Killed).",
                "-" * 74,
            ],
            "mpirun noticed that process rank 6 with PID 0 on node xxxxxxxx exited on signal 9 (Killed).",
            "killed",
            "the process was killed (SIGKILL)",
            id="mpirun-rank-exited-on-signal-9",
        ),
        # triton-inference-server/tensorrtllm_backend#459 (2024): Triton with TensorRT-LLM under mpirun, a rank's exit
        pytest.param(
            "trtllm",
            [
                "-" * 74,
                "mpirun detected that one or more processes exited with non-zero status, thus causing",
                "the job to be terminated. The first process to do so was:",
                "",
                "  Process name: [[12525,1],0]",
                "  Exit code:    1",
                "-" * 74,
            ],
            "mpirun detected that one or more processes exited with non-zero status",
            "killed",
            _NO_CAUSE,
            id="mpirun-rank-exited-with-non-zero-status",
        ),
        # meta-llama/llama#706 (2023): Llama 2's chat example under torchrun, its worker killed (exitcode -9)
        pytest.param(
            None,
            [
                "> initializing model parallel with size 1",
                "> initializing ddp with size 1",
                "> initializing pipeline with size 1",
                "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: "
                "333202) of binary: /home/akemid/llama/venv/bin/python3",
                "Traceback (most recent call last):",
                '  File "/home/akemid/llama/venv/bin/torchrun", line 8, in <module>',
                "    sys.exit(main())",
                '  File "/home/akemid/llama/venv/lib/python3.10/site-packages/torch/distributed/elastic/'
                'multiprocessing/errors/__init__.py", line 346, in wrapper',
                "    return f(*args, **kwargs)",
                '  File "/home/akemid/llama/venv/lib/python3.10/site-packages/torch/distributed/run.py", line 794, '
                "in main",
                "    run(args)",
                '  File "/home/akemid/llama/venv/lib/python3.10/site-packages/torch/distributed/run.py", line 785, '
                "in run",
                "    elastic_launch(",
                '  File "/home/akemid/llama/venv/lib/python3.10/site-packages/torch/distributed/launcher/api.py", '
                "line 134, in __call__",
                "    return launch_agent(self._config, self._entrypoint, list(args))",
                '  File "/home/akemid/llama/venv/lib/python3.10/site-packages/torch/distributed/launcher/api.py", '
                "line 250, in launch_agent",
                "    raise ChildFailedError(",
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
                "========================================",
            ],
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
            "killed",
            "died without a word of its own",
            id="torchrun-child-failed-exitcode-minus-9",
        ),
    ],
)
def test_a_death_told_without_its_cause(
    engine: str | None, lines: list[str], summary: str, category: str, hint: str
) -> None:
    """A launch whose log ends in a death told without its cause crashes on that line, `killed` with the hint
    that the cause is not in the log; SIGILL and a thread that could not be made say what failed."""
    v = _verdict(engine, lines)
    assert v["state"] == "crashed"
    error = v["error"]
    assert isinstance(error, dict)
    assert summary in str(error["summary"])
    assert error["category"] == category
    assert hint in str(error["hint"])


def test_the_no_cause_hint_sends_to_the_kernel_log_and_the_exit_status() -> None:
    """The hint of a death without its cause names where an expert looks: the kernel's log, the exit status."""
    v = _verdict(
        "vllm",
        ["CRITICAL 02-25 11:11:34 launcher.py:101] MQLLMEngine is already dead, terminating server process"],
    )
    hint = str(v["error"]["hint"])  # type: ignore[index]
    assert "dmesg -T" in hint
    assert "exit status" in hint
    assert "OOM killer" in hint


@pytest.mark.parametrize(
    ("engine", "lines", "category"),
    [
        # ollama/ollama#14065 (2026): the runner's own assert, then its exit status
        pytest.param(
            "ollama",
            [
                'time=2026-02-01T10:00:00.000Z level=ERROR source=sched.go:455 msg="error loading llama server" '
                'error="llama runner process has terminated: GGML_ASSERT(false && \\"unsupported minicpmv '
                'version\\") failed"',
            ],
            "assertion",
            id="ollama-terminated-carries-its-assert",
        ),
        # a CUDA error printed by the runner, then its end by exit status
        pytest.param(
            "ollama",
            [
                "CUDA error: out of memory",
                "  current device: 0, in function ggml_backend_cuda_buffer_type_alloc_buffer at ggml-cuda.cu:1234",
                'time=2025-02-20T12:24:52.667+08:00 level=ERROR source=sched.go:455 msg="error loading llama server" '
                'error="llama runner process has terminated: exit status 2"',
            ],
            "oom",
            id="ollama-cause-before-exit-status",
        ),
        # llama.cpp#10956: ggml's own message, then the shell's 'Aborted (core dumped)'
        pytest.param(
            "llamacpp",
            [
                "ggml_aligned_malloc: insufficient memory (attempted to allocate 655521.35 MB)",
                "Aborted (core dumped)",
            ],
            "oom",
            id="native-message-before-abort",
        ),
        # NVIDIA/TensorRT-LLM#1596 (2024): a rank's own error, then mpirun's report of its exit status
        pytest.param(
            "trtllm",
            [
                "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Tensor 'prompt_embedding_table' has invalid "
                "shape (1, 512), expected (-1, 4096)",
                "-" * 74,
                "mpirun detected that one or more processes exited with non-zero status, thus causing",
                "the job to be terminated. The first process to do so was:",
                "",
                "  Process name: [[57329,1],1]",
                "  Exit code:    1",
                "-" * 74,
            ],
            "assertion",
            id="rank-error-before-mpirun-exit-status",
        ),
        # a Ray worker's own error (its '(RayWorkerWrapper pid=N)' lines), then the EngineCore's ActorDiedError
        pytest.param(
            "vllm",
            [
                "(RayWorkerWrapper pid=13237) ERROR 10-24 07:38:01 [worker_base.py:620] torch.OutOfMemoryError: CUDA "
                "out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB "
                "is free.",
                "(EngineCore_DP0 pid=44606) ERROR 10-24 07:38:03 [core.py:718] ray.exceptions.ActorDiedError: The "
                "actor died unexpectedly before finishing this task.",
            ],
            "oom",
            id="ray-worker-error-before-actor-died",
        ),
        # a torchrun worker's own traceback, then the launcher's ChildFailedError (exitcode 1)
        pytest.param(
            None,
            [
                "[rank0]: Traceback (most recent call last):",
                '[rank0]:   File "/app/example_chat_completion.py", line 20, in main',
                "[rank0]:     generator = Llama.build(",
                "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1002.00 MiB. GPU 0 has a "
                "total capacity of 14.75 GiB of which 1.06 GiB is free.",
                "E0101 10:00:00.000000 1200 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: "
                "1) local_rank: 0 (pid: 1234) of binary: /usr/bin/python3",
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 263, in '
                "launch_agent",
                "    raise ChildFailedError(",
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
            ],
            "oom",
            id="worker-error-before-torchrun-child-failed",
        ),
    ],
)
def test_a_cause_before_the_dying_words_stays_the_cause(
    engine: str | None, lines: list[str], category: str
) -> None:
    """Dying words and a report of an exit status rank after any cause printed before them, and a report that
    carries the process's last error is read from its words, not as a death without a cause."""
    v = _verdict(engine, lines)
    assert v["state"] == "crashed"
    assert v["error"]["category"] == category  # type: ignore[index]


def test_a_failed_allocation_in_sglangs_memory_cache_is_the_kv_cache_full() -> None:
    """'Failed to allocate ...' raised in sglang/srt/mem_cache/ (the token pool's alloc() found no free slot) is
    `oom` with the KV cache's hint, not `other` (the LMCache radix cache of SGLang's PR 869, tests/fixtures/corpus
    sglang/postready-scheduler-valueerror-lmcache-tp2-pr869)."""
    lines = [
        "[2025-06-26 02:16:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2620, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/schedule_batch.py", line 661, in '
        "init_next_round_input",
        "    tree_cache.match_prefix_lmcache(",
        '  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/radix_cache.py", line 254, in match_prefix_lmcache',
        '    raise ValueError("Failed to allocate token prealloc indices")',
        "ValueError: Failed to allocate token prealloc indices",
    ]
    v = _verdict("sglang", lines)
    assert v["state"] == "crashed"
    error = v["error"]
    assert isinstance(error, dict)
    assert error["category"] == "oom"
    assert "KV cache had no free slot" in str(error["hint"])
    # the same wording raised outside the memory cache names no KV slot: nothing says what failed
    elsewhere = [ln.replace("mem_cache/radix_cache.py", "managers/io_struct.py") for ln in lines]
    assert _verdict("sglang", elsewhere)["error"]["category"] == "other"  # type: ignore[index]


# Open MPI's signal handler dumps of several ranks, interleaved (NVIDIA/TensorRT-LLM#5766, 2025)
_OMPI_SIGNAL = [
    "[b8e65b677a8f:219491] *** Process received signal ***",
    "[b8e65b677a8f:219491] Signal: Aborted (6)",
    "[b8e65b677a8f:219491] Signal code:  (-6)",
    "[b8e65b677a8f:219486] [ 0] /usr/lib/x86_64-linux-gnu/libc.so.6(+0x45330)[0x7f30bae1b330]",
    "[b8e65b677a8f:219486] [ 1] /usr/lib/x86_64-linux-gnu/libc.so.6(pthread_kill+0x11c)[0x7f30bae74b2c]",
    "[b8e65b677a8f:219487] [ 7] /usr/lib/x86_64-linux-gnu/libc.so.6(__libc_free+0x7e)[0x7f1913229dae]",
]
_NCCL_FRAMES = [
    "[b8e65b677a8f:219487] [ 8] /usr/lib/x86_64-linux-gnu/libnccl.so.2(+0x6437e)[0x7f16d126337e]",
    "[b8e65b677a8f:219487] [ 9] /usr/lib/x86_64-linux-gnu/libnccl.so.2(pncclCommInitRank+0x153)[0x7f16d1265513]",
]


def test_open_mpis_signal_report_is_a_death_and_nccl_frames_say_where() -> None:
    """Open MPI's 'Signal: Aborted (6)' is a rank's death (`killed`, the abort's hint); with NCCL's frames on
    the crashing stack it is `nccl`; a message printed before both stays the cause."""
    alone = _verdict("trtllm", _OMPI_SIGNAL)
    assert alone["state"] == "crashed"
    assert alone["error"]["category"] == "killed"  # type: ignore[index]
    assert "aborted in native code" in str(alone["error"]["hint"])  # type: ignore[index]
    nccl = _verdict("trtllm", [*_OMPI_SIGNAL, *_NCCL_FRAMES])
    assert nccl["error"]["category"] == "nccl"  # type: ignore[index]
    assert "inside NCCL" in str(nccl["error"]["hint"])  # type: ignore[index]
    caused = _verdict(
        "trtllm", ["RuntimeError: CUDA error: an illegal memory access was encountered", *_OMPI_SIGNAL]
    )
    assert caused["error"]["category"] == "cuda"  # type: ignore[index]


def test_ggml_cuda_error_is_a_crash_at_once_without_its_abort_line() -> None:
    """ggml_cuda_error never returns (GGML_ABORT follows its three lines): its 'current device: N, in function F
    at file:line' line is certain death at once, even when the abort's own line is not in the log (2026's
    timestamped E lines, ggml-org/llama.cpp#23546)."""
    analyzer = Analyzer(load_engine("llamacpp"))
    lines = [
        "0.11.033.179 E ggml_cuda_compute_forward: SOFT_MAX failed",
        "0.11.033.189 E CUDA error: invalid argument",
        "0.11.033.189 E   current device: 0, in function ggml_cuda_compute_forward at /home/jonno/code/llama.cpp/"
        "ggml/src/ggml-cuda/ggml-cuda.cu:3120",
        "0.11.033.190 E   err",
    ]
    analyzer.feed(("\n".join(lines) + "\n").encode(), now=0.0)
    v = build_verdict(analyzer).to_json()  # no finish(), no grace: the log is still open
    assert v["state"] == "crashed"
    assert v["error"]["category"] == "cuda"  # type: ignore[index]
    assert "CUDA error: invalid argument" in str(v["error"]["summary"])  # type: ignore[index]


def test_a_fit_dry_runs_context_error_is_survived_when_the_load_goes_on() -> None:
    """llama.cpp's --fit tries a context before loading the weights and goes on when it fails: the context's
    refusal of the parameters, printed in that dry run, is no crash once the loader's lines follow
    (TheTom/llama-cpp-turboquant#28, 2026); the same line as the log's last word is the crash."""
    fit = [
        "main: loading model",
        "srv    load_model: loading model '../models/GLM-4.7-Flash-Q4_K_M.gguf'",
        "common_init_result: fitting params to device memory, for bugs during this step try to reproduce them with "
        "-fit off, or provide --verbose logs if the bug only occurs with -fit on",
        "llama_init_from_model: K cache type turbo4 with block size 128 does not divide n_embd_head_k=576",
        "llama_params_fit: encountered an error while trying to fit params to free device memory: failed to create "
        "llama_context from model",
    ]
    going_on = [
        "llama_params_fit: fitting params to free memory took 1.71 seconds",
        "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3080) (0000:15:00.0) - 19830 MiB "
        "free",
    ]
    survived = _verdict("llamacpp", [*fit, *going_on])
    assert (survived["state"], survived["error"]) == ("loading_weights", None)
    ended = _verdict("llamacpp", fit[:4])
    assert ended["state"] == "crashed"
    assert ended["error"]["category"] == "config"  # type: ignore[index]


def test_sglangs_multimodal_warmup_failure_is_fatal_in_the_warmup() -> None:
    """SGLang's diffusion server's 'Server warmup failed; aborting startup' is the launch's end in its warm-up
    (capturing_graphs), the traceback after it the cause (sgl-project/sglang#28493, 2026)."""
    v = _verdict(
        "sglang",
        [
            "[06-17 13:46:56] Server warmup failed; aborting startup: HTTP server did not become ready at "
            "http://[::1]:10454/health",
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.11/dist-packages/sglang/multimodal_gen/runtime/entrypoints/http_server.py",'
            " line 73, in _wait_until_http_ready",
            '    raise RuntimeError(f"HTTP server did not become ready at {health_url}")',
            "RuntimeError: HTTP server did not become ready at http://[::1]:10762/health",
        ],
    )
    assert (v["state"], v["phase"]) == ("crashed", "capturing_graphs")
    assert "10762" in str(v["error"]["summary"])  # type: ignore[index]


_LOADING = [
    "INFO 03-10 10:00:00 [__init__.py:239] Automatically detected platform cuda.",
    "Loading safetensors checkpoint shards:  37% Completed | 11/30 [00:31<00:54,  2.87s/it]",
]


@pytest.mark.parametrize(
    ("engine", "last", "category", "hint"),
    [
        # the shell's report of SIGABRT when core dumps are off (bash: '<script>: line N: PID Aborted  <command>')
        pytest.param("vllm", "Aborted", "killed", "aborted in native code", id="bare-aborted"),
        pytest.param(
            "vllm",
            "./serve.sh: line 3: 12345 Aborted                 python3 -m vllm.entrypoints.openai.api_server",
            "killed",
            "aborted in native code",
            id="bash-job-aborted",
        ),
        # ggml-org/llama.cpp#22894 (2026): glibc's heap check, llama-server's only words
        pytest.param("vllm", "free(): invalid pointer", "killed", "aborted in native code", id="glibc-free"),
        # libstdc++'s terminate handler with no exception in flight
        pytest.param(
            "vllm",
            "terminate called without an active exception",
            "killed",
            "aborted in native code",
            id="terminate-no-exception",
        ),
        # ROCm/legacy-rocm-build#5051 (2026): ROCR's fault report, then abort()
        pytest.param(
            "vllm",
            "Memory access fault by GPU node-1 (Agent handle: 0x55f8b54eec30) on address 0x7f2a53193000. Reason: "
            "Page not present or supervisor privilege.",
            "cuda",
            "AMD_SERIALIZE_KERNEL",
            id="rocm-memory-access-fault",
        ),
    ],
)
def test_a_native_death_after_a_progress_bar_is_a_crash(
    engine: str, last: str, category: str, hint: str
) -> None:
    """A log that ends inside a progress bar followed only by a native library's or the shell's dying words is
    a crash, not an incomplete launch (issue 30): `killed` with the abort's hint, or what the runtime names."""
    v = _verdict(engine, [*_LOADING, last])
    assert (v["state"], v["phase"]) == ("crashed", "loading_weights")
    assert v["error"]["category"] == category  # type: ignore[index]
    assert hint in str(v["error"]["hint"])  # type: ignore[index]


def test_rocms_gpu_hang_is_the_cause_before_open_mpis_abort_report() -> None:
    """ROCR's 'HW Exception by GPU node-1 ... reason :GPU Hang' is the cause (cuda), Open MPI's 'Signal: Aborted
    (6)' after it the consequence (a public ROCm report: AMR-Wind on a Radeon Pro W7900, 2025)."""
    v = _verdict(
        "vllm",
        [
            "HW Exception by GPU node-1 (Agent handle: 0x1b0fc990) reason :GPU Hang",
            "[windteammitarbeiter:08475] *** Process received signal ***",
            "[windteammitarbeiter:08475] Signal: Aborted (6)",
            "[windteammitarbeiter:08475] Signal code: (-6)",
        ],
    )
    assert v["state"] == "crashed"
    assert v["error"]["category"] == "cuda"  # type: ignore[index]
    assert "GPU Hang" in str(v["error"]["summary"])  # type: ignore[index]


def test_a_line_that_only_begins_with_a_signals_name_is_no_death() -> None:
    """'Aborted' as a word of a log line (vLLM's 'Aborted request ...' when a client goes away) is no death."""
    v = _verdict("vllm", [*_LOADING, "INFO 03-10 10:00:40 [async_llm.py:270] Aborted request cmpl-5f2a."])
    assert v["state"] == "loading_weights"


@pytest.mark.parametrize(
    ("last", "category", "summary"),
    [
        # a vLLM Ray worker's Abseil failure-signal report (2025-11)
        pytest.param(
            "(EngineCore_DP0 pid=742) (RayWorkerWrapper pid=233, ip=10.20.1.125) *** SIGSEGV received at "
            "time=1762945937 on cpu 6 ***",
            "killed",
            "SIGSEGV received at time=1762945937",
            id="absl-sigsegv",
        ),
        # vllm-project/vllm#17152 (2025, V100 with fp16): Triton's LLVM backend gives up
        pytest.param(
            "LLVM ERROR: Failed to compute parent layout for slice layout.",
            "other",
            "Failed to compute parent layout for slice layout.",
            id="llvm-error",
        ),
        # glog's failed CHECK as its fatal line prints it (the envelope peels 'F1022 04:57:07.596509 1 x.cc:111] ')
        pytest.param(
            "F1022 04:57:07.596509     1 sim_server_main.cc:111] Check failed: "
            "qcraft::cassandra::ConnectCassSession(cluster, session) == CASS_OK ",
            "assertion",
            "Check failed: qcraft::cassandra::ConnectCassSession",
            id="glog-check-failed",
        ),
        # faulthandler after SIGFPE
        pytest.param(
            "Fatal Python error: Floating point exception",
            "killed",
            "Fatal Python error: Floating point exception",
            id="faulthandler-fpe",
        ),
    ],
)
def test_more_native_dying_words_after_a_progress_bar(last: str, category: str, summary: str) -> None:
    """Abseil's signal report, LLVM's fatal error (Triton's compiler), glog's failed CHECK and faulthandler's
    SIGFPE end the process: a crash at once, not an incomplete launch (issue 30)."""
    analyzer = Analyzer(load_engine("vllm"))
    analyzer.feed(("\n".join([*_LOADING, last]) + "\n").encode(), now=0.0)
    v = build_verdict(analyzer).to_json()  # no finish(): certain at the line itself
    assert v["state"] == "crashed"
    assert v["error"]["category"] == category  # type: ignore[index]
    assert summary in str(v["error"]["summary"])  # type: ignore[index]


def test_abseils_report_of_sigterm_is_no_crash() -> None:
    """Abseil's '*** SIGTERM received at time=...' is a stop from outside (the operator's, srun's at the end of a
    job), not a death without a cause."""
    v = _verdict("vllm", [*_LOADING, "0: *** SIGTERM received at time=1759954468 on cpu 5 ***"])
    assert v["error"] is None or v["error"]["category"] != "killed"  # type: ignore[index]


# sglang-project/sglang (2026-03, a public report's last lines; the scheduler's traceback is not in it): the
# launcher's SIGQUIT handler of SGLang 0.5.x once the server runs (tokenizer_manager.py running_phase_sigquit_handler)
_SGLANG_SIGQUIT = (
    "[2026-03-05 02:24:27] SIGQUIT received. signum=None, frame=None. It usually means one child failed."
)


def test_sglangs_running_phase_sigquit_alone_is_a_death_without_its_cause() -> None:
    """The launcher's news that a child failed, with no child's report in the log: a crash, `killed`, said at that
    line (the shell's `Killed` after it is the launcher's own kill_process_tree)."""
    verdict = _verdict(
        "sglang", ["[2026-03-05 02:20:01] The server is fired up and ready to roll!", _SGLANG_SIGQUIT]
    )
    assert verdict["state"] == "crashed"
    error = verdict["error"]
    assert isinstance(error, dict)
    assert error["category"] == "killed"
    assert error["summary"] == _SGLANG_SIGQUIT.split("] ", 1)[1]
    with_shell = _verdict(
        "sglang",
        ["[2026-03-05 02:20:01] The server is fired up and ready to roll!", _SGLANG_SIGQUIT, "Killed"],
    )
    assert with_shell["state"] == "crashed"
    timeline = with_shell["timeline"]
    assert isinstance(timeline, list)
    assert timeline[-1]["line"] == 2  # the crash is said at the SIGQUIT line, not at the shell's report


def test_a_childs_report_cut_short_is_the_cause_not_the_launchers_sigquit() -> None:
    """sglang-0.5.16 (corpus: sglang#32893's excerpt): the launcher's SIGQUIT line, then a TP rank's 'Scheduler hit
    an exception' traceback cut before its exception. The rank's own report is the root cause, and since its
    exception was cut off the category is `other`, not `killed` (the child did not die without a word)."""
    log = (
        CORPUS
        / "sglang"
        / "sglang-0.5.16-sigquit-received-then-scheduler-exception-run-batch-cut-issue32893.log"
    )
    verdict = _verdict("sglang", log.read_text(encoding="utf-8").splitlines())
    assert verdict["state"] == "crashed"
    error = verdict["error"]
    assert isinstance(error, dict)
    assert error["summary"] == "Scheduler hit an exception"
    assert error["category"] == "other"
