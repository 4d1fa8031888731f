// The Templates, Triggers and Executors pages: each fetches one list, shows it as cards,
// filters it in the page, and fetches it again when the live stream reports a change of
// its kind (at most every 500 ms).
import {h, fmtNumber, fmtDate, condition, throttle} from './dom.js';
import {api, errorText, isAbort, seg} from './api.js';
import {href} from './router.js';
import {setAlert, setNotice, pageTitle, focusTitle, empty, confirmDialog} from './ui.js';

function listPage(root, {title, path, kinds, noun, match, card, sort}) {
  let ctrl = null, seq = 0, destroyed = false, items = null;
  const filter = h('input', {id: 'f-filter', type: 'search', autocomplete: 'off', spellcheck: 'false'});
  const count = h('p', {class: 'muted count', role: 'status'});
  const list = h('div', {class: 'cards'});
  const body = h('div', {}, count, list);
  root.replaceChildren(pageTitle(title),
    h('form', {class: 'filters', role: 'search', 'aria-label': `Filter ${noun}s`},
      h('div', {class: 'field'}, h('label', {for: 'f-filter', text: 'Filter'}), filter)),
    body);
  focusTitle();
  filter.form.addEventListener('submit', (e) => e.preventDefault());
  filter.addEventListener('input', () => show());

  function show() {
    if (!items) return;
    const q = filter.value.trim().toLowerCase();
    const shown = q ? items.filter((it) => match(it).some((t) => String(t || '').toLowerCase().includes(q))) : items;
    list.replaceChildren(...shown.map(card));
    if (!items.length) list.append(empty(`No ${noun}s.`));
    else if (!shown.length) list.append(empty(`No ${noun} matches “${filter.value.trim()}”.`));
    count.textContent = q ? `${fmtNumber(shown.length)} of ${fmtNumber(items.length)} ${noun}s` : `${fmtNumber(items.length)} ${noun}${items.length === 1 ? '' : 's'}`;
  }

  async function load() {
    if (destroyed) return;
    if (ctrl) ctrl.abort();
    const my = ++seq;
    ctrl = new AbortController();
    list.setAttribute('aria-busy', 'true');
    try {
      const data = await api(path, {signal: ctrl.signal});
      if (my !== seq || destroyed) return;
      items = (Array.isArray(data.items) ? data.items : []).slice().sort(sort || byNsName);
      setAlert('');
      body.hidden = false;
      show();
    } catch (e) {
      if (isAbort(e) || my !== seq || destroyed) return;
      setAlert(errorText(e));
      if (e.status === 403 || e.status === 401) { items = null; list.replaceChildren(); body.hidden = true; }
    } finally {
      if (my === seq) list.removeAttribute('aria-busy');
    }
  }

  const refresh = throttle(load, 500);
  load();
  return {
    route: () => false,
    onChange(ev) { if (ev.kind === '*' || kinds.includes(ev.kind)) refresh(); },
    destroy() { destroyed = true; refresh.cancel(); if (ctrl) ctrl.abort(); },
  };
}

const byNsName = (a, b) => String(a.namespace || '').localeCompare(String(b.namespace || '')) || String(a.name || '').localeCompare(String(b.name || ''));

// idFor makes an element id from untrusted names (ids only need to be unique here).
let idSeq = 0;
const idFor = (prefix) => `${prefix}-${++idSeq}`;

function card(heading, sub, ...content) {
  const id = idFor('card');
  return h('article', {class: 'card', 'aria-labelledby': id},
    h('h2', {id}, heading, sub ? [' ', h('span', {class: 'h2-sub', text: sub})] : null), ...content);
}

function facts(rows) {
  return h('dl', {class: 'facts'}, rows.filter(Boolean).map(([k, v]) => [h('dt', {text: k}), h('dd', {}, v)]));
}

function table(caption, cols, rows, cls) {
  return h('div', {class: 'table-wrap'}, h('table', {class: `data compact ${cls || ''}`},
    h('caption', {class: 'visually-hidden', text: caption}),
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col', text: c})))),
    h('tbody', {}, rows)));
}

const yesNo = (b) => (b ? h('strong', {text: 'required'}) : h('span', {class: 'muted', text: 'optional'}));
const dash = (v) => (v === undefined || v === null || v === '' ? h('span', {class: 'muted', text: '—'}) : h('code', {text: String(v)}));

// --- Templates ------------------------------------------------------------------------
export function mountTemplates(root) {
  return listPage(root, {
    title: 'Templates', path: 'templates', kinds: ['PipelineTemplate'], noun: 'template',
    match: (t) => [t.name, t.namespace, ...(t.steps || []).map((s) => s.executor)],
    card: (t) => {
      const params = Array.isArray(t.params) ? t.params : [];
      const steps = Array.isArray(t.steps) ? t.steps : [];
      return card(String(t.name || ''), String(t.namespace || ''),
        t.onFailure ? facts([['On failure', t.onFailure]]) : null,
        h('p', {}, h('a', {href: href(['pipelines'], {namespace: t.namespace, template: t.name}), text: 'Pipelines of this template'})),
        h('h3', {text: `Parameters (${params.length})`}),
        params.length ? table(`Parameters of template ${t.name}`, ['Name', 'Required', 'Default', 'Description'],
          params.map((p) => h('tr', {},
            h('th', {scope: 'row', class: 'mono', text: p.name || ''}),
            h('td', {}, yesNo(p.required)),
            h('td', {}, dash(p.default)),
            h('td', {class: 'wrap', text: p.description || ''})))) : empty('No parameters.'),
        h('h3', {text: `Steps (${steps.length})`}),
        steps.length ? h('ol', {class: 'steps-list'}, steps.map((s) => h('li', {},
          h('span', {text: s.name || ''}), ' ', h('span', {class: 'small mono', text: s.executor || ''})))) : empty('No steps.'));
    },
  });
}

// --- Triggers -------------------------------------------------------------------------
export function mountTriggers(root) {
  return listPage(root, {
    title: 'Triggers', path: 'triggers', kinds: ['PipelineTrigger', 'Pipeline'], noun: 'trigger',
    match: (t) => [t.name, t.namespace, t.template, t.resource && t.resource.kind],
    card: (t) => {
      const res = t.resource || {};
      const ready = t.ready || condition(t.conditions, 'Ready');
      const queue = Array.isArray(t.queue) ? t.queue : [];
      const counts = [['Matched', t.matched], ['Running', t.running], ['Waiting', t.waiting], ['Succeeded', t.succeeded], ['Failed', t.failed]];
      const readyEl = ready
        ? h('span', {}, h('span', {class: `badge ${ready.status === 'True' ? 'phase-succeeded' : ready.status === 'False' ? 'phase-failed' : 'phase-unknown'}`, text: ready.status === 'True' ? 'Ready' : ready.status === 'False' ? 'Not ready' : 'Unknown'}),
          ready.reason ? ` ${ready.reason}` : '', ready.message ? `: ${ready.message}` : '')
        : h('span', {class: 'muted', text: 'No Ready condition yet'});
      const qid = idFor('queue');
      return card(String(t.name || ''), String(t.namespace || ''),
        facts([
          ['Ready', readyEl],
          ['Resource', `${res.kind || '?'} (${res.apiVersion || '?'})`],
          ['Template', t.template ? h('a', {href: href(['pipelines'], {namespace: t.namespace, template: t.template}), text: t.template}) : '—'],
          ['Concurrency', t.concurrency ? fmtNumber(t.concurrency) : 'unlimited'],
          t.suspend ? ['Suspended', 'yes: it starts no pipeline'] : null,
          t.paused ? ['Paused', `by ${t.paused.by} since ${fmtDate(t.paused.since)}${t.paused.reason ? `: ${t.paused.reason}` : ''}`] : null,
          ['Failure budget', `${fmtNumber(t.failureBudgetLeft || 0)} of ${fmtNumber(t.failureBudget || 1)} left`],
          t.nextWindow ? ['Next window', fmtDate(t.nextWindow)] : null,
        ]),
        triggerActions(t),
        h('dl', {class: 'counts', 'aria-label': 'Objects and pipelines'}, counts.map(([k, v]) => h('div', {class: 'count-item', dataset: {count: k.toLowerCase()}},
          h('dt', {text: k}), h('dd', {text: fmtNumber(v || 0)})))),
        h('p', {}, h('a', {href: href(['pipelines'], {namespace: t.namespace, trigger: t.name}), text: 'Pipelines of this trigger'})),
        h('h3', {id: qid, text: `Queue (${fmtNumber(queue.length)})`}),
        queue.length
          ? h('ol', {class: 'queue', 'aria-labelledby': qid, 'data-testid': 'trigger-queue'}, queue.map((q) => h('li', {class: 'mono', text: typeof q === 'string' ? q : JSON.stringify(q)})))
          : empty('Nothing waits.'));
    },
  });
}

// triggerActions are a trigger's Pause and Resume buttons, each confirmed in a dialog: both
// act in the user's name (their credentials), as kubectl stepwise triggers pause/resume.
// Resume also counts the trigger's failures from zero, so it is offered when the budget
// is spent too.
function triggerActions(t) {
  const who = `${t.namespace}/${t.name}`;
  const path = `triggers/${seg(t.namespace, t.name)}`;
  const spent = (t.failureBudgetLeft || 0) === 0 && t.ready && t.ready.reason === 'FailureBudgetSpent';
  const pause = h('button', {type: 'button', class: 'btn secondary', 'data-testid': 'trigger-pause', text: 'Pause…', hidden: !!t.pauseAsked});
  const resume = h('button', {type: 'button', class: 'btn secondary', 'data-testid': 'trigger-resume', text: 'Resume…', hidden: !(t.pauseAsked || spent)});
  pause.addEventListener('click', async () => {
    const reason = h('input', {id: 'pause-reason', type: 'text', maxlength: '256', autocomplete: 'off'});
    const ok = await confirmDialog({title: 'Pause trigger', confirmLabel: 'Pause',
      body: [`Pause trigger ${who} in your name?`, 'It starts no pipeline until someone resumes it; the pipelines running go on.'],
      extra: h('div', {class: 'field'}, h('label', {for: 'pause-reason', text: 'Why (optional)'}), reason)});
    if (ok) send(pause, 'pause', reason.value.trim() ? {reason: reason.value.trim()} : undefined);
  });
  resume.addEventListener('click', async () => {
    const ok = await confirmDialog({title: 'Resume trigger', confirmLabel: 'Resume',
      body: [`Resume trigger ${who} in your name?`, 'Its pause is lifted and its failed pipelines count from zero: it starts pipelines again.']});
    if (ok) send(resume, 'resume');
  });
  async function send(button, kind, body) {
    button.disabled = true;
    setAlert('', 'action');
    setNotice(`${kind === 'pause' ? 'Pause' : 'Resume'}: sending…`);
    try {
      const res = await api(`${path}/${kind}`, {method: 'POST', body});
      setNotice(res && res.message ? `${res.message[0].toUpperCase()}${res.message.slice(1)}.` : '');
    } catch (e) {
      setNotice('');
      setAlert(errorText(e), 'action');
    } finally {
      button.disabled = false;
    }
  }
  return h('div', {class: 'actions', role: 'group', 'aria-label': `Actions of trigger ${who}`}, pause, resume);
}

// --- Executors ------------------------------------------------------------------------
export function mountExecutors(root) {
  return listPage(root, {
    title: 'Executors', path: 'executors', kinds: ['TaskExecutor'], noun: 'executor',
    sort: (a, b) => String(a.name || '').localeCompare(String(b.name || '')),
    match: (e) => [e.name, e.description, e.plugin, ...(e.parameters || []).map((p) => p.name)],
    card: (e) => {
      const params = Array.isArray(e.parameters) ? e.parameters : [];
      return card(h('span', {class: 'mono', text: e.name || ''}), null,
        facts([
          ['Version', e.version || '—'],
          ['Served by', e.plugin ? `plugin ${e.plugin}` : 'the operator (built in)'],
          e.updatesInPlace ? ['Updates in place', 'yes: a re-run updates what it created'] : null,
        ]),
        e.description ? h('p', {class: 'wrap', text: e.description}) : null,
        params.length ? table(`Parameters of executor ${e.name}`, ['Parameter', 'Type', 'Required', 'Default', 'Values', 'Description'],
          params.map((p) => h('tr', {},
            h('th', {scope: 'row', class: 'mono', text: p.name || ''}),
            h('td', {text: p.type || 'string'}),
            h('td', {}, yesNo(p.required)),
            h('td', {}, dash(p.default)),
            h('td', {}, Array.isArray(p.values) && p.values.length ? p.values.map((v, i) => [i ? ', ' : '', h('code', {text: String(v)})]) : dash('')),
            h('td', {class: 'wrap', text: p.description || ''}))), 'params') : empty('No parameters.'));
    },
  });
}
