"""Rules read from the sources for what the eleventh crop of public 2025-2026 logs showed (issue 30, fourteenth
round), each pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import verdict as _verdict


def test_localai_backend_log_copy_glues_time_and_stream_to_the_line() -> None:
    """LocalAI's backend-log page (core/http/react-ui/src/pages/BackendLogs.jsx, 2026) shows each line as three
    spans with nothing between them: the time (toLocaleTimeString() + '.' + milliseconds), the stream's badge
    ('stdout'/'stderr') and the text. A copy of it reads '10:22:48.969stderrprint_info: ...': peeled, llama.cpp's
    print_info block is the model's load under way."""
    out = _verdict(
        "llamacpp", "llamacpp-2026-localai-stderr-glued-prefix-print-info-qwen36-mtp-cut-localai9893"
    )
    assert out["engine"] == "llamacpp"
    assert (out["state"], out["phase"]) == ("loading_weights", "loading_weights")
    assert out["error"] is None
