"""benchmarks/corpus_score.py scores the corpus and, apart, the held-out cases (tests/fixtures/heldout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchscripts import load_script

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
HELDOUT = FIXTURES / "heldout"


corpus_score = load_script("corpus_score.py")
report = load_script("report.py")


def _labels(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*/*.json") if p.with_suffix(".log").is_file())


@pytest.mark.timeout(300)  # each crash followed live at its log's pace too: many seconds on a loaded runner
def test_heldout_is_scored_case_by_case() -> None:
    """Every held-out case gets its figure: the section holds each labelled case, judged on outcome and phase."""
    labels = _labels(HELDOUT)
    assert labels, "the held-out set is empty"
    section = corpus_score.score_dirs("held out", [HELDOUT])
    assert sorted(c.name for c in section.cases) == sorted(p.stem for p in labels)
    for case in section.cases:
        assert case.fields["outcome"] is not None, case.name
        assert case.fields["phase"] is not None, case.name


def test_heldout_shares_no_source_with_the_corpus() -> None:
    """No held-out case comes from a thread a corpus case already uses (its `source` is not a corpus source)."""
    tuned = {
        json.loads(p.read_text(encoding="utf-8"))["source"]
        for folder in (FIXTURES / "corpus", FIXTURES / "cases")
        for p in _labels(folder)
    }
    held = {p.stem: json.loads(p.read_text(encoding="utf-8"))["source"] for p in _labels(HELDOUT)}
    assert not {stem: src for stem, src in held.items() if src in tuned}
    assert len(set(held.values())) == len(held)


@pytest.mark.timeout(300)  # the script follows each crash live too: over a minute on a loaded 2-core machine
def test_corpus_score_runs_end_to_end() -> None:
    """`python benchmarks/corpus_score.py --misses` runs and prints both sections, each with every field's row
    per engine and the share of crashes called other; it lists the tuning set's misses, not the held-out ones."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "corpus_score.py"), "--misses"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    corpus, _, held = out.partition("== held out ==")
    assert corpus.startswith("== corpus ==")
    for text, n in ((corpus, None), (held, len(_labels(HELDOUT)))):
        assert "labelled logs;" in text
        if n is not None:
            assert f"\n{n} labelled logs;" in text
        for field in corpus_score.FIELDS:
            assert f"\n  {field} " in text
        assert "crashes called other:" in text
        assert "crashes called other, per engine:" in text
    # --misses lists the tuning set's cases, never a held-out one (reading those would tune on them)
    assert not [p.stem for p in _labels(HELDOUT) if p.stem in out]
    # benchmarks/report.py reads the corpus section's figures, not the held-out section's after it
    assert report.parse_corpus(out)["logs"] == len(
        corpus_score.score_dirs("corpus", corpus_score.SECTIONS["corpus"]).cases
    )


def test_others_lists_each_crash_called_other_with_its_decisive_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--others lists, per engine, the crashes called `other` with the label's category (null: the log does not
    show what failed) and their decisive line, and no other case."""
    section = corpus_score.Section("s")
    fields = dict.fromkeys(corpus_score.FIELDS, True)
    section.cases = [
        corpus_score.CaseScore("a-cut", "vllm", fields, True, called_other=True, summary="Traceback cut"),
        corpus_score.CaseScore(
            "b-bug", "vllm", fields, True, called_other=True, summary="NameError: name 'x'", labelled="other"
        ),
        corpus_score.CaseScore(
            "c-oom", "vllm", fields, True, summary="torch.OutOfMemoryError: CUDA out of memory"
        ),
        corpus_score.CaseScore("d-ready", "sglang", fields, False),
    ]
    corpus_score._print(section, misses=False, others=True)
    out = capsys.readouterr().out
    assert "crashes called other, vllm:\n  a-cut (label: null)\n      Traceback cut\n" in out
    assert "  b-bug (label: other)\n      NameError: name 'x'\n" in out
    assert "c-oom" not in out
    assert "crashes called other, sglang:" not in out


def test_slow_lists_each_crash_not_called_live_under_a_second_with_its_decisive_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--slow lists the crashes a live follower called at 1 s or later (or never), each with its decisive line, and
    no crash called at once nor a launch that did not crash."""
    section = corpus_score.Section("s")
    fields = dict.fromkeys(corpus_score.FIELDS, True)
    section.cases = [
        corpus_score.CaseScore(
            "a-grace",
            "vllm",
            fields,
            True,
            latency=5.25,
            live_state="crashed",
            summary="WorkerProc hit an exception.",
        ),
        corpus_score.CaseScore(
            "b-none", "vllm", fields, True, live_state=None, summary="ValueError: Free memory"
        ),
        corpus_score.CaseScore(
            "c-once", "vllm", fields, True, latency=0.05, live_state="crashed", summary="EngineDeadError"
        ),
        corpus_score.CaseScore("d-ready", "sglang", fields, False),
    ]
    corpus_score._print(section, misses=False, slow=True)
    out = capsys.readouterr().out
    assert (
        "crash verdicts at 1 s or later:\n  vllm/a-grace: 5.25 s\n      WorkerProc hit an exception.\n" in out
    )
    assert "  vllm/b-none: no crash verdict live (None)\n      ValueError: Free memory\n" in out
    assert "c-once" not in out
    assert "d-ready" not in out
