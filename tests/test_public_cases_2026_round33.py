"""What round 33's public logs of vLLM, SGLang and their wrappers showed (issue 30, helper i30-cases33), read from
vLLM's own source and pinned on the real log that showed it (tests/fixtures/corpus)."""

from __future__ import annotations

from publiccases import error as _error
from publiccases import verdict as _verdict

# vllm-project/vllm#36771 (2026-03, vLLM 0.17.0 with LMCache): the connector factory's line, then LMCache's ImportError
_CONNECTOR = "vllm-2026-lmcache-connector-c-ops-undefined-symbol-importerror-three-lines-vllm36771"


def test_vllms_kv_connector_factory_line_names_vllm() -> None:
    """KVConnectorFactory.create_connector logs 'Creating v1 connector with name: ...' (vLLM's
    distributed/kv_transfer/kv_connector/factory.py) before it builds the connector: an excerpt of a connector plug-in
    failing to load holds it as vLLM's only word. vllm#36771 was read as an unknown engine."""
    out = _verdict("vllm", _CONNECTOR)
    assert out["engine"] == "vllm"
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    found = _error(out)
    assert found["category"] == "import"
    assert "undefined symbol: _ZN3c104cuda29c10_cuda_check_implementation" in str(found["summary"])


# QwenLM/Qwen3-VL#1988 (2026-01, vLLM's CPU image in Docker): the engine core's traceback cut after a bare header
_BARE_HEADER = "vllm-2026-cpu-docker-qwen3vl-enginecore-traceback-cut-initialize-kv-caches-qwen3vl1988"


def test_a_vllm_header_with_nothing_after_it_is_peeled_whole() -> None:
    """vLLM's NewLineFormatter writes 'LEVEL MM-DD HH:MM:SS [file.py:N] ' before every line of a multi-line record,
    an empty one too; with its trailing blank stripped (a copy, or an excerpt cut there) the header is still the
    header, not a statement of the traceback's last frame. Qwen3-VL#1988's cut summary ended in '01-13 07:02:02
    [core.py:866]' and a terminal's padding changed it."""
    out = _verdict("vllm", _BARE_HEADER)
    assert (out["state"], out["phase"]) == ("crashed", "allocating_kv_cache")
    summary = str(_error(out)["summary"])
    assert summary == "a traceback cut before its exception, in _initialize_kv_caches (engine/core.py:256)"
