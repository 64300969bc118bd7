"""The llama.cpp family read as llama.cpp (issue 30): the programs that serve through llama.cpp print their own
lines around llama.cpp's (KoboldCpp, GPUStack's llama-box, LocalAI, RamaLama, Jan, llama-cpp-python, llamafile)
or none of them in a crop; each is pinned on a real line: a corpus log's (tests/fixtures/corpus), or the
wrapper's own line as its source prints it (said so in the test)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.core.detection import detect_engine
from watchdog.follow.replay import replay_path
from watchdog.profiles.loader import catalogue


def _engine(*lines: str) -> str | None:
    return detect_engine(list(lines), catalogue())


def _replay(tmp_path: Path, text: str) -> dict[str, object]:
    log = tmp_path / "crop.log"
    log.write_text(text, encoding="utf-8")
    return replay_path(log)[1].to_json()


def test_koboldcpp_console_without_a_llama_cpp_line_is_llama_cpp() -> None:
    """KoboldCpp's console starts with koboldcpp.py's own lines (its banner 'Welcome to KoboldCpp - Version %s', its
    library 'Initializing dynamic library: koboldcpp_vulkan_noavx2.dll'): a crop of them holds no llama.cpp line,
    and is KoboldCpp's, a llama.cpp fork (koboldcpp#1921)."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-koboldcpp-1.105.4-kcpps-config-banner-dynamic-library-cut-koboldcpp1921"
    )
    assert (out["engine"], out["state"]) == ("llamacpp", "starting")


def test_koboldcpp_ready_and_load_failure_from_its_own_lines(tmp_path: Path) -> None:
    """koboldcpp.py main, its own lines as it prints them: 'Loading Text Model: <path>' starts the load, 'Please
    connect to custom endpoint at <url>' comes once the model is loaded, right before it serves (ready); when its
    library fails to load the model, 'Load Text Model OK: False' and exit_with_error(3, 'Could not load text model:
    ' + name) end it (a model_load crash in the load, whose cause llama.cpp's loader printed before it)."""
    banner = "***\nWelcome to KoboldCpp - Version 1.108.2\n***\nLoading Text Model: D:\\kobold\\m.gguf\n"
    ready = _replay(
        tmp_path,
        banner
        + "Load Text Model OK: True\n======\nPlease connect to custom endpoint at http://localhost:5001\n",
    )
    assert (ready["engine"], ready["state"]) == ("llamacpp", "ready")
    failed = _replay(
        tmp_path, banner + "Load Text Model OK: False\n\nCould not load text model: D:\\kobold\\m.gguf\n"
    )
    assert (failed["engine"], failed["state"], failed["phase"]) == ("llamacpp", "crashed", "loading_weights")
    assert _error(failed)["category"] == "model_load"


def test_llama_box_server_is_ready_is_ready() -> None:
    """GPUStack's llama-box logs 'start: server is ready' from its reconcile loop once its HTTP server is up, the
    model loaded before (llama-box/httpserver.hpp, 'srv %25s: '): a crop of its load and start lines is llama.cpp's
    and ready (gpustack#2099)."""
    out = _verdict("llamacpp", "llamacpp-2025-llama-box-gpustack-start-server-is-ready-crop-gpustack2099")
    assert (out["engine"], out["state"]) == ("llamacpp", "ready")


def test_llama_box_loader_progress_is_weights_loading() -> None:
    """llama-box's loader progress ('loaded %3u%% model tensors into buffer', its patch of llama.cpp's loader) is
    llama.cpp's weights loading, with its percent (gpustack#1382)."""
    out = _verdict(
        "llamacpp", "llamacpp-2025-llama-box-loaded-percent-model-tensors-into-buffer-gpustack1382"
    )
    assert (out["engine"], out["state"]) == ("llamacpp", "loading_weights")
    assert out["progress"]["weights"]["done"] == 93  # type: ignore[index]


def test_localai_llama_cpp_backend_is_llama_cpp_although_its_backend_list_names_vllm() -> None:
    """LocalAI's list of the backends it may try names vLLM's ('/build/backend/python/vllm/run.sh'); the backend it
    tries is 'llama-cpp' ('[llama-cpp] Attempting to load', 'BackendLoader starting backend=llama-cpp'): llama.cpp,
    loading; its per-backend failure that moves on to the fallback build is no crash (localai#5339)."""
    out = _verdict(
        "llamacpp", "llamacpp-2025-localai-backend-list-names-vllm-llama-cpp-canceled-fallback-localai5339"
    )
    assert (out["engine"], out["state"], out["error"]) == ("llamacpp", "loading_weights", None)


def test_ramalama_health_check_timeout_is_a_timeout_crash() -> None:
    """RamaLama logs 'Failed to serve model X, for ramalama run command' and the TimeoutExpired of its container's
    health check ('Command ... timed out after 20 seconds: logs: ...') and exits (ramalama/transports/base.py): a
    crash, timeout, the timeout's line the cause (ramalama#2570)."""
    out = _verdict(
        "llamacpp",
        "llamacpp-2026-ramalama-t5-failed-to-serve-health-check-timed-out-cuda-init-cut-ramalama2570",
    )
    assert (out["engine"], out["state"]) == ("llamacpp", "crashed")
    found = _error(out)
    assert found["category"] == "timeout"
    assert "timed out after 20 seconds" in str(found["summary"])


def test_jan_plugin_lines_are_llama_cpp() -> None:
    """Jan's llama.cpp plugin logs '[date][time][tauri_plugin_llamacpp::commands][INFO] ' before its own lines and
    each llama-server line it relays (jan#6628); its error for a llama-server that exits is LLAMA_CPP_PROCESS_ERROR
    (jan#7324, Jan's dialog)."""
    assert (
        _engine(
            '[2025-09-27][09:18:10][tauri_plugin_llamacpp::commands][INFO] Attempting to launch server at path: "/home/XXX/'
            '.local/share/Jan/data/llamacpp/backends/b6324/linux-vulkan-x64/build/bin/llama-server"',
            "[2025-09-27][09:18:10][tauri_plugin_llamacpp::commands][INFO] Waiting for model session to be ready...",
        )
        == "llamacpp"
    )
    assert (
        _engine("LLAMA_CPP_PROCESS_ERROR", "The model process encountered an unexpected error.") == "llamacpp"
    )


def test_llama_cpp_python_frames_are_llama_cpp_not_ollama_s_llama_cpp_build_dir() -> None:
    """llama-cpp-python's frames name its package ('...\\site-packages\\llama_cpp\\llama.py', a public traceback of
    its Llama() failing to load, 2026): llama.cpp; Ollama 0.30+'s assert paths name llama.cpp's CMake dependency
    dir ('_deps/llama_cpp-src', ollama#16946's journal), no llama-cpp-python."""
    assert (
        _engine(
            '  File "C:\\Users\\l-...\\Downloads\\LocalAIVtuber2v1.1.0\\LocalAIVtuber2\\backend\\venv\\Lib\\site-packages'
            '\\llama_cpp\\llama.py", line 371, in __init__',
            "    _LlamaModel(",
            "ValueError: Failed to load model from file: C:\\Users\\l-...\\LFM2.5-1.2B-Instruct-Q5_K_M.gguf",
        )
        == "llamacpp"
    )
    assert (
        _engine(
            "Jun 27 22:57:42 stealth16 systemd-ollama[44353]: /build/llama-server-cuda_v13/_deps/llama_cpp-src/ggml/src/"
            "ggml-cuda/ggml-cuda.cu:813: GGML_ASSERT(tensor->nb[0] == ggml_element_size(tensor)) failed"
        )
        == "ollama"
    )


def test_llamafile_gpu_module_lines_are_llama_cpp() -> None:
    """llamafile 0.8's GPU module logs its own lines (llamafile/cuda.c: 'import_cuda_impl: initializing gpu
    module...', 'link_cuda_dso: note: dynamically linking ...', 'ggml_cuda_link: welcome to CUDA SDK with cuBLAS',
    as in llamafile#516)."""
    assert (
        _engine(
            "import_cuda_impl: initializing gpu module...",
            "link_cuda_dso: note: dynamically linking /.llamafile/v/0.8.12/ggml-cuda.so",
            "ggml_cuda_link: welcome to CUDA SDK with cuBLAS",
        )
        == "llamacpp"
    )


def test_llama_cpp_2026_server_and_context_lines_are_llama_cpp() -> None:
    """llama-server's 2026 startup lines (tools/server: 'srv          init: using 8 threads for HTTP server',
    'srv         start: binding port with default address family', 'srv  llama_server: loading model') and the
    library's context lines ('llama_context: constructing llama_context', src/llama-context.cpp) name no function the
    older markers knew: a crop of them is llama.cpp's (lines as printed in a public 2026 llama-server log)."""
    assert (
        _engine(
            "0.00.024.544 I srv          init: using 8 threads for HTTP server",
            "0.00.028.479 I srv         start: binding port with default address family",
            "0.00.030.098 I srv  llama_server: loading model",
        )
        == "llamacpp"
    )
    assert (
        _engine(
            "llama_context: constructing llama_context",
            "llama_context: n_seq_max     = 1",
            "llama_context: n_ctx         = 8192",
        )
        == "llamacpp"
    )


def test_lm_studio_and_text_generation_webui_own_lines_are_llama_cpp() -> None:
    """LM Studio's own log line for a model its llama.cpp runtime failed to load ('[LMSInternal][Client=LM
    Studio][Endpoint=loadModel] Error in channel handler', as in lmstudio-bug-tracker#417, 2025) and
    text-generation-webui's llama.cpp loader line (modules/llama_cpp_server.py: 'Using gpu_layers=%s | ctx_size=%s |
    cache_type=%s', its format string) name llama.cpp's servers."""
    assert (
        _engine(
            "[2025-02-08 01:29:29.905] [error] [LMSInternal][Client=LM Studio][Endpoint=loadModel] Error in channel"
            " handler: Error: Error loading model."
        )
        == "llamacpp"
    )
    assert _engine("INFO     Using gpu_layers=auto | ctx_size=auto | cache_type=fp16") == "llamacpp"


def test_a_pasted_llama_server_command_and_a_ggml_allocation_line_are_llama_cpp() -> None:
    """A llama.cpp issue's log often starts with the command run ('llama-server.exe -hf ...', llama.cpp#23769, 2026)
    and an allocation failure's crop may hold only ggml's own function ('ggml_cuda_host_malloc: failed to allocate
    ... of pinned memory', ggml-cuda.cu, ollama#8964's two lines): both are llama.cpp's (ggml's lines are Ollama's
    too, whose own lines then decide)."""
    assert (
        _engine(
            "llama-server.exe -hf unsloth/Qwen3.6-35B-A3B-MTP-GGUF:UD-Q4_K_M -c 131072 -ngl 999 -fa on -np 1 --jinja"
            " --port 8033 --spec-type draft-mtp --spec-draft-n-max 2"
        )
        == "llamacpp"
    )
    assert (
        _engine("ggml_cuda_host_malloc: failed to allocate 335445.83 MiB of pinned memory: out of memory")
        == "llamacpp"
    )
