"""The status page in a real browser: headless Chromium loads it, runs its script, and we read the DOM."""

from __future__ import annotations

import copy
import functools
import html.parser
import io
import os
import shutil
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from snapshots import status_from_json
from test_http import EVIL, three_launches

from watchdog.core.facts import GLANCE, describe, fact_text
from watchdog.core.verdict import Status
from watchdog.daemon.http import serve_http, status_payload
from watchdog.daemon.metrics import DaemonStats
from watchdog.daemon.statuspage import render_page

pytestmark = pytest.mark.anyio

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
DEADLINE = 120.0  # a cold Chromium start on a slow CI machine
VIRTUAL_MS = 3000  # the page's 2 s refresh runs once within it
VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)


def _typed(statuses: list[Any]) -> list[Status]:
    """Snapshots given as their JSON (or typed already), as the server takes them."""
    return [s if isinstance(s, Status) else status_from_json(s) for s in statuses]


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    reason = "no Chromium on PATH (Debian package `chromium`)"
    if os.environ.get("WATCHDOG_REQUIRE_BROWSER") == "1":
        pytest.fail(f"WATCHDOG_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@dataclass
class Node:
    """An element of the dumped DOM."""

    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def find_all(self, match: Callable[[Node], bool]) -> list[Node]:
        out = [self] if match(self) else []
        for c in self.children:
            if isinstance(c, Node):
                out.extend(c.find_all(match))
        return out

    def by_class(self, cls: str) -> list[Node]:
        return self.find_all(lambda n: cls in n.attrs.get("class", "").split())

    def one(self, cls: str) -> Node:
        found = self.by_class(cls)
        assert len(found) == 1, f"{len(found)} elements of class {cls!r}"
        return found[0]


class _Tree(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self._stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self._stack[-1].children.append(node)
        if tag not in VOID:
            self._stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, 0, -1):
            if self._stack[i].tag == tag:
                del self._stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self._stack[-1].children.append(data)


def _parse(dom: str) -> Node:
    tree = _Tree()
    tree.feed(dom)
    return tree.root


def _later() -> list[dict[str, Any]]:
    """What /status says after the page was served: graph capture went on, a launch was added."""
    later = three_launches()
    later[2]["progress"]["graphs"]["done"] = 20
    later[2]["eta_seconds"] = 95.0  # the daemon's estimate, from the launch's history
    later.append({"name": "mixtral", "host": "gpu3", "since": None, "state": "pending", "phase": "pending"})
    return later


class _Daemon:
    """Answers the page with the three launches and every later /status with `_later()`."""

    def __init__(self) -> None:
        self.calls = 0

    def statuses(self) -> list[dict[str, Any]]:
        self.calls += 1
        return three_launches() if self.calls == 1 else copy.deepcopy(_later())


@asynccontextmanager
async def _serving(daemon: _Daemon) -> AsyncIterator[str]:
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            functools.partial(serve_http, ("127.0.0.1", 0), lambda: _typed(daemon.statuses()), DaemonStats)
        )
        yield f"http://127.0.0.1:{port}/"
        tg.cancel_scope.cancel()


async def _chromium(url: str, profile: Path, *args: str) -> bytes:
    browser = _browser()
    command = [
        browser,
        "--headless",
        "--no-sandbox",  # CI runs as root in a container
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1400,900",
        f"--virtual-time-budget={VIRTUAL_MS}",
        *args,
        url,
    ]
    with anyio.fail_after(DEADLINE):
        result = await anyio.run_process(command, check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout


async def test_page_draws_every_launch_and_refreshes_itself(tmp_path: Path) -> None:
    """In Chromium the page draws a row per launch (timeline, progress, facts, verdict) and redraws from
    /status by itself: the later progress and the added launch are in the DOM, log markup stays text."""
    daemon = _Daemon()
    async with _serving(daemon) as url:
        dom = (await _chromium(url, tmp_path / "profile", "--dump-dom")).decode()
    assert daemon.calls >= 2, "the page never fetched /status"
    doc = _parse(dom)
    rows = doc.by_class("launch")
    assert [(r.attrs["data-launch"], r.attrs["data-state"]) for r in rows] == [
        ("kimi-ep", "ready"),
        ("qwen-vllm", "crashed"),
        ("llama-70b", "capturing_graphs"),
        ("mixtral", "pending"),
    ]
    ready, crashed, capturing, pending = rows

    # the timeline: a segment per phase, sized by its duration, the duration written on it and in its tooltip
    segs = ready.by_class("seg")
    assert [s.attrs["data-phase"] for s in segs] == [
        "starting",
        "loading_weights",
        "allocating_kv_cache",
        "capturing_graphs",
        "ready",
    ]
    weights = segs[1]
    assert "flex-grow: 194" in weights.attrs["style"]
    assert "flex-grow: 12" in segs[0].attrs["style"]
    assert weights.text == "weights 3m14s"
    assert weights.attrs["title"].startswith("loading_weights: 3m14s")
    assert ready.one("verdict").text == "ready after 5m23s"
    facts = {f.attrs["data-fact"]: f.text for f in ready.by_class("fact")}
    assert facts["avail_mem_after_weights_gb"] == "free after weights 16.3 GB"
    assert facts["kv_cache_tokens"] == "KV tokens 812,345"

    # the crash: category, phase, ranks, summary, hint and the traceback, log markup shown as text
    verdict = crashed.one("verdict")
    assert "oom crashed during allocating_kv_cache on ranks TP0, TP1 (line 812)" in verdict.text
    assert "torch.OutOfMemoryError: CUDA out of memory" in verdict.one("summary").text
    assert verdict.one("hint").text == "hint: lower --gpu-memory-utilization or --max-model-len"
    (pre,) = verdict.find_all(lambda n: n.tag == "pre")
    assert EVIL in pre.text
    assert crashed.one("last").text == EVIL
    assert [s.attrs["data-phase"] for s in crashed.by_class("seg")][-1] == "crashed"
    assert not doc.find_all(lambda n: n.tag == "img")
    (title,) = doc.find_all(lambda n: n.tag == "title")
    assert "pwned" not in title.text
    assert title.text == "watchdog: 1 ready, 1 crashed, 1 capturing_graphs, 1 pending"

    # progress, as redrawn from the later /status
    bars = {b.attrs["data-kind"]: b for b in capturing.by_class("bar")}
    assert bars["weights"].one("num").text == "30/30 (100%)"
    assert bars["graphs"].one("num").text == "20/35 (57%)"
    assert bars["eta"].one("num").text == "~1m35s"
    assert capturing.by_class("seg")[-1].attrs["class"].split() == ["seg", "live"]
    assert pending.one("timeline").text == "no log yet"

    conn = doc.find_all(lambda n: n.attrs.get("id") == "conn")[0]
    assert conn.text.startswith("updated")


# Facts of every shape a verdict holds: seconds, units, counts, large and tiny numbers, text, yes/no, per GPU.
FACT_SAMPLES: dict[str, Any] = {
    "weights_seconds": 87.228781,
    "load_time_secs": 3725.0,
    "avail_mem_after_weights_gb": 16.345,
    "kv_cache_tokens": 812345,
    "kv_cache_gb": 20.0,
    "weights_mem_gb": 1234.5,
    "max_num_seqs": 256,
    "gpu_util_pct": 97.5,
    "kv_cache_usage_percent": 0.000012345,
    "dtype": "bfloat16",
    "tp": 8,
    "cuda_graph_bs": 1234567.5,
    "mem_free_mib": 81920,
    "enforce_eager": True,
    "prefix_caching": False,
    "gpu_mem_used_bytes": {"0": 1.5e10, "1": 0.5},
    "avail_mem_before_weights_gb": "n/a",
    "delta_gb": -3.5,
    "tokens_total": 1e15,
    "graph_mem_gb": 0,
    "capture_seconds": 3.1,
}


async def test_the_page_reads_every_fact_as_python_does(tmp_path: Path) -> None:
    """Every fact on a card reads in Chromium as the fact catalogue reads it in Python (`GLANCE`'s short label
    for a glance number, else `describe`'s label; `fact_text`'s value, durations and units included)."""
    template = three_launches()[0]
    names = list(FACT_SAMPLES)
    launches = [
        {**template, "name": f"facts{i}", "facts": {k: FACT_SAMPLES[k] for k in names[i : i + 8]}}
        for i in range(0, len(names), 8)
    ]
    page = tmp_path / "page.html"
    page.write_text(render_page(status_payload(_typed(launches)), nonce="n0nce"))
    dom = (await _chromium(page.as_uri(), tmp_path / "profile", "--dump-dom")).decode()
    shown = {f.attrs["data-fact"]: f.text for f in _parse(dom).by_class("fact")}
    short = dict(GLANCE)
    expected = {
        name: f"{short[name] if name in short and not isinstance(value, str) else describe(name).label} "
        f"{fact_text(name, value)}"
        for name, value in FACT_SAMPLES.items()
    }
    assert shown == expected
    assert shown["weights_seconds"] == "Weights time 1m27s"
    assert shown["kv_cache_tokens"] == "KV tokens 812,345"
    assert shown["kv_cache_gb"] == "KV cache 20 GB"


async def test_screenshot(tmp_path: Path) -> None:
    """Chromium renders the page to a 1400x900 screenshot (kept where WATCHDOG_SCREENSHOT says, to look at)."""
    shot = tmp_path / "statuspage.png"
    async with _serving(_Daemon()) as url:
        await _chromium(url, tmp_path / "profile", f"--screenshot={shot}")
    png = await anyio.Path(shot).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1400, 900)
    assert len(png) > 20_000  # not a blank page
    keep = os.environ.get("WATCHDOG_SCREENSHOT")
    if keep:
        await anyio.Path(keep).write_bytes(png)


async def test_an_alerts_link_marks_its_launch(tmp_path: Path) -> None:
    """An alert links to /#LAUNCH: the page gives that launch's row the id and marks it as the one linked."""
    async with _serving(_Daemon()) as url:
        dom = (await _chromium(url + "#qwen-vllm", tmp_path / "profile", "--dump-dom")).decode()
    rows = {r.attrs["data-launch"]: r for r in _parse(dom).by_class("launch")}
    assert rows["qwen-vllm"].attrs["id"] == "qwen-vllm"
    assert "linked" in rows["qwen-vllm"].attrs["class"].split()
    assert "linked" not in rows["kimi-ep"].attrs["class"].split()


class _Processes(_Daemon):
    """The crash printed by a process, not a rank: `EngineCore pid=911`."""

    def statuses(self) -> list[dict[str, Any]]:
        out = three_launches()
        out[1]["error"]["ranks"] = ["EngineCore pid=911"]
        return out


async def test_a_crash_printed_by_a_process_says_in_not_on_ranks(tmp_path: Path) -> None:
    """Ranks read "on ranks TP0, TP1"; a process that printed the crash reads "in EngineCore pid=911"."""
    async with _serving(_Processes()) as url:
        dom = (await _chromium(url, tmp_path / "profile", "--dump-dom")).decode()
    (crashed,) = [r for r in _parse(dom).by_class("launch") if r.attrs["data-state"] == "crashed"]
    text = crashed.one("verdict").text
    assert "crashed during allocating_kv_cache in EngineCore pid=911" in text
    assert "on ranks" not in text


# persistent marks: a title set by injected code would be overwritten by the page's next redraw
HOSTILE = (
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
    "</script><script>document.body.setAttribute('data-pwned','script')</script>"
)


def _unreachable_and_hostile() -> list[dict[str, Any]]:
    """kimi-ep was ready when gpu1 stopped answering; qwen-vllm's crash line and root cause carry markup."""
    out = three_launches()
    out[0]["unreachable"] = {
        "since": "2025-07-02T07:40:00+00:00",
        "error": "cannot connect to root@gpu1 port 22: Connection refused " + HOSTILE,
        "alerted": True,
    }
    out[0]["note"] = "follower failed: cannot connect to root@gpu1 port 22; trying again in 5s"
    error = out[1]["error"]
    error["summary"] = "RuntimeError: " + HOSTILE
    error["traceback"] = [*error["traceback"][:-1], "RuntimeError: " + HOSTILE]
    out[1]["last_line"] = HOSTILE
    return out


class _Unreachable(_Daemon):
    def statuses(self) -> list[dict[str, Any]]:
        self.calls += 1
        return _unreachable_and_hostile()


async def test_an_unreachable_host_is_said_plainly_on_its_card(tmp_path: Path) -> None:
    """A launch whose host stops answering is no longer a green "ready" card: it is marked unreachable (its
    own colour, a badge, in the header's summary too), the reason is said, and its last state is shown as
    only the last one known."""
    async with _serving(_Unreachable()) as url:
        dom = (await _chromium(url, tmp_path / "profile", "--dump-dom")).decode()
    doc = _parse(dom)
    rows = {r.attrs["data-launch"]: r for r in doc.by_class("launch")}
    lost, crashed = rows["kimi-ep"], rows["qwen-vllm"]
    assert "unreachable" in lost.attrs["class"].split()
    assert "--unreachable" in lost.attrs["style"]
    assert "unreachable" not in crashed.attrs["class"].split()
    head = lost.one("head")
    badges = [b.text for b in head.by_class("badge")]
    assert badges == ["\u26a0 unreachable", "ready"]
    assert "stale" in head.by_class("badge")[1].attrs["class"].split()
    reach = lost.one("reach")
    assert reach.one("title").text.startswith("cannot reach gpu1 since ")
    assert "(alert sent)" in reach.one("title").text
    assert reach.one("reason").text == "cannot connect to root@gpu1 port 22: Connection refused " + HOSTILE
    verdict = lost.one("verdict")
    assert "stale" in verdict.attrs["class"].split()
    assert verdict.text == "last known: ready after 5m23s"
    assert crashed.by_class("reach") == []
    (summary,) = doc.find_all(lambda n: n.attrs.get("id") == "summary")
    assert summary.by_class("badge")[0].text == "\u26a0 1 unreachable"


@pytest.mark.parametrize("served", [True, False], ids=["served-with-csp", "file-without-csp"])
async def test_markup_in_a_crash_line_is_inert(tmp_path: Path, served: bool) -> None:
    """`<img onerror>` and `</script><script>` in a crash line, its root cause, the last line and an
    unreachable reason stay text in Chromium: no element is injected and no script runs, by the page's own
    escaping alone (loaded from a file, no Content-Security-Policy) as well as when served."""
    if served:
        async with _serving(_Unreachable()) as url:
            dom = (await _chromium(url, tmp_path / "profile", "--dump-dom")).decode()
    else:
        page = tmp_path / "page.html"
        page.write_text(render_page(status_payload(_typed(_unreachable_and_hostile())), nonce="n0nce"))
        dom = (await _chromium(page.as_uri(), tmp_path / "profile", "--dump-dom")).decode()
    doc = _parse(dom)
    (body,) = doc.find_all(lambda n: n.tag == "body")
    assert "data-pwned" not in body.attrs
    assert not doc.find_all(lambda n: n.tag == "img")
    assert len(doc.find_all(lambda n: n.tag == "script")) == 2  # the page's data and its own script
    crashed = next(r for r in doc.by_class("launch") if r.attrs["data-launch"] == "qwen-vllm")
    assert crashed.one("summary").text == "RuntimeError: " + HOSTILE
    (pre,) = crashed.find_all(lambda n: n.tag == "pre")
    assert pre.text.endswith("RuntimeError: " + HOSTILE)
    assert crashed.one("last").text == HOSTILE


async def test_a_real_daemon_whose_host_refuses_shows_it_unreachable(tmp_path: Path) -> None:
    """A running daemon with a launch on a host that refuses connections: its card in Chromium is marked
    unreachable with the reason, and /status carries `unreachable` (since, error, alerted)."""
    from watchdog.daemon.supervisor import ConsoleAlerts, Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.follower import LaunchSpec  # noqa: PLC0415
    from watchdog.follow.sources import SSHOptions, parse_target  # noqa: PLC0415

    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    plan = LaunchPlan(
        LaunchSpec(name="far", target=parse_target("ssh://nobody@127.0.0.1:1/srv/server.log")),
        host="gpu9",
        ssh=SSHOptions(known_hosts=str(known_hosts), config=None, use_agent=False, connect_timeout=2.0),
        alerts=(ConsoleAlerts(out=io.StringIO()),),
    )

    async def serve(daemon: Daemon, *, task_status: Any) -> None:
        await serve_http(
            ("127.0.0.1", 0), lambda: _typed(daemon.statuses()), daemon.stats, task_status=task_status
        )

    daemon = Daemon({"far": plan}, serve=serve, handle_signals=False, unreachable_after=0.2)
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(DEADLINE):
            await tg.start(daemon.run)
            (status,) = await daemon.wait_until(lambda s: bool(s[0].get("unreachable", {}).get("alerted")))
            dom = (
                await _chromium(f"http://127.0.0.1:{daemon.port}/", tmp_path / "profile", "--dump-dom")
            ).decode()
        tg.cancel_scope.cancel()
    assert status["unreachable"]["since"].endswith("Z")
    assert status["unreachable"]["error"]
    (row,) = _parse(dom).by_class("launch")
    assert "unreachable" in row.attrs["class"].split()
    assert row.one("reach").one("title").text.startswith("cannot reach gpu9 since ")
    assert row.one("reach").one("reason").text == status["unreachable"]["error"]


class _Replaced(_Daemon):
    """qwen-vllm followed for two hours; its log was replaced by a new launch five minutes ago."""

    def statuses(self) -> list[dict[str, Any]]:
        self.calls += 1
        from datetime import UTC, datetime, timedelta  # noqa: PLC0415

        now = datetime.now(UTC)
        out = three_launches()
        out[1].update(
            incarnation=2,
            incarnations=2,
            since=(now - timedelta(hours=2)).isoformat(),
            incarnation_since=(now - timedelta(minutes=5)).isoformat(),
        )
        return out


async def test_incarnation_began_is_the_current_incarnation_s_start(tmp_path: Path) -> None:
    """After a replaced log the card's "incarnation began" is the new incarnation's start
    (`incarnation_since`), not when the daemon began following the launch (`since`, two hours ago)."""
    async with _serving(_Replaced()) as url:
        dom = (await _chromium(url, tmp_path / "profile", "--dump-dom")).decode()
    rows = {r.attrs["data-launch"]: r for r in _parse(dom).by_class("launch")}
    live = rows["qwen-vllm"].one("elapsed").text
    assert live.startswith("incarnation began 5m0"), live
    assert "2h" not in live


async def test_a_log_that_never_comes_is_said_by_name_on_its_card(tmp_path: Path) -> None:
    """A running daemon whose launch's log does not exist: past stall_after its card in Chromium names the
    file ("no log: PATH does not exist"), with no stalled segment; once the file appears it is followed."""
    from watchdog.daemon.supervisor import ConsoleAlerts, Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.follower import LaunchSpec  # noqa: PLC0415
    from watchdog.follow.sources import parse_target  # noqa: PLC0415

    never = tmp_path / "sever.log"  # a typo for server.log
    plan = LaunchPlan(
        LaunchSpec(name="typo", target=parse_target(str(never)), stall_after=0.5),
        alerts=(ConsoleAlerts(out=io.StringIO()),),
    )

    async def serve(daemon: Daemon, *, task_status: Any) -> None:
        await serve_http(
            ("127.0.0.1", 0), lambda: _typed(daemon.statuses()), daemon.stats, task_status=task_status
        )

    daemon = Daemon({"typo": plan}, serve=serve, handle_signals=False)
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(DEADLINE):
            await tg.start(daemon.run)
            (status,) = await daemon.wait_until(lambda s: bool(s[0].get("missing_log", {}).get("overdue")))
            url = f"http://127.0.0.1:{daemon.port}/"
            missing = (await _chromium(url, tmp_path / "profile", "--dump-dom")).decode()
            await anyio.Path(never).write_bytes(
                (
                    Path(__file__).parent / "fixtures/corpus/sglang/ready-llama31-8b-single-gpu-docs-v041.log"
                ).read_bytes()
            )
            await daemon.wait_until(lambda s: s[0]["state"] == "ready")
            found = (await _chromium(url, tmp_path / "profile2", "--dump-dom")).decode()
        tg.cancel_scope.cancel()
    assert status["state"] == "pending"
    (row,) = _parse(missing).by_class("launch")
    assert row.attrs["data-state"] == "pending"
    verdict = row.one("verdict")
    assert verdict.one("title").text.startswith(f"no log: {never} does not exist (waited ")
    assert verdict.one("hint").text == "a typo in the log's path, or a launch that never started"
    assert row.one("timeline").text == "no log yet"
    assert "stalled" not in row.text
    (row,) = _parse(found).by_class("launch")
    assert row.attrs["data-state"] == "ready"
    assert "does not exist" not in row.text


async def test_a_multi_node_launch_shows_each_node_and_the_node_that_failed(tmp_path: Path) -> None:
    """A two-node launch's card lists each node with its state, host and progress or error, and its crash
    names the node that failed first, with the other node's part."""
    from watchdog.follow.replay import replay_nodes  # noqa: PLC0415

    pair = Path(__file__).parent / "fixtures" / "nodes" / "sglang-2node"
    verdict = replay_nodes([pair / "node0.log", pair / "node1.log"])
    page = tmp_path / "page.html"
    page.write_text(render_page(status_payload([Status(verdict, name="ds", host="gpu0")]), nonce="n0nce"))
    dom = (await _chromium(page.as_uri(), tmp_path / "profile", "--dump-dom")).decode()
    (card,) = _parse(dom).by_class("launch")
    names = [n.text for n in card.by_class("node-name")]
    assert names == ["node0 (serves)", "node1"]
    nodes = card.one("nodes").text
    assert "crashed in allocating_kv_cache" in nodes
    assert "Error 802" in nodes
    verdict_text = card.one("verdict").text
    assert "crashed during starting on node node1 on ranks TP3" in verdict_text
    assert "node node0: [Rank 6] Watchdog caught collective operation timeout" in verdict_text
