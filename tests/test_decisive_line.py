"""The decisive line of a crash, and the deaths a log tells only by its last words (issue 30), on real logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.findings import ProcessExited
from watchdog.core.lifecycle import State
from watchdog.follow.replay import replay_path
from watchdog.profiles.loader import catalogue, load_engine

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def _crash(engine: str, name: str) -> tuple[dict[str, object], dict[str, object]]:
    # the verdict's JSON of a corpus log that crashed, and its error
    _, v = replay_path(CORPUS / engine / f"{name}.log")
    out = v.to_json()
    assert out["state"] == "crashed", out["state"]
    error = out["error"]
    assert isinstance(error, dict)
    return out, error


def _error(engine: str, name: str) -> dict[str, object]:
    return _crash(engine, name)[1]


def test_llamacpp_gguf_reason_over_the_loaders_generic_error() -> None:
    """llama.cpp's generic 'error loading model: llama_model_loader: failed to load model' (Sept 2025, no path)
    is a wrapper: the root cause is gguf_init_from_file's line that says why (the file cannot be opened)."""
    error = _error("llamacpp", "llamacpp-gguf-open-failed-generic-loader-error-after-issue15919")
    assert str(error["summary"]).startswith(
        "gguf_init_from_file: failed to open GGUF file '/home/user/models/"
    )
    assert error["category"] == "model_load"


def test_llamacpp_gguf_bad_magic_over_the_loaders_error_from_path() -> None:
    """With the path in the loader's error (b5760), the specific 'failed to read magic' is still the cause."""
    error = _error("llamacpp", "llamacpp-server-model-path-is-directory-failed-magic-b3rgundy")
    assert error["summary"] == "gguf_init_from_file_impl: failed to read magic"


_LEAK = (
    "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to "
    "be 1 leaked semaphore objects to clean up at shutdown\n"
    "  warnings.warn('resource_tracker: There appear to be %d '\n"
)
_LOADING = (
    "INFO 05-04 17:53:25 [gpu_model_runner.py:1329] Starting to load model /m...\n"
    "Loading safetensors checkpoint shards:   0% Completed | 0/46 [00:00<?, ?it/s]\n"
    "Loading safetensors checkpoint shards:   2% Completed | 1/46 [00:00<00:13,  3.45it/s]\n"
)


def _analyzer() -> Analyzer:
    return Analyzer(load_engine("vllm"), crash_grace=5.0)


def test_interpreter_shutdown_warnings_while_loading_are_a_silent_death() -> None:
    """A log that ends inside a progress bar, then only the interpreter's shutdown warnings: a crash (killed),
    said when those last words come (not left as a launch still loading), whose summary says its cause is not
    in the log."""
    a = _analyzer()
    a.feed(_LOADING.encode(), now=0.0)
    assert a.state == State.LOADING_WEIGHTS
    a.feed(_LEAK.encode(), now=0.1)
    assert a.state == State.CRASHED
    assert a.lifecycle.current.crash_phase == State.LOADING_WEIGHTS
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == "killed"
    assert error.summary.startswith("the process died without an error of its own in the log")
    assert "not in this log" in error.hint


# nanobind's leak report at interpreter exit (Triton's libtriton under vLLM 0.32), its last line unended as printed
_NANOBIND = (
    "nanobind: leaked 64 types!\n"
    ' - leaked type "triton._C.libtriton.ir.location"\n'
    " - ... skipped remainder\n"
    "nanobind: leaked 514 functions!\n"
    ' - leaked function "create_fmul"\n'
    "nanobind: this is likely caused by a reference counting issue in the binding code.\n"
    "See https://nanobind.readthedocs.io/en/latest/refleaks.html"
)


def test_nanobind_leak_report_while_loading_is_a_silent_death() -> None:
    """nanobind's leak report is the interpreter's exit noise too: after a progress bar it is a death whose cause
    is not in the log, said at its first line, and the summary names the launch's last line, not the noise."""
    a = _analyzer()
    a.feed((_LOADING + _NANOBIND + _LEAK).encode(), now=0.0)
    assert a.state == State.CRASHED
    assert a.lifecycle.current.crash_phase == State.LOADING_WEIGHTS
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == "killed"
    assert error.summary.endswith(
        "Loading safetensors checkpoint shards:   2% Completed | 1/46 [00:00<00:13,  3.45it/s]"
    )
    assert "nanobind" not in error.summary


def test_interpreter_exit_noise_alone_is_no_crash() -> None:
    """A log of nothing but the interpreter's exit noise (the last screenful of a launch that ended: nanobind's
    leak report, the resource tracker's warnings) says a process ended, not how: a clean stop prints the same as
    a death, so it is no crash and no error."""
    a = _analyzer()
    a.feed((_NANOBIND + _LEAK).encode(), now=0.0)
    a.finish(1.0)
    assert a.state == State.STARTING
    assert a.lifecycle.current.error is None
    assert a.lifecycle.current.candidates == []


def test_a_dump_of_one_thread_alone_is_a_death_exit_noise_is_not() -> None:
    """Only lines printed at every exit (`clean_exit`: the leak reports) are exit noise that alone says no crash:
    faulthandler's thread dump is printed as a process dies (a fatal signal), so a crop of one thread's dump,
    followed by the leak reports, is a death while starting; its first header is what says it."""
    a = _analyzer()
    dump = 'Thread 0x00007f71b9fff640 (most recent call first):\n  File "/x/scheduler.py", line 9 in watchdog_thread\n'
    a.feed((dump + _NANOBIND + _LEAK).encode(), now=0.0)
    assert a.state == State.CRASHED
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == "killed"
    assert error.line == 1


def test_interpreter_shutdown_warnings_make_the_pending_error_the_crash_at_once() -> None:
    """An error no rule marks fatal, then the interpreter's shutdown warnings: the process is gone, so the
    error is the crash at that line, without waiting for `crash_grace`."""
    a = _analyzer()
    a.feed((_LOADING + "RuntimeError: shard 2 is truncated\n" + _LEAK).encode(), now=0.0)
    assert a.state == State.CRASHED
    error = a.lifecycle.current.error
    assert error is not None
    assert error.summary == "RuntimeError: shard 2 is truncated"


@pytest.mark.parametrize(
    ("engine", "kv_line", "line"),
    [
        pytest.param(
            "vllm",
            "INFO 06-02 11:03:18 [kv_cache_utils.py:637] GPU KV cache size: 1,131,008 tokens",
            "(EngineCore pid=316) INFO 08-21 18:37:40 [monitor.py:53] torch.compile took 0.06 s in total",
            id="vllm-torch-compile-took",
        ),
        pytest.param(
            "vllm",
            "INFO 06-02 11:03:18 [kv_cache_utils.py:637] GPU KV cache size: 1,131,008 tokens",
            "INFO 06-02 11:03:11 [backends.py:170] Compiling a graph for general shape takes 36.76 s",
            id="vllm-general-shape",
        ),
        pytest.param(
            "vllm",
            "INFO 06-02 11:03:18 [kv_cache_utils.py:637] GPU KV cache size: 1,131,008 tokens",
            "(EngineCore pid=316) INFO 08-21 18:37:40 [decorators.py:311] Directly load AOT compilation from path "
            "/root/.cache/vllm/torch_compile_cache/torch_aot_compile/c0e571401d1318c9ef3627754df9cd2cc61a7e210c70b70"
            "847bbcc1216c48405/rank_0_0/model",
            id="vllm-aot-load",
        ),
        pytest.param(
            "vllm",
            "INFO 06-02 11:03:18 [kv_cache_utils.py:637] GPU KV cache size: 1,131,008 tokens",
            "DeepGemm(fp8_gemm_nt) warmup (W=torch.Size([4096, 7168])): 100%|██████████| 8192/8192 "
            "[01:01<00:00, 133.63it/s]",
            id="vllm-deepgemm-warmup",
        ),
        pytest.param(
            "sglang",
            "[2024-12-06 16:06:48 TP0] Memory pool end. avail mem=11.55 GB",
            "Compiling num tokens (num_tokens=8192):   2%|▏         | 1/58 [00:02<02:12,  2.32s/it]",
            id="sglang-compiling-num-tokens",
        ),
        pytest.param(
            "vllm",
            "INFO 06-02 11:03:18 [kv_cache_utils.py:637] GPU KV cache size: 1,131,008 tokens",
            "(Worker_TP2_EP2 pid=4155526) INFO 08-20 17:22:37 [gpu_worker.py:774] Compile and warming up model for "
            "size 8192",
            id="vllm-compile-and-warming-up-for-size",
        ),
        pytest.param(
            "vllm",
            "INFO 06-02 11:03:18 [kv_cache_utils.py:637] GPU KV cache size: 1,131,008 tokens",
            "(Worker_TP0 pid=123) Free memory on device (264.19/267.69 GiB) on startup. Actual usage is 205.08 GiB "
            "for weight, 3.75 GiB for peak activation, 1.63 GiB for non-torch memory, and 0.14 GiB for CUDAGraph "
            "memory. Current kv cache memory in use is 43.85 GiB.",
            id="vllm-memory-report-after-capture",
        ),
    ],
)
def test_compile_and_warm_up_after_the_kv_cache_are_capturing_graphs(
    engine: str, kv_line: str, line: str
) -> None:
    """torch.compile and the kernels' warm-up after the KV cache are capturing_graphs, in the wordings of the
    releases that print them (lines as published in 2025-2026 logs), not allocating_kv_cache."""
    a = Analyzer(load_engine(engine))
    a.feed(f"{kv_line}\n".encode(), now=0.0)
    assert a.state == State.ALLOCATING_KV_CACHE
    a.feed(f"{line}\n".encode(), now=1.0)
    assert a.state == State.CAPTURING_GRAPHS


# Frames as vLLM 0.1x-0.2x prints them (vllm#50705, tenstorrent/tt-inference-server#2995): the warm-up after the
# KV cache runs inside EngineCore._initialize_kv_caches, a KV-cache startup step.
_WARMUP_CRASH = """\
(EngineCore pid=4140) INFO 08-03 17:46:10 [kv_cache_utils.py:849] GPU KV cache size: 1,472,416 tokens
(EngineCore pid=4140) INFO 08-03 17:46:12 [kernel_warmup.py:64] Warming up FlashInfer attention.
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330] EngineCore failed to start.
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330] Traceback (most recent call last):
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]   File "/v/vllm/v1/engine/core.py", line 136, in __init__
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]     kv_cache_config = self._initialize_kv_caches(vllm_config)
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]   File "/v/vllm/v1/engine/core.py", line 324, in _initialize_kv_caches
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]     self.model_executor.initialize_from_config(kv_cache_configs)
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]   File "/v/vllm/v1/executor/abstract.py", line 118, in initialize_from_config
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]     self.collective_rpc("compile_or_warm_up_model")
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]   File "/v/vllm/v1/worker/gpu_worker.py", line 208, in compile_or_warm_up_model
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]     kernel_warmup(self)
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]   File "/v/vllm/model_executor/warmup/kernel_warmup.py", line 64, in kernel_warmup
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330]     flashinfer_autotune(worker.model_runner)
(EngineCore pid=4140) ERROR 08-03 17:46:16 [core.py:1330] RuntimeError: Ninja build failed.
"""


def test_a_crash_in_the_warm_up_inside_a_kv_cache_step_is_in_capturing_graphs() -> None:
    """The warm-up (kernel_warmup, compile_or_warm_up_model) runs inside vLLM's _initialize_kv_caches step: the
    error's own innermost frames put the crash in capturing_graphs, not the enclosing step's allocating_kv_cache."""
    a = Analyzer(load_engine("vllm"))
    a.feed(_WARMUP_CRASH.encode(), now=0.0)
    a.finish(now=0.0)
    assert a.state == State.CRASHED
    assert a.lifecycle.current.crash_phase == State.CAPTURING_GRAPHS


def test_an_error_raised_while_tearing_down_is_not_the_root_cause() -> None:
    """An AttributeError raised in shutdown() while handling the start-up failure (the executor's workers were
    never built; frames as in vllm#25381) is the aftermath: the failure it handled is the root cause."""
    a = Analyzer(load_engine("vllm"))
    a.feed(
        b"Traceback (most recent call last):\n"
        b'  File "/v/vllm/v1/executor/multiproc_executor.py", line 95, in _init_executor\n'
        b"    self._start_workers()\n"
        b'  File "/v/vllm/v1/executor/multiproc_executor.py", line 120, in _start_workers\n'
        b'    raise RuntimeError("worker 3 could not start")\n'
        b"RuntimeError: worker 3 could not start\n"
        b"\n"
        b"During handling of the above exception, another exception occurred:\n"
        b"\n"
        b"Traceback (most recent call last):\n"
        b'  File "/root/anaconda3/envs/janus_pro/lib/python3.10/site-packages/vllm/v1/executor/multiproc_executor.py",'
        b" line 228, in shutdown\n"
        b"    for w in self.workers:\n"
        b"AttributeError: 'MultiprocExecutor' object has no attribute 'workers'\n",
        now=0.0,
    )
    a.finish(now=0.0)
    error = a.lifecycle.current.error
    assert error is not None
    assert error.summary == "RuntimeError: worker 3 could not start"


_ZMQ_TEARDOWN = """\
future: <Task finished name='Task-28' coro=<MQLLMEngineClient.run_output_handler_loop() done, defined at \
/usr/local/lib/python3.10/dist-packages/vllm/engine/multiprocessing/client.py:178> exception=ZMQError('Operation not \
supported')>
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/multiprocessing/client.py", line 184, in \
run_output_handler_loop
    while await self.output_socket.poll(timeout=VLLM_RPC_TIMEOUT
  File "/usr/local/lib/python3.10/dist-packages/zmq/_future.py", line 400, in poll
    raise _zmq.ZMQError(_zmq.ENOTSUP)
zmq.error.ZMQError: Operation not supported
Task exception was never retrieved
"""


def test_a_death_named_only_by_its_zeromq_teardown_says_its_cause_is_not_in_the_log() -> None:
    """vLLM's API server polling a socket its dead engine closed (vllm#10856, as published): ZeroMQ's 'Operation
    not supported' names no missing feature; the verdict is a death whose cause is not in the log."""
    a = Analyzer(load_engine("vllm"))
    a.feed(_ZMQ_TEARDOWN.encode(), now=0.0)
    a.finish(now=0.0)
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == "killed"
    assert "died without a word of its own" in error.hint


# vLLM with an unwritable HOME/.cache (lines and paths as in Center-for-AI-Innovation/LLMFlux#59, 2026-02; the
# frames are registry.py's own): the model-info cache that cannot be saved is logged with its traceback and
# survived; the engine fails later, when FlashInfer cannot create its workspace.
_CACHE_NOT_SAVED = """\
(APIServer pid=387076) INFO 02-25 14:06:40 [utils.py:253] non-default args: {'model': '/m'}
(APIServer pid=387076) ERROR 02-25 14:06:41 [registry.py:711] Error saving model info cache.
(APIServer pid=387076) ERROR 02-25 14:06:41 [registry.py:711] Traceback (most recent call last):
(APIServer pid=387076) ERROR 02-25 14:06:41 [registry.py:711]   File "/app/venv/lib/python3.12/site-packages/vllm/\
model_executor/models/registry.py", line 705, in _save_modelinfo_to_cache
(APIServer pid=387076) ERROR 02-25 14:06:41 [registry.py:711]     cache_dir.mkdir(parents=True, exist_ok=True)
(APIServer pid=387076) ERROR 02-25 14:06:41 [registry.py:711]   File "/usr/lib/python3.12/pathlib.py", line 1313, in mkdir
(APIServer pid=387076) ERROR 02-25 14:06:41 [registry.py:711]     os.mkdir(self, mode)
(APIServer pid=387076) ERROR 02-25 14:06:41 [registry.py:711] FileNotFoundError: [Errno 2] No such file or directory: \
'/u/minum/.cache/vllm'
(EngineCore_DP0 pid=387196) ERROR 02-25 14:06:55 [core.py:946] EngineCore failed to start.
(EngineCore_DP0 pid=387196) ERROR 02-25 14:06:55 [core.py:946] Traceback (most recent call last):
(EngineCore_DP0 pid=387196) ERROR 02-25 14:06:55 [core.py:946]   File "/app/venv/lib/python3.12/site-packages/flashinfer/\
jit/core.py", line 18, in <module>
(EngineCore_DP0 pid=387196) ERROR 02-25 14:06:55 [core.py:946]     os.makedirs(jit_env.FLASHINFER_WORKSPACE_DIR, exist_ok=True)
(EngineCore_DP0 pid=387196) ERROR 02-25 14:06:55 [core.py:946]   File "<frozen os>", line 225, in makedirs
(EngineCore_DP0 pid=387196) ERROR 02-25 14:06:55 [core.py:946] FileNotFoundError: [Errno 2] No such file or directory: \
'/u/minum/.cache/flashinfer'
"""


def test_a_cache_that_cannot_be_saved_is_not_the_crash_nor_its_root_cause() -> None:
    """vLLM logs the model-info cache it cannot save with a traceback and goes on: when the launch fails later,
    the later failure is the root cause, and the cache's traceback alone is no crash."""
    first = _CACHE_NOT_SAVED.split("(EngineCore_DP0", maxsplit=1)[0]
    a = Analyzer(load_engine("vllm"))
    a.feed(first.encode(), now=0.0)
    a.finish(now=0.0)
    assert a.state != State.CRASHED
    a = Analyzer(load_engine("vllm"))
    a.feed(_CACHE_NOT_SAVED.encode(), now=0.0)
    a.finish(now=0.0)
    error = a.lifecycle.current.error
    assert error is not None
    assert (
        error.summary
        == "FileNotFoundError: [Errno 2] No such file or directory: '/u/minum/.cache/flashinfer'"
    )


_FLASHINFER_CUDA_ERROR = (
    "CUDA Error: an illegal memory access was encountered (CUDA Error: 700an illegal memory access was encountered) "
    "(/opt/conda/lib/python3.10/site-packages/flashinfer/data/include/flashinfer/attention/prefill.cuh700: line ) "
    "2349/opt/conda/lib/python3.10/site-packages/flashinfer/data/include/flashinfer/attention/prefill.cuh at "
    "function cudaLaunchKernel((void*)kernel, nblks, nthrs, args, smem_size, stream): line 2349\n"
    "at function cudaLaunchKernel((void*)kernel, nblks, nthrs, args, smem_size, stream)\n"
)


def test_a_kernel_librarys_native_cuda_error_line_is_a_root_cause_of_its_own() -> None:
    """FlashInfer's C++ CUDA check ('CUDA Error: ... prefill.cuh ... line 2349', flashinfer#924 as published, two
    threads' copies interleaved), with no Python traceback after it: a crash, category cuda, that line its cause."""
    a = Analyzer(load_engine("sglang"))
    a.feed(_FLASHINFER_CUDA_ERROR.encode(), now=0.0)
    assert a.state == State.CRASHED
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == "cuda"
    assert error.summary.startswith("CUDA Error: an illegal memory access was encountered")


def test_a_two_line_failed_to_load_model_log_is_a_crash() -> None:
    """llama.cpp's loader failing and saying so in two lines, nothing else (LLamaSharp#170 as published): the
    log is llama.cpp's and the launch crashed loading the weights, model_load."""
    a = Analyzer(catalogue())
    a.feed(
        b"error loading model: unknown (magic, version) combination: 46554747, 00000002; is this really a GGML file?\n"
        b"llama_load_model_from_file: failed to load model\n",
        now=0.0,
    )
    a.finish(now=0.0)
    assert a.engine == "llamacpp"
    assert (a.state, a.lifecycle.current.crash_phase) == (State.CRASHED, State.LOADING_WEIGHTS)
    error = a.lifecycle.current.error
    assert error is not None
    assert error.category == "model_load"


def test_llamacpp_abort_after_the_operators_stop_is_no_crash() -> None:
    """llama-server's 'cleaning up before exit...' after a SIGTERM (a real capture) is the operator's stop: the
    SIGABRT with which early-2025 builds end every exit is then neither a crash nor a kill for memory."""
    a = Analyzer(load_engine("llamacpp"))
    log = CORPUS / "llamacpp" / "captured-llamacpp-sigterm-after-ready-cpu.log"
    a.feed(log.read_bytes(), now=0.0)
    a.caught_up(now=0.0)
    a.probe(ProcessExited("killed by SIGABRT"), now=1.0)
    assert a.state == State.STOPPED
    assert a.lifecycle.current.phase == State.READY


def test_a_wrapper_raised_while_handling_the_runtime_error_it_carries_is_not_the_root_cause() -> None:
    """SGLang re-raises a graph-capture failure while handling it, carrying its text ('Capture cuda graph failed:
    CUDA out of memory ...', sglang#5285): the accelerator runtime's own error is the decisive line."""
    oom = "CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 GiB"
    a = Analyzer(load_engine("sglang"))
    a.feed(
        (
            "Traceback (most recent call last):\n"
            '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 305, in __init__\n'
            "    self.capture()\n"
            f"torch.OutOfMemoryError: {oom}\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "Traceback (most recent call last):\n"
            '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 307, in __init__\n'
            "    raise Exception(\n"
            f"Exception: Capture cuda graph failed: {oom}\n"
        ).encode(),
        now=0.0,
    )
    a.finish(now=0.0)
    error = a.lifecycle.current.error
    assert error is not None
    assert error.summary == f"torch.OutOfMemoryError: {oom}"


# A draft model's context refusing to be built alone, as llama.cpp 2026 prints it while --fit measures the draft
# (lmstudio-ai/lms#613 as published): on a launch with speculative decoding it is printed and survived.
_CTX_OTHER = (
    "0.01.112.229 E llama_init_from_model: failed to initialize the context: Gemma4Assistant requires ctx_other "
    "to be set (this warning is normal during memory fitting)\n"
)


def test_a_draft_models_context_refusal_is_survived_when_the_launch_goes_on() -> None:
    """'<model> requires ctx_other to be set' is survivable: in a real llama-server launch that goes on to its
    context and to ready after it (a captured launch stopped after ready, the line put after its weights), no
    crash."""
    lines = (CORPUS / "llamacpp" / "captured-llamacpp-ready-verbose-cuda.log").read_text(encoding="utf-8")
    head, sep, tail = lines.partition("0.00.232.267 I llama_context: constructing llama_context\n")
    assert sep
    a = Analyzer(load_engine("llamacpp"))
    a.feed((head + _CTX_OTHER + sep + tail).encode(), now=0.0)
    a.finish(now=0.0)
    # the capture ends with the operator's stop after ready: stopped, having been ready; no crash
    assert (a.state, a.lifecycle.current.phase) == (State.STOPPED, State.READY)
    assert a.lifecycle.current.error is None


def test_a_draft_models_context_refusal_is_the_cause_when_the_launch_gives_up() -> None:
    """Loaded as the model to serve (ggml-org/llama.cpp#24343, in LM Studio's log), the same refusal is the
    decisive line of the crash (config, allocating_kv_cache), not the 'failed to create context' wrappers."""
    error = _error("llamacpp", "llamacpp-2026-lmstudio-dflash-draft-model-needs-ctx-other-tab-indented-24343")
    assert "failed to initialize the context: dflash requires ctx_other to be set" in str(error["summary"])
    assert error["category"] == "config"


def test_an_ollama_runners_ggml_backtrace_is_its_last_words() -> None:
    """Ollama 0.30.5's llama-server runner aborting (ollama#16533 as published, cut to its outer frames from
    common_init_from_params on, no llama_decode among them): the glibc backtrace frames ggml_abort prints are
    last words, a crash."""
    log = CORPUS / "ollama" / "ollama-0.30.5-v100-llama-server-backend-ggml-backtrace-warmup-decode-16533.log"
    a = Analyzer(catalogue())
    a.feed("".join(log.read_text(encoding="utf-8").splitlines(keepends=True)[3:]).encode(), now=0.0)
    a.caught_up(now=0.0)
    assert a.engine == "ollama"
    assert a.state == State.CRASHED


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        pytest.param(
            "(Worker_TP1 pid=5537) INFO 11-10 01:24:58 [default_loader.py:267] Loading weights took 12.60 seconds",
            State.LOADING_WEIGHTS,
            id="vllm-loading-weights-took",
        ),
    ],
)
def test_a_vllm_line_alone_names_its_step(line: str, phase: State) -> None:
    """A crop that begins at vLLM's end-of-weights line (as published in a 2025 log) is in that step, not still
    starting."""
    a = Analyzer(load_engine("vllm"))
    a.feed(f"{line}\n".encode(), now=0.0)
    assert a.state == phase
    assert a.lifecycle.current.error is None


@pytest.mark.parametrize(
    ("before", "line", "phase"),
    [
        pytest.param(
            "",
            "[2025-12-29 18:33:03 TP0] Mamba Cache is allocated. max_mamba_cache_size: 85292, conv_state size: "
            "4.88GB, ssm_state size: 0.00GB ",
            State.ALLOCATING_KV_CACHE,
            id="sglang-mamba-cache",
        ),
        pytest.param(
            "[2025-05-02 16:13:42] Load weight begin. avail mem=3.23 GB",
            "[2025-05-02 16:14:33] Capture cuda graph bs [1, 2, 4, 8]",
            State.CAPTURING_GRAPHS,
            id="sglang-capture-cuda-graph-bs",
        ),
    ],
)
def test_an_sglang_line_names_its_step(before: str, line: str, phase: State) -> None:
    """SGLang's hybrid models' state pool and the CUDA graph runner's batch-size line (as published in 2025 logs)
    name their step in a crop that ends with them (the first alone, a crop that begins there)."""
    a = Analyzer(load_engine("sglang"))
    a.feed("".join(f"{ln}\n" for ln in (before, line) if ln).encode(), now=0.0)
    assert a.state == phase


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("Model init total -- 49.14s", id="trtllm-model-init-total"),
        pytest.param(
            "[12/20/2025-04:21:09] [TRT-LLM] [I] max_seq_len is not specified, using inferred value 131072",
            id="trtllm-inferred-max-seq-len",
        ),
        pytest.param("[12/20/2025-04:21:09] [TRT-LLM] [I] Using Sampler: TorchSampler", id="trtllm-sampler"),
        pytest.param(
            "[11/07/2025-07:20:57] [TRT-LLM] [I] max_seq_len=8193, max_num_requests=32, max_num_tokens=8192, "
            "max_batch_size=32",
            id="trtllm-executor-sizes",
        ),
        pytest.param(
            "[11/07/2025-07:20:57] [TRT-LLM] [I] cache_transceiver is disabled", id="trtllm-transceiver"
        ),
    ],
)
def test_a_trtllm_executor_creation_line_is_after_the_weights(line: str) -> None:
    """TensorRT-LLM's PyTorch backend lines between the weights and the warm-up (as published in 2025 logs):
    executor creation, allocating_kv_cache, after a crop's weight loading."""
    a = Analyzer(load_engine("trtllm"))
    a.feed(b"Loading weights: 100%|\xe2\x96\x88\xe2\x96\x88| 801/801 [00:46<00:00, 17.29it/s]\n", now=0.0)
    assert a.state == State.LOADING_WEIGHTS
    a.feed(f"{line}\n".encode(), now=1.0)
    assert a.state == State.ALLOCATING_KV_CACHE


def test_a_tgi_kv_cache_blocks_line_alone_is_allocating_the_kv_cache() -> None:
    """TGI's warm-up line sizing the KV cache (tgi#2823 as published), alone: allocating_kv_cache."""
    a = Analyzer(load_engine("tgi"))
    a.feed(
        b"2024-12-11T10:04:03.592966Z  INFO text_generation_launcher: KV-cache blocks: 2484579, size: 1\n",
        now=0.0,
    )
    assert a.state == State.ALLOCATING_KV_CACHE


def test_a_traceback_cut_before_its_exception_says_where_it_was_not_its_last_line() -> None:
    """A log that ends inside a traceback (vLLM 0.9's engine core, vllm#19018): no exception line, so the summary
    names the innermost frame and its statement, not the carets under it."""
    error = _error("vllm", "vllm-0.9-post-ready-500-then-engine-core-process-traceback-cut-19018")
    assert error["summary"] == (
        "a traceback cut before its exception, in step (engine/core.py:226): "
        "model_output = self.execute_model(scheduler_output)"
    )


# llama.cpp's server as Ollama ran it in May 2024 (ollama#4225), its lines as published: the KV cache is made, then
# the compute buffers' cudaMalloc fails and the context's own 'failed to allocate compute buffers' follows.
_COMPUTE_BUFFER_OOM = r"""llama_new_context_with_model: n_ctx      = 65536
llama_new_context_with_model: n_batch    = 512
llama_new_context_with_model: n_ubatch   = 512
llama_new_context_with_model: freq_base  = 500000.0
llama_new_context_with_model: freq_scale = 1
llama_kv_cache_init:  CUDA_Host KV buffer size =  8192.00 MiB
llama_new_context_with_model: KV self size  = 8192.00 MiB, K (f16): 4096.00 MiB, V (f16): 4096.00 MiB
llama_new_context_with_model:  CUDA_Host  output buffer size =     0.50 MiB
ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4507.00 MiB on device 0: cudaMalloc failed: out of memory
ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 4725934080
llama_new_context_with_model: failed to allocate compute buffers
llama_init_from_gpt_params: error: failed to create context with model 'C:\Users\Administrator\.ollama\models\blobs\sha256-912687f2b75ca31331bfcf8b55a34a366dbb0f31df6bf65bc464c1d2431b92be'
{"function":"load_model","level":"ERR","line":410,"model":"C:\\Users\\Administrator\\.ollama\\models\\blobs\\sha256-912687f2b75ca31331bfcf8b55a34a366dbb0f31df6bf65bc464c1d2431b92be","msg":"unable to load model","tid":"11992","timestamp":1715077029}
"""


def test_an_error_line_that_carries_a_phase_marker_is_no_progress() -> None:
    """The compute buffers' cudaMalloc fails, then 'llama_new_context_with_model: failed to allocate compute
    buffers', whose function prefix is also a phase marker. Read as progress, that line would settle the cudaMalloc
    error before it as survived; it is no progress, so the allocation that failed is the root cause (not its
    consequence), and the phase is the context's (allocating_kv_cache)."""
    a = Analyzer(load_engine("llamacpp"))
    a.feed(_COMPUTE_BUFFER_OOM.encode(), now=0.0)
    a.finish(now=0.0)
    assert a.state == State.CRASHED
    assert a.lifecycle.current.crash_phase == State.ALLOCATING_KV_CACHE
    error = a.lifecycle.current.error
    assert error is not None
    assert "cudaMalloc failed: out of memory" in error.summary
    assert error.category == "oom"


def test_llama_box_bracketed_datetime_level_lines_are_peeled() -> None:
    """llama-box (GPUStack's llama.cpp server, May 2025) writes '[2025-05-29 12:00:35.235796] E ROCm error: out of
    memory': a bracketed wall-clock date-time, then llama.cpp's level letter. Peeled like llama.cpp's own
    'elapsed-time level' prefix, the error-level line with the cause outranks ggml's bare abort 'ggml-cuda.cu:75:
    ROCm error', so the crash is out of memory (not a CUDA error) while the tensors load."""
    name = "llamacpp-llama-box-2025-rocm-stream-create-out-of-memory-after-load-tensors-gpustack1547"
    out, error = _crash("llamacpp", name)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    assert error["summary"] == "ROCm error: out of memory"
    assert error["category"] == "oom"


def test_a_torch_compile_exception_crashed_in_the_capture_phase() -> None:
    """vLLM (Apr 2026, DeepSeek V4 on sm120): the worker's 'torch._inductor.exc.InductorError: AssertionError:
    auto_functionalized was not removed', then EngineCore's cut 'failed to start' traceback; no phase marker in
    the excerpt. Inductor's exception class says the model was being compiled: capturing_graphs."""
    name = "vllm-2026-dsv4-sm120-inductor-assertion-auto-functionalized-then-enginecore-failed-40802"
    out, error = _crash("vllm", name)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    assert (
        error["summary"]
        == "torch._inductor.exc.InductorError: AssertionError: auto_functionalized was not removed"
    )
    assert error["category"] == "assertion"


def test_a_weight_loader_s_frame_in_a_traceback_cut_at_its_head_is_loading() -> None:
    """TensorRT-LLM 1.2.0rc0 (issue 7703): the pasted traceback keeps only its innermost frame, its first line
    cut mid-path: fused_moe/quantization.py 'in load_all_fp4_weight_scales_and_alphas' -> 'NameError: name
    'logger' is not defined'. The engines name their weight loaders load_*weight*: the crash is loading_weights."""
    name = "trtllm-1.2rc0-2025-fp4-moe-weight-scales-nameerror-logger-four-lines-7703"
    out, error = _crash("trtllm", name)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    assert error["summary"] == "NameError: name 'logger' is not defined"


def test_sglang_s_fp8_checkpoint_line_is_printed_while_the_model_loads() -> None:
    """SGLang (May 2025, issue 5950) builds Fp8Config, which warns 'Detected fp8 checkpoint...', in the model
    loader after 'Load weight begin': a log that stalls after those lines stalled loading the weights. vLLM prints
    the same words when its engine config is made, before any worker: there they are no sign of loading."""
    name = "sglang-2025-qwen3-235b-fp8-detected-checkpoint-lines-then-stall-5950"
    _, v = replay_path(CORPUS / "sglang" / f"{name}.log")
    assert v.to_json()["state"] == "loading_weights"
    line = b"INFO 05-01 10:08:11 [fp8.py:101] Detected fp8 checkpoint. Please note that the format is experimental.\n"
    a = Analyzer(load_engine("vllm"))
    a.feed(line, now=0.0)
    assert a.state != State.LOADING_WEIGHTS


def test_tgi_warm_up_quoted_without_its_launcher_lines_crashed_capturing() -> None:
    """TGI 3.2.3 (issue 3175) as its reporter quoted it: the shard's 'CUDA error: operation failed due to a
    previous error during capture', the allocator's assert after it, the router's 'Error: Backend(Warmup(...))'
    and the launcher's 'Error: WebserverFailed'. Those two exits are TGI's own, so the log is TGI's; the CUDA
    error is one only a stream capture raises, so the crash is in capturing_graphs, its cause that error."""
    name = "tgi-3.2.3-2025-llama4-fp8-warmup-cuda-error-during-capture-then-allocator-assert-webserverfailed-3175"
    out, error = _crash("tgi", name)
    assert (out["engine"], out["state"], out["phase"]) == ("tgi", "crashed", "capturing_graphs")
    assert (
        error["summary"]
        == "RuntimeError: CUDA error: operation failed due to a previous error during capture"
    )
    assert error["category"] == "cuda"


def test_vllm_s_older_custom_all_reduce_check_wording_is_a_death() -> None:
    """vLLM's custom all-reduce CUDACHECK printed 'Failed: <file>.cuh:<line> '<error>'' (no 'Cuda error') and then
    exit(EXIT_FAILURE) in its 2024 - early 2025 releases: relayed by NVIDIA Dynamo at INFO (issue 787), every
    worker's such line is a death of its own, with a CUDA error as its cause."""
    name = "vllm-2025-dynamo-worker-prefix-custom-allreduce-invalid-argument-after-capture-100pct-dynamo787"
    out, error = _crash("vllm", name)
    assert (out["engine"], out["state"]) == ("vllm", "crashed")
    assert "Failed: /workspace/csrc/custom_all_reduce.cuh:368 'invalid argument'" in str(error["summary"])
    assert error["category"] == "cuda"
