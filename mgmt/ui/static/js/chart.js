// Line charts drawn as inline SVG from the API's *_details objects.
//
// RabbitMQ's details carry {rate} and, when the request asks for an age and
// increment (lengths_age, msg_rates_age), {samples: [{sample, timestamp}]}.
// Length charts plot the samples as they are; rate charts differentiate
// cumulative counter samples. When a server sends no samples, the chart
// keeps its own short history of the values seen on each poll instead.

import {h, s, fmtClock, fmtNum, uid} from './dom.js';

// RANGES are the spans a chart can show, as RabbitMQ's UI offers them:
// [seconds, sample increment in seconds, label]. Ten minutes is the default.
export const RANGES = [
  [60, 5, 'Last minute'], [600, 5, 'Last ten minutes'], [3600, 60, 'Last hour'],
  [28800, 600, 'Last eight hours'], [86400, 1800, 'Last day'],
];
const DEFAULT_RANGE = 600;
// MIN_WINDOW_MS is the shortest span a chart shows.
const MIN_WINDOW_MS = 60 * 1000;
// HISTORY_MAX bounds the client-side history per series (a day at one
// point per poll would be 17,280; older points are dropped first).
const HISTORY_MAX = 2000;

// range is the span the user chose, kept for the tab in sessionStorage so
// every page's charts show the same one.
function range() {
  const secs = Number(sessionStorage.getItem('warren.chart-range'));
  return RANGES.find((r) => r[0] === secs) || RANGES.find((r) => r[0] === DEFAULT_RANGE);
}

function windowMs() {
  return range()[0] * 1000;
}

// ageParams are the query parameters that make the API return samples for
// the chosen range.
export function ageParams() {
  const [age, incr] = range();
  return {
    lengths_age: age, lengths_incr: incr,
    msg_rates_age: age, msg_rates_incr: incr,
    data_rates_age: age, data_rates_incr: incr,
  };
}

// rangePicker is the chart range selector; onChange runs after a change
// (pages refresh at once so the charts redraw over the new span).
export function rangePicker(onChange) {
  const sel = h('select', {id: uid('range')}, RANGES.map(([secs, , label]) => h('option', {value: String(secs), selected: secs === range()[0]}, label)));
  sel.addEventListener('change', () => {
    sessionStorage.setItem('warren.chart-range', sel.value);
    onChange();
  });
  return h('div', {class: 'chart-range field'}, h('label', {for: sel.id}, 'Chart range'), sel);
}

function sortedSamples(details) {
  if (!details || !Array.isArray(details.samples)) {
    return null;
  }
  const pts = [];
  for (const smp of details.samples) {
    if (smp && typeof smp.sample === 'number' && typeof smp.timestamp === 'number') {
      pts.push([smp.timestamp, smp.sample]);
    }
  }
  pts.sort((a, b) => a[0] - b[0]);
  return pts;
}

// lengthPoints returns [[t, value]] from a gauge's samples, or null.
export function lengthPoints(details) {
  const pts = sortedSamples(details);
  return pts && pts.length ? pts : null;
}

// ratePoints returns [[t, per-second rate]] from a counter's cumulative
// samples, or null. A counter that goes down (reset) contributes zero.
export function ratePoints(details) {
  const pts = sortedSamples(details);
  if (!pts || pts.length < 2) {
    return null;
  }
  const out = [];
  for (let i = 1; i < pts.length; i += 1) {
    const dt = (pts[i][0] - pts[i - 1][0]) / 1000;
    if (dt <= 0) {
      continue;
    }
    out.push([pts[i][0], Math.max(0, (pts[i][1] - pts[i - 1][1]) / dt)]);
  }
  return out.length ? out : null;
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten, so axis labels read
// well.
function niceCeil(v) {
  if (!(v > 0)) {
    return 1;
  }
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) {
    if (m * p >= v) {
      return m * p;
    }
  }
  return 10 * p;
}

const W = 640;
const H = 200;
// The left pad fits axis labels like "1.95 KiB/s".
const PAD = {left: 78, right: 12, top: 12, bottom: 24};

// Chart is one figure with a fixed set of series. update() redraws it from
// the latest API object.
export class Chart {
  // specs: [{label, details: (data) => detailsObject, kind: 'length'|'rate',
  //          value: (data) => current number}]
  // format renders values and axis labels; opts.integer keeps axis ticks on
  // whole numbers (message counts).
  constructor(title, specs, format, opts) {
    this.title = title;
    this.integer = Boolean(opts && opts.integer);
    this.specs = specs;
    this.format = format || ((v) => fmtNum(v));
    this.history = specs.map(() => []);
    this.svgBox = h('div', {class: 'chart-svg'});
    this.legend = h('ul', {class: 'legend'});
    const cap = h('figcaption', {id: uid('chart')}, title);
    this.el = h('figure', {class: 'chart', 'aria-labelledby': cap.id}, cap, this.svgBox, this.legend);
  }

  // seriesFor returns the points to plot for spec i: the server's samples if
  // it sent them, otherwise the client-side history.
  seriesFor(i, data, now) {
    const spec = this.specs[i];
    const details = spec.details(data);
    const pts = spec.kind === 'rate' ? ratePoints(details) : lengthPoints(details);
    const cur = spec.value(data);
    const hist = this.history[i];
    if (typeof cur === 'number' && Number.isFinite(cur)) {
      hist.push([now, cur]);
      while (hist.length > HISTORY_MAX || (hist.length && hist[0][0] < now - windowMs())) {
        hist.shift();
      }
    }
    return {points: pts || hist.slice(), current: cur};
  }

  update(data) {
    const now = Date.now();
    const series = this.specs.map((_, i) => this.seriesFor(i, data, now));
    // The window ends at the newest point, not at the browser's clock, so a
    // server whose clock differs still has its samples on the chart. It
    // spans the data it has (objects keep a shorter history than the
    // overview), at least MIN_WINDOW_MS and at most the chosen range.
    let t1 = -Infinity;
    let tMin = Infinity;
    let maxV = 0;
    for (const sr of series) {
      for (const [t, v] of sr.points) {
        t1 = Math.max(t1, t);
        tMin = Math.min(tMin, t);
        maxV = Math.max(maxV, v);
      }
    }
    if (t1 === -Infinity) {
      t1 = now;
      tMin = now;
    }
    const t0 = t1 - Math.min(windowMs(), Math.max(MIN_WINDOW_MS, t1 - tMin));
    let yMax = niceCeil(maxV);
    if (this.integer) {
      yMax = Math.max(4, Math.ceil(yMax / 4) * 4);
    }
    this.svgBox.replaceChildren(this.draw(series, t0, t1, yMax));
    this.legend.replaceChildren(...series.map((sr, i) => h('li', null,
      h('span', {class: 'swatch series-' + i, 'aria-hidden': 'true'}),
      h('span', {class: 'legend-label'}, this.specs[i].label),
      h('span', {class: 'legend-value'}, this.format(sr.current)))));
  }

  draw(series, t0, t1, yMax) {
    const pw = W - PAD.left - PAD.right;
    const ph = H - PAD.top - PAD.bottom;
    const x = (t) => PAD.left + ((t - t0) / (t1 - t0)) * pw;
    const y = (v) => PAD.top + ph - (v / yMax) * ph;
    const summary = this.title + ': ' + series.map((sr, i) => this.specs[i].label + ' ' + this.format(sr.current)).join(', ');
    const grid = [];
    for (let k = 0; k <= 4; k += 1) {
      const v = (yMax * k) / 4;
      const yy = y(v);
      grid.push(s('line', {class: 'grid', x1: PAD.left, x2: W - PAD.right, y1: yy, y2: yy}));
      grid.push(s('text', {class: 'axis', x: PAD.left - 6, y: yy + 4, 'text-anchor': 'end'}, this.format(v)));
    }
    const xs = [
      s('text', {class: 'axis', x: PAD.left, y: H - 6, 'text-anchor': 'start'}, fmtClock(t0)),
      s('text', {class: 'axis', x: PAD.left + pw / 2, y: H - 6, 'text-anchor': 'middle'}, fmtClock((t0 + t1) / 2)),
      s('text', {class: 'axis', x: W - PAD.right, y: H - 6, 'text-anchor': 'end'}, fmtClock(t1)),
    ];
    const lines = series.map((sr, i) => {
      const pts = sr.points.filter(([t]) => t >= t0 && t <= t1);
      if (pts.length === 0) {
        return null;
      }
      if (pts.length === 1) {
        return s('circle', {class: 'dot series-' + i, cx: x(pts[0][0]), cy: y(pts[0][1]), r: 3});
      }
      const d = pts.map(([t, v]) => x(t).toFixed(1) + ',' + y(v).toFixed(1)).join(' ');
      return s('polyline', {class: 'line series-' + i, points: d});
    });
    const empty = series.every((sr) => sr.points.length === 0)
      ? s('text', {class: 'empty', x: PAD.left + pw / 2, y: PAD.top + ph / 2, 'text-anchor': 'middle'}, 'No data yet')
      : null;
    return s('svg', {viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': summary, preserveAspectRatio: 'xMidYMid meet'},
      s('title', null, summary), grid, xs, lines, empty);
  }
}

// queuedChart charts queue lengths; get picks the object holding them
// (queue_totals on the overview, the queue itself on its page).
export function queuedChart(get) {
  return new Chart('Queued messages', [
    {label: 'Ready', kind: 'length', details: (d) => get(d).messages_ready_details, value: (d) => get(d).messages_ready},
    {label: 'Unacked', kind: 'length', details: (d) => get(d).messages_unacknowledged_details, value: (d) => get(d).messages_unacknowledged},
    {label: 'Total', kind: 'length', details: (d) => get(d).messages_details, value: (d) => get(d).messages},
  ], (v) => fmtNum(v, 0), {integer: true});
}

// rateSpecs builds chart series for message_stats counters.
export function rateSpecs(statsOf, keys) {
  return keys.map(([key, label]) => ({
    label: label,
    kind: 'rate',
    details: (d) => (statsOf(d) || {})[key + '_details'],
    value: (d) => {
      const det = (statsOf(d) || {})[key + '_details'];
      return det ? det.rate : 0;
    },
  }));
}

export const MESSAGE_RATE_KEYS = [
  ['publish', 'Publish'],
  ['confirm', 'Publisher confirm'],
  ['deliver_get', 'Deliver / get'],
  ['redeliver', 'Redelivered'],
  ['ack', 'Consumer ack'],
  ['return_unroutable', 'Unroutable (return)'],
  ['drop_unroutable', 'Unroutable (drop)'],
];

