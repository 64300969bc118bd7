"""What round 23's real launches showed (issue 30, helper i30-real): llama-cpp-python 0.3.36's own server and
llama-server (0c1e570) run here with a tiny model, in scenarios the corpus lacked (a request's error while the
server serves on, a hang, a kill while serving, the operator's second Ctrl-C, refused settings). Each rule is read
from the engine's source and pinned on the real log that showed it (tests/fixtures/corpus/llamacpp/captured-*)."""

from __future__ import annotations

from pathlib import Path

import pytest
from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict

from watchdog.core.analyzer import Analyzer
from watchdog.core.findings import ProcessExited
from watchdog.core.verdict import build_verdict
from watchdog.profiles.loader import load_engine


def test_llama_cpp_python_missing_model_is_its_load() -> None:
    """llama-cpp-python's Llama constructor is the model's load (llama_cpp/llama.py: the path check at 384, then
    internals.LlamaModel and internals.LlamaContext): a missing model file, raised before libllama prints a line,
    crashed loading the weights, as llama-server's own missing model does. Read as `starting` before."""
    out = _verdict("llamacpp", "captured-llamacpp-python-model-missing-cpu")
    assert (out["state"], out["phase"], out["engine"]) == ("crashed", "loading_weights", "llamacpp")
    found = _error(out)
    assert found["category"] == "model_load"
    assert str(found["summary"]).startswith("ValueError: Model path does not exist: ")


_CONTEXT_FAILS = (
    "llama_context: n_ctx         = 4294967040\n"
    "Traceback (most recent call last):\n"
    '  File "/venv/lib/python3.11/site-packages/llama_cpp/server/model.py", line 267, in '
    "load_llama_from_model_settings\n"
    "    _model = create_fn(\n"
    '  File "/venv/lib/python3.11/site-packages/llama_cpp/llama.py", line 415, in __init__\n'
    "    internals.LlamaContext(\n"
    '  File "/venv/lib/python3.11/site-packages/llama_cpp/_internals.py", line 280, in __init__\n'
    '    raise ValueError("Failed to create llama_context")\n'
    "ValueError: Failed to create llama_context\n"
)


def test_llama_cpp_python_constructor_frame_never_moves_a_context_failure_back(tmp_path: Path) -> None:
    """The constructor's frame says the load at the earliest: a context that fails after libllama's context lines
    stays where those lines put it (a frame's phase only carries the phase forward)."""
    out = _replay_text(tmp_path, _CONTEXT_FAILS)
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")


def test_llama_cpp_python_refused_setting_is_a_config_crash() -> None:
    """llama-cpp-python's server parses its command line into pydantic settings (llama_cpp/server/settings.py:
    'n_ctx: int = Field(default=2048, ge=0)'); a refused value is printed by __main__.py's `print(e)`, then the
    usage, and the process exits 1 before anything loads. The log has no traceback and no llama.cpp line: its
    engine is named by the usage's description ('Llama.cpp python server'), its cause by pydantic's message line.
    No verdict before (generic, starting)."""
    out = _verdict("llamacpp", "captured-llamacpp-python-n-ctx-negative-cpu")
    assert (out["state"], out["phase"], out["engine"]) == ("crashed", "starting", "llamacpp")
    found = _error(out)
    assert found["category"] == "config"
    assert str(found["summary"]).startswith("Input should be greater than or equal to 0")


def test_uvicorn_ssl_files_that_cannot_be_read_are_config() -> None:
    """Uvicorn reads the SSL certificate and key at startup (uvicorn/config.py Config.load -> create_ssl_context ->
    ssl's load_cert_chain); llama-cpp-python's --ssl_keyfile/--ssl_certfile naming missing files end the launch with
    a bare 'FileNotFoundError: [Errno 2] No such file or directory' after the model loaded: the operator's setting,
    config (was `other`)."""
    out = _verdict("llamacpp", "captured-llamacpp-python-ssl-files-missing-cpu")
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    found = _error(out)
    assert found["category"] == "config"
    assert str(found["summary"]).startswith("FileNotFoundError: [Errno 2] No such file or directory")


_CORPUS = Path(__file__).parent / "fixtures" / "corpus" / "llamacpp"


@pytest.mark.parametrize(
    "exited",
    [ProcessExited("killed by SIGKILL"), ProcessExited("the container exited with code 137", exit_code=137)],
)
def test_a_sigkilled_process_last_line_does_not_say_why(exited: ProcessExited) -> None:
    """A process killed by SIGKILL (the signal named, or a shell's status 137) was ended from outside: its last line
    is not why it stopped, even when it reads like a refusal. llama-cpp-python SIGKILLed while loading big.gguf: its
    last line is libllama's debug note 'tensor ... cannot be used with preferred buffer type AMX, using CPU instead'
    (src/llama-model-loader.cpp:1404), which was taken for the cause (config); it is a kill."""
    data = (_CORPUS / "captured-llamacpp-python-killed-loading-cpu.log").read_bytes()
    analyzer = Analyzer(load_engine(None))
    analyzer.feed(data, 1.5)
    analyzer.caught_up(1.5)
    analyzer.probe(exited, 2.5)
    v = build_verdict(analyzer).to_json()
    assert (v["state"], v["phase"], (v["error"] or {}).get("category")) == (
        "crashed",
        "loading_weights",
        "killed",
    )
