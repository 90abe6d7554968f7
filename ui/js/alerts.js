// The Alerts page: the alerts pending and firing (/api/v1/alerts), and every
// rule group with its rules' state, health, last evaluation and errors
// (/api/v1/rules), each rule's expression a link to the Query page. Polled
// every few seconds while shown.

import { h, fill, short } from './dom.js';
import { call } from './api.js';

/** How often the page asks (ms). */
export const POLL_MS = 5000;

/** "12 s ago" for an RFC 3339 time; "never" for Go's zero time. */
function ago(time, now) {
  const at = Date.parse(time);
  if (!Number.isFinite(at) || at < 0) return 'never';
  const seconds = Math.max(0, Math.round((now - at) / 1000));
  if (seconds < 120) return `${seconds} s ago`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min ago`;
  return new Date(at).toISOString().replace('T', ' ').slice(0, 19);
}

/** Seconds as ms or s. */
function took(seconds) {
  return seconds < 1 ? `${short(seconds * 1000)} ms` : `${short(seconds)} s`;
}

/** `{a="1", b="2"}` as small chips. */
function chips(labels, cls) {
  return h('span', { class: 'chips' }, Object.entries(labels || {}).map(([key, value]) =>
    h('span', { class: `chip ${cls}` }, `${key}="${value}"`)));
}

/** The Query page with `expr` over the rules' database. */
function queryLink(expr, db) {
  const params = new URLSearchParams({ lang: 'promql', q: expr });
  if (db) params.set('db', db);
  return h('a', { href: `/ui/query?${params}`, 'data-nav': '', class: 'rule-query' }, expr);
}

function activeAlerts(alerts, now) {
  if (!alerts.length) return h('p', { class: 'hint', id: 'alerts-none' }, 'No alert is pending or firing.');
  const rows = [...alerts].sort((a, b) => (a.state === b.state ? 0 : a.state === 'firing' ? -1 : 1));
  return h('div', { class: 'table-wrap' }, h('table', { class: 'result', id: 'alerts-active' },
    h('thead', {}, h('tr', {}, ['alert', 'state', 'labels', 'annotations', 'active since', 'value'].map((c) => h('th', {}, c)))),
    h('tbody', {}, rows.map((a) => h('tr', { dataset: { state: a.state } },
      h('td', {}, a.labels.alertname),
      h('td', {}, h('span', { class: `state-${a.state}` }, a.state)),
      h('td', {}, chips(Object.fromEntries(Object.entries(a.labels).filter(([k]) => k !== 'alertname')), 'label')),
      h('td', { class: 'annotations' }, Object.entries(a.annotations || {}).map(([k, v]) => h('div', {}, h('strong', {}, `${k}: `), v))),
      h('td', {}, ago(a.activeAt, now)),
      h('td', {}, short(Number(a.value))))))));
}

function group(g, db, now) {
  const rows = [];
  for (const rule of g.rules) {
    rows.push(h('tr', { dataset: { rule: rule.name, health: rule.health } },
      h('td', {}, rule.name),
      h('td', {}, rule.type),
      h('td', {}, rule.type === 'alerting' ? h('span', { class: `state-${rule.state}` }, rule.state) : ''),
      h('td', {}, h('span', { class: `health-${rule.health}` }, rule.health)),
      h('td', {}, ago(rule.lastEvaluation, now)),
      h('td', {}, took(rule.evaluationTime)),
      h('td', {}, queryLink(rule.query, db))));
    if (rule.lastError) {
      rows.push(h('tr', { class: 'rule-error' }, h('td', { colspan: 7 }, h('div', { class: 'error' }, rule.lastError))));
    }
  }
  return h('section', { class: 'rule-group', dataset: { group: g.name } },
    h('h3', {}, g.name, ' ', h('span', { class: 'hint' },
      `${g.file} · every ${short(g.interval)} s · evaluated ${ago(g.lastEvaluation, now)} in ${took(g.evaluationTime)}`)),
    h('div', { class: 'table-wrap' }, h('table', { class: 'result' },
      h('thead', {}, h('tr', {}, ['rule', 'type', 'state', 'health', 'last evaluation', 'took', 'expression'].map((c) => h('th', {}, c)))),
      h('tbody', {}, rows))));
}

/** Polls until `signal` aborts (the page is left). */
export async function render(main, access, signal) {
  const summary = h('p', { id: 'alerts-summary' });
  const active = h('section', { id: 'alerts' });
  const groups = h('section', { id: 'rule-groups' });
  const error = h('div', { id: 'alerts-error' });
  fill(main, h('h1', {}, 'Alerts'), error, summary, h('h2', {}, 'Pending and firing'), active,
    h('h2', {}, 'Rule groups'), groups);
  async function poll() {
    if (signal.aborted) return;
    if (document.hidden) { setTimeout(poll, POLL_MS); return; }
    try {
      const [rules, alerts] = await Promise.all([call('/api/v1/rules'), call('/api/v1/alerts')]);
      const now = Date.now();
      const list = alerts.data.alerts;
      const count = (state) => list.filter((a) => a.state === state).length;
      const all = rules.data.groups;
      const ruleCount = all.reduce((n, g) => n + g.rules.length, 0);
      fill(error);
      fill(summary, h('span', { id: 'alerts-firing', class: 'state-firing' }, `${count('firing')} firing`), ' · ',
        h('span', { id: 'alerts-pending', class: 'state-pending' }, `${count('pending')} pending`), ' · ',
        `${all.length} groups, ${ruleCount} rules`);
      fill(active, activeAlerts(list, now));
      fill(groups, all.length ? all.map((g) => group(g, access.promqlDatabase, now))
        : h('p', { class: 'hint' }, 'No rule files are loaded: name them in [rules] files (docs/rules.md).'));
      main.dataset.polls = String(Number(main.dataset.polls || 0) + 1);
    } catch (err) {
      fill(error, h('div', { class: 'error', role: 'alert' }, `Could not read the rules: ${err.message}`));
    }
    setTimeout(poll, POLL_MS);
  }
  poll();
}
