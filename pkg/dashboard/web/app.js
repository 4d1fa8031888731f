// Stepwise dashboard, the page's script.
//
// Plain ES2020 modules, CSS and HTML, with no framework, no bundler and no third-party
// code, on purpose: there is nothing to pin, build, audit or keep up to date; what is in
// the repository is exactly what the browser runs (the Go binary embeds these files); it
// works offline and stays small. The page is read-mostly and small enough that a few
// DOM helpers (js/dom.js) do what a framework would.
//
// Safety: the data comes from the cluster and is untrusted. It only ever reaches the page
// through textContent and DOM attributes (js/dom.js's h() cannot set HTML), and the page
// runs under a strict Content-Security-Policy: no inline script or style, no eval.
//
// Layout: js/api.js (token, fetch), js/live.js (the event stream), js/router.js (hash
// routes), js/ui.js (alert, dialog), one module per page (js/pipelines.js, js/pipeline.js
// with js/timeline.js, js/catalog.js for templates, triggers and executors, js/history.js
// for the archive's records).
import {initToken} from './js/api.js';
import {connect, onChange} from './js/live.js';
import {parseHash} from './js/router.js';
import {clearMessages, focusTitleOnRender} from './js/ui.js';
import * as pipelines from './js/pipelines.js';
import * as pipeline from './js/pipeline.js';
import {mountTemplates, mountTriggers, mountExecutors} from './js/catalog.js';
import {mountHistory} from './js/history.js';

initToken();

const view = document.getElementById('view');
let current = null;     // {key, page: {route, onChange, destroy}}
let first = true;

function resolve(r) {
  const [top] = r.parts;
  if (top === 'pipelines' && r.parts.length === 3) return {key: 'pipeline', nav: 'pipelines', mount: pipeline.mount};
  if (top === 'pipelines' && r.parts.length === 1) return {key: 'pipelines', nav: 'pipelines', mount: pipelines.mount};
  if (top === 'templates') return {key: 'templates', nav: 'templates', mount: mountTemplates};
  if (top === 'triggers') return {key: 'triggers', nav: 'triggers', mount: mountTriggers};
  if (top === 'executors') return {key: 'executors', nav: 'executors', mount: mountExecutors};
  if (top === 'history') return {key: 'history', nav: 'history', mount: mountHistory};
  return null;
}

function route() {
  const r = parseHash();
  const target = resolve(r);
  if (!target) {
    history.replaceState(null, '', window.location.pathname + window.location.search + '#/pipelines');
    return route();
  }
  // The same list page with other filters keeps its controls (and the focus in them).
  if (current && current.key === target.key && current.page.route(r)) return;
  if (current) current.page.destroy();
  const dlg = document.getElementById('dialog');
  if (dlg.open) dlg.close();
  clearMessages();
  if (!first) focusTitleOnRender();
  first = false;
  for (const a of document.querySelectorAll('.nav a')) {
    if (a.dataset.nav === target.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  view.replaceChildren();
  current = {key: target.key, page: target.mount(view, r)};
  window.scrollTo(0, 0);
}

window.addEventListener('hashchange', route);
onChange((ev) => { if (current) current.page.onChange(ev); });
route();
connect();
