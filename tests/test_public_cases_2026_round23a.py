"""What the twenty-third round's public logs of SGLang, vLLM and TensorRT-LLM showed (issue 30, helper i30-cases23a),
read from the engines' source and pinned on the real log that showed it (tests/fixtures/corpus/sglang)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict

_DUMP = (
    "[2026-01-29 13:12:36 TP0] Scheduler debug info:\n"
    "scheduler.cur_batch.batch_size()=1\n"
    "self.max_total_num_tokens=1180096, available_size=1180032, evictable_size=0, protected_size=0\n"
)
_READY = "[2026-01-29 13:00:00] The server is fired up and ready to roll!\n"
_SOFT = "[2026-01-29 13:12:36 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)\n"
_DECODE = (
    "[2026-01-29 13:12:{s:02d} TP0] Decode batch, #running-req: 1, #token: 100, token usage: 0.01, cuda graph: True, "
    "gen throughput (token/s): 50.0, #queue-req: 0\n"
)


def test_sglang_scheduler_watchdog_debug_info_is_the_hang_it_ends(tmp_path: Path) -> None:
    """SGLang's ProcessWatchdog (srt/utils/watchdog.py _watchdog_once) prints '<name> debug info:' only once it has
    fired: the forward counter stood still for watchdog_timeout while a batch ran; then py-spy, the 'watchdog
    timeout' line and, unless soft, SIGQUIT. The scheduler's dump_info (managers/scheduler.py
    create_scheduler_watchdog) is empty while it initializes, so the line comes only from its event loop: the
    warm-up request or serving. sglang#17941 (0.5.8, 2026-01): a PP warm-up hang whose crop ends in two stages'
    dumps, before the timeout line - read as an incomplete start before."""
    out = _verdict(
        "sglang",
        "sglang-2026-0.5.8-dsv3.2-pp-warmup-hang-scheduler-debug-info-dump-pp1-pp2-watchdog-cut-issue17941",
    )
    assert (out["engine"], out["state"], out["phase"]) == ("sglang", "crashed", "capturing_graphs")
    found = _error(out)
    assert (found["category"], found["summary"]) == ("timeout", "Scheduler debug info:")
    # after 'fired up' it is a serving hang's end
    after = _replay_text(tmp_path, _READY + _DUMP)
    assert (after["state"], after["phase"], _error(after)["category"]) == ("crashed", "ready", "timeout")
    # a soft watchdog (--soft-watchdog-timeout) only dumps: decode steps after it say the server went on
    decoding = "".join(_DECODE.format(s=40 + i % 19) for i in range(60))
    assert _replay_text(tmp_path, _READY + _DUMP + _SOFT + decoding)["state"] == "ready"
