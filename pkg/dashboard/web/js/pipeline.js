// The Pipeline page: header, timeline, steps, plan, events, and the actions (retry,
// suspend or resume, delete), each confirmed in a dialog. A change of this pipeline or of
// its Events on the live stream re-fetches it, at most every 500 ms; while a step runs a
// 1 s timer redraws the timeline and the running durations, and stops when none runs.
import {h, ms, fmtDate, fmtDuration, timeEl, badge, condition, kvList, throttle} from './dom.js';
import {api, errorText, isAbort, seg} from './api.js';
import {href} from './router.js';
import {setAlert, setNotice, pageTitle, focusTitle, confirmDialog, section, empty} from './ui.js';
import {render as renderTimeline, span, ACTIVE} from './timeline.js';
import {listHash} from './pipelines.js';

const TRIGGER_LABEL = 'stepwise.dev/trigger';
const RETRY_ANNOTATION = 'stepwise.dev/retry';

export function mount(root, route) {
  const [, ns, name] = route.parts;
  const path = 'pipelines/' + seg(ns, name);
  let ctrl = null;
  let seq = 0;
  let destroyed = false;
  let pipeline = null;   // the last Pipeline shown
  let steps = [];        // merged spec and status steps
  let inFlight = false;  // an action is running
  let timer = null;      // the 1 s timer while a step runs
  let liveCells = [];    // duration cells of running steps: [{el, st}]

  document.title = `${name} — Stepwise`;
  const crumbs = h('nav', {class: 'breadcrumb', 'aria-label': 'Breadcrumb'},
    h('ol', {},
      h('li', {}, h('a', {href: listHash(), text: 'Pipelines'})),
      h('li', {}, h('a', {href: href(['pipelines'], {namespace: ns}), text: ns})),
      h('li', {}, h('span', {'aria-current': 'page', text: name}))));
  const title = pageTitle(name, ns);
  const head = h('div', {class: 'detail-head'});

  // Actions: persistent buttons, so that the focus stays on them across refreshes.
  const btn = (id, label, cls) => h('button', {type: 'button', class: `btn ${cls || ''}`, 'data-testid': `action-${id}`, text: label});
  const retryBtn = btn('retry', 'Retry…');
  const suspendBtn = btn('suspend', 'Suspend…', 'secondary');
  const resumeBtn = btn('resume', 'Resume…', 'secondary');
  const deleteBtn = btn('delete', 'Delete…', 'danger');
  const actions = h('div', {class: 'actions', role: 'group', 'aria-label': 'Pipeline actions'}, retryBtn, suspendBtn, resumeBtn, deleteBtn);
  retryBtn.addEventListener('click', () => act('retry'));
  suspendBtn.addEventListener('click', () => act('suspend'));
  resumeBtn.addEventListener('click', () => act('resume'));
  deleteBtn.addEventListener('click', () => act('delete'));

  const tlBox = h('div', {class: 'timeline-box'});
  const stepsBox = h('div', {class: 'table-wrap'});
  const planBox = h('div');
  const paramsBox = h('div');
  const eventsBox = h('div', {class: 'table-wrap'});
  const content = h('div', {class: 'detail', hidden: true},
    h('div', {class: 'head-row'}, head, actions),
    section('Timeline', 'sec-timeline', tlBox),
    section('Steps', 'sec-steps', stepsBox),
    planBox,
    paramsBox,
    section('Events', 'sec-events', eventsBox));
  const gone = h('div', {hidden: true});
  root.replaceChildren(crumbs, title, content, gone);
  focusTitle();

  // --- load -----------------------------------------------------------------------------
  async function load() {
    if (destroyed) return;
    if (ctrl) ctrl.abort();
    const my = ++seq;
    ctrl = new AbortController();
    content.setAttribute('aria-busy', 'true');
    try {
      const data = await api(path, {signal: ctrl.signal});
      if (my !== seq || destroyed) return;
      if (!data.pipeline) throw new Error('the server sent no pipeline');
      setAlert('');
      render(data.pipeline, Array.isArray(data.events) ? data.events : []);
    } catch (e) {
      if (isAbort(e) || my !== seq || destroyed) return;
      if (e.status === 404 && pipeline) {
        // It was here and is gone: deleted.
        setNotice(`Pipeline ${ns}/${name} was deleted.`);
        showGone('This pipeline no longer exists.');
      } else if (e.status === 403 || e.status === 401 || e.status === 404) {
        setAlert(errorText(e));
        showGone('');
      } else {
        setAlert(errorText(e));
      }
    } finally {
      if (my === seq) content.removeAttribute('aria-busy');
    }
  }

  // showGone hides everything of the pipeline: it is gone, or the user may not see it.
  function showGone(text) {
    pipeline = null;
    stopTimer();
    content.hidden = true;
    head.replaceChildren(); tlBox.replaceChildren(); stepsBox.replaceChildren();
    planBox.replaceChildren(); paramsBox.replaceChildren(); eventsBox.replaceChildren();
    gone.replaceChildren(...(text ? [empty(text), h('p', {}, h('a', {href: listHash(), text: 'Back to the pipelines'}))] : []));
    gone.hidden = !text;
  }

  function render(p, events) {
    pipeline = p;
    const spec = p.spec || {};
    const status = p.status || {};
    const meta = p.metadata || {};
    steps = mergeSteps(spec, status);
    gone.hidden = true;
    content.hidden = false;

    // Header.
    const ready = condition(status.conditions, 'Ready');
    const template = (spec.templateRef && spec.templateRef.name) || (status.template && status.template.name) || '';
    const labels = meta.labels || {};
    const owner = (meta.ownerReferences || []).find((o) => o && o.kind === 'PipelineTrigger');
    const trigger = labels[TRIGGER_LABEL] || (owner && owner.name) || '';
    const phase = status.phase || 'Pending';
    const tags = [h('span', {'data-testid': 'pipeline-phase'}, badge(phase))];
    if (spec.suspend) tags.push(h('span', {class: 'tag', text: 'Suspended'}));
    if (spec.dryRun) tags.push(h('span', {class: 'tag', text: 'Dry run'}));
    if (meta.deletionTimestamp) tags.push(h('span', {class: 'tag', text: 'Being deleted'}));
    if (retryRequested(p)) tags.push(h('span', {class: 'tag', text: 'Retry requested'}));
    const start = ms(status.startTime);
    let end = ms(status.completionTime);
    const going = phase === 'Running' || phase === 'Deleting' || phase === 'Pending';
    if (!Number.isFinite(end) && !going) {
      // Stopped (failed, suspended): until the last step that ended.
      end = Math.max(...steps.map((st) => ms(st.completionTime)).filter(Number.isFinite), start);
    }
    const rows = [
      ['Ready', ready ? readyText(ready) : 'No Ready condition yet'],
      ['Template', template ? h('a', {href: href(['pipelines'], {namespace: ns, template}), text: template, title: 'Pipelines of this template'}) : '—'],
      ['Trigger', trigger ? h('a', {href: href(['pipelines'], {namespace: ns, trigger}), text: trigger, title: 'Pipelines of this trigger'}) : '—'],
      ['Progress', [status.progress || '—', status.currentStep ? ` (current step: ${status.currentStep})` : '']],
      ['Created', timeEl(meta.creationTimestamp)],
      ['Started', timeEl(status.startTime)],
      ['Duration', Number.isFinite(start) ? fmtDuration((Number.isFinite(end) ? end : Date.now()) - start) + (Number.isFinite(end) ? '' : ' so far') : '—'],
    ];
    if (spec.serviceAccountName) rows.push(['Service account', spec.serviceAccountName]);
    head.replaceChildren(
      h('div', {class: 'tags'}, tags),
      h('dl', {class: 'facts'}, rows.map(([k, v]) => [h('dt', {text: k}), h('dd', {}, v)])));
    if (ready && (phase === 'Failed' || ready.reason === 'TeardownFailed')) head.querySelector('dd').classList.add('ready-msg');

    renderActions();

    // Timeline and steps.
    drawTimeline();
    stepsBox.replaceChildren(stepsTable());
    const planned = steps.filter((st) => st.plan);
    planBox.replaceChildren(...(planned.length ? [section('Plan', 'sec-plan', planned.map(planView))] : []));
    const params = (status.template && status.template.params) || spec.params || {};
    paramsBox.replaceChildren(section('Parameters', 'sec-params', Object.keys(params).length ? kvList(params) : empty('No parameters.')));
    eventsBox.replaceChildren(eventsTable(events));

    if (steps.some((st) => ACTIVE.has(st.phase))) startTimer(); else stopTimer();
  }

  function drawTimeline() {
    if (!pipeline) return;
    const w = tlBox.clientWidth || root.clientWidth || 900;
    tlBox.replaceChildren(steps.length ? renderTimeline(steps, Date.now(), w) : empty('This pipeline has no steps yet.'));
  }

  function stepsTable() {
    liveCells = [];
    const now = Date.now();
    const rows = steps.map((st) => {
      const sp = span(st, now);
      const dur = h('td', {class: 'nowrap', text: Number.isFinite(sp.start) ? fmtDuration(sp.end - sp.start) : '—'});
      if (ACTIVE.has(st.phase) && Number.isFinite(sp.start)) liveCells.push({el: dur, st});
      const phaseCell = h('td', {}, badge(st.phase || 'Pending'));
      if (st.phase === 'Waiting' && st.nextAttemptTime) {
        phaseCell.append(h('div', {class: 'small'}, 'next attempt ', timeEl(st.nextAttemptTime)));
      }
      return h('tr', {dataset: {step: st.name}},
        h('th', {scope: 'row'}, h('div', {text: st.name}), st.executor ? h('div', {class: 'small mono', text: st.executor}) : null),
        phaseCell,
        h('td', {text: st.hook || '—'}),
        h('td', {class: 'num', text: st.attempts ? String(st.attempts) : '—'}),
        h('td', {class: 'nowrap'}, timeEl(st.startTime)),
        dur,
        h('td', {class: 'wrap', text: st.message || ''}),
        h('td', {class: 'col-outputs'}, kvList(st.outputs)),
        h('td', {}, conditionsList(st.conditions)));
    });
    return h('table', {class: 'data steps', 'data-testid': 'steps-table'},
      h('caption', {class: 'visually-hidden', text: 'Steps, in the order they run'}),
      h('thead', {}, h('tr', {}, ['Step', 'Phase', 'Hook', 'Attempts', 'Started', 'Duration', 'Message', 'Outputs', 'Conditions']
        .map((t) => h('th', {scope: 'col', class: t === 'Attempts' ? 'num' : null, text: t})))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', {colspan: 9, text: 'No steps.'}))));
  }

  function planView(st) {
    const plan = st.plan || {};
    const details = Array.isArray(plan.details) ? plan.details : [];
    const warnings = Array.isArray(plan.warnings) ? plan.warnings : [];
    const id = 'plan-' + st.name;
    return h('div', {class: 'plan', 'aria-labelledby': id, role: 'group'},
      h('h3', {id, text: st.name}),
      plan.summary ? h('p', {text: plan.summary}) : null,
      details.length ? h('div', {class: 'table-wrap'}, h('table', {class: 'data compact'},
        h('caption', {class: 'visually-hidden', text: `What step ${st.name} would touch`}),
        h('thead', {}, h('tr', {}, ['Kind', 'Name', 'Action', 'Note'].map((t) => h('th', {scope: 'col', text: t})))),
        h('tbody', {}, details.map((d) => h('tr', {},
          h('td', {text: d.kind || ''}), h('td', {class: 'mono', text: d.name || ''}),
          h('td', {}, h('span', {class: `action action-${String(d.action || '').toLowerCase().replace(/[^a-z]/g, '')}`, text: d.action || ''})),
          h('td', {class: 'wrap', text: d.note || ''})))))) : null,
      warnings.length ? h('ul', {class: 'warnings', 'aria-label': `Warnings for step ${st.name}`},
        warnings.map((w) => h('li', {}, h('strong', {text: 'Warning: '}), String(w)))) : null);
  }

  function eventsTable(events) {
    if (!events.length) return empty('No events.');
    const sorted = events.slice().sort((a, b) => (ms(b.lastTimestamp) || 0) - (ms(a.lastTimestamp) || 0));
    return h('table', {class: 'data events', 'data-testid': 'events-table'},
      h('caption', {class: 'visually-hidden', text: 'Events of the pipeline, newest first'}),
      h('thead', {}, h('tr', {}, ['Type', 'Reason', 'Message', 'Count', 'Last seen', 'First seen'].map((t) => h('th', {scope: 'col', class: t === 'Count' ? 'num' : null, text: t})))),
      h('tbody', {}, sorted.map((e) => h('tr', {},
        h('td', {}, h('span', {class: `evtype evtype-${e.type === 'Warning' ? 'warning' : 'normal'}`, text: e.type || 'Normal'})),
        h('td', {text: e.reason || ''}),
        h('td', {class: 'wrap', text: e.message || ''}),
        h('td', {class: 'num', text: String(e.count || 1)}),
        h('td', {class: 'nowrap'}, timeEl(e.lastTimestamp)),
        h('td', {class: 'nowrap'}, timeEl(e.firstTimestamp))))));
  }

  // --- the live timer -------------------------------------------------------------------
  function startTimer() {
    if (timer) return;
    timer = setInterval(tick, 1000);
  }
  function stopTimer() {
    clearInterval(timer);
    timer = null;
  }
  function tick() {
    if (!pipeline || !steps.some((st) => ACTIVE.has(st.phase))) { stopTimer(); return; }
    drawTimeline();
    const now = Date.now();
    for (const {el, st} of liveCells) {
      const sp = span(st, now);
      el.textContent = fmtDuration(sp.end - sp.start);
    }
  }
  // Redraw when the width changes (the window, the zoom), not when the height does.
  let lastWidth = 0;
  const ro = new ResizeObserver(() => {
    if (tlBox.clientWidth === lastWidth) return;
    lastWidth = tlBox.clientWidth;
    requestAnimationFrame(drawTimeline);
  });
  ro.observe(tlBox);

  // --- actions ------------------------------------------------------------------------
  function renderActions() {
    const p = pipeline;
    if (!p) return;
    const had = actions.contains(document.activeElement) ? document.activeElement : null;
    const spec = p.spec || {};
    const deleting = !!(p.metadata && p.metadata.deletionTimestamp);
    retryBtn.hidden = !canRetry(p);
    retryBtn.textContent = retryRequested(p) ? 'Retry requested' : 'Retry…';
    suspendBtn.hidden = !!spec.suspend;
    resumeBtn.hidden = !spec.suspend;
    deleteBtn.textContent = deleting ? 'Deleting' : 'Delete…';
    retryBtn.disabled = inFlight || retryRequested(p) || deleting;
    suspendBtn.disabled = resumeBtn.disabled = inFlight || deleting;
    deleteBtn.disabled = inFlight || deleting;
    actions.setAttribute('aria-busy', inFlight ? 'true' : 'false');
    // The focused button went (Suspend became Resume, say): focus its counterpart, else
    // the next usable action, else the title. Not while an action runs: it gives the
    // focus back itself.
    if (had && !inFlight && (had.hidden || had.disabled)) focusAction(had);
  }

  // focusAction focuses button b, or when it is gone its counterpart (Suspend and Resume),
  // the first usable action, or the title.
  function focusAction(b) {
    const usable = (x) => x && x.isConnected && !x.hidden && !x.disabled;
    if (usable(b)) return b.focus();
    const pair = b === suspendBtn ? resumeBtn : b === resumeBtn ? suspendBtn : null;
    const next = [pair, retryBtn, suspendBtn, resumeBtn, deleteBtn].find(usable);
    (next || title).focus();
  }

  async function act(kind) {
    if (inFlight || !pipeline) return;
    const p = pipeline;
    const who = `${ns}/${name}`;
    let extra = null, select = null;
    let ask;
    if (kind === 'retry') {
      const failed = (p.status && p.status.currentStep) || '';
      const idx = steps.findIndex((st) => st.name === failed);
      // A retry never skips the failed step: it may start from it or an earlier one.
      const earlier = (p.status && p.status.phase === 'Failed' && idx > 0) ? steps.slice(0, idx) : [];
      if (earlier.length) {
        select = h('select', {id: 'retry-step'},
          h('option', {value: '', text: `the failed step${failed ? ` (${failed})` : ''}`}),
          earlier.map((st) => h('option', {value: st.name, text: `step ${st.name}, and every step after it`})));
        extra = h('div', {class: 'field'}, h('label', {for: 'retry-step', text: 'Retry from'}), select);
      }
      ask = {title: 'Retry pipeline', confirmLabel: 'Retry',
        body: [`Retry the failed pipeline ${who}?`, `The ${failed ? `failed step ${failed}` : 'failed step'} runs again, and the pipeline goes on from there.`]};
    } else if (kind === 'suspend') {
      ask = {title: 'Suspend pipeline', confirmLabel: 'Suspend',
        body: [`Suspend pipeline ${who}?`, 'The hook that is running finishes; no other hook starts until the pipeline is resumed.']};
    } else if (kind === 'resume') {
      ask = {title: 'Resume pipeline', confirmLabel: 'Resume', body: [`Resume pipeline ${who}?`, 'It goes on from where it stopped.']};
    } else {
      ask = {title: 'Delete pipeline', confirmLabel: 'Delete', danger: true,
        body: [`Delete pipeline ${who}?`, p.spec && p.spec.dryRun
          ? 'It is a dry run: nothing ran, so nothing is torn down.'
          : 'Its teardown runs first: what its steps created is undone, last step first. This cannot be undone.']};
    }
    ask.extra = extra;
    const ok = await confirmDialog(ask);
    if (!ok || destroyed) return;
    const step = select ? select.value : '';

    const opener = document.activeElement;
    inFlight = true;
    renderActions();
    setAlert('', 'action');
    setNotice(`${ask.confirmLabel}: sending…`);
    try {
      if (kind === 'delete') await api(path, {method: 'DELETE'});
      else await api(`${path}/${kind}`, {method: 'POST', body: kind === 'retry' && step ? {step} : undefined});
      const done = {
        retry: `Retry requested for ${who}, from ${step ? `step ${step}` : 'its failed step'}.`,
        suspend: `Pipeline ${who} suspended: the hook that is running finishes, then it stops.`,
        resume: `Pipeline ${who} resumed.`,
        delete: `Deletion of ${who} requested${p.spec && p.spec.dryRun ? '' : ': its teardown runs, then it goes'}.`,
      }[kind];
      setNotice(done);
    } catch (e) {
      setNotice('');
      setAlert(errorText(e), 'action');
    } finally {
      inFlight = false;
      if (!destroyed) {
        renderActions();
        if (actions.contains(opener)) focusAction(opener);
        else if (document.activeElement === document.body || !document.activeElement) title.focus();
        load();
      }
    }
  }

  const refresh = throttle(load, 500);
  load();

  return {
    route: () => false,
    onChange(ev) {
      if (ev.kind === '*') return refresh();
      if (ev.namespace !== ns) return;
      if (ev.kind === 'Pipeline' && ev.name === name) refresh();
      // An Event's name: the pipeline's (its involved object) or the Event's own, NAME.xxx.
      if (ev.kind === 'Event' && (ev.name === name || String(ev.name || '').startsWith(name + '.') || !ev.name)) refresh();
    },
    destroy() {
      destroyed = true;
      refresh.cancel();
      stopTimer();
      ro.disconnect();
      if (ctrl) ctrl.abort();
    },
  };
}

function mergeSteps(spec, status) {
  const specSteps = (Array.isArray(spec.steps) && spec.steps.length ? spec.steps : (status.template && status.template.steps)) || [];
  const byName = new Map((status.steps || []).map((st) => [st.name, st]));
  const out = specSteps.map((sp) => {
    const st = byName.get(sp.name) || {};
    byName.delete(sp.name);
    return {...st, name: String(sp.name || ''), executor: st.executor || sp.executor || '', phase: st.phase || 'Pending'};
  });
  for (const st of byName.values()) out.push({...st, name: String(st.name || ''), phase: st.phase || 'Pending'});
  return out;
}

function retryRequested(p) {
  const a = (p.metadata && p.metadata.annotations) || {};
  return Object.prototype.hasOwnProperty.call(a, RETRY_ANNOTATION);
}

function canRetry(p) {
  const st = p.status || {};
  const ready = condition(st.conditions, 'Ready');
  return st.phase === 'Failed' || (ready && ready.reason === 'TeardownFailed') || retryRequested(p);
}

function readyText(c) {
  let t = `${c.status || 'Unknown'}`;
  if (c.reason) t += ` — ${c.reason}`;
  if (c.message) t += `: ${c.message}`;
  return t;
}

function conditionsList(conds) {
  if (!Array.isArray(conds) || !conds.length) return h('span', {class: 'muted', text: '—'});
  return h('ul', {class: 'conds'}, conds.map((c) => h('li', {},
    h('span', {class: 'k', text: `${c.type}=${c.status}`}),
    c.reason ? ` (${c.reason})` : '',
    c.message ? `: ${c.message}` : '')));
}
