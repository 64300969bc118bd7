"""What the thirtieth round's public logs of the llama.cpp family, Ollama and Python servers the profiles do not know
showed (issue 30, helper i30-cases30b), read from the engines' own source and pinned on the real log that showed it
(tests/fixtures/corpus/ollama)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict

# ollama/ollama#17003 (2026-07, 0.31.1 in Docker): the runner died creating a Gemma 4 MTP draft's context
_CTX_OTHER = (
    "ollama-2026-0.31.1-docker-gemma4-mtp-draft-llama-server-terminated-requires-ctx-other-issue17003"
)


def test_a_runner_that_died_making_the_context_crashed_in_kv_cache_allocation() -> None:
    """Ollama 0.30+'s 'llama-server process has terminated: ...' ends with the runner's last error; when that is
    llama.cpp's 'llama_init_from_model: ...' (called only after the model load returned the model), the weights were
    loaded and the runner died making the context: allocating_kv_cache, not loading_weights."""
    out = _verdict("ollama", _CTX_OTHER)
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")


def test_a_draft_context_without_its_target_carried_by_ollama_is_config() -> None:
    """llama.cpp's context constructor refuses a draft model (MTP assistant, DFlash, EAGLE3) given no target context
    ('Gemma4Assistant requires ctx_other to be set'): config, as llamacpp.toml reads the same line, also when Ollama's
    report of its runner carries it (it was other)."""
    found = _error(_verdict("ollama", _CTX_OTHER))
    assert "requires ctx_other to be set" in str(found["summary"])
    assert found["category"] == "config"
