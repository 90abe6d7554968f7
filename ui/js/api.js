// The server's own HTTP API, called with the tab's token. A 401 anywhere
// asks for a token again (app.js listens for `chingest:unauthorized`).

const TOKEN_KEY = 'chingest.token';

/** A refused or failed call: the HTTP status and the server's message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** The token kept for this tab (sessionStorage: gone when the tab closes). */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** Calls `path` with `params` in the query string; returns JSON or text. */
export async function call(path, { method = 'GET', params = {}, body, headers = {} } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, value);
  }
  const sent = { ...headers };
  if (token()) sent.Authorization = `Bearer ${token()}`;
  let response;
  try {
    response = await fetch(url, { method, body, headers: sent });
  } catch (err) {
    throw new ApiError(0, `the server did not answer (${err.message})`);
  }
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!response.ok) {
    const message = (json && (json.error || json.message)) || text || response.statusText;
    const err = new ApiError(response.status, message);
    err.body = json;
    if (response.status === 401) window.dispatchEvent(new CustomEvent('chingest:unauthorized'));
    throw err;
  }
  return json ?? text;
}

/** Runs InfluxQL; a statement's error (InfluxDB answers 200) is thrown. */
export async function influxql(q, db, extra = {}) {
  const answer = await call('/query', { params: { q, db, epoch: 'ms', ...extra } });
  if (answer.error) throw new ApiError(400, answer.error);
  for (const result of answer.results || []) {
    if (result.error) throw new ApiError(400, result.error);
  }
  return answer.results || [];
}

/** Runs one SQL statement; returns `{meta, data}` (JSONCompact). */
export function sql(query, db) {
  return call('/sql', { method: 'POST', params: { format: 'JSONCompact', db }, body: query });
}

/** The databases the token may read (InfluxQL's SHOW DATABASES). */
export async function databases() {
  const results = await influxql('SHOW DATABASES');
  const series = results[0]?.series?.[0];
  return (series?.values || []).map((row) => row[0]);
}

/** A string as a SQL literal. */
export function sqlString(value) {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** A name as a SQL identifier. */
export function sqlName(value) {
  return `\`${value.replace(/\\/g, '\\\\').replace(/`/g, '\\`')}\``;
}

/** A name as an InfluxQL identifier. */
export function influxName(value) {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}
