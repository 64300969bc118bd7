"""What the twenty-eighth round's public logs of SGLang and vLLM (and their wrappers: slime, vLLM-Ascend on Ray,
vLLM-Omni on Ascend) showed (issue 30, helper i30-cases28a), read from the engines' and libraries' own words and
pinned on the real log that showed it (tests/fixtures/corpus/sglang and vllm)."""

from __future__ import annotations

from publiccases import error
from publiccases import verdict as _verdict

# sglang#9155 (2025-08): Uvicorn up, then the warm-up's GET /get_model_info answered 403 by an HTTP proxy, retrying
_PROXY_WARMUP = "sglang-2025-host-0000-warmup-get-model-info-via-proxy-403-retrying-no-fired-up-issue9155"
# THUDM/slime#1514 (2026-01): SGLang's access lines under Ray's '(SGLangEngine pid=..., ip=...)' prefix
_SLIME = "sglang-2026-slime-ray-sglangengine-chat-500s-then-200s-serving-slime1514"
# vllm-ascend#1127 (2025-06): a Ray worker's NPU OOM under '(NPURayWorkerWrapper pid=...)'
_NPU_RAY = "vllm-ascend-2025-ray-npu-worker-npu-out-of-memory-repeated-across-cluster-err99999-issue1127"
# PKU-YuanGroup/Helios#62 (2026-04): vLLM-Omni's 'Dummy run failed' carrying CANN's EL0004 memory failure
_OMNI_WARMUP = "vllm-omni-2026-ascend-diffusion-dummy-run-failed-ge-memory-allocation-failure-el0004-helios62"


def test_the_warmups_get_model_info_names_sglang_and_uvicorn_is_not_ready() -> None:
    """SGLang's warm-up polls its native /get_model_info route (srt/entrypoints/http_server.py _wait_and_warmup)
    before 'The server is fired up': a log whose only SGLang word is that request (urllib3's line of it sent through
    a proxy, answered 403) is SGLang's, and its Uvicorn line is the warm-up's start, not ready. sglang#9155 was read
    as a generic server, ready at 'Uvicorn running on'."""
    out = _verdict("sglang", _PROXY_WARMUP)
    assert out["engine"] == "sglang"
    assert (out["state"], out["phase"]) == ("capturing_graphs", "capturing_graphs")


def test_rays_prefix_of_slimes_sglang_actor_names_sglang() -> None:
    """slime runs SGLang's server in a Ray actor, class SGLangEngine(RayActor)
    (slime/backends/sglang_utils/sglang_engine.py), whose lines Ray prefixes '(SGLangEngine pid=N, ip=X)'. slime#1514's
    access lines (500s then 200s, a serving server) were read as a generic server's."""
    out = _verdict("sglang", _SLIME)
    assert out["engine"] == "sglang"
    assert (out["state"], out["phase"]) == ("ready", "ready")


def test_vllm_ascends_ray_worker_wrapper_names_vllm() -> None:
    """vLLM-Ascend patches vLLM's RayWorkerWrapper with its NPURayWorkerWrapper (so that Ray's workers import
    torch_npu); Ray prefixes its lines '(NPURayWorkerWrapper pid=N)'. vllm-ascend#1127's NPU OOM on a worker was
    read as a generic crash."""
    out = _verdict("vllm", _NPU_RAY)
    assert out["engine"] == "vllm"
    assert error(out)["category"] == "oom"


def test_vllm_omnis_dummy_run_failure_is_the_warm_up_and_a_wrapper() -> None:
    """vLLM-Omni's DiffusionEngine._dummy_run ('dummy run to warm up the model') raises RuntimeError(f'Dummy run
    failed: {output.error}') with a worker's error as text: the launch was warming up (capturing_graphs), and the
    line is a wrapper. Helios#62 was read as a crash while starting."""
    out = _verdict("vllm", _OMNI_WARMUP)
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")


def test_a_cann_memory_failure_carried_in_a_wrappers_message_is_the_cause() -> None:
    """CANN's error manager reports 'Memory_Allocation_Failure(EL0004): Failed to allocate memory requested by GE
    module.' ('Possible Cause: Available memory is insufficient.'): oom. Printed on the lines the wrapper's exception
    message goes on over (torch_npu's 'The Inner error is reported as above', then 'ERR00100 PTA call acl api
    failed'), it is the decisive line, not the wrapper's first line (category other). Helios#62 named 'Dummy run
    failed' and other."""
    found = error(_verdict("vllm", _OMNI_WARMUP))
    assert found["category"] == "oom"
    assert "Memory_Allocation_Failure(EL0004): Failed to allocate memory requested by GE module." in str(
        found["summary"]
    )
