// Building elements without innerHTML: every text from the server (label
// values, error messages, query results) becomes a text node, never markup.

/** An element: `h('div', {class: 'x', onclick: f}, child, 'text', ...)`. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    // Style properties, not a style attribute (which the page's CSP forbids).
    else if (key === 'style') Object.assign(el.style, value);
    else if (key === 'value') el.value = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A `<select>` of `options` (values, or [value, label] pairs). */
export function select(attrs, options, selected) {
  return h('select', attrs, options.map((option) => {
    const [value, label] = Array.isArray(option) ? option : [option, option];
    return h('option', { value, selected: value === selected }, label);
  }));
}

/** The rows a table shows; the rest are counted, not built. */
export const TABLE_ROWS = 2000;

/** A table of `columns` and its first rows (arrays of cells) of `total`. */
export function table(columns, rows, total = rows.length) {
  const shown = rows.slice(0, TABLE_ROWS);
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'result' },
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', {}, c)))),
      h('tbody', {}, shown.map((row) => h('tr', {}, row.map((cell) => h('td', {}, cell ?? '')))))),
    total > shown.length ? h('p', { class: 'note' }, `${total - shown.length} more rows not shown`) : null);
}

/** A number in a short form: 1.23k, 4.5M, 0.012. */
export function short(value) {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  for (const [scale, suffix] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) {
    if (abs >= scale) return `${+(value / scale).toPrecision(3)}${suffix}`;
  }
  return abs === 0 || abs >= 0.01 ? String(+value.toPrecision(3)) : value.toExponential(2);
}

/** Bytes as KiB, MiB, GiB. */
export function bytes(value) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(value) >= 1024 && i < units.length - 1) { value /= 1024; i += 1; }
  return `${+value.toPrecision(3)} ${units[i]}`;
}
