// The Pipeline page: header, approvals, timeline, steps, plan, events, and the actions
// (retry, suspend or resume, delete), each confirmed in a dialog; a step that waits for
// approval is approved or rejected, with a comment, from its block in Approvals. A change
// of this pipeline or of its Events on the live stream re-fetches it, at most every 500 ms;
// while a step runs (or waits for approval) a 1 s timer redraws the timeline and the
// running durations, and stops when none does.
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

  // Approvals: a block per step that waits or waited for approval. The blocks persist
  // across refreshes, so that a comment being typed and the focus stay.
  const approvalList = h('div', {class: 'approvals'});
  const approvalsSec = section('Approvals', 'sec-approvals', approvalList);
  approvalsSec.hidden = true;
  const approvalBlocks = new Map(); // step name -> block (see approvalBlock)

  const tlBox = h('div', {class: 'timeline-box'});
  const stepsBox = h('div', {class: 'table-wrap'});
  const planBox = h('div');
  const paramsBox = h('div');
  const eventsBox = h('div', {class: 'table-wrap'});
  const content = h('div', {class: 'detail', hidden: true},
    h('div', {class: 'head-row'}, head, actions),
    approvalsSec,
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
    approvalList.replaceChildren(); approvalBlocks.clear(); approvalsSec.hidden = true;
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
    // What holds it back, as the operator wrote it (status.blockedBy; kubectl stepwise why).
    const blocked = status.blockedBy || [];
    if (blocked.length) rows.splice(1, 0, ['Blocked by', h('ul', {class: 'blockers', 'data-testid': 'pipeline-blocked-by'},
      blocked.map((b) => h('li', {dataset: {kind: b.kind || ''}},
        h('strong', {text: b.kind || '?'}),
        b.name ? ` ${b.namespace ? b.namespace + '/' : ''}${b.name}` : '',
        b.step ? ` (step ${b.step})` : '',
        b.since ? [' since ', timeEl(b.since)] : '',
        b.unblock ? h('div', {class: 'small', text: b.unblock}) : '')))]);
    if (spec.serviceAccountName) rows.push(['Service account', spec.serviceAccountName]);
    head.replaceChildren(
      h('div', {class: 'tags'}, tags),
      h('dl', {class: 'facts'}, rows.map(([k, v]) => [h('dt', {text: k}), h('dd', {}, v)])));
    if (ready && (phase === 'Failed' || ready.reason === 'TeardownFailed')) head.querySelector('dd').classList.add('ready-msg');

    renderActions();
    renderApprovals();

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
      if (st.phase === 'AwaitingApproval' && st.approval) {
        const {required, approvers} = approvalState(st.approval);
        phaseCell.append(h('div', {class: 'small', text: `${approvers.length} of ${plural(required, 'approval')}`}));
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
    renderApprovals();
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
        renderApprovals();
        if (actions.contains(opener)) focusAction(opener);
        else if (document.activeElement === document.body || !document.activeElement) title.focus();
        load();
      }
    }
  }

  // --- approvals ----------------------------------------------------------------------
  // Each step that waits or waited for approval has a block: where its approval is (how
  // many approvals it still waits for, its deadline), the decisions its status recorded
  // (counted, or ignored and why), and while it waits a comment with Approve and Reject,
  // which act in the user's name (their credentials), as kubectl stepwise approve and
  // reject do. A rejection needs the comment: it is the step's failure message.
  function renderApprovals() {
    const p = pipeline;
    if (!p) return;
    const gated = steps.filter((st) => st.approval && typeof st.approval === 'object');
    for (const name of [...approvalBlocks.keys()]) {
      if (!gated.some((st) => st.name === name)) approvalBlocks.delete(name);
    }
    const blocks = gated.map((st) => approvalBlock(st.name));
    const shown = Array.from(approvalList.children);
    if (shown.length !== blocks.length || blocks.some((b, i) => shown[i] !== b.el)) {
      // Only when a step starts or stops having a block: moving an element takes its focus.
      const had = approvalList.contains(document.activeElement) ? document.activeElement : null;
      approvalList.replaceChildren(...blocks.map((b) => b.el));
      if (had && had.isConnected) had.focus();
      else if (had) title.focus();
    }
    approvalsSec.hidden = !blocks.length;
    const deleting = !!(p.metadata && p.metadata.deletionTimestamp);
    gated.forEach((st, i) => updateApproval(blocks[i], st, deleting));
  }

  // approvalBlock is step's block, made once: its form's elements are never replaced.
  function approvalBlock(step) {
    let b = approvalBlocks.get(step);
    if (b) return b;
    const id = `approval-${step}`;
    const comment = h('input', {
      type: 'text', id: `${id}-comment`, maxlength: '1024', autocomplete: 'off', spellcheck: 'true',
      'data-testid': 'step-approval-comment', dataset: {step}, 'aria-describedby': `${id}-hint`,
    });
    const approve = h('button', {type: 'button', class: 'btn', 'data-testid': 'step-approve', dataset: {step}, text: 'Approve'});
    const reject = h('button', {type: 'button', class: 'btn danger', 'data-testid': 'step-reject', dataset: {step}, text: 'Reject'});
    const status = h('p', {class: 'approval-status', 'data-testid': 'step-approval-status', dataset: {step}});
    const form = h('div', {class: 'approval-form', role: 'group', 'aria-label': `Approve or reject step ${step}`},
      h('div', {class: 'field'},
        h('label', {for: `${id}-comment`, text: 'Comment'}),
        comment,
        h('span', {class: 'small', id: `${id}-hint`, text: 'Optional to approve. Required to reject: it becomes the step\'s failure message.'})),
      h('div', {class: 'actions'}, approve, reject));
    const decisions = h('div', {class: 'approval-decisions'});
    const el = h('div', {class: 'approval', 'data-testid': 'step-approval', dataset: {step}},
      h('h3', {text: `Step ${step}`}), status, form, decisions);
    b = {step, el, comment, approve, reject, status, form, decisions, request: null};
    approve.addEventListener('click', () => decide(b, 'approve'));
    reject.addEventListener('click', () => decide(b, 'reject'));
    comment.addEventListener('input', () => {
      if (comment.value.trim()) comment.removeAttribute('aria-invalid');
    });
    approvalBlocks.set(step, b);
    return b;
  }

  function updateApproval(b, st, deleting) {
    const a = st.approval;
    const {required, approvers, decisions} = approvalState(a);
    const waiting = st.phase === 'AwaitingApproval';
    const request = String(a.request || '');
    if (b.request !== null && request !== b.request) {
      // Another wait (the step was retried): a comment typed for the last one does not carry over.
      b.comment.value = '';
      b.comment.removeAttribute('aria-invalid');
    }
    b.request = request;

    const parts = [];
    if (waiting) {
      const left = Math.max(0, required - approvers.length);
      parts.push(h('strong', {text: `Waiting for ${plural(left, 'approval')}`}));
      if (approvers.length) parts.push(` (${approvers.length} of ${required} given, by ${approvers.join(', ')})`);
      parts.push(' · since ', timeEl(a.since));
      if (a.deadline) parts.push(' · deadline ', timeEl(a.deadline), ': not approved by then, the step fails');
    } else if (a.approvedTime) {
      parts.push(h('strong', {text: 'Approved'}), approvers.length ? ` by ${approvers.join(', ')}` : '', ' · ', timeEl(a.approvedTime));
    } else {
      parts.push(badge(st.phase || 'Pending'), st.message ? ` ${st.message}` : '');
    }
    b.status.replaceChildren(...parts);

    b.form.hidden = !waiting;
    b.approve.disabled = b.reject.disabled = inFlight || deleting;
    b.comment.readOnly = inFlight;
    b.form.setAttribute('aria-busy', inFlight ? 'true' : 'false');

    b.decisions.replaceChildren(decisions.length ? decisionsTable(st.name, decisions)
      : empty(waiting ? 'No decision yet.' : 'No decision was recorded.'));
  }

  async function decide(b, kind) {
    if (inFlight || !pipeline) return;
    const step = b.step;
    const comment = b.comment.value.trim();
    if (kind === 'reject' && !comment) {
      b.comment.setAttribute('aria-invalid', 'true');
      setNotice('');
      setAlert(`A rejection needs a comment: it becomes the failure message of step ${step}.`, 'action');
      b.comment.focus();
      return;
    }
    const opener = document.activeElement;
    const label = kind === 'approve' ? 'Approve' : 'Reject';
    inFlight = true;
    renderActions();
    renderApprovals();
    setAlert('', 'action');
    setNotice(`${label} step ${step}: sending…`);
    try {
      const res = await api(`${path}/${kind}`, {method: 'POST', body: comment ? {step, comment} : {step}});
      b.comment.value = '';
      const msg = res && res.message ? String(res.message) : `${label} of step ${step} of ${ns}/${name} recorded`;
      setNotice(`${msg[0].toUpperCase()}${msg.slice(1)}.`);
    } catch (e) {
      setNotice('');
      setAlert(errorText(e), 'action');
    } finally {
      inFlight = false;
      if (!destroyed) {
        renderActions();
        renderApprovals();
        // Back to the button, unless the step no longer waits (the form went): the title.
        const usable = (x) => x && x.isConnected && !x.disabled && !x.closest('[hidden]');
        if (usable(opener)) opener.focus();
        else if (!document.activeElement || document.activeElement === document.body) title.focus();
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

// approvalState is a step's approval in numbers: how many people must approve, who did
// (the counted approvals, each user once), and the decisions recorded.
function approvalState(a) {
  const decisions = Array.isArray(a.decisions) ? a.decisions.filter((d) => d && typeof d === 'object') : [];
  const required = Number.isFinite(Number(a.required)) ? Number(a.required) : 1;
  const approvers = [...new Set(decisions.filter((d) => d.counted && d.decision === 'Approve').map((d) => String(d.user || '')))];
  return {required, approvers, decisions};
}

const plural = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;

// decisionsTable lists the decisions on a step's approval, in the order the operator saw
// them: who, what, when, their comment, and whether it counted (if not, why).
function decisionsTable(step, decisions) {
  return h('div', {class: 'table-wrap'}, h('table', {class: 'data compact decisions', 'data-testid': 'step-decisions', dataset: {step}},
    h('caption', {class: 'visually-hidden', text: `Decisions on step ${step}, in the order the operator saw them`}),
    h('thead', {}, h('tr', {}, ['User', 'Decision', 'Time', 'Comment', 'Counted'].map((t) => h('th', {scope: 'col', text: t})))),
    h('tbody', {}, decisions.map((d) => h('tr', {'data-testid': 'step-decision', dataset: {user: String(d.user || ''), decision: String(d.decision || '')}},
      h('td', {class: 'mono wrap', text: d.user || ''}),
      h('td', {}, h('span', {class: `decision decision-${d.decision === 'Reject' ? 'reject' : 'approve'}`, text: String(d.decision || '')})),
      h('td', {class: 'nowrap'}, timeEl(d.time)),
      d.comment ? h('td', {class: 'wrap', text: d.comment}) : h('td', {class: 'muted', text: '—'}),
      h('td', {class: 'wrap'}, d.counted
        ? h('span', {class: 'counted', text: 'Counted'})
        : [h('span', {class: 'ignored', text: 'Ignored'}), d.ignored ? `: ${d.ignored}` : '']))))));
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
