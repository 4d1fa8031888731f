// The Pipelines page: filters, counts by phase, a sortable paginated table. The filters,
// sort and page are kept in the hash (#/pipelines?phase=Failed&q=node&page=2). A change of
// any Pipeline on the live stream re-fetches the page shown, at most every 500 ms.
import {h, icon, fmtNumber, timeEl, badge, phaseClass, PIPELINE_PHASES, throttle, debounce} from './dom.js';
import {api, errorText, isAbort} from './api.js';
import {href, setHash} from './router.js';
import {setAlert, pageTitle, focusTitle} from './ui.js';

export const PAGE_SIZE = 100;
const FIELDS = ['namespace', 'phase', 'template', 'trigger', 'q', 'sort'];
const SORTS = ['name', '-name', 'age', '-age', 'phase', '-phase'];
// The server's order when none is asked for.
const DEFAULT_SORT = 'name';
// What each order means, for the sort buttons' titles ("age" is youngest first, as an Age
// column sorted ascending; "phase" puts what needs attention first).
const SORT_TITLES = {
  name: 'Sorted by name, A to Z', '-name': 'Sorted by name, Z to A',
  age: 'Sorted by age, newest first', '-age': 'Sorted by age, oldest first',
  phase: 'Sorted by phase, what needs attention first', '-phase': 'Sorted by phase, finished first',
};

// The list's address as last shown, for the pipeline page's way back.
let lastListHash = '#/pipelines';
export const listHash = () => lastListHash;

// Names for the template and trigger fields' suggestions, fetched once.
let suggestions = null;

function stateFrom(query) {
  const st = {page: 1};
  for (const f of FIELDS) st[f] = (query.get(f) || '').trim();
  if (!SORTS.includes(st.sort)) st.sort = '';
  const p = parseInt(query.get('page') || '1', 10);
  st.page = Number.isFinite(p) && p > 0 ? p : 1;
  return st;
}

const sameState = (a, b) => FIELDS.every((f) => a[f] === b[f]) && a.page === b.page;

function stateHash(st) {
  const q = {};
  for (const f of FIELDS) q[f] = st[f];
  if (st.page > 1) q.page = st.page;
  return href(['pipelines'], q);
}

export function mount(root, route) {
  let st = stateFrom(route.query);
  let ctrl = null;        // AbortController of the fetch in flight
  let seq = 0;            // answers to older fetches are dropped
  let lastData = null;
  let announce = false;   // say the number of matches after a user's change
  let destroyed = false;

  // --- controls -----------------------------------------------------------------------
  const nsSelect = h('select', {id: 'f-namespace', name: 'namespace'});
  const phaseSelect = h('select', {id: 'f-phase', name: 'phase'},
    h('option', {value: '', text: 'All phases'}),
    PIPELINE_PHASES.map((p) => h('option', {value: p, text: p})));
  const tplInput = h('input', {id: 'f-template', name: 'template', type: 'text', list: 'f-template-list', autocomplete: 'off', spellcheck: 'false'});
  const trgInput = h('input', {id: 'f-trigger', name: 'trigger', type: 'text', list: 'f-trigger-list', autocomplete: 'off', spellcheck: 'false'});
  const qInput = h('input', {id: 'f-q', name: 'q', type: 'search', autocomplete: 'off', spellcheck: 'false', placeholder: 'name, step, message…'});
  const tplList = h('datalist', {id: 'f-template-list'});
  const trgList = h('datalist', {id: 'f-trigger-list'});
  const clearBtn = h('button', {type: 'button', class: 'btn secondary', text: 'Clear filters'});

  const field = (label, control, extra) => h('div', {class: 'field'},
    h('label', {for: control.id, text: label}), control, extra || null);

  const form = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter pipelines'},
    field('Namespace', nsSelect),
    field('Phase', phaseSelect),
    field('Template', tplInput, tplList),
    field('Trigger', trgInput, trgList),
    field('Search', qInput),
    h('div', {class: 'field field-button'}, clearBtn));
  form.addEventListener('submit', (e) => { e.preventDefault(); applyText(); });

  const chips = h('div', {class: 'chips', role: 'group', 'aria-label': 'Pipelines by phase (press to filter)'});

  const sortButtons = {};
  const th = (label, key, cls) => {
    if (!key) return h('th', {scope: 'col', class: cls || null, text: label});
    const b = h('button', {type: 'button', class: 'sort', dataset: {sort: key}}, h('span', {text: label}), h('span', {class: 'sort-icon'}));
    b.addEventListener('click', () => {
      // First press: this column, ascending; again: descending.
      const next = (st.sort || DEFAULT_SORT) === key ? '-' + key : key;
      update({sort: next === DEFAULT_SORT ? '' : next, page: 1}, false);
    });
    const cell = h('th', {scope: 'col', class: cls || null}, b);
    sortButtons[key] = {cell, b};
    return cell;
  };
  const tbody = h('tbody');
  const table = h('table', {class: 'data pipelines', 'data-testid': 'pipelines-table'},
    h('caption', {class: 'visually-hidden', text: 'Pipelines'}),
    h('thead', {}, h('tr', {},
      th('Name', 'name', 'col-name'), th('Namespace', null), th('Phase', 'phase'), th('Progress', null, 'num'),
      th('Current step', null), th('Template', null), th('Trigger', null), th('Age', 'age'), th('Message', null, 'col-message'))),
    tbody);

  const prevBtn = h('button', {type: 'button', class: 'btn secondary'}, icon('left'), 'Previous');
  const nextBtn = h('button', {type: 'button', class: 'btn secondary'}, 'Next', icon('right'));
  const range = h('span', {class: 'range', 'data-testid': 'pipelines-total'});
  const pager = h('nav', {class: 'pager', 'aria-label': 'Pages of pipelines'}, prevBtn, range, nextBtn);
  prevBtn.addEventListener('click', () => update({page: Math.max(1, st.page - 1)}, true));
  nextBtn.addEventListener('click', () => update({page: st.page + 1}, true));
  const sr = h('p', {class: 'visually-hidden', role: 'status'});

  const body = h('div', {class: 'list-body'}, h('div', {class: 'list-toolbar'}, chips, pager), h('div', {class: 'table-wrap'}, table));
  root.replaceChildren(pageTitle('Pipelines'), form, sr, body);
  focusTitle();

  // --- state --------------------------------------------------------------------------
  function syncControls() {
    setSelect(nsSelect, st.namespace, lastData ? lastData.namespaces : [], 'All namespaces');
    if (st.phase && ![...phaseSelect.options].some((o) => o.value === st.phase)) {
      phaseSelect.append(h('option', {value: st.phase, text: st.phase}));
    }
    phaseSelect.value = st.phase;
    if (document.activeElement !== tplInput) tplInput.value = st.template;
    if (document.activeElement !== trgInput) trgInput.value = st.trigger;
    if (document.activeElement !== qInput) qInput.value = st.q;
    const sort = st.sort || DEFAULT_SORT;
    for (const [key, {cell, b}] of Object.entries(sortButtons)) {
      let dir = '';
      if (sort === key) dir = 'ascending';
      else if (sort === '-' + key) dir = 'descending';
      if (dir) cell.setAttribute('aria-sort', dir); else cell.removeAttribute('aria-sort');
      cell.querySelector('.sort-icon').replaceChildren(icon(dir === 'ascending' ? 'up' : dir === 'descending' ? 'down' : 'updown'));
      b.title = dir ? `${SORT_TITLES[sort]}; press to reverse` : SORT_TITLES[key].replace('Sorted', 'Sort');
    }
  }

  function update(change, push) {
    const next = {...st, ...change};
    if (sameState(next, st)) return;
    st = next;
    announce = true;
    lastListHash = stateHash(st);
    setHash(lastListHash, push);
    syncControls();
    load();
  }

  const applyText = () => update({template: tplInput.value.trim(), trigger: trgInput.value.trim(), q: qInput.value.trim(), page: 1}, false);
  const typed = debounce(applyText, 300);
  for (const el of [tplInput, trgInput, qInput]) el.addEventListener('input', typed);
  nsSelect.addEventListener('change', () => update({namespace: nsSelect.value, page: 1}, false));
  phaseSelect.addEventListener('change', () => update({phase: phaseSelect.value, page: 1}, false));
  clearBtn.addEventListener('click', () => {
    typed.cancel();
    tplInput.value = trgInput.value = qInput.value = '';
    update({namespace: '', phase: '', template: '', trigger: '', q: '', page: 1}, false);
  });

  // --- fetch and render ---------------------------------------------------------------
  async function load() {
    if (destroyed) return;
    if (ctrl) ctrl.abort();
    const my = ++seq;
    ctrl = new AbortController();
    const q = new URLSearchParams();
    for (const f of FIELDS) if (st[f]) q.set(f, st[f]);
    q.set('offset', String((st.page - 1) * PAGE_SIZE));
    q.set('limit', String(PAGE_SIZE));
    table.setAttribute('aria-busy', 'true');
    try {
      const data = await api('pipelines?' + q.toString(), {signal: ctrl.signal});
      if (my !== seq || destroyed) return;
      const total = Number(data.total) || 0;
      // The page may have emptied (deletions, a narrower filter): go to the last one.
      if (st.page > 1 && (st.page - 1) * PAGE_SIZE >= total) {
        const last = Math.max(1, Math.ceil(total / PAGE_SIZE));
        if (last !== st.page) { update({page: last}, false); return; }
      }
      lastData = data;
      setAlert('');
      body.hidden = false;
      render(data);
    } catch (e) {
      if (isAbort(e) || my !== seq || destroyed) return;
      setAlert(errorText(e));
      if (e.status === 403 || e.status === 401) {
        // Show nothing of what the user may not see.
        lastData = null;
        tbody.replaceChildren();
        body.hidden = true;
      }
    } finally {
      if (my === seq) table.removeAttribute('aria-busy');
    }
  }

  function render(data) {
    const items = Array.isArray(data.items) ? data.items : [];
    const total = Number(data.total) || 0;
    syncControls();

    // Counts by phase: every known phase, then any other the server reports.
    const counts = data.counts || {};
    const phases = PIPELINE_PHASES.concat(Object.keys(counts).filter((p) => !PIPELINE_PHASES.includes(p)).sort());
    chips.replaceChildren(...phases.map((p) => {
      const on = st.phase === p;
      const b = h('button', {type: 'button', class: `chip phase-${phaseClass(p)}`, 'aria-pressed': on ? 'true' : 'false',
        'data-testid': `phase-count-${p}`, dataset: {phase: p, count: String(Number(counts[p]) || 0)}},
      h('span', {class: 'chip-label', text: p}), ' ', h('span', {class: 'chip-count', text: fmtNumber(counts[p] || 0)}));
      b.title = on ? `Showing ${p} only; press to show every phase` : `Show ${p} pipelines only`;
      b.addEventListener('click', () => update({phase: on ? '' : p, page: 1}, false));
      return b;
    }));

    // Keep the focus on the same row's link across a refresh.
    const active = document.activeElement;
    const activeRow = active && tbody.contains(active) ? active.closest('tr') : null;
    const activeKey = activeRow ? activeRow.dataset.key : null;

    tbody.replaceChildren(...items.map(row));
    if (!items.length) {
      tbody.append(h('tr', {class: 'empty-row'}, h('td', {colspan: 9, text: hasFilter() ? 'No pipeline matches these filters.' : 'No pipelines.'})));
    }
    if (activeKey) {
      const again = [...tbody.rows].find((r) => r.dataset.key === activeKey);
      const link = again && again.querySelector('a');
      if (link) link.focus({preventScroll: true});
    }

    const from = total ? (st.page - 1) * PAGE_SIZE + 1 : 0;
    const to = Math.min(total, (st.page - 1) * PAGE_SIZE + items.length);
    range.textContent = total ? `${fmtNumber(from)}–${fmtNumber(to)} of ${fmtNumber(total)}` : '0 of 0';
    range.dataset.total = String(total);
    prevBtn.disabled = st.page <= 1;
    nextBtn.disabled = to >= total;
    if (announce) {
      announce = false;
      sr.textContent = total === 1 ? '1 pipeline' : `${fmtNumber(total)} pipelines`;
    }

    if (!document.body.dataset.rendered) document.body.dataset.rendered = 'pipelines';
    loadSuggestions();
  }

  const hasFilter = () => FIELDS.some((f) => f !== 'sort' && st[f]);

  function row(p) {
    const ns = String(p.namespace || '');
    const name = String(p.name || '');
    const link = h('a', {href: href(['pipelines', ns, name]), text: name});
    const msg = h('td', {class: 'col-message', text: p.message || ''});
    if (p.message) msg.title = String(p.message);
    return h('tr', {'data-testid': 'pipeline-row', dataset: {name, namespace: ns, key: ns + '/' + name, phase: String(p.phase || '')}},
      h('th', {scope: 'row', class: 'col-name'}, link),
      h('td', {text: ns}),
      h('td', {class: 'col-phase'}, badge(p.phase || 'Pending'),
        p.retryRequested ? h('span', {class: 'tag small-tag', text: 'retry requested'}) : null,
        p.deleting ? h('span', {class: 'tag small-tag', text: 'deleting'}) : null,
        p.suspend && p.phase !== 'Suspended' ? h('span', {class: 'tag small-tag', text: 'suspended'}) : null,
        p.dryRun ? h('span', {class: 'tag small-tag', text: 'dry run'}) : null),
      h('td', {class: 'num', text: p.progress || ''}),
      h('td', {text: p.currentStep || ''}),
      h('td', {text: p.template || ''}),
      h('td', {text: p.trigger || ''}),
      h('td', {class: 'nowrap'}, timeEl(p.creationTimestamp, true)),
      msg);
  }

  let filled = null;
  async function loadSuggestions() {
    if (suggestions) { if (filled !== suggestions) fill(); return; }
    suggestions = {templates: [], triggers: []};
    const names = (items) => [...new Set((items || []).map((i) => String(i.name || '')).filter(Boolean))].sort();
    const [t, g] = await Promise.allSettled([api('templates'), api('triggers')]);
    if (t.status === 'fulfilled') suggestions.templates = names(t.value.items);
    if (g.status === 'fulfilled') suggestions.triggers = names(g.value.items);
    if (!destroyed) fill();
  }
  function fill() {
    filled = suggestions;
    tplList.replaceChildren(...suggestions.templates.map((n) => h('option', {value: n})));
    trgList.replaceChildren(...suggestions.triggers.map((n) => h('option', {value: n})));
  }

  const refresh = throttle(load, 500);

  syncControls();
  lastListHash = stateHash(st);
  load();

  return {
    // A new hash for this page (Back, Forward, a link): take its state.
    route(r) {
      if (r.parts.length !== 1 || r.parts[0] !== 'pipelines') return false;
      const next = stateFrom(r.query);
      if (!sameState(next, st)) { st = next; lastListHash = stateHash(st); syncControls(); load(); }
      return true;
    },
    onChange(ev) {
      if (ev.kind === 'Pipeline' || ev.kind === '*') refresh();
      if (ev.kind === 'PipelineTemplate' || ev.kind === 'PipelineTrigger' || ev.kind === '*') suggestions = null;
    },
    destroy() {
      destroyed = true;
      refresh.cancel();
      typed.cancel();
      if (ctrl) ctrl.abort();
    },
  };
}

// setSelect fills a namespace select from the server's list, keeping the chosen value.
function setSelect(sel, value, names, allLabel) {
  const list = [...new Set((names || []).map(String).concat(value ? [value] : []))].sort();
  const want = [''].concat(list);
  const have = [...sel.options].map((o) => o.value);
  if (want.join('\n') !== have.join('\n')) {
    sel.replaceChildren(h('option', {value: '', text: allLabel}), ...list.map((n) => h('option', {value: n, text: n})));
  }
  sel.value = value;
}
