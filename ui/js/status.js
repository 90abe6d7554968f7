// The Status page: the server's own counters (/metrics) and checks
// (/health), polled every few seconds, as numbers with small charts.

import { h, fill, short, bytes } from './dom.js';
import { call } from './api.js';
import { TimeChart } from './chart.js';

/** How often the page asks (ms): two small requests, well under 1% CPU. */
export const POLL_MS = 5000;
/** Polls kept for each small chart: five minutes. */
const HISTORY = 60;

/** Prometheus's text exposition: name → [{labels, value}]. */
export function parseMetrics(text) {
  const metrics = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const [, key, value] of (match[3] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key] = value;
    if (!metrics.has(match[1])) metrics.set(match[1], []);
    metrics.get(match[1]).push({ labels, value: Number(match[4]) });
  }
  return metrics;
}

/** The protocol an HTTP route or gRPC method serves. */
function protocol(endpoint) {
  const route = endpoint.replace(/^\/db\/\{db\}/, '');
  if (route.startsWith('clickhouse ')) return 'ClickHouse';
  if (['/metrics', '/health', '/ready', '/ping', '/api/v1/access'].includes(route)) return 'health and metrics';
  if (['/write', '/api/v2/write'].includes(route)) return 'line protocol';
  if (['/api/v1/write', '/api/v1/prom/write'].includes(route)) return 'remote write';
  if (route === '/v1/metrics') return 'OTLP';
  if (route === '/query') return 'InfluxQL';
  if (route === '/api/v1/read') return 'remote read';
  if (route.startsWith('/api/v1/')) return route.startsWith('/api/v1/admin') ? 'admin' : 'PromQL';
  if (route === '/sql') return 'SQL';
  if (route.startsWith('/ui') || route === '/') return 'web UI';
  return 'other';
}

const sum = (metrics, name, filter = () => true) => (metrics.get(name) || [])
  .filter((s) => filter(s.labels)).reduce((n, s) => n + s.value, 0);

/** `chingest_rows_written_total`'s protocols, named as `protocol` names them. */
const WRITTEN = { line_protocol: 'line protocol', remote_write: 'remote write', otlp: 'OTLP', grpc: 'gRPC Write', arrow: 'gRPC WriteArrow' };

/** Requests and rows written by protocol: {name: [requests, rows]}. */
function byProtocol(metrics) {
  const counts = {};
  const add = (name, i, value) => {
    counts[name] = counts[name] || [0, 0];
    counts[name][i] += value;
  };
  for (const { labels, value } of metrics.get('chingest_http_requests_total') || []) add(protocol(labels.endpoint), 0, value);
  for (const { labels, value } of metrics.get('chingest_grpc_calls_total') || []) add(`gRPC ${labels.method}`, 0, value);
  for (const { labels, value } of metrics.get('chingest_rows_written_total') || []) {
    if (value) add(WRITTEN[labels.protocol] || labels.protocol, 1, value);
  }
  return counts;
}

/** The tiles: what each shows of a poll (and of the poll before, for rates). */
const TILES = [
  { id: 'rows', title: 'Rows inserted /s', rate: (m) => sum(m, 'chingest_flush_rows_sum'), format: short },
  { id: 'written', title: 'Rows written /s', rate: (m) => sum(m, 'chingest_rows_written_total'), format: short,
    detail: (m) => `${short(sum(m, 'chingest_lines_rejected_total'))} lines rejected in all` },
  { id: 'requests', title: 'Requests /s', rate: (m) => sum(m, 'chingest_http_requests_total') + sum(m, 'chingest_grpc_calls_total'), format: short },
  { id: 'inserts', title: 'Inserts /s', rate: (m) => sum(m, 'chingest_flushes_total'), format: short,
    detail: (m) => `${short(sum(m, 'chingest_flush_errors_total'))} failed attempts in all` },
  { id: 'parts', title: 'Engine parts', gauge: (m) => sum(m, 'chingest_engine_parts'), format: short,
    detail: (m) => `${short(sum(m, 'chingest_engine_part_rows'))} rows · ${bytes(sum(m, 'chingest_engine_bytes_on_disk'))} on disk` },
  { id: 'wal', title: 'Log size', gauge: (m) => sum(m, 'chingest_wal_size_bytes'), format: bytes,
    detail: (m) => `${sum(m, 'chingest_wal_segments')} segments · checkpoint ${sum(m, 'chingest_wal_checkpoint_lsn')}` },
  { id: 'buffered', title: 'Logged, not yet inserted', gauge: (m) => sum(m, 'chingest_buffered_bytes'), format: bytes,
    detail: (m) => `${Math.round((100 * sum(m, 'chingest_buffered_bytes')) / (sum(m, 'chingest_buffered_bytes_limit') || 1))}% of the memory budget` },
  { id: 'memory', title: 'Resident memory', gauge: (m) => sum(m, 'process_resident_memory_bytes'), format: bytes,
    detail: (m) => `peak ${bytes(sum(m, 'chingest_process_resident_memory_peak_bytes'))}` },
  { id: 'queries', title: 'Queries running', gauge: (m) => sum(m, 'chingest_queries_running'), format: short,
    detail: (m) => `${sum(m, 'chingest_queries_waiting')} waiting · ${short(sum(m, 'chingest_queries_refused_total'))} refused in all` },
  { id: 'series', title: 'Series created /s', rate: (m) => sum(m, 'chingest_series_created_total'), format: short,
    detail: (m) => `${short(sum(m, 'chingest_series_created_total'))} since start` },
];

/** Polls until `signal` aborts (the page is left). */
export async function render(main, access, signal) {
  const health = h('section', { id: 'health' });
  const tiles = TILES.map((tile) => {
    const shown = h('div', { class: 'tile-value' }, '…');
    const said = h('div', { class: 'tile-detail' });
    const spark = h('div', { class: 'tile-chart' });
    const el = h('section', { class: 'tile', id: `tile-${tile.id}` }, h('h3', {}, tile.title), shown, said, spark);
    return { ...tile, el, shown, said, spark, history: [] };
  });
  const protocols = h('section', { id: 'protocols' });
  const error = h('div', { id: 'status-error' });
  fill(main, h('h1', {}, 'Status'), error, health, h('div', { class: 'tiles' }, tiles.map((t) => t.el)), protocols);
  for (const tile of tiles) tile.chart = new TimeChart(tile.spark, { mini: true, colour: '#3b6fd4' });
  signal.addEventListener('abort', () => tiles.forEach((tile) => tile.chart.destroy()));

  let previous = null;
  let first = false;
  async function poll() {
    if (signal.aborted) return;
    // A hidden tab asks nothing.
    if (document.hidden) { setTimeout(poll, POLL_MS); return; }
    try {
      const [text, checks] = await Promise.all([
        call('/metrics'),
        call('/health').catch((err) => err.body || { status: 'fail', checks: [{ message: err.message }] }),
      ]);
      const now = Date.now();
      const metrics = parseMetrics(text);
      fill(error);
      fill(health, h('h3', {}, 'Health: ', h('span', { class: `health-${checks.status}`, id: 'health-status' }, checks.status)),
        (checks.checks || []).map((c) => h('div', { class: 'error' }, c.message)),
        h('p', { class: 'hint' }, `broken parts found at open: ${sum(metrics, 'chingest_engine_broken_parts_total')} · `
          + `engine errors: ${sum(metrics, 'chingest_engine_errors_total')} · log errors: ${sum(metrics, 'chingest_wal_errors_total')}`
          + ` · version ${checks.version || '?'}`));
      for (const tile of tiles) {
        let value = null;
        if (tile.gauge) value = tile.gauge(metrics);
        else if (previous) value = Math.max(0, (tile.rate(metrics) - tile.rate(previous.metrics)) / ((now - previous.at) / 1000));
        if (value !== null) {
          fill(tile.shown, tile.format(value));
          tile.shown.dataset.value = String(value);
          tile.history.push([now, value]);
          if (tile.history.length > HISTORY) tile.history.shift();
          tile.chart.setData([{ label: tile.title, xs: Float64Array.from(tile.history, (p) => p[0]), ys: Float64Array.from(tile.history, (p) => p[1]) }]);
        }
        if (tile.detail) fill(tile.said, tile.detail(metrics));
      }
      const counts = byProtocol(metrics);
      const before = previous ? byProtocol(previous.metrics) : {};
      const seconds = previous ? (now - previous.at) / 1000 : 0;
      const rate = (name, i) => (seconds ? short((counts[name][i] - (before[name] || [0, 0])[i]) / seconds) : '…');
      fill(protocols, h('h3', {}, 'By protocol'), h('table', { class: 'result' },
        h('thead', {}, h('tr', {}, ['protocol', 'requests /s', 'rows /s', 'requests', 'rows'].map((c) => h('th', {}, c)))),
        h('tbody', {}, Object.keys(counts).sort().map((name) => h('tr', { dataset: { protocol: name } },
          h('td', {}, name), h('td', {}, rate(name, 0)), h('td', {}, rate(name, 1)),
          h('td', {}, short(counts[name][0])), h('td', {}, short(counts[name][1])))))));
      first = !previous;
      previous = { metrics, at: now };
      main.dataset.polls = String(Number(main.dataset.polls || 0) + 1);
    } catch (err) {
      fill(error, h('div', { class: 'error', role: 'alert' }, `Could not read the server's counters: ${err.message}`));
    }
    // The second reading comes soon, so rates show within a second.
    setTimeout(poll, first ? 1000 : POLL_MS);
  }
  poll();
}
