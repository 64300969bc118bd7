"""benchmarks/source_raises.py: an engine's own raise sites, found in its source and read with its profile."""

from __future__ import annotations

from pathlib import Path

from benchscripts import load_script

source_raises = load_script("source_raises.py")


def test_each_raise_is_found_once_and_read_where_it_is_raised(tmp_path: Path) -> None:
    """A `raise ValueError(f"...")` in a package's server_args.py is found with its function and its message (each
    f-string hole as 8), a repeat of the same message is counted once, and replayed in its own frame it gets the
    category sglang.toml gives a check of that file (config); a raise of no string is skipped."""
    root = tmp_path / "sglang"
    (root / "srt").mkdir(parents=True)
    (root / "srt" / "server_args.py").write_text(
        "def _handle_encoder_disaggregation(self):\n"
        "    if self.a and self.b:\n"
        '        raise ValueError(f"Cannot set --encoder-only and --language-only together ({self.a})")\n'
        '    raise ValueError(f"Cannot set --encoder-only and --language-only together ({self.a})")\n'
        "\n"
        "def other():\n"
        "    raise RuntimeError(code)\n",
        encoding="utf-8",
    )
    sites = source_raises.raise_sites(root, "srt/")
    assert [(s.path, s.line, s.function, s.cls, s.message) for s in sites] == [
        (
            "sglang/srt/server_args.py",
            3,
            "_handle_encoder_disaggregation",
            "ValueError",
            "Cannot set --encoder-only and --language-only together (8)",
        )
    ]
    assert [s.category for s in source_raises.categorize_sites(sites, "sglang")] == ["config"]
