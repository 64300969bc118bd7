"""`watchdog watch` on a real terminal: the live view is drawn and redraws by itself while the log is quiet."""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

from pty_screen import PtyScreen, Snapshot

CORPUS_LOG = Path(__file__).parent / "fixtures/corpus/sglang/ready-llama31-8b-single-gpu-docs-v041.log"
COLUMNS, LINES = 160, 40
STEP = 15.0  # seconds allowed for each step (the first includes the interpreter's start)
QUIET = 1.5  # seconds of log silence in which the view must redraw by itself
REDRAWS = 4  # changes of the ticking time in QUIET seconds: the view redraws about 3 times a second or more


def _shard(done: int) -> str:
    return f"Loading safetensors checkpoint shards: {done * 25:3d}% Completed | {done}/4 [00:0{done}<00:0{4 - done}, 1.2it/s]"


def _watchdog() -> list[str]:
    script = shutil.which("watchdog", path=str(Path(sys.executable).parent))
    if script:
        return [script]
    return [sys.executable, "-c", "from watchdog.cli.app import main; import sys; sys.exit(main())"]


def _phase_row(state: str) -> re.Pattern[str]:
    """The live view's row of a phase and the time in it: `▸  loading_weights  3.2s  2025-01-23T19:35:15`."""
    return re.compile(rf"^[▸>* ]*{state}\s+(\d[\dhms.]*)(?:\s|$)", re.MULTILINE)


def _ticks(snapshots: list[Snapshot], row: re.Pattern[str]) -> list[str]:
    """The distinct times the row showed, in order."""
    seen: list[str] = []
    for snap in snapshots:
        match = row.search(snap.text)
        if match and (not seen or seen[-1] != match.group(1)):
            seen.append(match.group(1))
    return seen


def test_live_view_draws_and_ticks_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal the view shows the phase, a time that ticks with no new line, 2/4, then the verdict."""
    corpus = CORPUS_LOG.read_text(encoding="utf-8").splitlines()
    load_at = next(i for i, line in enumerate(corpus) if "Load weight begin" in line)
    shards_end = next(i for i, line in enumerate(corpus) if "Load weight end" in line)
    log = tmp_path / "server.log"
    log.write_text("\n".join(corpus[:load_at]) + "\n", encoding="utf-8")  # server_args, distributed init

    def append(*lines: str) -> None:
        with log.open("a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))

    argv = [*_watchdog(), "watch", str(log), "--timeout", "60"]
    with PtyScreen(argv, columns=COLUMNS, lines=LINES, cwd=tmp_path) as term:
        term.wait_for(
            lambda text: str(log) in text and _phase_row("starting").search(text) is not None,
            STEP,
            what=f"the live view (the target {log} and the phase row 'starting <time>'): it was never drawn",
        )

        append(corpus[load_at], _shard(0), _shard(1))
        loading = _phase_row("loading_weights")
        term.wait_for(
            lambda text: loading.search(text) is not None and re.search(r"\b1/4\b", text) is not None,
            STEP,
            what="the phase row 'loading_weights <time>' and progress 1/4",
        )

        quiet_from = time.monotonic()  # no line is written from here on, for QUIET seconds
        try:
            term.wait_for(
                lambda _: len(_ticks(term.snapshots_since(quiet_from), loading)) > REDRAWS,
                QUIET,
                what=f"the time in loading_weights change {REDRAWS} times in {QUIET} s of a quiet log",
            )
        except AssertionError as exc:
            ticks = _ticks(term.snapshots_since(quiet_from), loading)
            raise AssertionError(
                f"the live view does not redraw by itself: times shown {ticks}\n{exc}"
            ) from None
        window = term.snapshots_since(quiet_from)
        finished = _ticks(window, _phase_row("starting"))
        assert len(finished) <= 1, f"a finished phase's time must stand still, it showed {finished}"

        append(_shard(2))
        bar = re.compile(r"^\s*weights\s+[━╸╺]+\s+2/4\s+ETA \d", re.MULTILINE)
        term.wait_for(
            lambda text: bar.search(text) is not None, STEP, what="the bar 'weights ━━━ 2/4  ETA …'"
        )

        append(_shard(3), _shard(4), *corpus[shards_end:])
        code = term.wait_exit(STEP)
        final = term.text
        assert f"{log}: sglang ready after" in final, final
        assert code == 0, final
        assert not loading.search(final), (
            f"the live view must be gone (transient) after the verdict:\n{final}"
        )
        # only the verdict names the target: no piece of an earlier picture was left behind by a redraw
        assert final.count(str(log)) == 1, f"stale lines of the live view are left on the screen:\n{final}"


def test_live_view_names_a_log_that_never_comes(tmp_path: Path) -> None:
    """On a terminal, a log that does not exist is named in the live view ("no log: PATH does not exist")
    while it is waited for, and past --stall-after the verdict names it too: never a stalled phase row."""
    log = tmp_path / "sever.log"
    argv = [*_watchdog(), "watch", str(log), "--stall-after", "1", "--timeout", "60"]
    said = f"no log: {log} does not exist (waited "
    with PtyScreen(argv, columns=COLUMNS, lines=LINES, cwd=tmp_path) as term:
        view = term.wait_for(
            lambda text: said in text and "no log after" not in text,
            STEP,
            what=f"the live view saying {said!r} before the stall",
        )
        assert "pending" in view
        done = term.wait_for(
            lambda text: "a typo in the log's path" in text, STEP, what="the verdict naming the file"
        )
    assert said in done
    assert _phase_row("stalled").search(view) is None
    assert _phase_row("stalled").search(done) is None
