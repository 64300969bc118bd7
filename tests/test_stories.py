"""The two stories of the mission, built from SGLang's real formats (tests/fixtures/stories/make_stories.py)."""

from __future__ import annotations

from pathlib import Path

from watchdog.follow.replay import replay_path

STORIES = Path(__file__).parent / "fixtures" / "stories"


def test_ep8_oom_amid_logging_noise() -> None:
    """4 of 8 EP ranks run out of memory: the oom wins over logging-error noise, with ranks and the free memory."""
    _, v = replay_path(STORIES / "ep8-oom-logging-noise.log")
    v = v.to_json()
    err = v["error"]
    assert (v["state"], v["phase"], err["category"]) == ("crashed", "allocating_kv_cache", "oom")
    assert err["summary"] == "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    assert err["ranks"] == ["TP1", "TP3", "TP5", "TP6"]
    assert "--mem-fraction-static" in err["hint"]
    assert "16.3 GB free after weights" in err["hint"]
    assert err["traceback"][-1] == err["summary"]
    assert v["facts"]["avail_mem_after_weights_gb"] == 16.3


def test_relaunch_bare_assert_in_graph_capture() -> None:
    """The relaunch is a new incarnation; its bare AssertionError carries the assert from the last frame."""
    _, v = replay_path(STORIES / "relaunch-capture-bare-assert.log")
    v = v.to_json()
    err = v["error"]
    assert (v["incarnation"], v["incarnations"]) == (2, 2)
    assert (v["state"], v["phase"], err["category"]) == ("crashed", "capturing_graphs", "assertion")
    assert err["summary"] == "AssertionError: assert expert_location_metadata is not None"
    assert err["ranks"] == [f"TP{r}" for r in range(8)]
    assert sum(1 for line in err["traceback"] if line.lstrip().startswith('File "')) == 30
    assert v["progress"]["graphs"] == {"done": 3, "total": 12}
