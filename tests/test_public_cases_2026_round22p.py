"""Logs as platforms print them, from the twenty-second crop of public 2025-2026 threads (issue 30, part P): the
prefixes a platform or a launcher puts in front of an engine's lines, each pinned on the real log that carried it
(tests/fixtures/corpus), and a prefix's format beside it."""

from __future__ import annotations

from pathlib import Path

from publiccases import CORPUS, replay_text
from publiccases import error as _error
from publiccases import verdict as _verdict

from watchdog.core.envelope import parse

_RAY_SERVE = "vllm-2025-ray-serve-controller-exception-in-replica-traceback-cut-ray50975"
_RAY_TASK = "vllm-2025-ray-engine-background-process-cudagraph-capture-incomplete-ray53663"
_CONTAINER_RELAY = "vllm-2026-python-logging-container-tag-apiserver-traceback-cut-vllm43410"
_MAIN_RELAY = "vllm-2025-python-logging-main-wrapper-enginecore-init-device-traceback-cut-olmocr260"
_LOCALAI = "llamacpp-2025-compose-localai-grpc-stderr-relay-failed-to-open-gguf-fallback-localai5225"
_SERVE_READY = "vllm-2025-ray-serve-llm-application-ready-then-test-teardown-replicas-stopped-ray55754"
_GPUSTACK = "vllm-2025-gpustack-iso-logging-starting-vllm-server-0.7.2-gpustack1210"


def test_a_serve_replicas_actor_name_with_colons_is_rays_prefix() -> None:
    """Ray prints a worker's line as '({actor or task name} pid={pid}[, ip={ip}]) ' (ray/_private/worker.py
    print_worker_logs, prefix_for), and Serve names a replica's actor 'ServeReplica:<app>:<deployment>': ray#50975
    (2025, vLLM 0.7 under Ray Serve) has vLLM's only line behind it, which names the engine once peeled."""
    first = (CORPUS / "vllm" / f"{_RAY_SERVE}.log").read_text(encoding="utf-8").splitlines()[0]
    rec = parse(first)
    assert (rec.source, rec.level, rec.content) == (
        "ServeReplica:default:VLLMDeployment pid=770466",
        "INFO",
        "Using Triton MLA backend.",
    )
    out = _verdict("vllm", _RAY_SERVE)
    assert (out["engine"], out["state"], out["phase"]) == ("vllm", "crashed", "starting")
    assert "worker.get_objects" in str(_error(out)["summary"])


def test_a_deployment_name_with_slashes_and_dots_stays_in_the_replicas_tag() -> None:
    """A deployment's name is the model's (ray.serve.llm: 'meta-llama/Llama-2-7b-chat-hf:...', ray PR 55754): its
    slashes, dots and colons are the actor's name, so the line's own text starts after the pid."""
    rec = parse(
        "(ServeReplica:default:meta-llama/Llama-2-7b-chat-hf:meta-llama--Llama-2-7b-chat-hf pid=529554) "
        "INFO 2025-08-29 18:04:46,933 default_meta-llama/Llama-2-7b-chat-hf suq5nsdj -- CALL llm_config OK 2.2ms"
    )
    assert rec.source == "ServeReplica:default:meta-llama/Llama-2-7b-chat-hf:meta-llama--Llama-2-7b-chat-hf"
    assert rec.content.startswith("default_meta-llama/Llama-2-7b-chat-hf suq5nsdj -- CALL")


def test_a_ray_tasks_name_may_begin_with_an_underscore() -> None:
    """A task's name is its function's, '_EngineBackgroundProcess' as ray.serve.llm starts vLLM's engine (ray#53663,
    2025): the prefix is peeled like any other, and a name that is only an underscore word in parentheses without
    a pid stays text."""
    first = (CORPUS / "vllm" / f"{_RAY_TASK}.log").read_text(encoding="utf-8").splitlines()[0]
    rec = parse(first)
    assert (rec.source, rec.level) == ("_EngineBackgroundProcess pid=9083", "INFO")
    assert rec.content.startswith("Capturing cudagraphs for decoding.")
    assert parse("(_private) text").content == "(_private) text"


def test_a_launchers_logging_relay_of_a_containers_traceback_is_the_programs_traceback() -> None:
    """A harness that relays a container's lines through Python logging at INFO ('%(asctime)s - %(levelname)s -
    %(message)s' and logger.info(f"[container] {line}")) puts its own level in front of vLLM's traceback (vllm PR
    43410, 2026): that level is the relay's, so the API server's traceback is the crash it is, not one survived."""
    out = _verdict("vllm", _CONTAINER_RELAY)
    assert (out["state"], out["phase"]) == ("crashed", "starting")
    assert "make_async_mp_client" in str(_error(out)["summary"])
    rec = parse(
        '2026-05-29 09:14:45,594 - INFO - [container] (APIServer pid=557)   File "/usr/local/lib/python3.12/'
        'dist-packages/vllm/v1/engine/async_llm.py", line 146, in __init__'
    )
    assert (rec.source, rec.level) == ("APIServer pid=557", "")


def test_a_level_before_a_process_tag_is_its_relays(tmp_path: Path) -> None:
    """The same with the logger's name ('%(asctime)s - %(name)s - %(levelname)s - %(message)s', olmOCR relaying
    vLLM's engine core at INFO, as olmocr#424 (2026) prints it): the frames behind '(EngineCore_DP0 pid=N)' end in
    the engine's exception, a crash; a level the program prints after its own tag is still the line's (olmocr#260)."""
    relay = "2026-01-17 20:30:51,298 - vllm - INFO - (EngineCore_DP0 pid=13131) "
    body = (
        "Traceback (most recent call last):",
        '  File "/x/vllm/model_executor/layers/layernorm.py", line 169, in forward_static',
        "    x = x.to(orig_dtype)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 160.00 MiB.",
    )
    out = replay_text(tmp_path, "".join(f"{relay}{line}\n" for line in body))
    assert out["state"] == "crashed"
    assert _error(out)["category"] == "oom"
    own = (CORPUS / "vllm" / f"{_MAIN_RELAY}.log").read_text(encoding="utf-8").splitlines()[0]
    assert parse(own).level == "ERROR"
    out = _verdict("vllm", _MAIN_RELAY)
    assert (out["state"], out["phase"]) == ("crashed", "starting")


def test_journalctl_short_precise_is_peeled_as_short() -> None:
    """journalctl -o short-precise prints the classic syslog time with its microseconds (journalctl(1) --output):
    'Dec 02 10:00:01.123456 host identifier[pid]: ' is peeled as the short format is."""
    precise = parse("Jun 01 13:59:38.512347 i2r-spd-0030576 ollama[318199]: llama_model_loader: - kv   3: x")
    short = parse("Jun 01 13:59:38 i2r-spd-0030576 ollama[318199]: llama_model_loader: - kv   3: x")
    assert precise == short
    assert precise.content == "llama_model_loader: - kv   3: x"


def test_localais_backend_relay_is_peeled_to_the_backends_own_line() -> None:
    """LocalAI logs through zerolog's console writer ('10:41AM DBG ') and relays its backend's output as
    'GRPC(<model>-<address>): stderr <line>' (pkg/model initializers.go): under docker compose (LocalAI#5225,
    2025) the llama.cpp backend's own line that says why the model failed, not LocalAI's DBG level or the
    generic 'failed to load model' after it, is the cause."""
    out = _verdict("llamacpp", _LOCALAI)
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "model_load"
    assert str(found["summary"]).startswith("gguf_init_from_file: failed to open GGUF file")
    lines = (CORPUS / "llamacpp" / f"{_LOCALAI}.log").read_text(encoding="utf-8").splitlines()
    assert parse(lines[3]).content == ""  # a relayed empty line
    rec = parse(lines[6])
    assert (rec.level, rec.content.split(":")[0]) == ("INFO", "[llama-cpp] Fails")


def test_ray_serves_application_ready_line_is_ready() -> None:
    """Ray Serve says 'Application '<name>' is ready at <url>.' once its deployments run and its proxies route
    (serve/_private/client.py deploy_applications): ray PR 55754 (2025, Serve LLM) is ready there, and the test's
    teardown after it (replicas removed, stopped) is no crash."""
    out = _verdict("vllm", _SERVE_READY)
    assert (out["state"], out["phase"], out["error"]) == ("ready", "ready", None)


def test_a_python_logging_asctime_in_iso_form_is_peeled() -> None:
    """A formatter's own ISO asctime ('%(asctime)s - %(name)s - %(levelname)s - %(message)s' with
    '2025-02-28T16:40:18+00:00', GPUStack 0.5 in gpustack#1210; with microseconds and an offset in GPUStack 2.0)
    gives the line's level and time as the default asctime does."""
    first = (CORPUS / "vllm" / f"{_GPUSTACK}.log").read_text(encoding="utf-8").splitlines()[0]
    rec = parse(first)
    assert (rec.level, rec.at, rec.content) == ("INFO", "2025-02-28T16:40:18", "Starting vllm server")
    rec = parse(
        "2025-12-20 04:38:00.262558+08:00 - gpustack.worker.serve_manager - ERROR - Error provisioning"
    )
    assert (rec.level, rec.content) == ("ERROR", "Error provisioning")
