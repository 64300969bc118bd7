"""The status page's "changed since launch #N" block, read in headless Chromium: the changed flags, time to
ready, phases and memory facts before -> after, and a value from the log stays text."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from snapshots import status_from_json
from test_http import three_launches
from test_statuspage_browser import _chromium, _parse

from watchdog.core.compare import ArgumentChange, Changes, FactChange, PhaseChange
from watchdog.daemon.http import status_payload
from watchdog.daemon.statuspage import render_page

pytestmark = pytest.mark.anyio

HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1">'


async def test_a_relaunch_card_says_what_changed(tmp_path: Path) -> None:
    """A relaunch's card lists each changed flag (`--mem-fraction-static 0.88 → 0.92`, an added one), the time
    to ready, the phases and a memory fact before → after; a first launch's card has no such block; a value
    with markup in it is shown as text, injecting nothing."""
    first, relaunch = (status_from_json(s) for s in three_launches()[:2])
    changes = Changes(
        1,
        arguments=(
            ArgumentChange("mem_fraction_static", "--mem-fraction-static", "0.88", "0.92"),
            ArgumentChange("moe_a2a_backend", "--moe-a2a-backend", None, "flashinfer"),
            ArgumentChange("served_model_name", "--served-model-name", "a", HOSTILE),
        ),
        phases=(PhaseChange("loading_weights", 250.0, 125.0),),
        time_to_ready=(662.0, 580.0),
        facts=(FactChange("avail_mem_after_weights_gb", 16.3, 9.1),),
        compared_arguments=True,
    )
    relaunch = replace(relaunch, verdict=replace(relaunch.verdict, incarnation=2, changes=changes))
    page = tmp_path / "page.html"
    page.write_text(render_page(status_payload([first, relaunch]), nonce="n0nce"))
    doc = _parse((await _chromium(page.as_uri(), tmp_path / "profile", "--dump-dom")).decode())
    cards = {c.attrs["data-launch"]: c for c in doc.by_class("launch")}
    assert cards[first.name].by_class("changes") == []
    block = cards[relaunch.name].one("changes")
    assert block.one("title").text == "changed since launch #1"
    items = [li.text for li in block.find_all(lambda n: n.tag == "li")]
    assert items == [
        "--mem-fraction-static 0.88 \u2192 0.92",
        "--moe-a2a-backend flashinfer added",
        f"--served-model-name a \u2192 {HOSTILE}",
        "time to ready 11m02s \u2192 9m40s",
        "phases: weights 4m10s \u2192 2m05s",
        "Free memory after weights 16.3 GB \u2192 9.1 GB",
    ]
    (body,) = doc.find_all(lambda n: n.tag == "body")
    assert "data-pwned" not in body.attrs
    assert not doc.find_all(lambda n: n.tag == "img")
