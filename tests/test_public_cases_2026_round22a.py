"""What the twenty-second round's public logs of SGLang and vLLM showed (issue 30, helper i30-cases22a), read from
SGLang's source and pinned on the real log that showed it (tests/fixtures/corpus/sglang)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict

_PREFILL = (
    "[2026-04-14 04:46:04 DP{rank} TP{rank}] Prefill batch, #new-seq: 1, #new-token: 1280, #cached-token: 0, "
    "token usage: 0.01, #running-req: 0, #queue-req: 1, #pending-token: 13898, cuda graph: False, "
    "input throughput (token/s): 556.48\n"
)


def test_sglang_prefill_line_of_2026_names_the_engine(tmp_path: Path) -> None:
    """SGLang 0.5.9+ logs its prefill statistics as 'Prefill batch, #new-seq: ...' (scheduler_metrics_mixin.py
    log_prefill_stats; 'Prefill batch. #new-seq' before, as the decode line's '.' became ','). A crop of those lines
    and a native death was read by the generic profile; it is SGLang's. sglang#22757 (2026-04, DeepSeek V3.2 on H20,
    DP attention): two ranks' prefill lines, then faulthandler's 'Fatal Python error: Segmentation fault'."""
    out = _verdict(
        "sglang",
        "sglang-2026-04-h20-deepseek-v3.2-dp-attention-prefill-then-fatal-python-error-segfault-watchdog-thread-issue22757",
    )
    assert out["engine"] == "sglang"
    assert out["state"] == "crashed"
    found = _error(out)
    assert found["category"] == "killed"
    assert str(found["summary"]).startswith("Fatal Python error: Segmentation fault")
    crop = _PREFILL.format(rank=5) + _PREFILL.format(rank=4) + "Fatal Python error: Segmentation fault\n"
    bare = _replay_text(tmp_path, crop)
    assert (bare["engine"], bare["state"]) == ("sglang", "crashed")
    assert _error(bare)["category"] == "killed"
