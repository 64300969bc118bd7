"""llama.cpp's ggml and Ollama read from their source (issue 30): each rule added this round, pinned on a real line.

A line is written from the source's own format string (llama.cpp b4747, Feb 2025, and the copy vendored by
llama-cpp-python 0.3.16, Aug 2025; Ollama's tags), with the file and function that print it named in the test's
docstring. The lines of the launch around it are those the same release prints (llama-server's banner and loader
lines; Ollama's server config, `Listening on`, the scheduler's runner lines).
"""

from __future__ import annotations

import json
from pathlib import Path

from publiccases import error as _error

from watchdog.core.detection import detect_engine
from watchdog.follow.replay import replay_path
from watchdog.profiles import loader

# llama-server of 2025 (b5xxx) at the default verbosity, up to the weights loaded onto a GPU
_LLAMA = (
    "build: 5234 (a1b2c3d4) with cc (GCC) 13.2.0 for x86_64-linux-gnu\n"
    "system info: n_threads = 16, n_threads_batch = 16, total_threads = 32\n"
    "main: binding port with default address family\n"
    "main: HTTP server is listening, hostname: 0.0.0.0, port: 8080, http threads: 31\n"
    "main: loading model\n"
    "srv    load_model: loading model '/models/qwen3-30b-a3b-q4_k_m.gguf'\n"
    "llama_model_loader: loaded meta data with 35 key-value pairs and 579 tensors from "
    "/models/qwen3-30b-a3b-q4_k_m.gguf (version GGUF V3 (latest))\n"
    "load_tensors: loading model tensors, this can take a while... (mmap = true)\n"
    "load_tensors: offloaded 49/49 layers to GPU\n"
    "load_tensors:        CUDA0 model buffer size = 17000.00 MiB\n"
)
# Ollama 0.12 serving, a request's model load started (server/routes.go, llm/server.go StartRunner)
_OLLAMA = (
    'time=2025-10-02T10:00:00.000Z level=INFO source=routes.go:1475 msg="server config" '
    'env="map[OLLAMA_HOST:http://0.0.0.0:11434]"\n'
    'time=2025-10-02T10:00:00.010Z level=INFO source=routes.go:1528 msg="Listening on [::]:11434 (version 0.12.3)"\n'
    'time=2025-10-02T10:00:10.000Z level=INFO source=server.go:399 msg="starting runner" '
    'cmd="/usr/bin/ollama runner --model /root/.ollama/models/blobs/sha256-abc --port 40000"\n'
    "load_tensors: loading model tensors, this can take a while... (mmap = true)\n"
)
_OLLAMA_DIED = (
    'time=2025-10-02T10:00:12.000Z level=ERROR source=sched.go:474 msg="error loading llama server" '
    'error="llama runner process has terminated: exit status 2"\n'
)


def _replay(tmp_path: Path, text: str) -> dict[str, object]:
    log = tmp_path / "launch.log"
    log.write_text(text, encoding="utf-8")
    return replay_path(log)[1].to_json()


def _crash(out: dict[str, object], category: str, words: str) -> None:
    # a crash of `category` whose summary holds `words`
    assert out["state"] == "crashed"
    found = _error(out)
    assert (found["category"], words in str(found["summary"])) == (category, True), found["summary"]


def test_cpu_op_without_a_case_for_the_type_is_unsupported(tmp_path: Path) -> None:
    """ggml/src/ggml-cpu/ops.cpp (llama-cpp-python 0.3.16's vendored ggml; ggml-cpu.c in b4747): an op's switch over
    the tensor's type ends in `default: GGML_ABORT("fatal error")`, which ggml_abort prints as '<file>:<line>: fatal
    error' with no message: the CPU kernel has no case for the type (it was `killed`, a wrapper with nothing
    before it); the same line from ggml.c, after ggml_malloc's 'failed to allocate' (ggml.c ggml_malloc), is that
    allocation's: oom, its own line the cause."""
    for engine, head, tail in (("llamacpp", _LLAMA, ""), ("ollama", _OLLAMA, _OLLAMA_DIED)):
        out = _replay(tmp_path, head + "/app/ggml/src/ggml-cpu/ops.cpp:4012: fatal error\n" + tail)
        assert out["engine"] == engine
        _crash(out, "unsupported", "ggml-cpu/ops.cpp:4012: fatal error")
        out = _replay(
            tmp_path,
            head
            + "ggml_malloc: failed to allocate  120.00 MB\n/app/ggml/src/ggml.c:320: fatal error\n"
            + tail,
        )
        _crash(out, "oom", "ggml_malloc: failed to allocate  120.00 MB")
    # ggml-cuda.cu's own 'fatal error' (an unexpected copy path in ggml_cuda_op_mul_mat) names no type: a death
    out = _replay(tmp_path, _LLAMA + "/app/ggml/src/ggml-cuda/ggml-cuda.cu:1598: fatal error\n")
    _crash(out, "killed", "ggml-cuda.cu:1598: fatal error")


def test_kernel_without_device_code_for_the_arch_is_cuda(tmp_path: Path) -> None:
    """ggml/src/ggml-cuda/common.cuh no_device_code (NO_DEVICE_CODE, b4747 and 0.3.16): a kernel built without code
    for the GPU's arch prints '%s:%d: ERROR: CUDA kernel %s has no device code compatible with CUDA arch %d.
    ggml-cuda.cu was compiled for: %s' from the device and traps; the runtime's 'unspecified launch failure' that
    ggml_cuda_error prints next is its consequence. The build lacks the arch, as 'no kernel image is available'
    says: cuda, the device's line the cause (it was `assertion`, ggml_abort's 'file:line: message' form)."""
    block = (
        "/app/ggml/src/ggml-cuda/template-instances/../mmq.cuh:3000: ERROR: CUDA kernel mul_mat_q has no device "
        "code compatible with CUDA arch 700. ggml-cuda.cu was compiled for: 800,860\n"
        "CUDA error: unspecified launch failure\n"
        "  current device: 0, in function ggml_backend_cuda_synchronize at "
        "/app/ggml/src/ggml-cuda/ggml-cuda.cu:2500\n"
        "  cudaStreamSynchronize(cuda_ctx->stream())\n"
        "/app/ggml/src/ggml-cuda/ggml-cuda.cu:73: CUDA error\n"
    )
    for head, tail in ((_LLAMA, ""), (_OLLAMA, _OLLAMA_DIED)):
        _crash(
            _replay(tmp_path, head + block + tail), "cuda", "has no device code compatible with CUDA arch 700"
        )
    # without the CUDA error after it (a crop), and at ggml-cuda.cu's own line
    line = (
        "/app/ggml/src/ggml-cuda/ggml-cuda.cu:2400: ERROR: CUDA kernel mul_mat_q has no device code compatible "
        "with CUDA arch 520. ggml-cuda.cu was compiled for: 520\n"
    )
    _crash(_replay(tmp_path, _LLAMA + line), "cuda", "ERROR: CUDA kernel mul_mat_q has no device code")


def test_vulkan_missing_op_or_copy_is_unsupported(tmp_path: Path) -> None:
    """ggml/src/ggml-vulkan/ggml-vulkan.cpp (b4747, 0.3.16): ggml_vk_op_f32 prints 'ggml_vulkan: Error: Missing op:
    <op> for <t> and <t> to <t>' and ggml_vk_get_cpy_pipeline 'Missing CPY op for types: <t> <t>' to std::cerr, then
    GGML_ABORT("fatal error"): the Vulkan backend has no shader for it (it was `killed`: the abort's line only)."""
    for head, tail in ((_LLAMA, ""), (_OLLAMA, _OLLAMA_DIED)):
        out = _replay(
            tmp_path,
            head + "ggml_vulkan: Error: Missing op: MUL_MAT for iq4_nl and f32 to f32\n"
            "/app/ggml/src/ggml-vulkan/ggml-vulkan.cpp:7391: fatal error\n" + tail,
        )
        _crash(out, "unsupported", "Missing op: MUL_MAT for iq4_nl and f32 to f32")
        out = _replay(
            tmp_path,
            head
            + "Missing CPY op for types: q4_1 q8_0\n/app/ggml/src/ggml-vulkan/ggml-vulkan.cpp:5355: fatal error\n"
            + tail,
        )
        _crash(out, "unsupported", "Missing CPY op for types: q4_1 q8_0")


def test_vulkan_device_lost_is_cuda_and_vk_check_reads_its_result(tmp_path: Path) -> None:
    """vulkan-hpp throws vk::DeviceLostError (what() 'vk::Queue::submit: ErrorDeviceLost') out of ggml-vulkan's
    submit, uncaught: the GPU's driver lost the device, cuda (it was `other`). ggml-vulkan.cpp VK_CHECK(err, msg):
    fprintf(stderr, "ggml_vulkan: %s error %s at %s:%d\\n", #err, to_string(err_), __FILE__, __LINE__); exit(1): the
    vk::Result decides, ErrorOutOfDeviceMemory oom, any other (ErrorDeviceLost) cuda (both were `killed`)."""
    out = _replay(
        tmp_path,
        _LLAMA + "terminate called after throwing an instance of 'vk::DeviceLostError'\n"
        "  what():  vk::Queue::submit: ErrorDeviceLost\n",
    )
    _crash(out, "cuda", "vk::Queue::submit: ErrorDeviceLost")
    call = "ggml_vulkan: ctx->device->device.waitForFences({ ctx->fence }, true, UINT64_MAX) error"
    place = "at /app/ggml/src/ggml-vulkan/ggml-vulkan.cpp:1200\n"
    for head, tail in ((_LLAMA, ""), (_OLLAMA, _OLLAMA_DIED)):
        _crash(
            _replay(tmp_path, f"{head}{call} ErrorDeviceLost {place}{tail}"),
            "cuda",
            "error ErrorDeviceLost at",
        )
        out = _replay(tmp_path, f"{head}{call} ErrorOutOfDeviceMemory {place}{tail}")
        _crash(out, "oom", "error ErrorOutOfDeviceMemory at")


# Ollama's model loaded and serving a request (llm/server.go: 'llama runner started in', then gin's 200)
_OLLAMA_SERVING = (
    _OLLAMA
    + 'time=2025-10-02T10:00:13.000Z level=INFO source=server.go:1289 msg="llama runner started in 3.01 seconds"\n'
    + '[GIN] 2025/10/02 - 10:00:14 | 200 |  4.1s |       127.0.0.1 | POST     "/api/chat"\n'
)
_STOPPED = (
    "model runner has unexpectedly stopped, this may be due to resource limitations or an internal error, "
    "check ollama server logs for details"
)


def test_ollama_request_told_the_runner_stopped_is_a_crash_after_ready(tmp_path: Path) -> None:
    """llm/server.go Completion (Ollama v0.9.6-v0.24.0; llm/llama_server.go from v0.30): when the request to the
    runner's /completion fails it returns errors.New("model runner has unexpectedly stopped, this may be due to
    resource limitations or an internal error, check ollama server logs for details"), which the client prints as
    'Error: ...' and the API answers as {"error":"..."}: the runner died serving, a crash after ready whose cause is
    not in the log (killed; it was `other`, and the API's answer no crash at all); from 0.30 it carries the runner's
    last error after ': ', read from its words."""
    for line in (f"Error: {_STOPPED}\n", f'{{"error":"{_STOPPED}"}}\n'):
        out = _replay(tmp_path, _OLLAMA_SERVING + line)
        assert out["phase"] == "ready"
        _crash(out, "killed", "model runner has unexpectedly stopped")
    out = _replay(tmp_path, f"{_OLLAMA_SERVING}Error: {_STOPPED}: CUDA error: out of memory\n")
    _crash(out, "oom", "CUDA error: out of memory")


def test_ollama_stream_broken_off_under_a_request_is_a_crash_after_ready(tmp_path: Path) -> None:
    """llm/server.go Completion (v0.5.13-v0.24.0; llm/llama_server.go v0.30+): a runner's response stream cut by
    'unexpected EOF' or Windows' 'forcibly closed' closes the runner and returns fmt.Errorf("an error was
    encountered while running the model: %s", its last error or the read error): with only the read error the
    cause is not in the log (killed; it was `other`), and a line of it alone names Ollama (it was `generic`)."""
    out = _replay(
        tmp_path,
        _OLLAMA_SERVING + "Error: an error was encountered while running the model: unexpected EOF\n",
    )
    assert out["phase"] == "ready"
    _crash(out, "killed", "an error was encountered while running the model: unexpected EOF")
    windows = (
        "Error: an error was encountered while running the model: read tcp 127.0.0.1:54321->127.0.0.1:40000: "
        "wsarecv: An existing connection was forcibly closed by the remote host.\n"
    )
    _crash(_replay(tmp_path, _OLLAMA_SERVING + windows), "killed", "forcibly closed by the remote host")
    alone = _replay(tmp_path, "Error: an error was encountered while running the model: unexpected EOF\n")
    assert alone["engine"] == "ollama"
    _crash(alone, "killed", "unexpected EOF")


def test_llama_cpp_python_sampler_callback_error_under_a_served_request_is_no_crash(tmp_path: Path) -> None:
    """llama-cpp-python 0.3.x (llama_cpp/_internals.py CustomSampler's apply_wrapper, a ctypes callback from
    libllama): an exception raised in it cannot propagate to C, so CPython prints it under 'Exception ignored on
    calling ctypes callback function: ...' (Python/errors.c PyErr_WriteUnraisable) and the request goes on; Uvicorn
    answers it 200 (llama_cpp/server/app.py's /v1/completions, a route that exists only once create_app has loaded
    the model). A crop of the captured launch that starts at the first such header: ready, no crash (it was a crash
    of the IndexError, in `starting`)."""
    name = "captured-llamacpp-python-logit-bias-request-error-served-on-cpu"
    lines = (
        (Path(__file__).parent / "fixtures" / "corpus" / "llamacpp" / f"{name}.log").read_text().splitlines()
    )
    first = next(i for i, line in enumerate(lines) if line.startswith("Exception ignored on calling ctypes"))
    out = _replay(tmp_path, "\n".join(lines[first:]) + "\n")
    assert (out["engine"], out["phase"], out["error"]) == ("llamacpp", "ready", None)
    assert out["state"] in {
        "ready",
        "stopped",
    }  # Uvicorn's clean shutdown after it, at the operator's SIGTERM


def test_rocblas_tensile_host_that_cannot_start_is_cuda(tmp_path: Path) -> None:
    """rocBLAS (library/src/tensile_host.cpp, ROCm 5.x-7.x): a TensileHost that cannot be built prints 'rocBLAS
    error: Could not initialize Tensile host: <what()>' ('No devices found', a filesystem error on its library's
    directory) and calls rocblas_abort(): the GPU math library has no device or no kernels for this GPU, cuda (it was
    `other` in llama.cpp's log). Ollama's runner reports it through llm/status.go's StatusWriter, which keeps the
    last stderr line holding 'error:' glued as 'error:' + the rest: 'llama runner process has terminated:
    error:Could not initialize Tensile host: No devices found' (it was `killed`)."""
    out = _replay(tmp_path, _LLAMA + "rocBLAS error: Could not initialize Tensile host: No devices found\n")
    _crash(out, "cuda", "rocBLAS error: Could not initialize Tensile host: No devices found")
    died = _OLLAMA_DIED.replace("exit status 2", "error:Could not initialize Tensile host: No devices found")
    _crash(_replay(tmp_path, _OLLAMA + died), "cuda", "error:Could not initialize Tensile host")


def test_context_that_refuses_its_gpu_backend_or_output_buffer(tmp_path: Path) -> None:
    """src/llama-context.cpp llama_context::llama_context (b4747, 0.3.16), printed by llama_init_from_model as
    'failed to initialize the context: <what()>': ggml_backend_dev_init returning null for a GPU device throws
    'failed to initialize %s backend' (the GPU runtime: cuda), output_reserve's 'failed to allocate output buffer of
    size %.2f MiB' then 'failed to reserve initial output buffer' (oom); both were `other`, in allocating_kv_cache.
    llama_init_from_model's own 'V cache quantization requires flash_attn' (0.3.16's wording of 0.3.36's 'quantized
    V cache requires flash_attn to be enabled') is config (it was no error at all)."""
    ctx = "llama_init_from_model: failed to initialize the context: "
    cases = (
        (f"{ctx}failed to initialize CUDA0 backend\n", "cuda", "failed to initialize CUDA0 backend"),
        (
            "llama_context: output_reserve: failed to allocate output buffer of size 0.58 MiB\n"
            f"{ctx}failed to reserve initial output buffer\n",
            "oom",
            "failed to allocate output buffer of size 0.58 MiB",
        ),
        (
            "llama_init_from_model: V cache quantization requires flash_attn\n",
            "config",
            "requires flash_attn",
        ),
    )
    for lines, category, words in cases:
        out = _replay(tmp_path, _LLAMA + lines)
        assert out["phase"] == "allocating_kv_cache"
        _crash(out, category, words)


def test_op_a_backend_cannot_run_is_unsupported(tmp_path: Path) -> None:
    """ggml/src/ggml-backend.cpp ggml_backend_sched_backend_id_from_cur: GGML_ABORT("pre-allocated tensor (%s) in a
    buffer (%s) that cannot run the operation (%s)"); ggml-cuda.cu's graph compute: GGML_LOG_ERROR("%s: op not
    supported %s (%s)") then GGML_ASSERT(ok) (b4747, 0.3.16): the backend has no kernel for the op, unsupported (both
    were `assertion`: ggml_abort's message form, the GGML_ASSERT after the log line)."""
    line = (
        "/app/ggml/src/ggml-backend.cpp:736: pre-allocated tensor (blk.0.attn_q.weight) in a buffer (CUDA0) that "
        "cannot run the operation (MUL_MAT)\n"
    )
    for head in (_LLAMA, _OLLAMA):
        _crash(_replay(tmp_path, head + line), "unsupported", "that cannot run the operation (MUL_MAT)")
    block = (
        "ggml_backend_cuda_graph_compute: op not supported node_5 (SOFT_MAX)\n"
        "/app/ggml/src/ggml-cuda/ggml-cuda.cu:2900: GGML_ASSERT(ok) failed\n"
    )
    _crash(_replay(tmp_path, _LLAMA + block), "unsupported", "op not supported node_5 (SOFT_MAX)")


def test_ollama_load_refused_for_its_memory_layout_is_oom(tmp_path: Path) -> None:
    """llm/server.go ollamaServer.Load (Ollama v0.11.5-v0.24.0): a layout the runner cannot allocate returns
    fmt.Errorf("memory layout cannot be allocated with num_gpu = %v") (num_gpu set), errors.New("memory layout cannot
    be allocated") after its backoff (a WARN 'memory layout cannot be allocated' memory=... before it) or
    errors.New("failed to commit memory for model"), which server/sched.go logs as slog.Error("error loading llama
    server", "error", err): the model's load failed for want of memory, oom (the scheduler's line was no error at
    all: the launch was called ready)."""
    for carried in (
        "memory layout cannot be allocated with num_gpu = 99",
        "memory layout cannot be allocated",
        "failed to commit memory for model",
    ):
        out = _replay(
            tmp_path,
            _OLLAMA + _OLLAMA_DIED.replace("llama runner process has terminated: exit status 2", carried),
        )
        _crash(out, "oom", f'"error loading llama server" error="{carried}"')
    warn = (
        'time=2025-10-02T10:00:11.900Z level=WARN source=server.go:862 msg="memory layout cannot be allocated" '
        'memory="{InputWeights:1048576 CPU:{Name:CPU}}"\n'
    )
    died = _OLLAMA_DIED.replace(
        "llama runner process has terminated: exit status 2", "memory layout cannot be allocated"
    )
    _crash(_replay(tmp_path, _OLLAMA + warn + died), "oom", "memory layout cannot be allocated")


def test_ollama_runner_ggml_abort_with_a_message_is_an_assertion(tmp_path: Path) -> None:
    """ggml/src/ggml.c ggml_abort (the ggml Ollama vendors under ml/backend/ggml/ggml/src/): '%s:%d: ' then the
    message, e.g. ggml_new_object's GGML_ABORT("not enough space in the context's memory pool"), then abort(): an
    internal check of ggml failed, assertion, the abort's line the summary (Ollama read it as the runner's bare exit,
    `killed`; llama.cpp's profile already read its own paths so)."""
    block = (
        "ggml_new_object: not enough space in the context's memory pool (needed 3000000, available 2097152)\n"
        "//ml/backend/ggml/ggml/src/ggml.c:1600: not enough space in the context's memory pool\n"
    )
    out = _replay(tmp_path, _OLLAMA + block + _OLLAMA_DIED)
    assert out["engine"] == "ollama"
    _crash(out, "assertion", "ggml.c:1600: not enough space in the context's memory pool")


def test_context_lines_of_early_2025_are_the_kv_cache_step(tmp_path: Path) -> None:
    """src/llama.cpp llama_init_from_model (llama.cpp b4747, Feb 2025; Ollama v0.5.13's vendored copy): the
    context's own lines, LLAMA_LOG_INFO("%s: n_ctx         = %u\\n", __func__, ...) and the rest, under the name that
    replaced llama_new_context_with_model before llama_context: took it. The weights are loaded: a crash after them
    is in allocating_kv_cache (llama.cpp's profile said loading_weights; Ollama's read it so already)."""
    context = "llama_init_from_model: n_seq_max     = 1\nllama_init_from_model: n_ctx         = 4096\n"
    crash = "/app/ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error\nCUDA error: an illegal memory access was encountered\n"
    # Ollama: an excerpt from the model's load on (the daemon's 'Listening on', before, made the crash one after ready)
    runner = _OLLAMA.split("\n", 2)[2]
    for head, tail in ((_LLAMA, ""), (runner, _OLLAMA_DIED)):
        out = _replay(tmp_path, head + context + crash + tail)
        assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")


def test_a_program_under_gdb_that_receives_a_fatal_signal_dies(tmp_path: Path) -> None:
    """gdb's infrun.c print_signal_received_reason: 'Thread N "name" received signal SIGABRT, Aborted.' or 'Program
    received signal SIGSEGV, Segmentation fault.' for a program run under it: it dies of the signal, killed (the
    log ended there with no verdict); gdb's thread name "llama-server" names llama.cpp (it was `generic`). The
    operator's Ctrl-C under gdb ('Program received signal SIGINT, Interrupt.') is no death. The crop is the last 15
    lines of ik_llama.cpp#1910's launch under gdb."""
    name = "llamacpp-2026-ik-llama-iqk-fa-ggml-assert-wrapped-then-gdb-ptrace-sigabrt-iklamacpp1910"
    lines = (
        (Path(__file__).parent / "fixtures" / "corpus" / "llamacpp" / f"{name}.log").read_text().splitlines()
    )
    out = _replay(tmp_path, "\n".join(lines[-15:]) + "\n")
    assert out["engine"] == "llamacpp"
    _crash(out, "killed", 'Thread 1659 "llama-server" received signal SIGABRT, Aborted.')
    out = _replay(tmp_path, _LLAMA + "\nProgram received signal SIGABRT, Aborted.\n")
    _crash(out, "killed", "Program received signal SIGABRT, Aborted.")
    out = _replay(tmp_path, _LLAMA + "\nProgram received signal SIGINT, Interrupt.\n")
    assert out["state"] != "crashed"


def test_gguf_reader_check_before_its_generic_failure_is_the_cause(tmp_path: Path) -> None:
    """ggml/src/gguf.cpp gguf_init_from_file_impl (b4747; 0.3.16 the same): a tensor's check prints what was wrong
    ("%s: tensor '%s' has invalid ggml type %d (%s)", "... has %ld elements per row, not a multiple of block size
    (%ld)") and then "%s: failed to read tensor info": the check's line is the cause (the generic line was chosen, or
    the check's line not read at all); a version check ("this GGUF file is version %u but this software only supports
    up to version %d"), then "failed to read header", is a file this build cannot read: unsupported (it was
    model_load, of the generic line); so is a tensor type past the build's GGML_TYPE_COUNT ('has invalid ggml type 39
    (NONE)': a quantization newer than the build, i30-cases22b). A row that does not fit a real block size, and the
    generic line alone (the read itself failed), are still the file's fault."""
    loader = "llama_model_load: error loading model: llama_model_loader: failed to load model from /models/x.gguf\n"
    head = _LLAMA.split("llama_model_loader:", maxsplit=1)[0]
    cases = (
        (
            "gguf_init_from_file_impl: tensor 'blk.0.attn_q.weight' has invalid ggml type 39 (NONE)\n"
            "gguf_init_from_file_impl: failed to read tensor info\n",
            "unsupported",
            "has invalid ggml type 39 (NONE)",
        ),
        (
            "gguf_init_from_file_impl: tensor 'blk.5.ffn_down.weight' of type 12 (q4_K) has 4096 elements per row, "
            "not a multiple of block size (256)\ngguf_init_from_file_impl: failed to read tensor info\n",
            "model_load",
            "not a multiple of block size (256)",
        ),
        (
            "gguf_init_from_file_impl: this GGUF file is version 4 but this software only supports up to version 3\n"
            "gguf_init_from_file_impl: failed to read header\n",
            "unsupported",
            "this GGUF file is version 4",
        ),
        (
            "gguf_init_from_file_impl: failed to read tensor info\n",
            "model_load",
            "failed to read tensor info",
        ),
    )
    for lines, category, words in cases:
        _crash(_replay(tmp_path, head + lines + loader), category, words)


def test_ollama_runner_gguf_reason_beats_the_loaders_generic_line(tmp_path: Path) -> None:
    """Ollama's llama runner prints llama.cpp's loader as llama.cpp does: gguf.cpp's reason ("%s: failed to open GGUF
    file '%s'", a tensor's check) and then src/llama-model-loader.cpp's generic "llama_model_loader: failed to load
    model from %s", which llm/status.go's StatusWriter carries into 'llama runner process has terminated: error
    loading model: llama_model_loader: failed to load model from ...'. The reason is the root cause (the generic
    loader line was chosen), as llamacpp.toml reads it."""
    blob = "/root/.ollama/models/blobs/sha256-abc"
    generic = f"llama_model_loader: failed to load model from {blob}"
    died = _OLLAMA_DIED.replace("exit status 2", f"error loading model: {generic}")
    for reason, category in (
        (f"gguf_init_from_file_impl: failed to open GGUF file '{blob}' (Permission denied)", "model_load"),
        (
            "gguf_init_from_file_impl: tensor 'blk.0.attn_q.weight' has invalid ggml type 39 (NONE)\n"
            "gguf_init_from_file_impl: failed to read tensor info",
            "unsupported",  # a quantization the runner's llama.cpp does not have (i30-cases22b)
        ),
    ):
        out = _replay(
            tmp_path, f"{_OLLAMA}{reason}\nllama_model_load: error loading model: {generic}\n{died}"
        )
        _crash(out, category, reason.split("\n")[0].split(": ", 1)[1])


def test_ollama_runner_windows_exit_status_reads_its_ntstatus(tmp_path: Path) -> None:
    """Go's os/exec reports a Windows child's NTSTATUS as 'exit status 0x...' (Ollama's 'llama runner process has
    terminated: exit status 0xc0000409', v0.5.13-v0.24.0 llm/server.go): 0xC000001D STATUS_ILLEGAL_INSTRUCTION is the
    SIGILL of Windows (unsupported; it was killed), 0xC0000135 STATUS_DLL_NOT_FOUND a DLL the runner links missing
    (import; it was killed); 0xC0000409, how the C runtime's abort() ends a process (__fastfail), stays a death told
    without its cause (killed), its hint now an abort's, not a signal's."""
    for status, category in (
        ("0xc000001d", "unsupported"),
        ("0xc0000135", "import"),
        ("0xc0000409", "killed"),
    ):
        out = _replay(tmp_path, _OLLAMA + _OLLAMA_DIED.replace("exit status 2", f"exit status {status}"))
        _crash(out, category, f"exit status {status}")
        if status == "0xc0000409":
            assert "abort" in str(_error(out)["hint"])


def test_a_crop_of_llama_cpp_s_own_line_families_is_llama_cpp_and_ollama_stays_ollama() -> None:
    """llama.cpp prints each line through a log macro that begins it with the printing function (LLAMA_LOG_*("%s:
    ...", __func__)) or with the module tag of tools/server's and common's macros: a crop of a few such lines, none
    of the markers of the loader or the server's main(), is llama.cpp's. Each crop is read from the source of
    its release:
    - tools/server/server.cpp server_context::init (llama-cpp-python 0.3.16): SRV_INF 'srv  %12.*s: ' "initializing
      slots, n_slots = %d", SLT_INF 'slot %12.*s: id %2d | task %d | ' "new slot n_ctx_slot = %d";
    - common/common.cpp common_threadpools::init (0.3.36, 2026's '<time> <level> ' prefix): COM_INF 'cmn  %12.*s: '
      "llama threadpool init, n_threads = %d";
    - src/llama.cpp llm_load_vocab (0.2.90, 2024) "%s: special tokens cache size = %u", src/llama-memory-recurrent.cpp
      llama_memory_recurrent (0.3.16) "%s: %10s RS buffer size = %8.2f MiB";
    - common/download.cpp common_download_file_single_online (0.3.36) "%s: download failed after %d attempts";
    - tools/mtmd/mtmd.cpp mtmd_init_from_file (0.3.36) "%s: error: %s" of clip.cpp load_hparams' "%s: unknown
      projector type: %s"; ggml/src/ggml-quants.c ggml_validate_row_data (0.3.16) "found nan value at block %zu".
    The same lines relayed by Ollama's runner, after Ollama's own records, are Ollama's."""
    catalogue = loader.catalogue()
    crops = (
        "srv          init: initializing slots, n_slots = 4\n"
        "slot         init: id  0 | task -1 | new slot n_ctx_slot = 4096\n",
        "0.00.010.315 I cmn          init: llama threadpool init, n_threads = 2\n",
        "llm_load_vocab: special tokens cache size = 256\n"
        "llama_memory_recurrent:      CUDA0 RS buffer size =    16.00 MiB\n",
        "common_download_file_single_online: download failed after 3 attempts\n",
        "mtmd_init_from_file: error: load_hparams: unknown projector type: glm4v\n",
        "ggml_validate_row_data: found nan value at block 4096\n",
    )
    for crop in crops:
        assert detect_engine(crop.splitlines(), catalogue) == "llamacpp", crop
        assert detect_engine((_OLLAMA + crop).splitlines(), catalogue) == "ollama", crop


# llama-server 2026 (llama-cpp-python 0.3.36's vendored llama.cpp) at the default verbosity: its common log's
# '<min>.<s>.<ms>.<us> <level> ' lines, then common_init_from_params' warm-up batch refused by common_batch's
# get_sub_batch, whose GGML_ABORT ggml_abort prints to stderr itself ('%s:%d: ' file:line and the message, no
# time) before ggml_print_backtrace's gdb (a captured launch with --ctx-size 1, tests/fixtures/corpus/llamacpp)
_LLAMA_2026_ABORT = (
    "0.00.001.135 I srv  llama_server: initializing ...\n"
    "0.00.006.831 I cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)\n"
    "0.00.007.759 I srv    load_model: loading model '/models/tiny.gguf'\n"
    "0.00.016.627 I cmn          init: llama threadpool init, n_threads = 2\n"
    "/src/llama.cpp/common/common.cpp:2158: get_sub_batch: failed to add token 2 at index 1 (error -1, n = 2)\n"
    "\n"
    "[New LWP 26648]\n"
    "[Thread debugging using libthread_db enabled]\n"
    "#2  0x00007f7c9452e7de in ggml_abort () from /src/llama.cpp/build/bin/libggml-base.so.0\n"
    "#3  0x00007f7c93a217c8 in common_batch::get_sub_batch(int, int) () from /src/llama.cpp/build/bin/libllama-common.so.0\n"
    "[Inferior 1 (process 26645) detached]\n"
)


def test_router_mode_port_prefix_keeps_the_childs_abort(tmp_path: Path) -> None:
    """tools/server/server-models.cpp (llama-cpp-python 0.3.36; router mode, llama-server --models-dir /
    --models-preset, 2025-12+) relays each line of a model's child server as LOG("[%5d] %s", port, line): the
    child's port in front of its common log lines and of what it writes to stderr itself (ggml_abort's
    file:line line, gdb's backtrace). The child's abort so relayed is the same crash as without the router: the
    ggml_abort line is its cause, and a port under 10000 is padded to five ('[ 8081] ')."""
    plain = _replay(tmp_path, _LLAMA_2026_ABORT)
    _crash(plain, "assertion", "get_sub_batch: failed to add token 2")
    for port in ("[57663] ", "[ 8081] "):
        out = _replay(tmp_path, "".join(port + line for line in _LLAMA_2026_ABORT.splitlines(keepends=True)))
        assert (out["engine"], out.get("phase")) == ("llamacpp", plain.get("phase"))
        _crash(out, "assertion", "get_sub_batch: failed to add token 2")


def test_recurrent_models_memory_is_the_kv_cache_step(tmp_path: Path) -> None:
    """src/llama-memory-recurrent.cpp llama_memory_recurrent::llama_memory_recurrent (llama-cpp-python 0.3.16 and
    0.3.36's vendored llama.cpp): a recurrent or hybrid model (Mamba, Jamba, Qwen3-Next) makes its recurrent-state
    memory where others make the KV cache, LLAMA_LOG_INFO("%s: %10s RS buffer size = %8.2f MiB", __func__): a
    failure after it is the KV-cache step's, in llama-server as in Ollama's runner."""
    failure = (
        "llama_memory_recurrent:      CUDA0 RS buffer size =    16.00 MiB\n"
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: "
        "out of memory\n"
    )
    # Ollama: an excerpt from the model's load on (the daemon's 'Listening on', before, made the crash one after ready)
    for head, tail in ((_LLAMA, ""), (_OLLAMA.split("\n", 2)[2], _OLLAMA_DIED)):
        out = _replay(tmp_path, head + failure + tail)
        assert out["phase"] == "allocating_kv_cache"
        _crash(out, "oom", "cudaMalloc failed: out of memory")


def _jsonl(log: str) -> str:
    # the same lines as llama-server --log-jsonl writes its common log (common/log.cpp common_log_entry::print,
    # llama-cpp-python 0.3.36: {"type": "log", "time": <us since start>, "level": ..., "msg": <line with its
    # newline>}); the lines the program writes to stderr itself stay plain
    levels = {"I": "info", "W": "warn", "E": "error", "D": "debug"}
    out = []
    for line in log.splitlines():
        stamp, _, rest = line.partition(" ")
        parts = stamp.split(".")
        if len(parts) == 4 and all(p.isdigit() for p in parts) and rest[:1] in levels and rest[1:2] == " ":
            us = ((int(parts[0]) * 60 + int(parts[1])) * 1000 + int(parts[2])) * 1000 + int(parts[3])
            record = {"type": "log", "time": us, "level": levels[rest[0]], "msg": rest[2:] + "\n"}
            out.append(json.dumps(record, separators=(",", ":")))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def test_common_log_as_json_lines_reads_as_its_plain_lines(tmp_path: Path) -> None:
    """common/log.cpp (llama-cpp-python 0.3.36's vendored llama.cpp, 2026): with --log-jsonl (LLAMA_ARG_LOG_JSONL)
    each common-log line is a JSON object, {"type": "log", "time", "level", "msg"}, on stdout, and ggml_abort's own
    stderr lines stay plain beside them: the launch reads as its plain log does, the cause its message (not the
    JSON record), the phase the same. A captured launch's lines (a model file it may not read)."""
    log = (
        "0.00.023.198 I srv  llama_server: initializing ...\n"
        "0.00.041.267 I srv    load_model: loading model '/models/private/private.gguf'\n"
        "0.00.041.636 E gguf_init_from_file: failed to open GGUF file '/models/private/private.gguf' "
        "(Permission denied)\n"
        "0.00.041.780 E llama_model_load: error loading model: llama_model_loader: failed to load model from "
        "/models/private/private.gguf\n"
        "0.00.041.800 E llama_model_load_from_file_impl: failed to load model\n"
        "0.00.041.935 E srv    load_model: failed to load model, '/models/private/private.gguf'\n"
        "0.00.041.946 I srv    operator(): operator(): cleaning up before exit...\n"
        "0.00.057.766 E srv  llama_server: exiting due to model loading error\n"
    )
    for text in (log, _LLAMA_2026_ABORT):
        plain = _replay(tmp_path, text)
        out = _replay(tmp_path, _jsonl(text))
        assert (out["state"], out["phase"], _error(out)["summary"]) == (
            plain["state"],
            plain["phase"],
            _error(plain)["summary"],
        )
    _crash(plain, "assertion", "get_sub_batch: failed to add token 2")
    _crash(_replay(tmp_path, _jsonl(log)), "model_load", "failed to open GGUF file")
