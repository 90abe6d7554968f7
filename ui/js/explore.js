// The Explore page: databases → measurements (with their series) → fields
// and tags, the last values of a measurement, and the cardinality of the
// database as /api/v1/status/tsdb counts it.

import { h, fill, table, short } from './dom.js';
import { call, influxql, sql, databases, sqlName, sqlString, influxName } from './api.js';

function link(page, params, text, attrs = {}) {
  return h('a', { href: `/ui/${page}?${new URLSearchParams(params)}`, 'data-nav': '', ...attrs }, text);
}

function failure(err) {
  return h('div', { class: 'error', role: 'alert' }, err.message);
}

/** Bars of `[{name, value}]`, longest first, as status/tsdb gives them. */
function bars(title, entries, id) {
  const top = Math.max(1, ...entries.map((e) => e.value));
  return h('section', { class: 'bars', id },
    h('h3', {}, title),
    entries.length ? entries.map((e) => h('div', { class: 'bar-row' },
      h('span', { class: 'bar-name', title: e.name }, e.name),
      h('span', { class: 'bar' }, h('span', { class: 'bar-fill', style: { width: `${(100 * e.value) / top}%` } })),
      h('span', { class: 'bar-value' }, String(e.value)))) : h('p', { class: 'hint' }, 'none'));
}

async function cardinality(db) {
  const answer = await call('/api/v1/status/tsdb', { params: { db, limit: 10 } });
  const data = answer.data;
  return h('div', { class: 'cardinality' },
    h('p', {}, `${data.headStats.numSeries} series, ${data.headStats.numLabelPairs} label pairs`),
    h('div', { class: 'bar-grid' },
      bars('Top metrics by series', data.seriesCountByMetricName, 'top-metrics'),
      bars('Labels by distinct values', data.labelValueCountByLabelName, 'top-labels'),
      bars('Label pairs by series', data.seriesCountByLabelValuePair, 'top-pairs')));
}

async function measurements(db, selected) {
  const answer = await sql(`SELECT measurement, count() AS series FROM ${sqlName(db)}._series GROUP BY measurement ORDER BY measurement`);
  if (!answer.data.length) return h('p', { class: 'hint' }, 'No measurements yet.');
  return h('ul', { class: 'pick', id: 'measurements' }, answer.data.map(([name, series]) => h('li', {},
    link('explore', { db, m: name }, name, { class: name === selected ? 'current' : null }),
    h('span', { class: 'count', title: 'series' }, short(Number(series))))));
}

async function measurement(db, m) {
  const [fields, tags] = await Promise.all([
    influxql(`SHOW FIELD KEYS ON ${influxName(db)} FROM ${influxName(m)}`),
    sql(`SELECT key, uniqExact(value) AS values, count() AS series FROM ${sqlName(db)}._series
         ARRAY JOIN mapKeys(tags) AS key, mapValues(tags) AS value
         WHERE measurement = ${sqlString(m)} GROUP BY key ORDER BY key`),
  ]);
  const fieldRows = fields[0]?.series?.[0]?.values || [];
  const query = (field) => ({
    lang: 'influxql', db, range: '1h',
    q: `SELECT mean(${influxName(field)}) FROM ${influxName(m)} WHERE $timeFilter GROUP BY time($interval)`,
  });
  const last = h('div', { id: 'last-values' }, 'loading…');
  sql(`SELECT * FROM last_values(${sqlString(db)}, ${sqlString(m)}) LIMIT 100`)
    .then((answer) => fill(last, table(answer.meta.map((c) => c.name), answer.data.map((row) => row.map((c) => (c !== null && typeof c === 'object' ? JSON.stringify(c) : c))))))
    .catch((err) => fill(last, failure(err)));
  return h('div', { class: 'measurement' },
    h('h2', {}, m),
    h('div', { class: 'columns' },
      h('section', { id: 'fields' }, h('h3', {}, 'Fields'),
        table(['field', 'type', ''], fieldRows.map(([field, type]) => [field, type, link('query', query(field), 'chart')]))),
      h('section', { id: 'tags' }, h('h3', {}, 'Tags'),
        table(['tag', 'values', 'series'], tags.data.map(([key, values, series]) => [key, values, series])))),
    h('section', {}, h('h3', {}, 'Last values (the last-value cache)'), last));
}

export async function render(main, access) {
  const params = new URLSearchParams(location.search);
  if (!access.read) {
    fill(main, h('h1', {}, 'Explore'), h('div', { class: 'error', role: 'alert' }, 'This token may not read.'));
    return;
  }
  const dbs = await databases();
  const db = params.get('db') || dbs[0];
  const m = params.get('m');
  const detail = h('div', { class: 'explore-detail' });
  fill(main, h('h1', {}, 'Explore'),
    h('div', { class: 'explore' },
      h('nav', { class: 'explore-side' },
        h('h3', {}, 'Databases'),
        h('ul', { class: 'pick', id: 'databases' }, dbs.map((name) => h('li', {},
          link('explore', { db: name }, name, { class: name === db ? 'current' : null })))),
        h('h3', {}, 'Measurements'),
        h('div', { id: 'measurement-list' }, db ? 'loading…' : 'No databases yet: write some data.')),
      detail));
  if (!db) return;
  const list = main.querySelector('#measurement-list');
  measurements(db, m).then((el) => fill(list, el)).catch((err) => fill(list, failure(err)));
  const parts = [];
  if (m) parts.push(await measurement(db, m).catch(failure));
  parts.push(h('h2', {}, `Cardinality of ${db}`), await cardinality(db).catch(failure));
  fill(detail, parts);
}
