// The Query page: PromQL, InfluxQL or SQL over a time range, drawn as a
// chart and a table. Everything the view needs is in the URL, so a link
// reproduces it.

import { h, fill, select, table, TABLE_ROWS } from './dom.js';
import { call, influxql, sql, databases } from './api.js';
import { TimeChart } from './chart.js';

const RANGES = [['5m', 300], ['15m', 900], ['1h', 3600], ['3h', 10800], ['6h', 21600],
  ['12h', 43200], ['1d', 86400], ['2d', 172800], ['7d', 604800], ['30d', 2592000]];
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
const LANGUAGES = [['promql', 'PromQL'], ['influxql', 'InfluxQL'], ['sql', 'SQL']];
const PLACEHOLDERS = {
  promql: 'rate(http_requests_total[5m])',
  influxql: 'SELECT mean("usage_user") FROM "cpu" WHERE $timeFilter GROUP BY time($interval), "host"',
  sql: 'SELECT toStartOfInterval(time, INTERVAL $step SECOND) AS t, avg(usage_user)\nFROM cpu WHERE $timeFilter GROUP BY t ORDER BY t',
};
/** Points per series a chart is asked for when the step is automatic. */
const AUTO_POINTS = 500;

/** The query's time range in ms and its step in seconds. */
export function timeRange(state, now = Date.now()) {
  let from;
  let to;
  if (state.range === 'custom') {
    from = Number(state.from);
    to = Number(state.to);
  } else {
    const seconds = (RANGES.find(([name]) => name === state.range) || RANGES[2])[1];
    to = now;
    from = now - seconds * 1000;
  }
  const span = Math.max(1, (to - from) / 1000);
  const wanted = Math.max(span / AUTO_POINTS, span / 11000);
  const step = Number(state.step) || STEPS.find((s) => s >= wanted) || Math.ceil(wanted);
  return { from, to, step };
}

/** `$timeFilter`, `$interval`, `$from`, `$to` and `$step` in a query. */
function expand(text, language, { from, to, step }) {
  const at = (ms) => (language === 'sql' ? `toDateTime64(${ms / 1000}, 3)` : `${ms}ms`);
  return text
    .replaceAll('$timeFilter', `time >= ${at(from)} AND time <= ${at(to)}`)
    .replaceAll('$interval', `${step}s`)
    .replaceAll('$from', at(from))
    .replaceAll('$to', at(to))
    .replaceAll('$step', String(step));
}

function promLabel(metric) {
  const { __name__: name = '', ...labels } = metric;
  const pairs = Object.entries(labels).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  return `${name}{${pairs.join(', ')}}`;
}

const iso = (ms) => new Date(ms).toISOString();

/** PromQL: a range query, one line per series. */
async function runPromql(text, db, range) {
  const answer = await call('/api/v1/query_range', {
    params: { query: text, start: range.from / 1000, end: range.to / 1000, step: range.step, db },
  });
  const result = answer.data.result || [];
  const series = result.map((s) => ({
    label: promLabel(s.metric),
    xs: Float64Array.from(s.values, ([t]) => t * 1000),
    ys: Float64Array.from(s.values, ([, v]) => Number(v)),
  }));
  // Only the rows the table shows are formatted.
  const rows = [];
  for (let i = 0; i < result.length && rows.length < TABLE_ROWS; i += 1) {
    for (const [t, v] of result[i].values.slice(0, TABLE_ROWS - rows.length)) rows.push([series[i].label, iso(t * 1000), v]);
  }
  const total = result.reduce((n, s) => n + s.values.length, 0);
  return { series, tables: [table(['series', 'time', 'value'], rows, total)], rows: total };
}

/** InfluxQL: each numeric column of each series is a line. */
async function runInfluxql(text, db) {
  const results = await influxql(text, db);
  const series = [];
  const tables = [];
  let rows = 0;
  for (const result of results) {
    for (const s of result.series || []) {
      const tags = Object.entries(s.tags || {}).map(([k, v]) => `${k}=${v}`).join(', ');
      const name = tags ? `${s.name} {${tags}}` : s.name;
      const timed = s.columns[0] === 'time';
      s.columns.forEach((column, c) => {
        if (!timed || c === 0 || !s.values.some((row) => typeof row[c] === 'number')) return;
        series.push({
          label: `${name} ${column}`,
          xs: Float64Array.from(s.values, (row) => row[0]),
          ys: Float64Array.from(s.values, (row) => (typeof row[c] === 'number' ? row[c] : NaN)),
        });
      });
      tables.push(h('h3', { class: 'table-title' }, name));
      const shown = s.values.slice(0, TABLE_ROWS).map((row) => row.map((cell, c) => (timed && c === 0 ? iso(cell) : cell)));
      tables.push(table(s.columns, shown, s.values.length));
      rows += s.values.length;
    }
  }
  return { series, tables, rows };
}

const TIME_TYPE = /^(Nullable\()?(LowCardinality\()?(DateTime|Date)/;
const NUMBER_TYPE = /^(Nullable\()?(U?Int|Float|Decimal)/;

/** A DateTime or Date as the engine writes it (UTC) in ms. */
function sqlTime(text) {
  return Date.parse(`${text.length === 10 ? `${text}T00:00:00` : text.replace(' ', 'T')}Z`);
}

/** SQL: a table; a chart too when a column is a time (one line per number
 * column and per value of the other columns). */
async function runSql(text, db) {
  const answer = await sql(text, db);
  const { meta, data } = answer;
  const columns = meta.map((m) => m.name);
  const time = meta.findIndex((m) => TIME_TYPE.test(m.type));
  const series = [];
  if (time >= 0) {
    const numbers = meta.map((m, i) => (NUMBER_TYPE.test(m.type) ? i : -1)).filter((i) => i >= 0);
    const keys = meta.map((m, i) => i).filter((i) => i !== time && !numbers.includes(i));
    const lines = new Map();
    for (const row of data) {
      const key = keys.map((i) => `${columns[i]}=${row[i]}`).join(', ');
      const t = sqlTime(row[time]);
      for (const i of numbers) {
        const label = key ? `${columns[i]} {${key}}` : columns[i];
        if (!lines.has(label)) lines.set(label, []);
        lines.get(label).push([t, row[i] === null ? NaN : Number(row[i])]);
      }
    }
    for (const [label, points] of lines) {
      points.sort((a, b) => a[0] - b[0]);
      series.push({ label, xs: Float64Array.from(points, (p) => p[0]), ys: Float64Array.from(points, (p) => p[1]) });
    }
  }
  const cells = data.slice(0, TABLE_ROWS).map((row) => row.map((cell) => (cell !== null && typeof cell === 'object' ? JSON.stringify(cell) : cell)));
  return { series, tables: [table(columns, cells, data.length)], rows: data.length, chartless: time < 0 };
}

const RUNNERS = { promql: runPromql, influxql: runInfluxql, sql: runSql };

/** Where in the query an error points, if its message says: {line, column} (1-based). */
export function errorPosition(message, text) {
  let match = /at line (\d+), char (\d+)/.exec(message) || /^(\d+):(\d+): /.exec(message);
  if (match) return { line: Number(match[1]), column: Number(match[2]) };
  match = /failed at position (\d+)/.exec(message);
  if (match) {
    const before = text.slice(0, Number(match[1]) - 1).split('\n');
    return { line: before.length, column: before.at(-1).length + 1 };
  }
  return null;
}

function errorView(message, text, editor) {
  const position = errorPosition(message, text);
  let pointer = null;
  if (position) {
    const line = text.split('\n')[position.line - 1] ?? '';
    pointer = h('pre', { class: 'error-at' }, `${line}\n${' '.repeat(Math.max(0, position.column - 1))}^`);
    const offset = text.split('\n').slice(0, position.line - 1).reduce((n, l) => n + l.length + 1, 0) + position.column - 1;
    editor.setSelectionRange(offset, offset + 1);
  }
  return h('div', { class: 'error', id: 'query-error', role: 'alert' },
    h('strong', {}, 'Error: '), message, pointer);
}

export async function render(main, access) {
  const params = new URLSearchParams(location.search);
  const state = {
    lang: params.get('lang') || 'promql',
    db: params.get('db') || '',
    q: params.get('q') || '',
    range: params.get('range') || (params.get('from') ? 'custom' : '1h'),
    from: params.get('from') || '',
    to: params.get('to') || '',
    step: params.get('step') || '',
  };
  const dbs = await databases().catch(() => []);
  if (!state.db) state.db = dbs[0] || '';
  const editor = h('textarea', { id: 'query-text', rows: 4, spellcheck: 'false', placeholder: PLACEHOLDERS[state.lang] });
  editor.value = state.q;
  const language = select({ id: 'query-lang' }, LANGUAGES, state.lang);
  const database = select({ id: 'query-db' }, dbs.includes(state.db) || !state.db ? dbs : [state.db, ...dbs], state.db);
  const range = select({ id: 'query-range' }, [...RANGES.map(([name]) => [name, `last ${name}`]), ['custom', 'custom']], state.range);
  const local = (ms) => (ms ? new Date(Number(ms) - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 19) : '');
  const fromInput = h('input', { id: 'query-from', type: 'datetime-local', step: 1, value: local(state.from) });
  const toInput = h('input', { id: 'query-to', type: 'datetime-local', step: 1, value: local(state.to) });
  const custom = h('span', { class: 'custom-range', hidden: state.range !== 'custom' }, fromInput, ' to ', toInput);
  const step = h('input', { id: 'query-step', class: 'step', placeholder: 'auto', title: 'step in seconds', value: state.step });
  const run = h('button', { id: 'query-run', class: 'primary', type: 'submit' }, 'Run');
  const status = h('div', { id: 'query-status', class: 'status-line' });
  const chartBox = h('div', { id: 'query-chart' });
  const tables = h('div', { id: 'query-table' });
  const output = h('div', { id: 'query-output' });
  const help = h('p', { class: 'hint' }, 'Ctrl+Enter runs. InfluxQL and SQL may use ', h('code', {}, '$timeFilter'),
    ', ', h('code', {}, '$interval'), ' (InfluxQL), ', h('code', {}, '$from'), ', ', h('code', {}, '$to'),
    ' and ', h('code', {}, '$step'), ' for the chosen range. Drag across the chart to zoom.');
  let chart = null;

  language.addEventListener('change', () => { editor.placeholder = PLACEHOLDERS[language.value]; });
  range.addEventListener('change', () => {
    custom.hidden = range.value !== 'custom';
    if (range.value === 'custom' && !fromInput.value) {
      const { from, to } = timeRange({ range: '1h' });
      fromInput.value = local(from);
      toInput.value = local(to);
    }
  });

  async function execute() {
    Object.assign(state, {
      lang: language.value, db: database.value, q: editor.value, range: range.value, step: step.value.trim(),
      from: range.value === 'custom' ? String(new Date(fromInput.value).getTime()) : '',
      to: range.value === 'custom' ? String(new Date(toInput.value).getTime()) : '',
    });
    const kept = new URLSearchParams(Object.entries(state).filter(([, v]) => v));
    history.replaceState(null, '', `/ui/query?${kept}`);
    if (!state.q.trim()) { fill(output, h('p', { class: 'hint' }, 'Write a query above.')); return; }
    const span = timeRange(state);
    const started = performance.now();
    run.disabled = true;
    fill(status, 'running…');
    output.dataset.state = 'running';
    try {
      const text = expand(state.q, state.lang, span);
      const result = await RUNNERS[state.lang](text, state.db, span);
      const fetched = performance.now();
      fill(output, chartBox, tables);
      if (result.series.length) {
        chart = chart || new TimeChart(chartBox, {
          onZoom: (from, to) => {
            range.value = 'custom';
            custom.hidden = false;
            fromInput.value = local(from);
            toInput.value = local(to);
            execute();
          },
        });
        chart.setData(result.series, state.lang === 'sql' ? undefined : { from: span.from, to: span.to });
      } else {
        if (chart) chart.destroy();
        chart = null;
        fill(chartBox, result.chartless ? null : h('p', { class: 'hint' }, 'No series in this range.'));
      }
      fill(tables, result.tables);
      const drawn = performance.now();
      const points = result.series.reduce((n, s) => n + s.xs.length, 0);
      fill(status, `${result.series.length} series · ${points} points · ${result.rows} rows · `
        + `answered in ${Math.round(fetched - started)} ms · drawn in ${Math.round(drawn - fetched)} ms`);
      Object.assign(output.dataset, {
        state: 'done', series: result.series.length, points, rows: result.rows,
        fetchMs: (fetched - started).toFixed(1), drawMs: (drawn - fetched).toFixed(1),
      });
    } catch (err) {
      fill(status, err.status ? `HTTP ${err.status}` : '');
      fill(output, errorView(err.message, state.q, editor));
      output.dataset.state = 'error';
    } finally {
      run.disabled = false;
    }
  }

  const form = h('form', { class: 'query-form', onsubmit: (event) => { event.preventDefault(); execute(); } },
    h('div', { class: 'toolbar' }, language, database, range, custom, h('label', {}, 'step ', step), run),
    editor, help);
  editor.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) { event.preventDefault(); execute(); }
  });
  fill(main, h('h1', {}, 'Query'), form, status, output);
  if (!access.read) {
    fill(output, h('div', { class: 'error', role: 'alert' }, 'This token may not read.'));
    run.disabled = true;
    return;
  }
  if (state.q) execute();
}
