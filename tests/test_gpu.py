"""Tests for the nvidia-smi parsers and the GPU memory trend."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchdog.follow.probes.nvidia import (
    MIB,
    QUERY_APPS_ARGS,
    QUERY_GPU_ARGS,
    GpuProcess,
    GpuSample,
    MemoryTrend,
    parse_compute_apps,
    parse_gpu_query,
)

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"
H200_UUID = "GPU-c86de862-4695-ccc1-b659-b6285f15c6d1"
H200_TOTAL = 143771 * MIB
GIB = 1024 * MIB


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def _gpus(*used_mib: float | None, total_mib: int = 143771) -> list[GpuSample]:
    return [
        GpuSample(
            index=i,
            uuid=f"GPU-{i}",
            name="NVIDIA H200",
            memory_used_bytes=None if used is None else round(used * MIB),
            memory_total_bytes=total_mib * MIB,
            utilization_pct=0.0,
            temperature_c=40.0,
            power_w=100.0,
        )
        for i, used in enumerate(used_mib)
    ]


def test_query_gpu_args_match_the_fixture_command() -> None:
    """The exported command line is exactly the one the fixtures were captured with."""
    readme = _fixture("README.md")
    assert " ".join(QUERY_GPU_ARGS) in readme
    assert " ".join(QUERY_APPS_ARGS) in readme


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        pytest.param(
            "query-idle.csv",
            GpuSample(0, H200_UUID, "NVIDIA H200", 0, H200_TOTAL, 0.0, 37.0, 99.91),
            id="idle",
        ),
        pytest.param(
            "query-40g.csv",
            GpuSample(0, H200_UUID, "NVIDIA H200", 38675 * MIB, H200_TOTAL, 0.0, 38.0, 123.77),
            id="40g-allocated",
        ),
    ],
)
def test_parse_gpu_query_real_samples(fixture: str, expected: GpuSample) -> None:
    """Real H200 rows parse to exact values, memory converted from MiB to bytes."""
    assert parse_gpu_query(_fixture(fixture)) == [expected]


def test_parse_gpu_query_40g_in_bytes() -> None:
    """The 40 GB sample's used memory is 38675 MiB = 40,553,676,800 bytes of 150,754,820,096."""
    (sample,) = parse_gpu_query(_fixture("query-40g.csv"))
    assert sample.memory_used_bytes == 40_553_676_800
    assert sample.memory_total_bytes == 150_754_820_096


def test_parse_compute_apps_real_sample() -> None:
    """The real compute-apps row gives the pid, the process name and its memory in bytes."""
    assert parse_compute_apps(_fixture("query-apps.csv")) == [GpuProcess(416, "python3", 38666 * MIB)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", [], id="empty"),
        pytest.param("\n  \n", [], id="blank-lines"),
        pytest.param(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n",
            [],
            id="driver-error",
        ),
        pytest.param("No devices were found\n", [], id="no-devices"),
        pytest.param("0, GPU-x, NVIDIA H200, 12\n", [], id="truncated-row"),
        pytest.param("x, GPU-x, NVIDIA H200, 1, 2, 3, 4, 5\n", [], id="non-numeric-index"),
        pytest.param("-1, GPU-x, NVIDIA H200, 1, 2, 3, 4, 5\n", [], id="negative-index"),
        pytest.param(
            "0, GPU-a, NVIDIA A100-SXM4-80GB, [N/A], [Not Supported], [N/A], [Unknown Error], [N/A]\n",
            [GpuSample(0, "GPU-a", "NVIDIA A100-SXM4-80GB", None, None, None, None, None)],
            id="n-a-and-not-supported",
        ),
        pytest.param(
            "1, GPU-b, Tesla T4, , 15360, , 45, \n",
            [GpuSample(1, "GPU-b", "Tesla T4", None, 15360 * MIB, None, 45.0, None)],
            id="blank-fields",
        ),
        pytest.param(
            "   2 ,GPU-c,   NVIDIA H100 80GB HBM3  ,  81559,81559 , 100,  71 ,  699.52   \r\n",
            [GpuSample(2, "GPU-c", "NVIDIA H100 80GB HBM3", 81559 * MIB, 81559 * MIB, 100.0, 71.0, 699.52)],
            id="extra-whitespace-and-crlf",
        ),
        pytest.param(
            "3, GPU-d, Odd, Name, 1, 2, 3, 4, nan\n",
            [GpuSample(3, "GPU-d", "Odd, Name", MIB, 2 * MIB, 3.0, 4.0, None)],
            id="comma-in-name-and-nan",
        ),
        pytest.param(
            "0, GPU-e, H200, -5, 10, 0, 30, 90\n",
            [GpuSample(0, "GPU-e", "H200", None, 10 * MIB, 0.0, 30.0, 90.0)],
            id="negative-memory",
        ),
        pytest.param(
            "garbage\n0, GPU-f, H200, 1, 2, 3, 4, 5\nWARNING: infoROM is corrupted at gpu 0000:01:00.0\n"
            "1, GPU-g, H200, 6, 7, 8, 9, 10\n",
            [
                GpuSample(0, "GPU-f", "H200", MIB, 2 * MIB, 3.0, 4.0, 5.0),
                GpuSample(1, "GPU-g", "H200", 6 * MIB, 7 * MIB, 8.0, 9.0, 10.0),
            ],
            id="garbage-between-rows",
        ),
    ],
)
def test_parse_gpu_query_tolerates_odd_output(text: str, expected: list[GpuSample]) -> None:
    """Missing values become None, whitespace is ignored and lines that are not GPU rows are skipped."""
    assert parse_gpu_query(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("No running processes found\n", [], id="no-processes"),
        pytest.param("416, python3, [N/A]\n", [GpuProcess(416, "python3", None)], id="n-a-memory"),
        pytest.param(
            "  9001 ,  /usr/bin/python3 -m sglang , 70000  \n",
            [GpuProcess(9001, "/usr/bin/python3 -m sglang", 70000 * MIB)],
            id="whitespace",
        ),
        pytest.param(
            "77, /opt/a,b/python, 12\n", [GpuProcess(77, "/opt/a,b/python", 12 * MIB)], id="comma-in-name"
        ),
        pytest.param("abc, python3, 12\n0, python3, 12\n416, python3\n", [], id="bad-pid-or-short"),
    ],
)
def test_parse_compute_apps_tolerates_odd_output(text: str, expected: list[GpuProcess]) -> None:
    """Process rows keep their full name, tolerate missing memory and skip rows without a pid."""
    assert parse_compute_apps(text) == expected


@given(st.text())
def test_parsers_never_raise(text: str) -> None:
    """Any text at all parses to a list without raising."""
    assert isinstance(parse_gpu_query(text), list)
    assert isinstance(parse_compute_apps(text), list)


def test_samples_are_frozen() -> None:
    """Samples are immutable values."""
    (sample,) = parse_gpu_query(_fixture("query-idle.csv"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.index = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("series", "expected"),
    [
        pytest.param([(0.0, 0.0), (5.0, 10_000.0), (10.0, 20_000.0)], True, id="growing"),
        pytest.param([(0.0, 0.0), (30.0, 38675.0)], True, id="real-idle-to-40g"),
        pytest.param([(0.0, 38675.0), (10.0, 38675.0), (20.0, 38675.0)], False, id="flat"),
        pytest.param([(0.0, 40_000.0), (10.0, 20_000.0), (20.0, 0.0)], False, id="shrinking"),
        pytest.param([(0.0, 0.0), (10.0, 100.0), (20.0, 200.0)], False, id="below-threshold"),
        pytest.param([(0.0, 0.0), (10.0, 256.0)], False, id="exactly-threshold"),
        pytest.param([(0.0, 0.0), (10.0, 257.0)], True, id="just-over-threshold"),
        pytest.param([(0.0, 0.0), (10.0, 40_000.0), (20.0, 40.0)], False, id="rose-then-freed"),
        pytest.param([(0.0, 0.0), (61.0, 40_000.0)], False, id="rise-spans-more-than-window"),
        pytest.param([(0.0, 0.0), (60.0, 40_000.0)], True, id="rise-spans-exactly-window"),
        pytest.param([(0.0, 10_000.0)], False, id="single-sample"),
    ],
)
def test_memory_trend_single_gpu(series: list[tuple[float, float]], expected: bool) -> None:
    """Memory grows when used memory rose by more than 256 MiB above its low within the last 60 s."""
    trend = MemoryTrend()
    result = False
    for now, used_mib in series:
        result = trend.observe(now, _gpus(used_mib))
    assert result is expected


def test_memory_trend_real_samples() -> None:
    """The idle then 40 GB H200 samples count as growing, and later flat ones do not once the low expires."""
    trend = MemoryTrend()
    idle = parse_gpu_query(_fixture("query-idle.csv"))
    loaded = parse_gpu_query(_fixture("query-40g.csv"))
    assert trend.observe(100.0, idle) is False
    assert trend.observe(110.0, loaded) is True
    assert trend.observe(150.0, loaded) is True
    assert trend.observe(170.0, loaded) is False


def test_memory_trend_window_expiry_without_new_samples() -> None:
    """Growth stops counting once it lies wholly outside the window, even when no new sample arrives."""
    trend = MemoryTrend(window_seconds=30.0)
    trend.observe(0.0, _gpus(0))
    assert trend.observe(10.0, _gpus(10_000)) is True
    assert trend.growing(30.0) is True
    assert trend.growing(31.0) is False


def test_memory_trend_sums_over_gpus() -> None:
    """Small rises on each of 8 GPUs add up to growth although none alone passes the threshold."""
    trend = MemoryTrend()
    trend.observe(0.0, _gpus(*[1000.0] * 8))
    assert trend.observe(5.0, _gpus(*[1040.0] * 8)) is True


def test_memory_trend_ignores_a_gpu_missing_from_one_sample() -> None:
    """A GPU row dropped from one probe does not read as a fall followed by growth."""
    trend = MemoryTrend()
    full = _gpus(*[70_000.0] * 8)
    trend.observe(0.0, full)
    trend.observe(5.0, full[:7])
    assert trend.observe(10.0, full) is False


def test_memory_trend_ignores_unknown_memory_and_failed_probes() -> None:
    """Samples without memory values and empty probes record nothing."""
    trend = MemoryTrend()
    trend.observe(0.0, _gpus(0))
    trend.observe(5.0, _gpus(None))
    trend.observe(6.0, [])
    assert trend.observe(10.0, _gpus(1000)) is True


def test_memory_trend_clock_going_back_restarts() -> None:
    """A sample older than the last one restarts the history instead of being placed in the window."""
    trend = MemoryTrend()
    trend.observe(100.0, _gpus(0))
    assert trend.observe(50.0, _gpus(40_000)) is False


def test_memory_trend_custom_threshold() -> None:
    """The threshold and window are settable."""
    trend = MemoryTrend(threshold_bytes=GIB, window_seconds=10.0)
    trend.observe(0.0, _gpus(0))
    assert trend.observe(5.0, _gpus(1000)) is False
    assert trend.observe(8.0, _gpus(1100)) is True


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"threshold_bytes": -1}, id="negative-threshold"),
        pytest.param({"window_seconds": 0.0}, id="zero-window"),
    ],
)
def test_memory_trend_rejects_bad_settings(kwargs: dict[str, float]) -> None:
    """A negative threshold or an empty window is refused at construction."""
    with pytest.raises(ValueError, match="must be"):
        MemoryTrend(**kwargs)  # type: ignore[arg-type]


def test_memory_trend_facts() -> None:
    """Facts give the latest used and total memory per GPU index, leaving out unknown values."""
    trend = MemoryTrend()
    assert trend.facts() == {}
    trend.observe(0.0, parse_gpu_query(_fixture("query-idle.csv")))
    trend.observe(
        5.0, parse_gpu_query(_fixture("query-40g.csv") + "1, GPU-x, H200, [N/A], 143771, 0, 30, 90\n")
    )
    assert trend.facts() == {
        "gpu_mem_used_bytes": {"0": 40_553_676_800},
        "gpu_mem_total_bytes": {"0": 150_754_820_096, "1": 150_754_820_096},
    }
