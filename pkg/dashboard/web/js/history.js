// The History page: the archive's records (history.stepwise.dev pipelinerecords), read
// through the dashboard's server in the user's name, a page of 100 at a time in the order
// they were written, with a button for the next page. A record is one state of one
// pipeline (Succeeded, Failed, Deleted, Orphaned, Removed); the pipeline may be gone.
import {h, fmtNumber, timeEl, badge} from './dom.js';
import {api, errorText, isAbort} from './api.js';
import {href} from './router.js';
import {setAlert, pageTitle, focusTitle, empty} from './ui.js';

export function mountHistory(root, r) {
  const namespace = r.query.get('namespace') || '';
  let ctrl = null, destroyed = false, next = '', shown = 0;
  const count = h('p', {class: 'muted count', role: 'status'});
  const rows = h('tbody', {});
  const more = h('button', {type: 'button', class: 'btn', 'data-testid': 'history-more', text: 'Older pages: next 100', hidden: true});
  const tableEl = h('div', {class: 'table-wrap'}, h('table', {class: 'data compact', 'data-testid': 'history'},
    h('caption', {class: 'visually-hidden', text: 'Records of the archive'}),
    h('thead', {}, h('tr', {}, ['Pipeline', 'State', 'Trigger', 'Object', 'Steps', 'Finished', 'Record'].map((c) => h('th', {scope: 'col', text: c})))),
    rows));
  root.replaceChildren(pageTitle('History', namespace || null),
    h('p', {class: 'muted', text: 'What the archive keeps of each finished, deleted or removed pipeline, oldest first.'}),
    count, tableEl, more);
  focusTitle();
  more.addEventListener('click', () => load(next));

  function row(it) {
    const steps = it.failedStep
      ? `${fmtNumber(it.succeeded)}/${fmtNumber(it.steps)}, failed at ${it.failedStep}`
      : `${fmtNumber(it.succeeded)}/${fmtNumber(it.steps)}`;
    return h('tr', {'data-testid': 'history-row', 'data-pipeline': it.pipeline || '', 'data-state': it.state || ''},
      h('th', {scope: 'row'}, h('a', {href: href(['pipelines', it.namespace || '', it.pipeline || '']), text: it.pipeline || ''}),
        namespace ? null : h('span', {class: 'small muted', text: ` ${it.namespace || ''}`})),
      h('td', {}, badge(it.state)),
      h('td', {text: it.trigger || '—'}),
      h('td', {class: 'mono', text: it.object || '—'}),
      h('td', {text: steps}),
      h('td', {}, timeEl(it.finished, true)),
      h('td', {class: 'small mono', text: it.name || ''}));
  }

  async function load(cont) {
    if (destroyed) return;
    if (ctrl) ctrl.abort();
    ctrl = new AbortController();
    rows.setAttribute('aria-busy', 'true');
    const q = new URLSearchParams();
    if (namespace) q.set('namespace', namespace);
    if (cont) q.set('continue', cont);
    try {
      const data = await api('history' + (q.toString() ? '?' + q : ''), {signal: ctrl.signal});
      if (destroyed) return;
      const items = Array.isArray(data.items) ? data.items : [];
      if (!cont) rows.replaceChildren();
      rows.append(...items.map(row));
      shown += items.length;
      next = data.continue || '';
      more.hidden = !next;
      setAlert('');
      count.textContent = `${fmtNumber(shown)} record${shown === 1 ? '' : 's'}${next ? ', more in the archive' : ''}`;
      if (!shown) tableEl.replaceWith(empty('No records: nothing has finished since archiving was turned on.'));
    } catch (e) {
      if (isAbort(e) || destroyed) return;
      setAlert(errorText(e));
    } finally {
      rows.removeAttribute('aria-busy');
    }
  }

  load('');
  return {
    route: () => false,
    onChange() {}, // records are written once: the page does not follow the live stream
    destroy() { destroyed = true; if (ctrl) ctrl.abort(); },
  };
}
