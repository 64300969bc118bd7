"""The decisive line of a crash, and the deaths a log tells only by its last words (issue 30), on real logs."""

from __future__ import annotations

from pathlib import Path

from watchdog.follow.replay import replay_path

CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def _error(engine: str, name: str) -> dict[str, object]:
    _, v = replay_path(CORPUS / engine / f"{name}.log")
    out = v.to_json()
    assert out["state"] == "crashed", out["state"]
    error = out["error"]
    assert isinstance(error, dict)
    return error


def test_llamacpp_gguf_reason_over_the_loaders_generic_error() -> None:
    """llama.cpp's generic 'error loading model: llama_model_loader: failed to load model' (Sept 2025, no path)
    is a wrapper: the root cause is gguf_init_from_file's line that says why (the file cannot be opened)."""
    error = _error("llamacpp", "llamacpp-gguf-open-failed-generic-loader-error-after-issue15919")
    assert str(error["summary"]).startswith("gguf_init_from_file: failed to open GGUF file '/home/user/models/")
    assert error["category"] == "model_load"


def test_llamacpp_gguf_bad_magic_over_the_loaders_error_from_path() -> None:
    """With the path in the loader's error (b5760), the specific 'failed to read magic' is still the cause."""
    error = _error("llamacpp", "llamacpp-server-model-path-is-directory-failed-magic-b3rgundy")
    assert error["summary"] == "gguf_init_from_file_impl: failed to read magic"
