"""The daemon's malloc arenas (watchdog/daemon/arenas.py): one for the process on glibc, as MALLOC_ARENA_MAX=1."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.confstr("CS_GNU_LIBC_VERSION") is None, reason="glibc's arenas"
)

# Eight threads allocate at once, then the process counts glibc's thread arenas in its own maps: each is a
# 64 MiB-aligned anonymous heap of 64 MiB (HEAP_MAX_SIZE on 64-bit), read-write then reserved.
PROBE = textwrap.dedent(
    """
    import sys, threading
    if sys.argv[1] == "one":
        from watchdog.daemon.arenas import use_one_arena
        print(use_one_arena())
    barrier, held = threading.Barrier(8), []
    def work():
        barrier.wait()
        held.append([bytearray(100) for _ in range(20000)])
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    heap, spans = 64 << 20, []
    for fields in (line.split() for line in open("/proc/self/maps")):
        start, end = (int(x, 16) for x in fields[0].split("-"))
        spans.append((start, end, fields[1], len(fields) > 5))
    arenas = 0
    for i, (start, end, perms, named) in enumerate(spans):
        if start % heap or perms != "rw-p" or named:
            continue
        if i + 1 < len(spans) and spans[i + 1][0] == end and spans[i + 1][2] == "---p":
            end = spans[i + 1][1]
        arenas += end - start == heap
    print(arenas)
    """
)


def _probe(mode: str, **env: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        env=environ,
        check=True,
        timeout=60,
    )
    return done.stdout.split()


def test_threads_that_allocate_share_one_arena() -> None:
    assert int(_probe("default")[-1]) >= 2  # glibc's own way: an arena for each thread that contends
    assert _probe("one") == ["True", "0"]


def test_malloc_arena_max_in_the_environment_wins() -> None:
    assert _probe("one", MALLOC_ARENA_MAX="4")[0] == "False"  # glibc read it at the start: left as it is
