"""A picture of a scenario as one self-contained HTML page.

`render_page` draws a `Picture` (and, for a replayed test whose log check found a
difference, a `Drift` side by side): inline CSS, no script, no font, image or link that
leaves the page, so it opens from disk with no network
([docs/guide/picture.md](../guide/picture.md)). Every text is shown, never obeyed: control
characters as visible symbols (`visible`), then HTML-escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import orjson

from .._check.log_check import Drift
from .._format.text import visible
from .picture import Call, Message, Picture, Request, SessionPicture, ToolCall

__all__ = ["PageStatus", "render_page"]

_CSS: Final = """
:root{--fg:#1f2328;--mute:#59636e;--line:#d1d9e0;--bg:#fff;--soft:#f6f8fa;--acc:#0969da;
--spawn:#1a7f37;--fork:#8250df;--bad:#cf222e;--warn:#9a6700}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:var(--bg)}
header,main{max-width:1100px;margin:0 auto;padding:0 16px}
header{padding-top:16px}
h1{font-size:20px;margin:0 0 4px}
h2{font-size:16px;margin:20px 0 8px}
h3{font-size:14px;margin:0 0 6px}
h4{font-size:12px;margin:8px 0 4px;text-transform:uppercase;color:var(--mute)}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;word-break:break-word;margin:0;padding:6px 8px;background:var(--soft);
border-radius:4px}
a{color:var(--acc)}
.meta{color:var(--mute);margin:2px 0}
.status{padding:6px 10px;border-radius:4px;background:var(--soft);display:inline-block}
.status.failed{background:#ffebe9;color:var(--bad)}
.tree ul{list-style:none;margin:0;padding-left:18px;border-left:1px dashed var(--line)}
.tree>ul{padding-left:0;border:0}
.tree li{margin:3px 0}
.role{display:inline-block;font-size:11px;padding:0 6px;border-radius:8px;color:#fff;
background:var(--acc);margin-right:4px}
.role-spawn{background:var(--spawn)}.role-fork{background:var(--fork)}
.session{border:1px solid var(--line);border-radius:6px;padding:10px 14px;margin:14px 0}
.session:target,.call:target{outline:2px solid var(--acc)}
.seed{border-left:3px solid var(--fork);padding:4px 10px;margin:8px 0;background:#fbf8ff}
.call{border-top:1px solid var(--line);padding:10px 0}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:14px}
.messages{list-style:none;padding:0;margin:0}.messages li{margin:0 0 4px}
.who{display:block;font-size:11px;color:var(--mute);margin-top:4px}
pre.reasoning{font-style:italic;color:var(--mute)}
.finish{font-size:11px;padding:0 6px;border-radius:8px;background:var(--soft);
border:1px solid var(--line)}
.finish-error,.finish-aborted{color:var(--bad);border-color:var(--bad)}
.tools{padding-left:18px;margin:4px 0}
.usage{color:var(--mute);font-size:12px}
.timeline .row{display:grid;grid-template-columns:220px 1fr;gap:8px;align-items:center;margin:3px 0}
.track{position:relative;height:18px;background:var(--soft);border-radius:3px}
.span{position:absolute;top:7px;height:4px;background:var(--line)}
.bar{position:absolute;top:2px;height:14px;min-width:3px;border-radius:2px;background:var(--acc)}
.bar.fork{background:var(--fork)}.bar.spawn{background:var(--spawn)}
.drift{border:2px solid var(--bad);border-radius:6px;padding:10px 14px;margin:14px 0}
.side{width:100%;border-collapse:collapse;table-layout:fixed}
.side td,.side th{border:1px solid var(--line);vertical-align:top;padding:4px;text-align:left}
.side th:first-child,.side td:first-child{width:48px}
.side tr.differs td{background:#ffebe9}
"""


@dataclass(frozen=True)
class PageStatus:
    """A replayed test's heading: its node id, its outcome and its scenario.

    Attributes:
        nodeid: The test's node id.
        outcome: ``passed``, ``failed`` or what the check found, in words.
        failed: Whether the outcome is a failure (drawn so).
    """

    nodeid: str
    outcome: str
    failed: bool = False


def _e(text: object) -> str:
    """``text`` shown: control characters visible, then HTML-escaped."""
    return html.escape(visible(str(text)), quote=True)


def _pre(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<pre{attr}>{_e(text)}</pre>"


def _label(session: SessionPicture) -> str:
    return f"{session.role} session <code>{_e(session.id or '(no id)')}</code>"


def _anchor(session: SessionPicture) -> str:
    return f"session-{session.index}"


def _call_anchor(session: int, call: int) -> str:
    return f"session-{session}-call-{call}"


def _tree(picture: Picture) -> str:
    def node(session: SessionPicture) -> str:
        seed = f", seed {session.seed_length} events" if session.role == "fork" else ""
        calls = f"{len(session.calls)} call(s)"
        kids = "".join(node(c) for c in picture.children(session.index))
        inner = f"<ul>{kids}</ul>" if kids else ""
        return (
            f'<li data-node="{session.index}" data-role="{session.role}">'
            f'<a href="#{_anchor(session)}"><span class="role role-{session.role}">'
            f"{session.role}</span><code>{_e(session.id or '(no id)')}</code></a>"
            f' <span class="meta">{calls}{seed}</span>{inner}</li>'
        )

    roots = "".join(node(s) for s in picture.sessions if s.parent is None)
    return f'<nav class="tree" aria-label="Sessions"><h2>Sessions</h2><ul>{roots}</ul></nav>'


def _timeline(picture: Picture) -> str:
    spans = [s.span for s in picture.sessions if s.span is not None]
    if not spans:
        return (
            '<section class="timeline" id="time-line"><h2>Time line</h2>'
            '<p class="meta no-times">no times recorded (the logs are in the committed form, '
            "which keeps no event times)</p></section>"
        )
    origin = min(start for start, _ in spans)
    total = max(1, max(end for _, end in spans) - origin)

    def pos(start: int, end: int) -> str:
        left = 100 * (start - origin) / total
        width = 100 * max(0, end - start) / total
        return f"left:{left:.2f}%;width:{width:.2f}%"

    rows = []
    for s in picture.sessions:
        if s.span is None:
            track = '<span class="meta">no times recorded</span>'
        else:
            bars = [f'<div class="span" style="{pos(*s.span)}"></div>']
            for c in s.calls:
                if c.start is None or c.end is None:
                    continue
                title = f"call #{c.number}: +{c.start - origin} ms, {c.end - c.start} ms"
                bars.append(
                    f'<a class="bar {s.role}" style="{pos(c.start, c.end)}" '
                    f'href="#{_call_anchor(s.index, c.number)}" title="{_e(title)}"></a>'
                )
            track = f'<div class="track">{"".join(bars)}</div>'
        rows.append(f'<div class="row"><a href="#{_anchor(s)}">{_label(s)}</a>{track}</div>')
    return (
        '<section class="timeline" id="time-line"><h2>Time line</h2>'
        f'<p class="meta">{total} ms from the first event to the last</p>{"".join(rows)}'
        "</section>"
    )


def _messages(messages: Iterable[Message]) -> str:
    items = "".join(
        f'<li><span class="who">{_e(m.role)}</span>{_pre(m.text)}</li>' for m in messages
    )
    return f'<ul class="messages">{items}</ul>' if items else '<p class="meta">no new message</p>'


def _request(request: Request) -> str:
    parts = ['<div class="request"><h4>Request</h4>']
    if request.model:
        parts.append(f'<p class="meta">model <code>{_e(request.model)}</code></p>')
    if request.tools:
        names = ", ".join(f"<code>{_e(name)}</code>" for name in request.tools)
        parts.append(
            f"<details><summary>{len(request.tools)} tool(s)</summary>"
            f'<p class="meta">{names}</p></details>'
        )
    if request.system:
        parts.append(f"<details><summary>system prompt</summary>{_pre(request.system)}</details>")
    parts.append(_messages(request.messages))
    parts.append("</div>")
    return "".join(parts)


def _tool_call(tool: ToolCall, picture: Picture) -> str:
    links = "".join(
        f' → <a href="#{_anchor(picture.sessions[c])}" data-child="{c}">'
        f"{_label(picture.sessions[c])}</a>"
        for c in tool.children
    )
    return f"<li><code>{_e(tool.name)}</code>{links}{_pre(tool.arguments)}</li>"


def _usage(usage: Mapping[str, object] | None) -> str:
    if not usage:
        return ""
    shown = " · ".join(f"{_e(k)} {_e(v)}" for k, v in usage.items())
    return f'<p class="usage">usage: {shown}</p>'


def _answer(call: Call, picture: Picture) -> str:
    parts = ['<div class="answer"><h4>Streamed answer</h4>']
    if call.reasoning:
        parts.append(f'<span class="who">reasoning</span>{_pre(call.reasoning, "reasoning")}')
    if call.text:
        parts.append(f'<span class="who">text</span>{_pre(call.text, "text")}')
    if call.tool_calls:
        tools = "".join(_tool_call(t, picture) for t in call.tool_calls)
        parts.append(f'<ul class="tools">{tools}</ul>')
    if not (call.reasoning or call.text or call.tool_calls):
        parts.append('<p class="meta">no text, no tool call</p>')
    parts.append(_usage(call.usage))
    parts.append("</div>")
    return "".join(parts)


def _call(session: SessionPicture, call: Call, picture: Picture, origin: int | None) -> str:
    kind = call.finish.split(" ", 1)[0]
    when = ""
    if call.start is not None and call.end is not None and origin is not None:
        when = f' <span class="meta">+{call.start - origin} ms, {call.end - call.start} ms</span>'
    return (
        f'<article class="call" id="{_call_anchor(session.index, call.number)}">'
        f'<h3>call #{call.number} <span class="finish finish-{_e(kind)}">{_e(call.finish)}</span>'
        f'{when}</h3><div class="cols">{_request(call.request)}{_answer(call, picture)}</div>'
        "</article>"
    )


def _seed(session: SessionPicture, picture: Picture) -> str:
    if session.role != "fork":
        return ""
    parent = picture.sessions[session.parent] if session.parent is not None else None
    source = f'<a href="#{_anchor(parent)}">its parent</a>' if parent else "its parent"
    inherited = (
        f"<details><summary>the inherited messages</summary>{_messages(session.inherited)}"
        "</details>"
        if session.inherited
        else ""
    )
    return (
        f'<div class="seed" data-seed-length="{session.seed_length}"><strong>Seed boundary'
        f"</strong>: the first {session.seed_length} event(s) of this log were inherited from "
        f"{source} ({len(session.inherited)} message(s), {session.inherited_calls} model "
        f"call(s)); the calls below are its own.{inherited}</div>"
    )


def _origin_line(session: SessionPicture, picture: Picture) -> str:
    if session.parent is None:
        return ""
    parent = picture.sessions[session.parent]
    text = f'child of <a href="#{_anchor(parent)}">{_label(parent)}</a>'
    if session.started_by is not None:
        call, ordinal = session.started_by
        tool = parent.calls[call - 1].tool_calls[ordinal]
        text += (
            f', started by <a href="#{_call_anchor(parent.index, call)}">call #{call}, tool call '
            f"<code>{_e(tool.name)}</code></a>"
        )
    return f" · {text}"


def _session(session: SessionPicture, picture: Picture, origin: int | None) -> str:
    file = f"{_e(session.file)} · " if session.file else ""
    meta = (
        f"{file}format {session.version} · {session.event_count} event(s) · "
        f"{len(session.calls)} model call(s){_origin_line(session, picture)}"
    )
    calls = "".join(_call(session, c, picture, origin) for c in session.calls)
    unlinked = ""
    if session.unlinked:
        links = ", ".join(
            f'<a href="#{_anchor(picture.sessions[c])}">{_label(picture.sessions[c])}</a>'
            for c in session.unlinked
        )
        unlinked = f'<p class="meta">Also started (no tool call of it is known to): {links}</p>'
    return (
        f'<section class="session" id="{_anchor(session)}" data-session="{session.index}">'
        f'<h2><span class="role role-{session.role}">{session.role}</span> session '
        f'<code>{_e(session.id or "(no id)")}</code></h2><p class="meta">{meta}</p>'
        f"{_seed(session, picture)}{calls or '<p class=meta>no model call</p>'}{unlinked}"
        "</section>"
    )


def _json(value: object) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return json.dumps(value, indent=2, ensure_ascii=False)


def _drift(drift: Drift) -> str:
    diff = drift.difference
    rows = []
    count = max(len(drift.recorded), len(drift.replayed))
    for k in range(count):
        index = None if diff.index is None else drift.first + k
        differs = index == diff.index
        mine = _pre(_json(drift.recorded[k])) if k < len(drift.recorded) else "(none)"
        theirs = _pre(_json(drift.replayed[k])) if k < len(drift.replayed) else "(none)"
        rows.append(
            f"<tr{' class=differs' if differs else ''}>"
            f"<td>{'header' if index is None else f'#{index}'}</td><td>{mine}</td>"
            f"<td>{theirs}</td></tr>"
        )
    return (
        '<section class="drift" id="drift" data-drift><h2>The replayed log differs from '
        f"the recording: {_e(drift.file)}</h2>{_pre(drift.report)}"
        '<table class="side"><thead><tr><th></th><th>recorded</th><th>replayed</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        '<p class="meta">Events normalized as the check compares them (ids numbered within '
        "this view, times and envelopes dropped), secrets redacted.</p></section>"
    )


def render_page(
    picture: Picture, *, status: PageStatus | None = None, drift: Drift | None = None
) -> str:
    """The page of ``picture``: one self-contained HTML document.

    Args:
        picture: The scenario.
        status: For a replayed test: its node id and outcome, shown first.
        drift: The log check's first difference, drawn side by side before the scenario.

    Returns:
        The HTML text (UTF-8 when written): the session tree (one ``data-node`` element
        per session), the time line, then one section per session (``id="session-<n>"``)
        with one ``id="session-<n>-call-<k>"`` article per model call.
    """
    title = f"dsh scenario {picture.title}"
    starts = [s.span[0] for s in picture.sessions if s.span is not None]
    origin = min(starts) if starts else None
    versions = sorted({s.version for s in picture.sessions})
    head = ""
    if status is not None:
        title = f"{status.nodeid}: {title}"
        cls = "status failed" if status.failed else "status"
        outcome = f'<span class="{cls}">{_e(status.outcome)}</span>'
        head = f"<p><code>{_e(status.nodeid)}</code> {outcome}</p>"
    body = "".join(_session(s, picture, origin) for s in picture.sessions)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<header>{head}<h1>Scenario <code>{_e(picture.title)}</code></h1>"
        f'<p class="meta">{len(picture.sessions)} session(s) · {picture.call_count} model '
        f"call(s) · log format {', '.join(map(str, versions))}</p></header><main>"
        f"{_drift(drift) if drift is not None else ''}{_tree(picture)}{_timeline(picture)}"
        f"{body}</main></body></html>\n"
    )
