"""Latency from a fatal line written on an SSH host to the verdict and to the webhook, end to end.

Starts a throwaway sshd on 127.0.0.1 (as the tests do) and a webhook receiver on loopback. Each run writes a
startup line, starts `watchdog watch ssh://... --notify URL --events FILE` in-process, waits until it is
following (its events file shows loading_weights, then a further 100 ms so the first read has caught up),
then appends, in one write, the crash of the case and measures, on the same clock:
  - transition: the time the `crashed` transition is written to the events file, minus the write time;
  - webhook: the time the receiver got the POST, minus the write time.

Cases (`--case`, default both, each run alternating so both see the same conditions):
  - fatal: an uncaught scheduler traceback (outermost frame `run_scheduler_process`, the process's entry
    point, so the crash is certain at its exception line) ending in `RuntimeError: Not enough memory. ...`,
    and no line after it;
  - sigquit: the same traceback, a blank line and SGLang's "Received sigquit from a child process" line.

The crash transition is published at once; the webhook waits for the settle window (250 ms), which ends early
once the log has been quiet for 50 ms, so the webhook figure is about 50 ms plus delivery.

    python benchmarks/verdict_latency.py [--runs 30] [--case fatal|sigquit|both]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sshd_server import SSHDServer, running_sshd

from watchdog.cli.app import build_parser
from watchdog.cli.watch import watch

START = "[2025-07-02 07:31:02 TP0] Load weight begin. avail mem=139.28 GB\n"
FATAL = (
    "[2025-07-02 07:34:18 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
    # the outermost frame is the scheduler process's entry point: an uncaught error, certain crash at once
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2712,'
    " in run_scheduler_process\n"
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 1512,'
    " in init_memory_pool\n"
    '    raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static.")\n'
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
)
SIGQUIT = (
    FATAL
    + "\n"
    + "[2025-07-02 07:34:19] Received sigquit from a child process. It usually means the child failed.\n"
)
CASES = {"fatal": FATAL, "sigquit": SIGQUIT}
SETTLE_MS = 250  # the watch's default settle window (watchdog.follow.follower.DEFAULT_SETTLE)
TARGETS = {  # (p50, p99, max) bounds in ms, line written on the host -> ...; None: no bound
    "transition": (10.0, 20.0, None),
    "webhook": (None, None, SETTLE_MS + 20.0),  # within the settle window + 20 ms, every run
}
FOLLOW_LEAD = 0.1  # s after the first transition before the crash is written (not measured)


def _receiver() -> tuple[ThreadingHTTPServer, list[float]]:
    received: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            received.append(time.time())
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, received


def _crashed_at(events: Path) -> float | None:
    for line in events.read_text().splitlines():
        record = json.loads(line)
        if record.get("state") == "crashed":
            return float(record["time"])
    return None


async def one_run(
    server: SSHDServer, workdir: Path, url: str, received: list[float], i: int, case: str
) -> tuple[float, float]:
    """One watch from start to verdict; returns (transition ms, webhook ms) after the crash lines' write."""
    log = workdir / f"run{i}-{case}.log"
    events = workdir / f"run{i}-{case}.events"
    log.write_text(START)
    target = f"ssh://{server.user}@{server.host}:{server.port}{log}"
    args = build_parser().parse_args(
        [
            "watch",
            target,
            "--identity",
            str(server.client_key),
            "--known-hosts",
            str(server.known_hosts),
            "--notify",
            url,
            "--events",
            str(events),
            "--json",
            "--engine",
            "sglang",
        ]
    )
    before = len(received)
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch, args, io.StringIO())
        with anyio.fail_after(20):
            # the events file is the watcher's only outside voice: poll it (setup, not the measured span)
            while not events.exists() or "loading_weights" not in events.read_text():  # noqa: ASYNC110
                await anyio.sleep(0.005)
            # the first read has caught up and the watch is following: the crash arrives as new lines
            await anyio.sleep(FOLLOW_LEAD)
        assert _crashed_at(events) is None, "crashed before the crash was written"
        written = time.time()
        with log.open("a") as f:
            f.write(CASES[case])
    crashed = _crashed_at(events)
    assert crashed is not None, "no verdict"
    assert len(received) == before + 1, "no webhook"
    return (crashed - written) * 1000, (received[-1] - written) * 1000


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    values = sorted(values)
    p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
    return statistics.median(values), p99, values[-1]


async def main(runs: int, cases: list[str]) -> None:
    receiver, received = _receiver()
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    figures: dict[tuple[str, str], list[float]] = {(c, m): [] for c in cases for m in TARGETS}
    with tempfile.TemporaryDirectory() as tmp, running_sshd(Path(tmp) / "sshd") as server:
        for i in range(runs):
            for case in cases:
                t, w = await one_run(server, Path(tmp), url, received, i, case)
                figures[case, "transition"].append(t)
                figures[case, "webhook"].append(w)
    receiver.shutdown()
    receiver.server_close()
    print("line written on the SSH host -> crashed transition in --events / webhook received (ms)")
    print(f"{'case':8} {'measure':10} {'runs':>4} {'p50':>7} {'p99':>7} {'max':>7}   target")
    for (case, measure), values in figures.items():
        p50, p99, top = _percentiles(values)
        bounds = [
            (n, v, b)
            for n, v, b in zip(("p50", "p99", "max"), (p50, p99, top), TARGETS[measure], strict=True)
        ]
        goal = ", ".join(f"{n} <= {b:g}" for n, _, b in bounds if b is not None)
        ok = "met" if all(v <= b for _, v, b in bounds if b is not None) else "MISSED"
        print(f"{case:8} {measure:10} {len(values):>4} {p50:7.1f} {p99:7.1f} {top:7.1f}   {goal}: {ok}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=30, help="runs per case (default 30)")
    parser.add_argument(
        "--case", choices=["fatal", "sigquit", "both"], default="both", help="which crash (default both)"
    )
    options = parser.parse_args()
    anyio.run(main, options.runs, list(CASES) if options.case == "both" else [options.case])
