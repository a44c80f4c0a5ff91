"""The on-call page's HTML: the sources at a glance, and one page per source (``loader.oncall``).

Plain HTML with a little script: a way out posts its DAG run (or clears the failed task) to
Airflow's REST API as the signed-in user, so Airflow's permissions apply, then opens the run.
``root`` is the path of Airflow's UI (``/`` unless Airflow is served below a prefix).
"""

from __future__ import annotations

import html
import urllib.parse
from typing import Any

from loader.oncall.page import FAILED, HEALTHY, Field, SourcePage, WayOut

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem 2rem; color: #1f2933; font-size: 14px; }
h1 { font-size: 1.5rem; margin: 0 0 .3rem; } h2 { font-size: 1.1rem; margin: 1.6rem 0 .5rem; }
table { border-collapse: collapse; margin: .3rem 0; } td, th { padding: .3rem .7rem; text-align: left;
  border-bottom: 1px solid #e4e7eb; vertical-align: top; } th { background: #f5f7fa; font-weight: 600; }
dl { display: grid; grid-template-columns: max-content auto; gap: .25rem 1.2rem; margin: 0; }
dt { color: #52606d; } dd { margin: 0; } code { font-size: 13px; }
.verdict { display: inline-block; padding: .15rem .6rem; border-radius: 1rem; font-weight: 600;
  color: white; background: #c0392b; text-transform: uppercase; font-size: 12px; }
.verdict.healthy { background: #2e8540; } .verdict.behind, .verdict.differs { background: #d4820b; }
.verdict.not-loaded, .verdict.paused, .verdict.no-run-due { background: #616e7c; } .error { color: #c0392b; }
.way { border: 1px solid #cbd2d9; border-radius: 6px; padding: .7rem 1rem; margin: .6rem 0; max-width: 60rem; }
.way h3 { margin: 0 0 .3rem; font-size: 1rem; } .way p { margin: .2rem 0 .5rem; color: #3e4c59; }
.way label { display: block; margin: .4rem 0 .1rem; font-weight: 600; }
.way small { display: block; color: #616e7c; } .way input[type=text], .way input[type=number] { width: 24rem; }
.way button { margin-top: .5rem; } .outcome { margin-left: .8rem; }
"""

SCRIPT = """
async function wayOut(form) {
  const out = form.querySelector('.outcome');
  const root = document.body.dataset.root;
  const dag = form.dataset.dag;
  let path, body;
  if (form.dataset.runId) {
    path = `dags/${encodeURIComponent(dag)}/clearTaskInstances`;
    body = { dry_run: false, dag_run_id: form.dataset.runId, task_ids: [form.dataset.taskId],
             only_failed: true, include_downstream: true };
  } else {
    const conf = {};
    for (const input of form.querySelectorAll('[data-kind]')) {
      const kind = input.dataset.kind, text = input.value.trim();
      if (kind === 'boolean') conf[input.name] = input.checked;
      else if (kind === 'array') conf[input.name] = text ? text.split(/[\\s,]+/).filter(Boolean) : [];
      else if (kind === 'integer') conf[input.name] = text === '' ? null : Number(text);
      else conf[input.name] = text === '' ? null : text;
    }
    path = `dags/${encodeURIComponent(dag)}/dagRuns`;
    body = { logical_date: null, conf };
  }
  out.textContent = 'sending…';
  const response = await fetch(`${root}api/v2/${path}`, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = typeof answer.detail === 'string' ? answer.detail : JSON.stringify(answer.detail ?? answer);
    out.textContent = `Airflow refused it (${response.status}): ${detail}`;
    out.className = 'outcome error';
    return;
  }
  const runId = form.dataset.runId || answer.dag_run_id;
  out.textContent = `run ${runId} of ${dag}`;
  window.location.href = `${root}dags/${encodeURIComponent(dag)}/runs/${encodeURIComponent(runId)}`;
}
document.addEventListener('submit', (event) => {
  event.preventDefault();
  if (window.confirm(event.target.dataset.confirm)) wayOut(event.target);
});
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _document(title: str, root: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{STYLE}</style></head>"
        f'<body data-root="{_e(root)}">{body}<script>{SCRIPT}</script></body></html>'
    )


def _badge(verdict: str) -> str:
    return f'<span class="verdict {verdict.replace(" ", "-")}">{_e(verdict)}</span>'


def index(pages: list[SourcePage], broken: dict[str, str], root: str) -> str:
    """Every source on one line: its verdict, lag and backlog; each links to its page."""
    rows = []
    for page in pages:
        s = page.status
        lag = "unknown" if s.lag_seconds is None else f"{s.lag_seconds:,.0f} s, {s.lag_bytes or 0:,} bytes"
        rows.append(
            f'<tr><td><a href="source/{urllib.parse.quote(page.name, safe="")}">{_e(page.name)}</a></td>'
            f"<td>{_badge(page.verdict)}</td><td>{_e(lag)}</td><td>{_e(s.backlog())}</td>"
            f"<td>{_e(page.verdict_text if page.verdict != HEALTHY else '')}</td></tr>"
        )
    for name, error in broken.items():
        rows.append(
            f"<tr><td>{_e(name)}</td><td>{_badge('broken')}</td><td></td><td></td>"
            f'<td class="error">{_e(error)}</td></tr>'
        )
    body = (
        "<h1>Loader on-call</h1><p>Each source of the deployment: how far behind the source it is, and "
        "what failed. Open a source for its intervals, tables and ways out.</p>"
        "<table><tr><th>Source</th><th>State</th><th>Lag</th><th>Backlog</th><th>Why</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    return _document("Loader on-call", root, body)


def source(page: SourcePage, root: str, many: bool) -> str:
    """One source's page: where it is, its intervals, its tables and the ways out."""
    s = page.status
    cp = s.checkpoint
    facts = [
        (
            "Source at",
            (s.source_position or "unreachable") + (f" ({s.source_server})" if s.source_server else ""),
        ),
        (
            "Checkpoint",
            f"{cp['position']} (interval {cp['interval']})" if cp else "none: run the initial load",
        ),
        ("Lag", s.lag_line(backlog=False).removeprefix("lag: ")),
        ("Backlog", s.backlog()),
        ("Running now", s.lease or "nothing"),
        ("Delta DAG", s.delta_dag.text() if s.delta_dag else "not known here"),
        (
            "Last initial load",
            f"{s.last_load.id} ({s.last_load.state}, {s.last_load.tables} tables, P0 {s.last_load.p0})"
            if s.last_load
            else "none",
        ),
        (
            "Last check",
            s.last_check.text()
            if s.last_check
            else "none yet (the delta DAG's Checksum field, or loader checksum)",
        ),
    ]
    facts += [("Gap allowed", f"[{g['from']}, {g['to']}) before interval {g['interval']}") for g in s.gaps]
    if s.awaiting_copy:
        facts.append(("Awaiting their copy", ", ".join(s.awaiting_copy)))
    back = '<p><a href="../">← every source</a></p>' if many else ""
    body = [
        back,
        f"<h1>Source {_e(page.name)} {_badge(page.verdict)}</h1>",
        f'<p class="{"error" if page.verdict == FAILED else ""}">{_e(page.verdict_text)}</p>',
        "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts) + "</dl>",
        _intervals(page, root),
        _tables(page),
        "<h2>Ways out</h2>",
        "<p>Each starts a run of the DAG named, with the fields of its trigger form as filled here; "
        "Airflow's permissions apply. The run's page opens once Airflow has it.</p>",
        "".join(_way_out(w) for w in page.ways_out),
    ]
    return _document(f"Loader on-call: {page.name}", root, "".join(body))


def _intervals(page: SourcePage, root: str) -> str:
    s = page.status
    counts = ", ".join(f"{n} {state}" for state, n in s.intervals.items())
    parts = ["<h2>Intervals</h2>", f"<p>{_e(counts)}</p>"]
    if page.failed:
        rows = "".join(
            f"<tr><td>{_e(f.record.id)}</td><td>{_e(f.record.state)}</td>"
            f"<td><code>[{_e(f.record.start)}, {_e(f.record.end)})</code></td>"
            f'<td class="error">{_e(f.record.error)}</td><td>'
            + (
                f'<a class="task-run" href="{_e(root + f.task_link)}">{_e(f.task_id or "run")} of run '
                f"{_e(f.record.run_id)}</a>"
                if f.task_link
                else "not run by Airflow"
            )
            + "</td></tr>"
            for f in page.failed
        )
        parts.append(
            '<h3>Failed</h3><table id="failed"><tr><th>Interval</th><th>State</th><th>Range</th><th>Error</th>'
            f"<th>Task run</th></tr>{rows}</table>"
        )
    shown = f"the last {len(page.intervals)} of {page.total_intervals}"
    rows = "".join(
        f"<tr><td>{_e(r.id)}</td><td>{_e(r.state)}</td><td><code>[{_e(r.start)}, {_e(r.end)})</code></td>"
        f"<td>{'' if r.changes is None else f'{r.changes:,}'}</td>"
        f"<td>{_e(r.abandoned_reason or r.error or '')}</td></tr>"
        for r in reversed(page.intervals)
    )
    parts.append(
        f"<h3>Latest ({_e(shown)})</h3><table><tr><th>Interval</th><th>State</th><th>Range</th>"
        f"<th>Changes</th><th>Note</th></tr>{rows}</table>"
    )
    return "".join(parts)


def _tables(page: SourcePage) -> str:
    if page.tables_error:
        return f'<h2>Tables</h2><p class="error">{_e(page.tables_error)}</p>'
    rows = "".join(
        f"<tr><td>{_e(t.schema)}.{_e(t.table)}</td><td>{_e(t.warehouse_table)}</td><td>{_e(t.mode)}</td>"
        f"<td>{_e(t.loaded_at or 'not loaded')}</td>"
        f"<td>{_e(f'interval {t.last_interval}' if t.last_interval else 'none since its copy')}</td>"
        f"<td>{_e(t.last_change_by or '')}</td>"
        f"<td>{_e(f'copy by {t.awaiting_load} pending' if t.awaiting_load else '')}</td></tr>"
        for t in page.tables
    )
    return (
        '<h2>Tables</h2><table id="tables"><tr><th>Source table</th><th>Warehouse table</th><th>Mode</th>'
        "<th>Copied at</th><th>Last change applied</th><th>Committed by</th><th></th></tr>"
        f"{rows}</table>"
    )


def _input(f: Field) -> str:
    value: Any = f.value
    if f.kind == "boolean":
        checked = " checked" if value else ""
        control = f'<input type="checkbox" name="{_e(f.name)}" data-kind="boolean"{checked}>'
    else:
        shown = ", ".join(value) if isinstance(value, list) else ("" if value is None else value)
        kind = "number" if f.kind == "integer" else "text"
        required = " required" if f.required else ""
        control = f'<input type="{kind}" name="{_e(f.name)}" data-kind="{_e(f.kind)}" value="{_e(shown)}"{required}>'
    return f"<label>{_e(f.title)}</label>{control}<small>{_e(f.help)}</small>"


def _way_out(way: WayOut) -> str:
    data: dict[str, Any] = {"dag": way.dag_id, "confirm": f"{way.title}: start it on {way.dag_id}?"}
    if way.clear:
        data["run-id"], data["task-id"] = way.clear
    attributes = " ".join(f'data-{k}="{_e(v)}"' for k, v in data.items())
    action = "Clear the task" if way.clear else f"Trigger {way.dag_id}"
    return (
        f'<form class="way" id="way-{_e(way.key)}" {attributes}><h3>{_e(way.title)}</h3><p>{_e(way.explain)}</p>'
        + "".join(_input(f) for f in way.fields)
        + f'<button type="submit">{_e(action)}</button><span class="outcome"></span></form>'
    )


def error_page(title: str, message: str, root: str) -> str:
    """A source (or the deployment) whose facts could not be read: what and why."""
    return _document(title, root, f'<h1>{_e(title)}</h1><p class="error">{_e(message)}</p>')
