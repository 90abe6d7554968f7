// The Write page: line protocol pasted or read from a file, posted to
// /write; what was stored and each rejected line with its reason.

import { h, fill, select, table } from './dom.js';
import { call, databases } from './api.js';

const PRECISIONS = [['ns', 'nanoseconds'], ['us', 'microseconds'], ['ms', 'milliseconds'], ['s', 'seconds']];

export async function render(main, access) {
  const params = new URLSearchParams(location.search);
  const dbs = await databases().catch(() => []);
  const db = h('input', { id: 'write-db', list: 'write-dbs', value: params.get('db') || dbs[0] || '', placeholder: 'database', required: true });
  const precision = select({ id: 'write-precision' }, PRECISIONS, 'ns');
  const text = h('textarea', { id: 'write-text', rows: 12, spellcheck: 'false', placeholder: 'cpu,host=a usage_user=12.5\nmem,host=a used=1234i' });
  const file = h('input', { id: 'write-file', type: 'file', accept: '.txt,.lp,.line,text/plain' });
  const submit = h('button', { id: 'write-submit', class: 'primary', type: 'submit' }, 'Write');
  const result = h('div', { id: 'write-result' });
  file.addEventListener('change', async () => {
    if (file.files[0]) text.value = await file.files[0].text();
  });
  if (!access.write) {
    submit.disabled = true;
    fill(result, h('div', { class: 'error', role: 'alert' }, access.writeReason || 'This token may not write.'));
  }

  async function send(event) {
    event.preventDefault();
    const body = text.value;
    const lines = body.split('\n');
    const count = lines.filter((line) => line.trim() && !line.trim().startsWith('#')).length;
    submit.disabled = true;
    fill(result, 'writing…');
    try {
      await call('/write', { method: 'POST', params: { db: db.value, precision: precision.value }, body });
      fill(result, h('div', { class: 'ok', role: 'status' }, `Stored all ${count} lines in ${db.value}.`));
      result.dataset.accepted = String(count);
      result.dataset.rejected = '0';
    } catch (err) {
      const answer = err.body;
      if (err.status === 400 && answer && Array.isArray(answer.rejected)) {
        fill(result,
          h('div', { class: answer.accepted ? 'ok' : 'error', role: 'status' },
            `Stored ${answer.accepted} lines in ${db.value}; ${answer.dropped} rejected.`),
          table(['line', 'column', 'reason', 'text'],
            answer.rejected.map((r) => [r.line, r.column ?? '', r.reason, lines[r.line - 1] ?? ''])));
        result.dataset.accepted = String(answer.accepted);
        result.dataset.rejected = String(answer.dropped);
      } else {
        fill(result, h('div', { class: 'error', role: 'alert' }, `HTTP ${err.status || '—'}: ${err.message}`));
        result.dataset.rejected = 'all';
      }
    } finally {
      submit.disabled = !access.write;
    }
  }

  fill(main, h('h1', {}, 'Write'),
    h('form', { class: 'write-form', onsubmit: send },
      h('div', { class: 'toolbar' },
        h('label', {}, 'database ', db), h('datalist', { id: 'write-dbs' }, dbs.map((name) => h('option', { value: name }))),
        h('label', {}, 'precision ', precision), h('label', {}, 'or a file ', file), submit),
      text,
      h('p', { class: 'hint' }, 'InfluxDB line protocol, one point per line; a line without a time gets the server\'s.')),
    result);
}
