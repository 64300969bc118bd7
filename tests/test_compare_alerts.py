"""The alerts of a relaunch say what changed since the launch before (`changed`), and a changed value from the
log (an argument's) reaches each chat service as text that mentions and links nobody."""

from __future__ import annotations

import pytest
from http_receiver import Receiver
from test_notifiers import _ACTIVE, CHAT_KINDS, CRAFTED, NOW, OPTIONS, READY_LOG, _readable, _strings

from watchdog.alerts.alert import Alert
from watchdog.alerts.compose import fields, plain_text
from watchdog.alerts.delivery import open_client, send
from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import Status, build_verdict
from watchdog.profiles.loader import load_engine

pytestmark = pytest.mark.anyio


def _relaunch_alert(name_value: str) -> Alert:
    """The ready alert of a replayed relaunch whose --served-model-name became `name_value`."""
    first = READY_LOG.read_bytes()
    second = first.replace(
        b"served_model_name='meta-llama/Meta-Llama-3.1-8B-Instruct'",
        f"served_model_name='{name_value}'".encode(),
    )
    analyzer = Analyzer(load_engine(None))
    analyzer.feed(first + second, 0.0)
    analyzer.finish(0.0)
    return Alert.from_status("ready", Status(build_verdict(analyzer), name="kimi"), now=NOW)


def test_a_relaunch_alert_says_what_changed() -> None:
    """A relaunch's ready alert has the `changed` line (the flag, before -> after, time to ready), shown under
    "Changed" before the facts, in its plain text and in its JSON; the first launch's has none."""
    alert = _relaunch_alert("kimi-k2")
    assert alert.changed == (
        "changed since #1: --served-model-name meta-llama/Meta-Llama-3.1-8B-Instruct -> kimi-k2; "
        "time to ready 38s -> 38s"
    )
    names = [name for name, _ in fields(alert)]
    assert names.index("Changed") < names.index("Free memory after weights")
    assert "Changed: since #1: --served-model-name" in plain_text(alert)
    assert Alert.from_dict(alert.to_dict()) == alert
    analyzer = Analyzer(load_engine(None))
    analyzer.feed(READY_LOG.read_bytes(), 0.0)
    analyzer.finish(0.0)
    first = Alert.from_status("ready", Status(build_verdict(analyzer), name="kimi"), now=NOW)
    assert first.changed == ""
    assert "Changed" not in dict(fields(first))


@pytest.mark.parametrize("kind", CHAT_KINDS)
async def test_a_crafted_changed_value_notifies_nobody(receiver: Receiver, kind: str) -> None:
    """An argument value holding every mention and link form reaches a real receiver, in the alert's changed
    line, as text that mentions and links nobody, yet still says the flag that changed."""
    alert = _relaunch_alert(CRAFTED)
    assert CRAFTED in alert.changed
    async with open_client() as client:
        await send(kind, receiver.url(), alert, client=client, options=OPTIONS.get(kind), backoff=0.01)
    (got,) = receiver.got
    texts = [got.body.decode()] if kind == "ntfy" else _strings(got.json())
    assert [m.group(0) for text in texts for m in _ACTIVE.finditer(text)] == []
    said = _readable("\n".join(texts))
    assert "--served-model-name" in said
    assert "@channel @here" in said
