"""benchmarks/churn_split.py: the daemon's CPU split into a steady line's and a crash and relaunch's."""

from __future__ import annotations

import pytest
from benchscripts import load_script

churn_split = load_script("churn_split.py")

OUTPUT = """watchdog run: 200 launches, local files; 2 CPUs, load (5.13720703125, 4.28271484375, 3.57568359375)
  started (every log read) in 3.1 s; daemon exit code 0 after SIGTERM
  load window 20.0 s: writer wrote 46,837 lines, 6.0 MB in 23 s (10.2 lines/s per log); 227 crashes in the window judged, 0 not
  CPU, logs growing                     9.7 <= 10.0 % of a core  met
"""


def test_a_run_s_figures_are_read_from_its_output() -> None:
    """The daemon's CPU, the lines written a second (over the writer's whole time), the crashes a second of the
    window, the load average."""
    run = churn_split.parse(OUTPUT, 20.0)
    assert run == churn_split.Run(9.7, 46837 / 23, 227 / 20, 5.13720703125)


def test_a_crash_comes_with_the_crash_s_lines_and_the_relaunch_s_startup() -> None:
    """43 lines: the bench's SGLang startup (27) and its scheduler crash (16)."""
    assert churn_split.lines_a_crash() == 43


def test_the_split_prices_the_serving_lines_at_the_steady_run_s_cost() -> None:
    """2 % of a core for 1,000 steady lines a second is 20 us a line; a run of 1,500 serving lines and 10 crashes a
    second (430 lines with them) at 8 % spends 3 % on its serving lines, 5 % on its crashes: 5 ms each, 62.5 %."""
    steady = churn_split.Run(2.0, 1000.0, 0.0, 1.0)
    loaded = churn_split.Run(8.0, 1500.0 + 10 * 43, 10.0, 1.0)
    line, crash_ms, share = churn_split.split(steady, loaded, 43)
    assert line == pytest.approx(20.0)
    assert crash_ms == pytest.approx(5.0)
    assert share == pytest.approx(62.5)
