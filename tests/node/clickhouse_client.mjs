// Reads through chingest's ClickHouse HTTP interface with the official
// JavaScript client, unchanged, and prints what it got as one JSON object
// for tests/python/test_clickhouse_http.py to compare with /sql.
//
// Usage: node clickhouse_client.mjs <url> <password> <database> <sql>

import { createClient } from '@clickhouse/client';

const [url, password, database, sql] = process.argv.slice(2);
const client = createClient({ url, username: 'default', password, database });
const wrong = createClient({ url, username: 'default', password: 'not-a-token' });

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (err) {
    return { code: String(err.code), type: err.type ?? null, message: err.message };
  }
}

const out = {};
out.ping = (await client.ping()).success;
const result = await client.query({ query: sql, format: 'JSONEachRow', query_id: 'node-query-1' });
out.query_id = result.query_id;
out.rows = await result.json();
out.version = await (await client.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' })).json();
const compressing = createClient({ url, password, database, compression: { response: true } });
out.compressed = await (await compressing.query({ query: sql, format: 'JSONEachRow' })).json();
out.wrong_password = await errorOf(wrong.query({ query: 'SELECT 1', format: 'JSONEachRow' }));
out.ddl = await errorOf(client.command({ query: 'DROP TABLE cpu' }));
await Promise.all([client.close(), wrong.close(), compressing.close()]);
console.log(JSON.stringify(out));
