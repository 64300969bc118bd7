"""The status page: one self-contained HTML document (inline CSS and JS, no external assets; its log text is
untrusted: docs/architecture.md, "The status page")."""

from __future__ import annotations

import json
from typing import Any

from watchdog.core.facts import GLANCE
from watchdog.vocabulary import PROBLEM_STATES, PROGRESS_STATES

REFRESH_MS = 2000

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>watchdog: launches</title>
<link rel="icon" href="data:,">
<style nonce="@NONCE@">
:root {
  --bg: #f6f7f9; --card: #fff; --ink: #1f2937; --muted: #6b7280; --line: #e5e7eb;
  --pending: #cbd5e1; --starting: #94a3b8; --loading_weights: #3b82f6; --allocating_kv_cache: #8b5cf6;
  --capturing_graphs: #f59e0b; --ready: #16a34a; --crashed: #dc2626; --stalled: #ea580c; --stopped: #64748b;
  --unreachable: #1e293b;
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
header { display: flex; flex-wrap: wrap; gap: 8px 20px; align-items: center; padding: 12px 20px;
  background: #111827; color: #f9fafb; position: sticky; top: 0; z-index: 1; }
header h1 { font-size: 17px; margin: 0; letter-spacing: .02em; }
#summary { display: flex; gap: 6px; flex-wrap: wrap; }
#conn { margin-left: auto; font-size: 12px; color: #9ca3af; }
#conn.lost { color: #fca5a5; font-weight: 600; }
.legend { display: flex; gap: 12px; flex-wrap: wrap; padding: 8px 20px 0; font-size: 12px; color: var(--muted); }
.legend span::before { content: ""; display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 5px; vertical-align: -1px; background: var(--c); }
main { padding: 10px 20px 30px; display: flex; flex-direction: column; gap: 10px; }
.empty { color: var(--muted); padding: 30px; text-align: center; }
.launch.linked { outline: 3px solid var(--c, #999); outline-offset: 2px; }
.launch { background: var(--card); border: 1px solid var(--line); border-left: 5px solid var(--c, #999);
  border-radius: 8px; padding: 10px 14px 12px; display: flex; flex-direction: column; gap: 8px; }
.head { display: flex; align-items: baseline; gap: 10px; flex-wrap: wrap; }
.name { font-weight: 700; font-size: 15px; word-break: break-all; }
.meta { color: var(--muted); font-size: 12.5px; }
.elapsed { margin-left: auto; color: var(--muted); font-size: 12.5px; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600;
  color: #fff; background: var(--c, #6b7280); white-space: nowrap; }
.badge.pale, .seg.pale { color: #334155; }
.timeline { display: flex; height: 24px; border-radius: 5px; overflow: hidden; background: #eef0f3; }
.seg { flex: 1 1 0; min-width: 8px; height: 100%; background: var(--c); color: #fff; font-size: 11.5px;
  line-height: 24px; padding: 0 6px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  border-right: 1px solid rgba(255,255,255,.7); }
.seg.live { background-image: repeating-linear-gradient(-45deg, rgba(255,255,255,.18) 0 8px, transparent 8px 16px); }
.seg.stalled { background-image: repeating-linear-gradient(-45deg, rgba(0,0,0,.18) 0 5px, transparent 5px 10px); }
.seg.cap { flex: 0 0 auto; min-width: 0; font-weight: 600; }
.bars { display: flex; gap: 8px 24px; flex-wrap: wrap; }
.bar { display: flex; align-items: center; gap: 8px; font-size: 12.5px; }
.bar .track { width: 220px; height: 10px; border-radius: 5px; background: #e5e7eb; overflow: hidden; }
.bar .fill { height: 100%; background: var(--c, #3b82f6); }
.bar .num { font-variant-numeric: tabular-nums; color: var(--muted); }
.facts { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12.5px; }
.fact b { font-weight: 600; }
.fact span { color: var(--muted); }
.verdict { border-radius: 6px; padding: 8px 10px; font-size: 13px; background: #f3f4f6; }
.verdict.crashed { background: #fef2f2; border: 1px solid #fecaca; }
.verdict.stalled, .verdict.missing.overdue { background: #fff7ed; border: 1px solid #fed7aa; }
.verdict.ready { background: #f0fdf4; border: 1px solid #bbf7d0; }
.verdict .title, .reach .title { font-weight: 600; }
.verdict .summary, .reach .reason { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px;
  white-space: pre-wrap; word-break: break-word; margin-top: 3px; }
.verdict .hint { margin-top: 4px; }
.verdict .hint b { color: #92400e; }
details { margin-top: 4px; }
summary { cursor: pointer; color: var(--muted); font-size: 12.5px; }
pre { margin: 4px 0 0; padding: 8px; background: #111827; color: #e5e7eb; border-radius: 5px;
  font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; overflow: auto; max-height: 320px;
  white-space: pre; }
.last { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; color: var(--muted);
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.note { font-size: 12.5px; color: #92400e; }
/* a host that cannot be reached: what the card says is only the last thing known */
.launch.unreachable { border-left-style: dashed; background: #f8fafc; }
header .badge.unreachable { box-shadow: 0 0 0 1px #f8fafc; }
.badge.stale { opacity: .5; }
.reach { border-radius: 6px; padding: 8px 10px; font-size: 13px; background: var(--unreachable); color: #f8fafc; }
.reach .reason { color: #e2e8f0; }
.verdict.stale { background: #f3f4f6; border: 1px solid #e5e7eb; color: var(--muted); }
</style>
</head>
<body>
<header>
  <h1>watchdog</h1>
  <div id="summary"></div>
  <div id="conn">loading</div>
</header>
<div class="legend" id="legend"></div>
<main id="launches"><noscript><p class="empty">This page draws itself with JavaScript; the same data is
<a href="status">/status</a> (JSON) and <a href="metrics">/metrics</a>.</p></noscript></main>
<script type="application/json" id="initial">@DATA@</script>
<script nonce="@NONCE@">
(() => {
  "use strict";
  const REFRESH_MS = @REFRESH@;
  const PHASES = @PHASES@;
  const PROBLEMS = @PROBLEMS@;
  const CAPS = { crashed: "\\u2715 crashed", stopped: "\\u25a0 stopped", ready: "\\u2713 ready" };
  // the memory facts worth a glance: [name, short label, unit] (`watchdog.core.facts.GLANCE`)
  const FACTS = @FACTS@.map(([key, label, unit]) => [key, label, v => num(v, 2) + (unit ? " " + unit : "")]);
  const MAX_FACTS = 8;
  // what a timeline segment says (its tooltip has the state's full name)
  const SHORT = { starting: "start", loading_weights: "weights", allocating_kv_cache: "KV cache", capturing_graphs: "graphs" };
  const list = document.getElementById("launches");
  const rows = new Map();

  // an element with its class, its text and its colour (the CSS variable --c its rules draw with)
  function el(tag, cls, text, c) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (c) e.style.setProperty("--c", c);
    return e;
  }
  function pale(state) { return state === "pending" ? " pale" : ""; }
  function colour(state) { return "var(--" + (/^[a-z_]+$/.test(state) ? state : "pending") + ")"; }
  function num(v, digits) {
    const n = Number(v);
    if (!Number.isFinite(n)) return String(v);
    return n.toLocaleString("en-US", { maximumFractionDigits: digits });
  }
  function dur(s) {
    if (typeof s !== "number" || !Number.isFinite(s)) return "";
    if (s < 10) return s.toFixed(1) + "s";
    s = Math.round(s);
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    if (d) return d + "d" + String(h).padStart(2, "0") + "h";
    if (h) return h + "h" + String(m).padStart(2, "0") + "m";
    if (m) return m + "m" + String(r).padStart(2, "0") + "s";
    return r + "s";
  }
  function ago(iso) {
    const t = Date.parse(iso || "");
    return Number.isFinite(t) ? dur(Math.max(0, (Date.now() - t) / 1000)) + " ago" : "";
  }

  // one segment per timeline entry: log-time durations where the log has timestamps, else the follower's clock
  function segments(st) {
    if (st.missing_log) return [];  // no log, so no launch: not a phase that stalled
    const tl = st.timeline || [], en = st.entered || [], elapsed = st.elapsed_seconds;
    return tl.map((t, i) => {
      let d = typeof t.duration_seconds === "number" ? t.duration_seconds : null;
      if (d === null && i < en.length) {
        const end = i + 1 < en.length ? en[i + 1] : elapsed;
        if (typeof end === "number") d = Math.max(0, end - en[i]);
      }
      return { state: String(t.state), seconds: d, last: i === tl.length - 1, line: t.line, at: t.at, reason: t.reason };
    });
  }

  function drawHead(st) {
    const box = el("div", "head");
    const badge = el("span", "badge" + pale(st.state) + (st.unreachable ? " stale" : ""), st.state, colour(st.state));
    if (st.unreachable) {
      badge.title = "the last state known before the host stopped answering";
      box.append(el("span", "badge unreachable", "\u26a0 unreachable", "var(--unreachable)"));
    }
    box.append(badge, el("span", "name", st.name));
    const meta = [st.host ? "on " + st.host : "local", st.engine || "engine not detected yet"];
    if (st.phase && st.phase !== st.state) meta.push("phase " + st.phase);
    if (st.incarnations > 1) meta.push("incarnation " + st.incarnation + " of " + st.incarnations);
    const m = el("span", "meta", meta.join(" \\u00b7 "));
    if (st.target) m.title = st.target;
    box.append(m, el("span", "elapsed"));
    return box;
  }

  // the one text that changes every refresh, set in place (redrawing the row would drop a hovered tooltip)
  function liveText(st) {
    const parts = [];
    // when the current incarnation began (a replaced log's new launch), not when the daemon began following it
    if (st.incarnation_since) parts.push("incarnation began " + ago(st.incarnation_since));
    if (typeof st.elapsed_seconds === "number") parts.push("followed " + dur(st.elapsed_seconds));
    return parts.join(" \\u00b7 ");
  }

  function drawTimeline(st) {
    const bar = el("div", "timeline");
    bar.setAttribute("role", "img");
    const parts = [];
    for (const s of segments(st)) {
      const cap = s.last && CAPS[s.state];
      const seg = el("div", "seg" + (cap ? " cap" : "") + (s.state === "stalled" ? " stalled" : "") + (s.last && !cap ? " live" : ""),
                     null, colour(s.state));
      seg.dataset.phase = s.state;
      const d = dur(s.seconds);
      if (!cap) seg.style.flexGrow = String(Math.max(s.seconds || 0, 0.001));
      seg.textContent = cap ? CAPS[s.state] : (SHORT[s.state] || s.state) + (d ? " " + d : "");
      const tip = [cap ? s.state : s.state + (d ? ": " + d : "") + (s.last ? " so far" : "")];
      if (s.at) tip.push("at " + s.at);
      if (s.line) tip.push("line " + s.line);
      if (s.reason) tip.push(s.reason);
      seg.title = tip.join("\\n");
      parts.push(s.state + (d ? " " + d : ""));
      bar.append(seg);
    }
    if (!parts.length) bar.append(el("div", "seg cap pale", "no log yet", colour("pending")));
    bar.setAttribute("aria-label", parts.join(", ") || "no log yet");
    return bar;
  }

  function drawProgress(st) {
    const box = el("div", "bars");
    for (const [kind, p] of Object.entries(st.progress || {})) {
      if (!p || !(p.total > 0)) continue;
      const ratio = Math.min(1, Math.max(0, p.done / p.total));
      const row = el("div", "bar");
      row.dataset.kind = kind;
      const track = el("div", "track"), fill = el("div", "fill");
      fill.style.width = (ratio * 100).toFixed(1) + "%";
      fill.style.setProperty("--c", ratio >= 1 ? "var(--ready)" : "var(--loading_weights)");
      track.append(fill);
      track.setAttribute("role", "progressbar");
      track.setAttribute("aria-valuenow", String(Math.round(ratio * 100)));
      row.append(el("span", "", kind), track, el("span", "num", p.done + "/" + p.total + " (" + Math.round(ratio * 100) + "%)"));
      box.append(row);
    }
    if (typeof st.eta_seconds === "number") {
      const eta = el("div", "bar eta");
      eta.dataset.kind = "eta";
      eta.append(el("span", "", "ready in"), el("span", "num", "~" + dur(st.eta_seconds)));
      box.append(eta);
    }
    return box;
  }

  function drawFacts(st) {
    const box = el("div", "facts"), facts = Object.assign({}, st.facts || {}), shown = [];
    for (const [key, label, fmt] of FACTS) {
      if (key in facts) { shown.push([label, fmt(facts[key]), key]); delete facts[key]; }
    }
    for (const [key, v] of Object.entries(facts)) shown.push([key, typeof v === "object" ? JSON.stringify(v) : String(v), key]);
    for (const [label, value, key] of shown.slice(0, MAX_FACTS)) {
      const f = el("span", "fact");
      f.dataset.fact = key;
      f.append(el("span", "", label + " "), el("b", "", value));
      box.append(f);
    }
    if (shown.length > MAX_FACTS) {
      const more = el("span", "fact", "+" + (shown.length - MAX_FACTS) + " more");
      more.title = shown.slice(MAX_FACTS).map(x => x[0] + " = " + x[1]).join("\\n");
      box.append(more);
    }
    return box;
  }

  // the host cannot be reached: said first and plainly, with the reason, above what was last known
  function drawReach(st) {
    const u = st.unreachable;
    if (!u) return null;
    const box = el("div", "reach");
    const since = Date.parse(u.since || "");
    const when = Number.isFinite(since) ? " since " + new Date(since).toLocaleTimeString("en-GB") : "";
    box.append(el("div", "title", "cannot reach " + (st.host || "the log") + when + (u.alerted ? " (alert sent)" : "") +
                  ": what follows is the last state known"),
               el("div", "reason", u.error || "no reason given"));
    return box;
  }

  // a log that does not exist (a typo in its path, a launch never started): said by name, not as a hang
  function drawMissing(st) {
    const m = st.missing_log, waited = dur(m.seconds);
    const box = el("div", "verdict missing" + (m.overdue ? " overdue" : "") + (st.unreachable ? " stale" : ""));
    box.append(el("div", "title", "no log: " + m.path + " does not exist" + (waited ? " (waited " + waited + ")" : "")),
               el("div", "hint", m.overdue ? "a typo in the log's path, or a launch that never started"
                                           : "waiting for it to appear"));
    return box;
  }

  function drawVerdict(st) {
    if (st.missing_log && st.missing_log.path) return drawMissing(st);
    const box = el("div", "verdict " + st.state + (st.unreachable ? " stale" : ""));
    const err = st.error;
    if (st.state === "crashed" && err) {
      const title = el("div", "title");
      const cat = el("span", "badge", err.category || "other", "var(--crashed)");
      // ranks (TP3, DP0 EP1, rank2) or, as the alerts say it, the processes that printed it (EngineCore pid=911)
      const rankish = (r) => /^(?:(?:[A-Z]{2,4}\\d+ ?)+|rank\\d+)$/.test(r);
      const ranks = err.ranks && err.ranks.length
        ? (err.ranks.every(rankish) ? " on ranks " : " in ") + err.ranks.join(", ") : "";
      title.append(cat, document.createTextNode(" crashed during " + st.phase + ranks + (err.line ? " (line " + err.line + ")" : "")));
      box.append(title, el("div", "summary", err.summary || err.exception || ""));
      if (err.hint) {
        const hint = el("div", "hint");
        hint.append(el("b", "", "hint: "), document.createTextNode(err.hint));
        box.append(hint);
      }
      const lines = (err.traceback && err.traceback.length ? err.traceback : err.context) || [];
      if (lines.length) {
        const det = el("details");
        det.append(el("summary", "", (err.traceback && err.traceback.length ? "traceback" : "last lines") + " (" + lines.length + " lines)"),
                   el("pre", "", lines.join("\\n")));
        box.append(det);
      }
    } else if (st.state === "ready") {
      box.append(el("div", "title", (st.unreachable ? "last known: ready" : "ready") + (typeof st.time_to_ready_seconds === "number" ? " after " + dur(st.time_to_ready_seconds) : "")));
    } else if (st.state === "stalled") {
      const tl = st.timeline || [], last = tl.length ? tl[tl.length - 1] : {};
      box.append(el("div", "title", "stalled during " + st.phase + ": " + (last.reason || "no progress")));
    } else if (st.state === "stopped") {
      box.append(el("div", "title", "stopped (phase " + st.phase + ")"));
    } else {
      return null;
    }
    return box;
  }

  function drawLast(st) {
    const note = st.missing_log ? "" : st.note;  // a missing log's note: the verdict says it
    if (!st.last_line && !note) return null;
    const box = el("div");
    if (note) box.append(el("div", "note", note));
    if (st.last_line) { const l = el("div", "last", st.last_line); l.title = st.last_line; box.append(l); }
    return box;
  }

  const SECTIONS = [
    ["head", drawHead, st => [st.state, st.name, st.host, st.engine, st.phase, st.incarnation, st.incarnations, st.target, !!st.unreachable]],
    ["reach", drawReach, st => [st.unreachable, st.host]],
    ["timeline", drawTimeline, st => [!!st.missing_log, st.timeline, st.entered, CAPS[st.state] ? 0 : Math.round(st.elapsed_seconds || 0)]],
    ["progress", drawProgress, st => [st.progress, st.eta_seconds]],
    ["facts", drawFacts, st => [st.facts]],
    ["verdict", drawVerdict, st => [st.state, st.phase, st.error, st.time_to_ready_seconds, !!st.unreachable, st.missing_log]],
    ["last", drawLast, st => [st.last_line, st.note, !!st.missing_log]],
  ];

  function update(row, st) {
    row.el.dataset.state = st.state;
    row.el.classList.toggle("unreachable", !!st.unreachable);
    row.el.style.setProperty("--c", st.unreachable ? "var(--unreachable)" : colour(st.state));
    for (const [name, draw, key] of SECTIONS) {
      const sig = JSON.stringify(key(st));
      if (row.sig[name] === sig) continue;
      row.sig[name] = sig;
      const old = row.parts[name];
      const openDetails = old ? Array.from(old.querySelectorAll("details")).map(d => d.open) : [];
      const fresh = draw(st) || el("div");
      fresh.dataset.section = name;
      if (!fresh.childNodes.length && name !== "timeline") fresh.hidden = true;
      fresh.querySelectorAll("details").forEach((d, i) => { if (openDetails[i]) d.open = true; });
      if (old) old.replaceWith(fresh); else row.el.append(fresh);
      row.parts[name] = fresh;
    }
    const live = row.parts.head.querySelector(".elapsed");
    if (live) live.textContent = liveText(st);
  }

  function render(statuses) {
    const seen = new Set();
    statuses.forEach((st, i) => {
      const key = String(st.name) + "\\u0000" + String(st.host || "");
      seen.add(key);
      let row = rows.get(key);
      if (!row) {
        row = { el: el("section", "launch"), sig: {}, parts: {} };
        row.el.dataset.launch = String(st.name);
        row.el.id = String(st.name);  // alerts link to /#LAUNCH
        rows.set(key, row);
      }
      update(row, st);
      if (list.children[i] !== row.el) list.insertBefore(row.el, list.children[i] || null);
    });
    for (const [key, row] of rows) if (!seen.has(key)) { row.el.remove(); rows.delete(key); }
    let empty = document.getElementById("empty");
    if (!statuses.length && !empty) { empty = el("p", "empty", "No launches configured."); empty.id = "empty"; list.append(empty); }
    if (statuses.length && empty) empty.remove();
    const counts = {};
    for (const st of statuses) counts[st.state] = (counts[st.state] || 0) + 1;
    const unreachable = statuses.filter(st => st.unreachable).length;
    const summary = document.getElementById("summary");
    const badges = Object.entries(counts).sort().map(([state, n]) => el("span", "badge" + pale(state), n + " " + state, colour(state)));
    if (unreachable) badges.unshift(el("span", "badge unreachable", "\u26a0 " + unreachable + " unreachable", "var(--unreachable)"));
    summary.replaceChildren(...badges);
    document.title = "watchdog: " + (unreachable ? unreachable + " unreachable; " : "") +
      (Object.entries(counts).map(([s, n]) => n + " " + s).join(", ") || "no launches");
    if (!scrolled && location.hash.length > 1) {  // an alert's link: show its launch once it is drawn
      const target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
      if (target) { target.scrollIntoView(); target.classList.add("linked"); scrolled = true; }
    }
  }
  let scrolled = false;

  function connection(ok, text) {
    const c = document.getElementById("conn");
    c.className = ok ? "" : "lost";
    c.textContent = text;
  }

  async function refresh() {
    try {
      const response = await fetch("status", { cache: "no-store", credentials: "same-origin" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      render(await response.json());
      connection(true, "updated " + new Date().toLocaleTimeString("en-GB"));
    } catch (e) {
      connection(false, "cannot reach the daemon (" + e.message + "): retrying");
    } finally {
      setTimeout(refresh, REFRESH_MS);
    }
  }

  document.getElementById("legend").append(...[...PHASES, ...PROBLEMS].map(p => {
    const s = el("span", "", SHORT[p] || p, colour(p));
    s.title = p;
    return s;
  }));
  list.replaceChildren();
  render(JSON.parse(document.getElementById("initial").textContent));
  connection(true, "updated " + new Date().toLocaleTimeString("en-GB"));
  setTimeout(refresh, REFRESH_MS);
})();
</script>
</body>
</html>
"""


_SCRIPT_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def _script_json(payload: Any) -> str:
    """JSON that is inert inside a <script> element: `<`, `>`, `&` and the JS line separators escaped."""
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str).translate(_SCRIPT_ESCAPES)


_PHASES_JSON = json.dumps([s.value for s in PROGRESS_STATES])
_PROBLEMS_JSON = json.dumps([s.value for s in PROBLEM_STATES])
_FACTS_JSON = json.dumps(GLANCE)


def render_page(statuses: list[dict[str, Any]], *, nonce: str) -> str:
    """The status page with `statuses` (the /status list) drawn at once; `nonce` marks its own script and
    style for the Content-Security-Policy (URL-safe characters only)."""
    if not nonce.replace("-", "").replace("_", "").isalnum():
        raise ValueError("the nonce must be URL-safe base64")
    return (
        _PAGE.replace("@NONCE@", nonce)
        .replace("@REFRESH@", str(REFRESH_MS))
        .replace("@PHASES@", _PHASES_JSON)
        .replace("@FACTS@", _FACTS_JSON)
        .replace("@PROBLEMS@", _PROBLEMS_JSON)
        .replace("@DATA@", _script_json(statuses))
    )
