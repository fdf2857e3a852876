// DOM building and formatting helpers shared by every page.
//
// Everything that comes from the broker (queue names, payloads, client
// properties) is inserted as text nodes, never as markup: h() has no way to
// set innerHTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

let idCounter = 0;

// uid returns a document-unique id for label/for and aria-describedby pairs.
export function uid(prefix) {
  idCounter += 1;
  return (prefix || 'id') + '-' + idCounter;
}

function append(parent, child) {
  if (child === null || child === undefined || child === false) {
    return;
  }
  if (Array.isArray(child)) {
    for (const c of child) {
      append(parent, c);
    }
    return;
  }
  if (child instanceof Node) {
    parent.appendChild(child);
    return;
  }
  parent.appendChild(document.createTextNode(String(child)));
}

function setAttrs(el, attrs) {
  if (!attrs) {
    return;
  }
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) {
      continue;
    }
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === 'class') {
      el.setAttribute('class', v);
    } else if (k === 'value' && 'value' in el) {
      el.value = v;
    } else if (k === 'checked' || k === 'selected') {
      el[k] = Boolean(v);
    } else if (v === true) {
      el.setAttribute(k, '');
    } else {
      el.setAttribute(k, String(v));
    }
  }
}

// h creates an HTML element: h('a', {href: '#/x'}, 'text', child, [more]).
// Attributes named on* with a function value become event listeners; true
// sets a boolean attribute; null, undefined and false are left out.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// add appends children to parent with h's rules: arrays are flattened and
// null, undefined and false are skipped (Element.append would print them).
export function add(parent, ...children) {
  append(parent, children);
  return parent;
}

// s creates an SVG element, with the same conventions as h.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// focusKey returns the identity of a focusable element that survives
// re-rendering: its data-focus-key, else its id.
function focusKey(el) {
  if (!el || !(el instanceof Element)) {
    return null;
  }
  return el.getAttribute('data-focus-key') || el.id || null;
}

// fill replaces parent's children. If the focused element was inside parent,
// the element with the same data-focus-key (or id) in the new content gets the
// focus back, so the 5-second refresh never throws a keyboard user out.
export function fill(parent, ...children) {
  const active = document.activeElement;
  const hadFocus = active && parent.contains(active);
  const key = hadFocus ? focusKey(active) : null;
  const frag = document.createDocumentFragment();
  append(frag, children);
  parent.replaceChildren(frag);
  if (!hadFocus) {
    return;
  }
  let target = null;
  if (key) {
    for (const el of parent.querySelectorAll('[data-focus-key], [id]')) {
      if (focusKey(el) === key) {
        target = el;
        break;
      }
    }
  }
  if (target) {
    target.focus({preventScroll: true});
  } else {
    // The element is gone (its row was deleted): keep focus near it.
    const holder = parent.closest('[tabindex]') || parent.closest('section');
    if (holder) {
      if (!holder.hasAttribute('tabindex')) {
        holder.setAttribute('tabindex', '-1');
      }
      holder.focus({preventScroll: true});
    }
  }
}

// route builds a hash link from raw segments: route('queues', '/', 'q') is
// "#/queues/%2F/q".
export function route(...segments) {
  return '#/' + segments.map((x) => encodeURIComponent(x)).join('/');
}

export function link(text, href, attrs) {
  return h('a', Object.assign({href: href, 'data-focus-key': 'link:' + href}, attrs || {}), text);
}

// ---- formatting --------------------------------------------------------

export function isNum(v) {
  return typeof v === 'number' && Number.isFinite(v);
}

export function fmtInt(v) {
  if (!isNum(v)) {
    return '–';
  }
  return Math.round(v).toLocaleString('en-US');
}

export function fmtNum(v, digits) {
  if (!isNum(v)) {
    return '–';
  }
  const d = digits === undefined ? 2 : digits;
  if (Math.abs(v) >= 100 || Number.isInteger(v)) {
    return Math.round(v).toLocaleString('en-US');
  }
  return v.toLocaleString('en-US', {maximumFractionDigits: d, minimumFractionDigits: 0});
}

export function fmtRate(v) {
  if (!isNum(v)) {
    return '–';
  }
  return fmtNum(v, v < 10 ? 2 : 1) + '/s';
}

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function fmtBytes(v) {
  if (!isNum(v)) {
    return '–';
  }
  let n = v;
  let i = 0;
  while (Math.abs(n) >= 1024 && i < BYTE_UNITS.length - 1) {
    n /= 1024;
    i += 1;
  }
  return (i === 0 ? String(Math.round(n)) : n.toFixed(n < 10 ? 2 : 1)) + ' ' + BYTE_UNITS[i];
}

export function fmtByteRate(v) {
  if (!isNum(v)) {
    return '–';
  }
  return fmtBytes(v) + '/s';
}

export function fmtDuration(ms) {
  if (!isNum(ms)) {
    return '–';
  }
  let sec = Math.floor(ms / 1000);
  const d = Math.floor(sec / 86400);
  sec -= d * 86400;
  const hh = Math.floor(sec / 3600);
  sec -= hh * 3600;
  const mm = Math.floor(sec / 60);
  sec -= mm * 60;
  if (d > 0) {
    return d + 'd ' + hh + 'h';
  }
  if (hh > 0) {
    return hh + 'h ' + mm + 'm';
  }
  if (mm > 0) {
    return mm + 'm ' + sec + 's';
  }
  return sec + 's';
}

function pad2(n) {
  return n < 10 ? '0' + n : String(n);
}

export function fmtClock(ms) {
  const d = new Date(ms);
  return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
}

// fmtTime formats milliseconds since the epoch (RabbitMQ's connected_at).
export function fmtTime(ms) {
  if (!isNum(ms)) {
    return '–';
  }
  const d = new Date(ms);
  return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + fmtClock(ms);
}

export function fmtBool(v) {
  if (v === true) {
    return 'yes';
  }
  if (v === false) {
    return 'no';
  }
  return '–';
}

export function fmtValue(v) {
  if (v === null || v === undefined) {
    return '–';
  }
  if (typeof v === 'object') {
    return JSON.stringify(v);
  }
  return String(v);
}

// get reads a dotted path ("message_stats.publish_details.rate") from obj.
export function get(obj, pathStr) {
  let cur = obj;
  for (const part of pathStr.split('.')) {
    if (cur === null || cur === undefined) {
      return undefined;
    }
    cur = cur[part];
  }
  return cur;
}

// ---- widgets -----------------------------------------------------------

// kvTable renders an object's entries as a two-column table of name and
// value; nested objects become nested tables.
export function kvTable(obj, caption) {
  const entries = obj ? Object.entries(obj) : [];
  if (entries.length === 0) {
    return h('p', {class: 'muted'}, caption ? caption + ': none' : 'None');
  }
  entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return h('table', {class: 'kv'},
    caption ? h('caption', null, caption) : null,
    h('tbody', null, entries.map(([k, v]) => h('tr', null,
      h('th', {scope: 'row'}, k),
      h('td', null, v !== null && typeof v === 'object' && !Array.isArray(v) ? kvTable(v) : fmtValue(v))))));
}

// details renders label/value pairs as a description list.
export function details(pairs) {
  return h('dl', {class: 'details'}, pairs.filter((p) => p).map(([k, v]) => [
    h('dt', null, k),
    h('dd', null, v === null || v === undefined || v === '' ? '–' : v),
  ]));
}

// field wraps a control with its label; hint text is tied to the control with
// aria-describedby.
export function field(label, control, hint) {
  if (!control.id) {
    control.id = uid('f');
  }
  let hintEl = null;
  if (hint) {
    hintEl = h('span', {class: 'hint', id: uid('hint')}, hint);
    control.setAttribute('aria-describedby', hintEl.id);
  }
  const isCheck = control.type === 'checkbox' || control.type === 'radio';
  if (isCheck) {
    return h('div', {class: 'field field-check'}, control, h('label', {for: control.id}, label), hintEl);
  }
  return h('div', {class: 'field'}, h('label', {for: control.id}, label), control, hintEl);
}

export function select(options, value, attrs) {
  return h('select', attrs || null, options.map((o) => {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    return h('option', {value: v, selected: v === value}, label);
  }));
}

export function button(label, onClick, attrs) {
  return h('button', Object.assign({type: 'button', class: 'btn', onclick: onClick}, attrs || {}), label);
}

// busy disables a button while the promise-returning fn runs, so a double
// click never sends a request twice.
export async function busy(btn, fn) {
  if (btn.disabled) {
    return undefined;
  }
  btn.disabled = true;
  btn.setAttribute('aria-busy', 'true');
  try {
    return await fn();
  } finally {
    btn.disabled = false;
    btn.removeAttribute('aria-busy');
  }
}

// notify shows a short message in the polite live region and removes it
// after a while; errors stay longer and use role=alert.
export function notify(message, kind) {
  const box = document.getElementById('toasts');
  if (!box) {
    return;
  }
  const isErr = kind === 'error';
  const el = h('div', {class: 'toast ' + (isErr ? 'toast-error' : 'toast-ok'), role: isErr ? 'alert' : null}, message);
  box.appendChild(el);
  while (box.children.length > 4) {
    box.firstElementChild.remove();
  }
  setTimeout(() => el.remove(), isErr ? 10000 : 5000);
}

// errorText turns an ApiError or any other error into one line for the user.
export function errorText(err) {
  if (err && err.reason) {
    return err.reason;
  }
  if (err && err.message) {
    return err.message;
  }
  return String(err);
}

// confirmAction asks in a modal <dialog> and resolves to true if the user
// confirms. The dialog traps focus and Escape cancels it, natively.
export function confirmAction(message, confirmLabel) {
  return new Promise((resolve) => {
    const ok = h('button', {type: 'submit', class: 'btn btn-danger', value: 'ok'}, confirmLabel || 'Confirm');
    const cancel = h('button', {type: 'submit', class: 'btn', value: 'cancel'}, 'Cancel');
    const title = h('h2', {id: uid('dlg')}, 'Please confirm');
    const dlg = h('dialog', {class: 'confirm', 'aria-labelledby': title.id},
      h('form', {method: 'dialog'}, title, h('p', null, message), h('div', {class: 'actions'}, cancel, ok)));
    const back = document.activeElement;
    dlg.addEventListener('close', () => {
      resolve(dlg.returnValue === 'ok');
      dlg.remove();
      if (back && back.isConnected) {
        back.focus();
      }
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

// parseJSONObject reads an optional JSON object typed into a textarea.
// Empty text is an empty object; anything else must be a JSON object.
export function parseJSONObject(text, what) {
  const t = (text || '').trim();
  if (t === '') {
    return {};
  }
  let v;
  try {
    v = JSON.parse(t);
  } catch (e) {
    throw new Error(what + ' is not valid JSON: ' + e.message);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new Error(what + ' must be a JSON object, like {"x-message-ttl": 60000}');
  }
  return v;
}

// section wraps content under a heading; the heading labels the region.
export function section(title, ...children) {
  const hd = h('h2', {id: uid('sec')}, title);
  return h('section', {class: 'panel', 'aria-labelledby': hd.id}, hd, children);
}

// scrollBox makes wide tables scroll inside a focusable region, so keyboard
// users can scroll them too.
export function scrollBox(label, child) {
  return h('div', {class: 'scroll', role: 'region', 'aria-label': label, tabindex: '0'}, child);
}
