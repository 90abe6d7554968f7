// A time-series line chart on a canvas: one line per series, time and value
// axes, a legend (click to hide a line), the values under the cursor, and a
// dragged range to zoom into. Drawing is one path per series, so 100
// series of 1,000 points take a few milliseconds.

import { h, fill, short } from './dom.js';

const PAD = { left: 56, right: 12, top: 10, bottom: 24 };
const SECOND = 1000;
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200,
  10800, 21600, 43200, 86400, 172800, 604800, 2592000].map((s) => s * SECOND);

/** The colour of the `i`th series: hues a golden angle apart. */
export function colour(i) {
  return `hsl(${(i * 137.508) % 360}, 65%, ${i % 2 ? 42 : 52}%)`;
}

/** Round value steps (1, 2, 5 × 10^k) giving about `count` ticks. */
function valueTicks(min, max, count) {
  const raw = (max - min) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const ticks = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step / 1e6; v += step) ticks.push(v);
  return ticks;
}

function timeTicks(from, to, count) {
  const step = TIME_STEPS.find((s) => (to - from) / s <= count) || TIME_STEPS.at(-1);
  // Local midnight alignment for day steps, else the step's own multiples.
  const offset = step >= 86400 * SECOND ? new Date(from).getTimezoneOffset() * 60 * SECOND : 0;
  const ticks = [];
  for (let t = Math.ceil((from - offset) / step) * step + offset; t <= to; t += step) ticks.push(t);
  return { ticks, step };
}

function timeLabel(t, step, span) {
  const d = new Date(t);
  const pad = (n) => String(n).padStart(2, '0');
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  const day = `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  if (step < 60 * SECOND) return `${hm}:${pad(d.getSeconds())}`;
  if (step >= 86400 * SECOND) return day;
  return span > 86400 * SECOND ? `${day} ${hm}` : hm;
}

/** The index of the point of sorted `xs` nearest to `x`. */
function nearest(xs, x) {
  let lo = 0;
  let hi = xs.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo > 0 && x - xs[lo - 1] < xs[lo] - x ? lo - 1 : lo;
}

export class TimeChart {
  /**
   * `options.onZoom(from, to)` is called with a dragged range (ms);
   * `options.mini` draws a sparkline: no legend, no hover, no zoom.
   */
  constructor(container, options = {}) {
    this.options = { height: 320, ...options };
    this.series = [];
    this.hidden = new Set();
    this.canvas = h('canvas', { class: 'chart-canvas' });
    this.tip = h('div', { class: 'chart-tip', hidden: true });
    this.legend = h('div', { class: 'chart-legend' });
    this.root = h('div', { class: options.mini ? 'chart mini' : 'chart' },
      h('div', { class: 'chart-area' }, this.canvas, this.tip),
      options.mini ? null : this.legend);
    fill(container, this.root);
    if (!options.mini) this.listen();
    this.resize = () => this.draw();
    window.addEventListener('resize', this.resize);
  }

  /**
   * `series`: [{label, xs, ys}] with xs in ms, ascending; NaN in ys is a gap.
   * `range`: {from, to} in ms, else the data's own.
   */
  setData(series, range) {
    this.series = series;
    this.hidden.clear();
    let from = Infinity;
    let to = -Infinity;
    for (const s of series) {
      if (s.xs.length) { from = Math.min(from, s.xs[0]); to = Math.max(to, s.xs[s.xs.length - 1]); }
    }
    this.range = range || { from, to };
    if (!this.options.mini) this.drawLegend();
    this.draw();
  }

  drawLegend() {
    fill(this.legend, this.series.slice(0, 500).map((s, i) => h('span', {
      class: 'legend-item',
      title: 'click to hide or show',
      onclick: (event) => {
        if (this.hidden.has(i)) this.hidden.delete(i); else this.hidden.add(i);
        event.currentTarget.classList.toggle('off', this.hidden.has(i));
        this.draw();
      },
    }, h('i', { class: 'swatch', style: { background: colour(i) } }), s.label)),
    this.series.length > 500 ? h('span', { class: 'note' }, `… ${this.series.length - 500} more`) : null);
  }

  /** The value range of the visible series within the time range. */
  bounds() {
    let min = Infinity;
    let max = -Infinity;
    this.series.forEach((s, i) => {
      if (this.hidden.has(i)) return;
      for (let j = 0; j < s.ys.length; j += 1) {
        const y = s.ys[j];
        if (Number.isFinite(y) && s.xs[j] >= this.range.from && s.xs[j] <= this.range.to) {
          if (y < min) min = y;
          if (y > max) max = y;
        }
      }
    });
    if (min === Infinity) return { min: 0, max: 1 };
    if (min === max) return { min: min - (Math.abs(min) || 1) / 2, max: max + (Math.abs(max) || 1) / 2 };
    return { min, max };
  }

  draw() {
    const started = performance.now();
    const { canvas } = this;
    const width = canvas.parentElement.clientWidth || 600;
    const height = this.options.mini ? 48 : this.options.height;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    canvas.style.height = `${height}px`;
    const ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const pad = this.options.mini ? { left: 2, right: 2, top: 4, bottom: 4 } : PAD;
    const plot = { x: pad.left, y: pad.top, w: width - pad.left - pad.right, h: height - pad.top - pad.bottom };
    const { from, to } = this.range;
    const { min, max } = this.bounds();
    const span = to > from ? to - from : 1;
    this.scale = {
      plot,
      x: (t) => plot.x + ((t - from) / span) * plot.w,
      y: (v) => plot.y + plot.h - ((v - min) / (max - min)) * plot.h,
      t: (px) => from + ((px - plot.x) / plot.w) * span,
    };
    if (!this.options.mini) this.drawAxes(ctx, plot, min, max);
    let lines = 0;
    ctx.lineWidth = this.options.mini ? 1.5 : 1.25;
    ctx.lineJoin = 'round';
    ctx.save();
    ctx.beginPath();
    ctx.rect(plot.x, plot.y - 1, plot.w, plot.h + 2);
    ctx.clip();
    this.series.forEach((s, i) => {
      if (this.hidden.has(i)) return;
      ctx.strokeStyle = this.options.colour || colour(i);
      ctx.beginPath();
      let pen = false;
      let points = 0;
      for (let j = 0; j < s.xs.length; j += 1) {
        const y = s.ys[j];
        if (!Number.isFinite(y)) { pen = false; continue; }
        const px = this.scale.x(s.xs[j]);
        const py = this.scale.y(y);
        if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
        pen = true;
        points += 1;
      }
      // A lone point is a dot, so a series of one sample still shows.
      if (points === 1) ctx.lineTo(this.scale.x(s.xs.at(-1)) + 0.5, this.scale.y(s.ys.at(-1)));
      ctx.stroke();
      lines += 1;
    });
    ctx.restore();
    this.root.dataset.lines = String(lines);
    this.root.dataset.drawMs = (performance.now() - started).toFixed(1);
  }

  drawAxes(ctx, plot, min, max) {
    const style = getComputedStyle(this.root);
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = style.getPropertyValue('--muted') || '#666';
    ctx.strokeStyle = style.getPropertyValue('--grid') || '#e5e5e5';
    ctx.lineWidth = 1;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (const v of valueTicks(min, max, Math.max(2, Math.floor(plot.h / 40)))) {
      const y = Math.round(this.scale.y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(plot.x, y); ctx.lineTo(plot.x + plot.w, y); ctx.stroke();
      ctx.fillText(short(v), plot.x - 6, y);
    }
    const { from, to } = this.range;
    const { ticks, step } = timeTicks(from, to, Math.max(2, Math.floor(plot.w / 90)));
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    for (const t of ticks) {
      const x = Math.round(this.scale.x(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, plot.y); ctx.lineTo(x, plot.y + plot.h); ctx.stroke();
      ctx.fillText(timeLabel(t, step, to - from), x, plot.y + plot.h + 6);
    }
  }

  listen() {
    let dragFrom = null;
    const local = (event) => {
      const box = this.canvas.getBoundingClientRect();
      return { x: event.clientX - box.left, y: event.clientY - box.top };
    };
    this.canvas.addEventListener('mousedown', (event) => { dragFrom = local(event).x; });
    this.canvas.addEventListener('mousemove', (event) => {
      const { x, y } = local(event);
      this.draw();
      if (dragFrom !== null) this.shade(dragFrom, x);
      this.hover(x, y);
    });
    this.canvas.addEventListener('mouseleave', () => { this.tip.hidden = true; this.draw(); });
    window.addEventListener('mouseup', (event) => {
      if (dragFrom === null) return;
      const to = local(event).x;
      const [a, b] = [dragFrom, to].sort((p, q) => p - q);
      dragFrom = null;
      if (b - a > 4 && this.options.onZoom) {
        this.options.onZoom(Math.round(this.scale.t(a)), Math.round(this.scale.t(b)));
      }
    });
  }

  shade(a, b) {
    const ctx = this.canvas.getContext('2d');
    const { plot } = this.scale;
    ctx.fillStyle = 'rgba(80, 120, 200, 0.15)';
    ctx.fillRect(Math.min(a, b), plot.y, Math.abs(b - a), plot.h);
  }

  /** The values nearest the cursor's time, nearest the cursor's height first. */
  hover(x, y) {
    const { plot } = this.scale;
    if (x < plot.x || x > plot.x + plot.w || !this.series.length) { this.tip.hidden = true; return; }
    const t = this.scale.t(x);
    const rows = [];
    this.series.forEach((s, i) => {
      if (this.hidden.has(i) || !s.xs.length) return;
      const j = nearest(s.xs, t);
      if (Number.isFinite(s.ys[j])) rows.push({ i, s, t: s.xs[j], v: s.ys[j], d: Math.abs(this.scale.y(s.ys[j]) - y) });
    });
    if (!rows.length) { this.tip.hidden = true; return; }
    rows.sort((p, q) => p.d - q.d);
    const ctx = this.canvas.getContext('2d');
    ctx.strokeStyle = 'rgba(0,0,0,0.35)';
    ctx.beginPath(); ctx.moveTo(this.scale.x(rows[0].t) + 0.5, plot.y); ctx.lineTo(this.scale.x(rows[0].t) + 0.5, plot.y + plot.h); ctx.stroke();
    ctx.fillStyle = colour(rows[0].i);
    ctx.beginPath(); ctx.arc(this.scale.x(rows[0].t), this.scale.y(rows[0].v), 3.5, 0, 2 * Math.PI); ctx.fill();
    fill(this.tip,
      h('div', { class: 'tip-time' }, new Date(rows[0].t).toISOString().replace('T', ' ').replace('Z', ' UTC')),
      rows.slice(0, 10).map((r) => h('div', {}, h('i', { class: 'swatch', style: { background: colour(r.i) } }),
        `${r.s.label}: `, h('b', {}, String(r.v)))),
      rows.length > 10 ? h('div', { class: 'note' }, `${rows.length - 10} more`) : null);
    this.tip.hidden = false;
    const left = x + 16 + this.tip.offsetWidth > plot.x + plot.w ? x - 16 - this.tip.offsetWidth : x + 16;
    this.tip.style.left = `${Math.max(0, left)}px`;
    this.tip.style.top = `${plot.y + 4}px`;
  }

  destroy() {
    window.removeEventListener('resize', this.resize);
  }
}
