// DOM and formatting helpers. Every string from the cluster reaches the page as a text node
// or an attribute value set through the DOM, never as HTML: h() has no way to set
// innerHTML, and the rest of the code does not use it.

const SVG_NS = 'http://www.w3.org/2000/svg';

// set applies attrs to el: "class", "text" (textContent), "dataset" ({k: v}), "on*"
// functions as listeners, booleans as present/absent attributes, and anything else as an
// attribute (null and undefined are skipped).
function set(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') el.textContent = String(v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h builds an HTML element: h('a', {href: '#/x', class: 'y'}, 'text', child, [more]).
export function h(tag, attrs, ...children) {
  return append(set(document.createElement(tag), attrs), children);
}

// s builds an SVG element the same way.
export function s(tag, attrs, ...children) {
  return append(set(document.createElementNS(SVG_NS, tag), attrs), children);
}

// icon returns a small decorative inline SVG (hidden from assistive technology).
export function icon(name) {
  const paths = {
    up: 'M4 10l4-4 4 4',
    down: 'M4 6l4 4 4-4',
    updown: 'M5 6.5l3-3 3 3M5 9.5l3 3 3-3',
    retry: 'M12.5 6A5 5 0 1 0 13 9M13 2.5V6H9.5',
    left: 'M10 3L5 8l5 5',
    right: 'M6 3l5 5-5 5',
  };
  return s('svg', {class: 'icon', viewBox: '0 0 16 16', width: 16, height: 16, 'aria-hidden': 'true', focusable: 'false'},
    s('path', {d: paths[name] || '', fill: 'none', stroke: 'currentColor', 'stroke-width': 1.6, 'stroke-linecap': 'round', 'stroke-linejoin': 'round'}));
}

const numberFormat = new Intl.NumberFormat('en-US');
export const fmtNumber = (n) => numberFormat.format(Number(n) || 0);

// ms parses a Kubernetes timestamp; NaN when absent or unreadable.
export function ms(t) {
  if (!t) return NaN;
  const v = Date.parse(t);
  return Number.isFinite(v) ? v : NaN;
}

const dateFormat = new Intl.DateTimeFormat(undefined, {dateStyle: 'medium', timeStyle: 'medium'});
export function fmtDate(t) {
  const v = ms(t);
  return Number.isFinite(v) ? dateFormat.format(v) : '';
}

// fmtDuration renders milliseconds as "850ms", "12s", "3m 4s", "1h 2m", "2d 3h".
export function fmtDuration(d) {
  if (!Number.isFinite(d)) return '';
  if (d < 0) d = 0;
  if (d < 1000) return `${Math.round(d)}ms`;
  let sec = Math.floor(d / 1000);
  const days = Math.floor(sec / 86400); sec -= days * 86400;
  const hours = Math.floor(sec / 3600); sec -= hours * 3600;
  const mins = Math.floor(sec / 60); sec -= mins * 60;
  if (days) return hours ? `${days}d ${hours}h` : `${days}d`;
  if (hours) return mins ? `${hours}h ${mins}m` : `${hours}h`;
  if (mins) return sec ? `${mins}m ${sec}s` : `${mins}m`;
  return `${sec}s`;
}

// timeEl renders a timestamp as <time>, absolute in the title; relative ("5m ago") when
// rel is true.
export function timeEl(t, rel) {
  const v = ms(t);
  if (!Number.isFinite(v)) return h('span', {class: 'muted', text: '—'});
  const el = h('time', {datetime: new Date(v).toISOString(), text: rel ? fmtDuration(Date.now() - v) : dateFormat.format(v)});
  if (rel) el.title = dateFormat.format(v);
  return el;
}

// Phases and the order they are listed in.
export const PIPELINE_PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Suspended', 'Deleting', 'Planned'];
export const STEP_PHASES = ['Pending', 'AwaitingApproval', 'Running', 'Waiting', 'Succeeded', 'Failed', 'Deleting', 'Deleted', 'Planned'];

// phaseClass maps a phase to a CSS class suffix; unknown phases get the neutral one.
export function phaseClass(phase) {
  return STEP_PHASES.includes(phase) || PIPELINE_PHASES.includes(phase) ? phase.toLowerCase() : 'unknown';
}

// badge renders a phase as text on a tinted background: the text carries the meaning, the
// colour only helps.
export function badge(phase) {
  return h('span', {class: `badge phase-${phaseClass(phase)}`, text: phase || 'Unknown'});
}

export function condition(conds, type = 'Ready') {
  return (conds || []).find((c) => c && c.type === type) || null;
}

// kv renders a string map as a key=value list, sorted by key.
export function kvList(map, empty = '—') {
  const keys = Object.keys(map || {}).sort();
  if (!keys.length) return h('span', {class: 'muted', text: empty});
  return h('ul', {class: 'kv'}, keys.map((k) => h('li', {},
    h('span', {class: 'k', text: k}), '=', h('span', {class: 'v', text: map[k]}))));
}

// clip shortens text to n characters for a fixed-width spot (the full text goes in a title).
export function clip(text, n) {
  text = String(text ?? '');
  return text.length > n ? text.slice(0, n - 1) + '…' : text;
}

// throttle runs fn at most once every interval ms, always running the last request
// (trailing), and never while a previous run (a promise) is still going.
export function throttle(fn, interval) {
  let last = 0, timer = null, running = false, pending = false, dead = false;
  const run = async () => {
    timer = null;
    if (dead) return;
    running = true; pending = false; last = Date.now();
    try { await fn(); } catch (e) { /* fn reports its own errors */ }
    running = false;
    if (pending) request();
  };
  const request = () => {
    if (dead) return;
    if (running) { pending = true; return; }
    if (timer) return;
    timer = setTimeout(run, Math.max(0, last + interval - Date.now()));
  };
  request.cancel = () => { dead = true; clearTimeout(timer); };
  return request;
}

// debounce runs fn once calls stop for wait ms.
export function debounce(fn, wait) {
  let timer = null;
  const d = (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), wait); };
  d.cancel = () => clearTimeout(timer);
  return d;
}
