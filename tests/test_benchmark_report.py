"""benchmarks/report.py: its parsers read the scripts' real outputs right, and --write touches only its block."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from benchscripts import load_script

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = Path(__file__).resolve().parent / "fixtures" / "benchmarks"


report = load_script("report.py", "benchmark_report")


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def test_replay_bench_output_gives_each_tools_times_and_the_verdict() -> None:
    """replay_bench.py's table gives the line count, each tool's wall/user/sys/RSS and that replay said crashed."""
    f = report.parse_replay(sample("replay_bench.txt"))
    assert f["lines"] == 51_292
    assert (f["watchdog.wall"], f["watchdog.user"], f["watchdog.sys"], f["watchdog.rss_mb"]) == (
        0.201,
        0.159,
        0.040,
        25.3,
    )
    assert (f["mtail.wall"], f["mtail.user"], f["mtail.sys"], f["mtail.rss_mb"]) == (
        0.359,
        0.320,
        0.032,
        18.3,
    )
    assert f["watchdog.crashed"] == 1.0


def test_replay_rows_put_mtail_and_grep_beside_replay_with_ratios() -> None:
    """The replay rows give lines/s from the parsed times, mtail's ratio against 10x, and grep's as the floor."""
    f = report.parse_replay(sample("replay_bench.txt"))
    grep_count = report.parse_grep_count(sample("grep_count.txt"))
    mtail, grep = report.replay_rows(f, (0.02, 0.018, grep_count), "`cmd`", "`grep`")
    assert "255,184 lines/s wall" in mtail.watchdog  # 51,292 / 0.201
    assert "1.8x wall" in mtail.anchor
    assert mtail.met is False
    assert "(117 lines): 2,564,600 lines/s wall" in grep.anchor
    assert grep.met is False  # 255k lines/s < 1M


def test_replay_output_without_the_watchdog_row_is_a_parse_error() -> None:
    """A replay_bench.py output whose replay gave no verdict (no watchdog row) raises ParseError, not a figure."""
    text = "\n".join(
        line for line in sample("replay_bench.txt").splitlines() if not line.startswith("watchdog ")
    )
    with pytest.raises(report.ParseError, match="watchdog row"):
        report.parse_replay(text)


def test_verdict_latency_output_gives_each_case_and_its_verdict() -> None:
    """verdict_latency.py's rows give runs, p50/p99/max, the target and met per case and measure."""
    rows = report.parse_verdict(sample("verdict_latency.txt"))
    assert set(rows) == {"fatal transition", "fatal webhook", "sigquit transition", "sigquit webhook"}
    assert rows["fatal transition"] == {
        "runs": 3.0,
        "p50": 16.5,
        "p99": 16.8,
        "max": 16.8,
        "goal": "p50 <= 10, p99 <= 20",
        "met": "MISSED",
    }
    transition, webhook = report.verdict_rows(rows, "`cmd`")
    assert transition.met is False  # the fatal case missed its p50 target
    assert webhook.met is True
    assert "330 s mean, 660 s worst" in transition.anchor
    assert webhook.goal == "max <= 270 ms"


def test_ssh_latency_output_gives_p50_p99_beside_a_one_second_poll() -> None:
    """ssh_latency.py's line gives lines and p50/p99/max; the row sets them beside a 500 ms mean poll."""
    f = report.parse_ssh(sample("ssh_latency.txt"))
    assert f == {"lines": 30.0, "p50": 7.5, "p99": 10.9, "max": 10.9}
    row = report.ssh_row(f, "`cmd`")
    assert "500 ms mean" in row.anchor
    assert row.met is True


def test_daemon_bench_output_gives_every_goal_row_and_its_context() -> None:
    """daemon_bench.py's goal rows give (measured, bound, unit), and each row is judged on its own."""
    d = report.parse_daemon(sample("daemon_bench.txt"))
    assert d.mode == "local files"
    assert d.context["launches"] == 10
    assert (d.context["judged"], d.context["p50"], d.context["max"]) == (3, 10.1, 14.8)
    assert d.goals == {
        "CPU, logs growing": (12.0, 20.0, "% of a core"),
        "peak RSS": (81.6, 150.0, "MB"),
        "line-to-verdict p99": (14.8, 100.0, "ms"),
        "CPU, all logs quiet": (7.6, 1.0, "% of a core"),
    }
    rows = report.daemon_rows(d, "`cmd`")
    assert [row.met for row in rows] == [True, True, True, False]  # quiet CPU 7.6 % > 1 %
    assert rows[2].watchdog == "14.8 ms (p50 10.1, max 14.8; 3 crashes, 0 missed)"


def test_daemon_bench_cpu_rows_carry_the_same_runs_tail_anchor() -> None:
    """The CPU rows of a daemon_bench.py run show, as their anchor, its `tail -F` of each log in the same window
    (under load, and quiet); the other rows have none."""
    d = report.parse_daemon(sample("daemon_bench_anchor.txt"))
    assert (d.context["tails"], d.context["tail_load"], d.context["tail_quiet"]) == (10, 0.199, 0.0)
    assert d.goals["CPU, logs growing"][1:] == (10.0, "% of a core")  # issue 31's goal
    growing, rss, _p99, quiet = report.daemon_rows(d, "`cmd`")
    assert growing.anchor == "`tail -F` of each of the 10 logs: 0.199 % of a core in all"
    assert quiet.anchor == "`tail -F` of each of the 10 logs: 0.000 % of a core in all"
    assert rss.anchor == "—"


def test_remote_bench_output_gives_watchdog_s_reader_and_both_anchors() -> None:
    """remote_bench.py's rows give the CPU per log of watchdog's stream script, `tail -f` and `tail -F`."""
    f = report.parse_remote(sample("remote_bench.txt"))
    assert f["logs"] == 10
    assert set(f) == {"logs", "watchdog", "tail_f", "tail_F"}
    row = report.remote_row(f, "`cmd`")
    assert row.watchdog == f"{f['watchdog']:.3f} % of a core"
    assert row.anchor.startswith(f"`tail -f LOG` {f['tail_f']:.3f} %")
    assert row.met is None


def test_daemon_bench_over_ssh_pinned_says_so_in_its_rows() -> None:
    """A run over SSH with the daemon pinned to a CPU of its own says both in its rows' description."""
    d = report.parse_daemon(sample("daemon_bench_ssh.txt"))
    assert d.mode == "over SSH, 2 host names -> one sshd on 127.0.0.1, the daemon on a CPU of its own"
    assert d.goals["line-to-verdict p99"] == (10.3, 100.0, "ms")
    rows = report.daemon_rows(d, "`cmd`")
    assert rows[0].what == f"daemon: CPU, logs growing, 10 launches, {d.mode}"
    assert [row.met for row in rows] == [True, True, True, True]


def test_daemon_bench_at_scale_is_judged_on_one_core_and_a_verdict_within_a_second() -> None:
    """From 1,000 launches on, daemon_bench.py's goals are issue 31's for one daemon at scale: under one core and no
    crash verdict later than 1 s after its line; its peak RSS and p99 are printed without a goal, not parsed as one."""
    d = report.parse_daemon(sample("daemon_bench_scale.txt"))
    assert d.context["launches"] == 2000
    assert d.goals == {
        "CPU, logs growing": (91.5, 100.0, "% of a core"),
        "line-to-verdict max": (3391.8, 1000.0, "ms"),
    }
    cpu, late = report.daemon_rows(d, "`cmd`")
    assert (cpu.met, late.met) == (True, False)
    assert late.what.startswith("daemon: line-to-verdict max, 2000 launches, over SSH")
    assert "p50 128.1" in late.watchdog


def test_daemon_output_without_a_goal_row_is_a_parse_error() -> None:
    """A daemon_bench.py output that lost its peak RSS row raises ParseError naming it."""
    text = "\n".join(line for line in sample("daemon_bench.txt").splitlines() if "peak RSS" not in line)
    with pytest.raises(report.ParseError, match="peak RSS"):
        report.parse_daemon(text)


def test_alert_latency_output_gives_p99_and_the_settle_goal() -> None:
    """alert_latency.py's output, daemon log lines included, gives p50/p99/max, the settle window and the goal."""
    f = report.parse_alert(sample("alert_latency.txt"))
    assert (f["crashes"], f["others"], f["local"]) == (3, 10, 1.0)
    assert (f["p50"], f["p99"], f["max"], f["settle"], f["goal"], f["cpu"]) == (100, 102, 102, 250, 300, 15)
    assert report.alert_row(f, "`cmd`").met is True


def test_resume_bench_output_gives_both_catch_ups() -> None:
    """resume_bench.py's lines give seconds and bytes read from the start and from the checkpoint."""
    f = report.parse_resume(sample("resume_bench.txt"))
    assert f == {
        "start_s": 0.077,
        "start_bytes": 8_680_227,
        "resume_s": 0.005,
        "resume_bytes": 44_000,
        "resumed_at": 8_680_227,
        "appended": 44_000,
        "checkpoint_bytes": 40_927,
    }
    row = report.resume_row(f, "`cmd`")
    assert row.met is True
    assert "15.4x sooner" in row.anchor


def test_a_resume_that_reads_more_than_was_appended_misses_its_goal() -> None:
    """A resume that reads the whole log again (more bytes than were appended) is judged not met."""
    f = {**report.parse_resume(sample("resume_bench.txt")), "resume_bytes": 8_724_227}
    assert report.resume_row(f, "`cmd`").met is False


def test_a_daemon_figure_at_its_bound_meets_the_goal() -> None:
    """A goal written "<= bound" is met by a figure equal to the bound and missed just above it."""
    d = report.parse_daemon(sample("daemon_bench.txt"))
    at = report.DaemonFigures(
        d.mode, d.context, {"peak RSS": (150.0, 150.0, "MB"), "p99": (100.1, 100.0, "ms")}
    )
    assert [row.met for row in report.daemon_rows(at, "`cmd`")] == [True, False]


def test_shard_sim_output_gives_moves_per_shard_count() -> None:
    """shard_sim.py's table gives launches moved per n for rendezvous, the ideal and modulo."""
    rows = report.parse_shard(sample("shard_sim.txt"))
    assert sorted(rows) == list(range(1, 9))
    assert rows[8] == {"launches": 2000, "moved": 214, "ideal": 222, "modulo": 1776}
    row = report.shard_row(rows, "`cmd`")
    assert "rendezvous: 10.7%" in row.watchdog
    assert "88.8%" in row.anchor
    assert "at most 1.5 points" in row.watchdog  # n = 6: 256 moved, 286 ideal
    assert row.met is True


def test_corpus_score_output_gives_per_field_accuracy() -> None:
    """corpus_score.py's summary gives logs, logs right on every field, and each field's share."""
    f = report.parse_corpus(sample("corpus_score.txt"))
    assert (f["logs"], f["right"]) == (185, 185)
    assert f["category"] == 1.0
    assert set(f) == {"logs", "right", "outcome", "phase", "category", "root_cause", "engine"}


def test_local_verdict_output_gives_watch_and_replay_beside_their_anchors() -> None:
    """local_verdict.py's lines (a real run's output) give each command's wall and CPU figures; the goal is
    watch's wall p50."""
    f = report.parse_local(sample("local_verdict.txt"))
    assert f["watch"] == {"wall": 1077, "wall_p90": 1558, "cpu": 305, "cpu_p90": 370}
    assert f["python3 -c pass"]["wall"] == 78
    row = report.local_row(f, "`cmd`")
    assert "wall p50 1077 ms" in row.watchdog
    assert "CPU p50 259 ms" in row.watchdog  # replay's
    assert "`tail -n 20 LOG`: 7 ms" in row.anchor
    assert row.met is False


@pytest.mark.parametrize(
    ("parser", "other"),
    [
        pytest.param("parse_replay", "ssh_latency.txt", id="replay"),
        pytest.param("parse_verdict", "daemon_bench.txt", id="verdict"),
        pytest.param("parse_ssh", "verdict_latency.txt", id="ssh"),
        pytest.param("parse_daemon", "alert_latency.txt", id="daemon"),
        pytest.param("parse_alert", "resume_bench.txt", id="alert"),
        pytest.param("parse_resume", "shard_sim.txt", id="resume"),
        pytest.param("parse_shard", "corpus_score.txt", id="shard"),
        pytest.param("parse_corpus", "replay_bench.txt", id="corpus"),
        pytest.param("parse_local", "corpus_score.txt", id="local"),
    ],
)
def test_a_parser_refuses_another_scripts_output(parser: str, other: str) -> None:
    """Each parser fed a different script's output raises ParseError instead of inventing a figure."""
    with pytest.raises(report.ParseError):
        getattr(report, parser)(sample(other))


def test_table_cells_escape_pipes() -> None:
    """A pipe in a cell (a regex, a shell pipeline) is escaped so it does not split the Markdown row."""
    row = report.Row("a|b", "1", "—", "—", None, "`grep -E 'x|y'`")
    line = report.render_table([row]).splitlines()[-1]
    assert line == "| a\\|b | 1 | — | — | — | `grep -E 'x\\|y'` |"


def _doc_with_markers(tmp_path: Path) -> Path:
    doc = tmp_path / "benchmarks.md"
    shutil.copy(ROOT / "docs" / "benchmarks.md", doc)
    head, sep, rest = doc.read_text(encoding="utf-8").partition("\n\n")
    doc.write_text(f"{head}{sep}{report.BEGIN}\nold figures\n{report.END}\n\n{rest}", encoding="utf-8")
    return doc


def test_write_replaces_only_the_block_between_the_markers(tmp_path: Path) -> None:
    """write_doc swaps the generated block of a copy of docs/benchmarks.md and leaves every other byte as it was."""
    doc = _doc_with_markers(tmp_path)
    before = doc.read_text(encoding="utf-8")
    report.write_doc(doc, "\n\n| what |\n|---|\n| new figures |\n\n")
    after = doc.read_text(encoding="utf-8")
    start, end = before.index(report.BEGIN) + len(report.BEGIN), before.index(report.END)
    assert after == before[:start] + "\n| what |\n|---|\n| new figures |\n" + before[end:]
    report.write_doc(doc, "| what |\n|---|\n| new figures |\n")
    assert doc.read_text(encoding="utf-8") == after  # a second write with the same block changes nothing


def test_write_without_markers_is_an_error() -> None:
    """replace_block raises MarkersMissing when the document has no generated block."""
    with pytest.raises(report.MarkersMissing):
        report.replace_block("# Benchmarks\n\nprose\n", "table")


def test_cli_write_without_markers_prints_them_and_exits_nonzero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report.py --write` on a document without markers prints the two marker lines, exits 2 and runs nothing."""
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nprose\n", encoding="utf-8")
    assert report.main(["--write", "--doc", str(doc)]) == 2
    err = capsys.readouterr().err
    assert f"{report.BEGIN}\n{report.END}" in err
    assert doc.read_text(encoding="utf-8") == "# Benchmarks\n\nprose\n"


def _part(name: str, took: float) -> Any:
    row = report.Row(f"{name} figure", "1.0 | 2.0", "anchor", "goal", True, f"`{name}`")
    return report.Part(
        (row,), f"machine of {name}", f"report.py --only {name}", took, (f"note {name}",), (0.1, 0.2, 0.3)
    )


def test_parts_saved_apart_are_written_as_one_table_in_the_order_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--write-from A B` writes one block: each run's command, machine and load, then A's rows before B's."""
    doc = _doc_with_markers(tmp_path)
    a, b = _part("replay", 300.0), _part("daemon", 400.0)
    assert report.Part.from_json(a.to_json()) == a
    paths = []
    for name, part in (("b.json", b), ("a.json", a)):
        paths.append(tmp_path / name)
        paths[-1].write_text(part.to_json(), encoding="utf-8")
    assert report.main(["--write-from", str(paths[1]), str(paths[0]), "--doc", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    block = text[text.index(report.BEGIN) : text.index(report.END)]
    assert "Generated in 2 runs" in block
    assert (
        "`report.py --only replay` (300 s): machine of replay. Load average at the end 0.1 / 0.2 / 0.3."
        in block
    )
    assert block.index("| replay figure | 1.0 \\| 2.0 |") < block.index("| daemon figure |")
    assert block.index("- note replay") < block.index("- note daemon")
    capsys.readouterr()


def test_write_from_runs_nothing_else(tmp_path: Path) -> None:
    """`--write-from` with an option that would run benchmarks is refused before anything runs."""
    doc = _doc_with_markers(tmp_path)
    with pytest.raises(SystemExit) as exc:
        report.main(["--write-from", str(tmp_path / "x.json"), "--only", "replay", "--doc", str(doc)])
    assert exc.value.code == 2


def test_the_machine_line_names_the_host_s_calibration() -> None:
    """The quiet machine is whichever host is lent (their Python speed differs by up to 2.4x): each run's line
    says how fast its host ran the calibration loop, so that runs on two hosts can be compared through it."""
    line = report.machine()
    found = re.search(r"calibration (\d+\.\d\d) s of CPU", line)
    assert found is not None, line
    assert 0.0 < float(found.group(1)) < 60.0
