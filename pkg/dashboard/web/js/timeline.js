// The timeline of a pipeline's steps, drawn as SVG: one row per step, a bar from its start
// to its completion (to now while it runs), coloured by phase and always labelled with the
// phase in text; a retry mark when the hook is on its second attempt or later; a hatched,
// dashed segment while the step waits out its backoff, up to its next attempt; a mark at
// each decision on a step that waits for approval (approve, reject; hollow when it did not
// count); a time axis.
import {s, ms, fmtDuration, fmtDate, phaseClass, clip} from './dom.js';

const LABEL_W = 180;   // step names
const INFO_W = 200;    // phase, attempt, duration
const AXIS_H = 30;
const ROW_H = 30;
const BAR_H = 16;
const PAD = 12;

// Phases whose bar grows until now.
export const ACTIVE = new Set(['AwaitingApproval', 'Running', 'Waiting', 'Deleting']);

const TICKS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800]
  .map((x) => x * 1000);

const clock = {
  s: new Intl.DateTimeFormat(undefined, {hour: '2-digit', minute: '2-digit', second: '2-digit'}),
  m: new Intl.DateTimeFormat(undefined, {hour: '2-digit', minute: '2-digit'}),
  d: new Intl.DateTimeFormat(undefined, {month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit'}),
};

// span is where a step's bar runs: [start, end, waitEnd]; start NaN when it never started.
export function span(st, now) {
  const start = ms(st.startTime);
  if (!Number.isFinite(start)) return {start: NaN, end: NaN, waitEnd: NaN};
  let end = ms(st.completionTime);
  const active = ACTIVE.has(st.phase);
  if (active || !Number.isFinite(end)) end = active ? now : Math.max(start, ms(st.hookStartTime) || start);
  let waitEnd = NaN;
  if (st.phase === 'Waiting') {
    const next = ms(st.nextAttemptTime);
    if (Number.isFinite(next)) {
      end = Math.min(end, Math.max(start, next));
      if (next > end) waitEnd = next;
    }
  }
  return {start, end: Math.max(start, end), waitEnd};
}

function describe(st, sp) {
  const parts = [`${st.name}${st.executor ? ` (${st.executor})` : ''}: ${st.phase || 'Pending'}`];
  if ((st.attempts || 0) > 1) parts.push(`attempt ${st.attempts}`);
  if (st.hook) parts.push(`hook ${st.hook}`);
  if (Number.isFinite(sp.start)) {
    parts.push(`started ${fmtDate(st.startTime)}`);
    const going = st.phase === 'AwaitingApproval' ? 'waiting for approval for' : 'running for';
    parts.push(`${ACTIVE.has(st.phase) ? going : 'took'} ${fmtDuration(sp.end - sp.start)}`);
  } else {
    parts.push('not started');
  }
  if (st.phase === 'Waiting' && st.nextAttemptTime) parts.push(`next attempt at ${fmtDate(st.nextAttemptTime)}`);
  if (st.phase === 'AwaitingApproval' && st.approval && st.approval.deadline) parts.push(`deadline ${fmtDate(st.approval.deadline)}`);
  return parts.join(', ');
}

// decisionsOf are the decisions a step's approval recorded.
function decisionsOf(st) {
  const d = st.approval && st.approval.decisions;
  return Array.isArray(d) ? d.filter((x) => x && typeof x === 'object') : [];
}

// decisionText says who decided what, when, with what comment, and whether it counted.
export function decisionText(d) {
  const verb = d.decision === 'Reject' ? 'rejected' : d.decision === 'Approve' ? 'approved' : String(d.decision || 'decided');
  let t = `${d.user || 'someone'} ${verb}`;
  if (d.time) t += ` at ${fmtDate(d.time)}`;
  if (d.comment) t += `: ${d.comment}`;
  t += d.counted ? ' (counted)' : ` (ignored${d.ignored ? `: ${d.ignored}` : ''})`;
  return t;
}

// render draws steps ([{name, executor, phase, hook, attempts, startTime, completionTime,
// hookStartTime, nextAttemptTime, approval}]) at time now into an SVG width pixels wide.
export function render(steps, now, width) {
  const W = Math.max(640, Math.floor(width || 0));
  const x0 = LABEL_W;
  const x1 = W - INFO_W - PAD;
  const H = AXIS_H + Math.max(1, steps.length) * ROW_H + 6;
  const spans = steps.map((st) => span(st, now));

  let t0 = Infinity, t1 = -Infinity;
  for (const sp of spans) {
    if (!Number.isFinite(sp.start)) continue;
    t0 = Math.min(t0, sp.start);
    t1 = Math.max(t1, sp.end, Number.isFinite(sp.waitEnd) ? sp.waitEnd : -Infinity);
  }
  const started = Number.isFinite(t0);
  if (started) {
    if (t1 - t0 < 1000) t1 = t0 + 1000;
    t1 += (t1 - t0) * 0.02;
  }
  const x = (t) => x0 + ((t - t0) / (t1 - t0)) * (x1 - x0);

  const summary = steps.map((st, i) => {
    const sp = spans[i];
    let t = `${st.name}: ${st.phase || 'Pending'}`;
    if ((st.attempts || 0) > 1) t += `, attempt ${st.attempts}`;
    if (Number.isFinite(sp.start)) t += `, ${fmtDuration(sp.end - sp.start)}`;
    if (st.phase === 'Waiting' && st.nextAttemptTime) t += `, waiting until ${fmtDate(st.nextAttemptTime)}`;
    const decisions = decisionsOf(st);
    if (decisions.length) t += `, ${decisions.map(decisionText).join(', ')}`;
    return t;
  }).join('; ');

  const svg = s('svg', {
    class: 'timeline', 'data-testid': 'timeline', role: 'img', width: W, height: H,
    viewBox: `0 0 ${W} ${H}`, 'aria-labelledby': 'tl-title tl-desc',
  },
  s('title', {id: 'tl-title', text: `Timeline of ${steps.length} step${steps.length === 1 ? '' : 's'}`}),
  s('desc', {id: 'tl-desc', text: summary || 'No steps.'}),
  s('defs', {},
    s('pattern', {id: 'tl-hatch', patternUnits: 'userSpaceOnUse', width: 6, height: 6, patternTransform: 'rotate(45)'},
      s('rect', {class: 'hatch-bg', width: 6, height: 6}),
      s('line', {class: 'hatch-line', x1: 0, y1: 0, x2: 0, y2: 6, 'stroke-width': 3}))));

  // Row stripes.
  steps.forEach((_, i) => {
    if (i % 2) svg.append(s('rect', {class: 'tl-stripe', x: 0, y: AXIS_H + i * ROW_H, width: W, height: ROW_H}));
  });

  // Axis: ticks at round intervals, labelled with the clock time.
  const axis = s('g', {class: 'tl-axis', 'aria-hidden': 'true'});
  axis.append(s('line', {class: 'tl-axis-line', x1: x0, x2: x1, y1: AXIS_H - 0.5, y2: AXIS_H - 0.5}));
  if (started) {
    const maxTicks = Math.max(2, Math.floor((x1 - x0) / 90));
    const step = TICKS.find((t) => (t1 - t0) / t <= maxTicks) || TICKS[TICKS.length - 1];
    const fmt = step >= 86400000 || new Date(t0).toDateString() !== new Date(t1).toDateString() ? clock.d : step < 60000 ? clock.s : clock.m;
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const tx = Math.round(x(t)) + 0.5;
      axis.append(
        s('line', {class: 'tl-grid', x1: tx, x2: tx, y1: AXIS_H - 5, y2: H}),
        s('text', {class: 'tl-tick', x: tx, y: AXIS_H - 10, 'text-anchor': 'middle', text: fmt.format(t)}));
    }
  } else {
    axis.append(s('text', {class: 'tl-tick', x: x0, y: AXIS_H - 10, text: 'No step has started yet.'}));
  }
  svg.append(axis);

  steps.forEach((st, i) => {
    const sp = spans[i];
    const y = AXIS_H + i * ROW_H;
    const cy = y + ROW_H / 2;
    const phase = st.phase || 'Pending';
    const cls = phaseClass(phase);
    const g = s('g', {class: 'tl-row', dataset: {step: st.name}});
    const label = s('text', {class: 'tl-label', x: PAD, y: cy, 'dominant-baseline': 'central', text: clip(st.name, 24)});
    g.append(label);

    let barEnd = x0;
    if (Number.isFinite(sp.start)) {
      const bx = x(sp.start);
      const bw = Math.max(3, x(sp.end) - bx);
      barEnd = bx + bw;
      g.append(s('rect', {
        class: `tl-bar phase-${cls}`, 'data-testid': 'timeline-bar', x: bx.toFixed(1), y: cy - BAR_H / 2,
        width: bw.toFixed(1), height: BAR_H, rx: 3, dataset: {step: st.name, phase},
      }, s('title', {text: describe(st, sp)})));
      if (Number.isFinite(sp.waitEnd)) {
        const wx = x(sp.end);
        const ww = Math.max(3, x(sp.waitEnd) - wx);
        barEnd = wx + ww;
        g.append(s('rect', {
          class: 'tl-wait', 'data-testid': 'timeline-wait', x: wx.toFixed(1), y: cy - BAR_H / 2 + 1,
          width: ww.toFixed(1), height: BAR_H - 2, fill: 'url(#tl-hatch)', 'stroke-dasharray': '4 3',
          dataset: {step: st.name},
        }, s('title', {text: `${st.name}: waiting to retry until ${fmtDate(st.nextAttemptTime)}`})));
      }
    } else {
      // Not started: an empty, dashed slot at the start of the axis.
      g.append(s('rect', {
        class: 'tl-bar tl-empty', 'data-testid': 'timeline-slot', x: x0, y: cy - BAR_H / 2, width: 0, height: BAR_H,
        dataset: {step: st.name, phase},
      }, s('title', {text: describe(st, sp)})));
    }

    if ((st.attempts || 0) > 1) {
      // Retry mark: a circular arrow just after the bar.
      const mx = Math.min(barEnd + 4, x1 - 14);
      g.append(s('g', {class: 'tl-retry', 'data-testid': 'timeline-retry', transform: `translate(${mx.toFixed(1)} ${cy - 7})`, dataset: {step: st.name}},
        s('title', {text: `${st.name}: attempt ${st.attempts}`}),
        s('circle', {cx: 7, cy: 7, r: 7}),
        s('path', {d: 'M10.2 5.2A3.6 3.6 0 1 0 10.6 8.2M10.6 2.8V5.6H7.8', fill: 'none', 'stroke-width': 1.5, 'stroke-linecap': 'round', 'stroke-linejoin': 'round'})));
    }

    // Decisions on its approval, at their time: a circle approves, a diamond rejects; hollow
    // when it did not count. The title says it all in words.
    if (started) {
      for (const d of decisionsOf(st)) {
        const t = ms(d.time);
        if (!Number.isFinite(t)) continue;
        const dx = Math.min(Math.max(x(t), x0), x1);
        const reject = d.decision === 'Reject';
        const shape = reject
          ? s('rect', {x: -4, y: -4, width: 8, height: 8, transform: 'rotate(45)'})
          : s('circle', {cx: 0, cy: 0, r: 4.5});
        g.append(s('g', {
          class: `tl-decision ${reject ? 'tl-reject' : 'tl-approve'}${d.counted ? '' : ' tl-ignored'}`,
          'data-testid': 'timeline-decision', transform: `translate(${dx.toFixed(1)} ${cy})`,
          dataset: {step: st.name, user: String(d.user || ''), decision: String(d.decision || '')},
        }, s('title', {text: `${st.name}: ${decisionText(d)}`}), shape));
      }
    }

    // The phase in words, with its swatch: colour never carries the meaning alone.
    let info = phase;
    if ((st.attempts || 0) > 1) info += ` · attempt ${st.attempts}`;
    if (Number.isFinite(sp.start)) info += ` · ${fmtDuration(sp.end - sp.start)}`;
    g.append(
      s('rect', {class: `tl-swatch phase-${cls}`, x: x1 + PAD, y: cy - 5, width: 10, height: 10, rx: 2}),
      s('text', {class: 'tl-info', x: x1 + PAD + 16, y: cy, 'dominant-baseline': 'central', text: info}));
    if (st.name.length > 24) label.append(s('title', {text: st.name}));
    svg.append(g);
  });

  if (started && steps.some((st) => ACTIVE.has(st.phase)) && now <= t1) {
    const nx = Math.round(x(now)) + 0.5;
    svg.append(s('line', {class: 'tl-now', x1: nx, x2: nx, y1: AXIS_H - 4, y2: H, 'aria-hidden': 'true'}));
  }
  return svg;
}
