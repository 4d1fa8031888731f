// The live stream: one EventSource on /api/events, whose "change" events tell the page
// what to fetch again. Nothing polls. The indicator in the header says whether the stream
// is connected; after a reconnection the page reloads what it shows (changes may have
// been missed while the stream was down).
import {eventsURL} from './api.js';

let source = null;
let listener = () => {};
let wasDown = false;
let retryDelay = 1000;
let retryTimer = null;

function indicate(state) {
  const el = document.getElementById('live-status');
  if (!el) return;
  const text = {connecting: 'Connecting…', connected: 'Live', reconnecting: 'Reconnecting…'}[state];
  el.dataset.state = state;
  el.querySelector('.live-text').textContent = text;
  el.title = state === 'connected' ? 'Live updates: connected' : 'Live updates: ' + text.toLowerCase();
}

// onChange sets the one function told of changes: {kind, namespace, name}; kind "*" means
// reload everything shown.
export function onChange(fn) { listener = fn; }

export function connect() {
  clearTimeout(retryTimer);
  if (source) source.close();
  indicate(wasDown ? 'reconnecting' : 'connecting');
  const es = new EventSource(eventsURL());
  source = es;
  es.addEventListener('open', () => {
    retryDelay = 1000;
    indicate('connected');
    if (wasDown) {
      wasDown = false;
      listener({kind: '*', namespace: '', name: ''});
    }
  });
  es.addEventListener('change', (e) => {
    let ev;
    try { ev = JSON.parse(e.data); } catch (err) { return; }
    if (ev && typeof ev.kind === 'string') listener(ev);
  });
  es.addEventListener('error', () => {
    if (source !== es) return;
    wasDown = true;
    indicate('reconnecting');
    // The browser reconnects by itself after a network error (readyState CONNECTING) but
    // gives up on an HTTP error (CLOSED): then try again, backing off up to 30s.
    if (es.readyState === EventSource.CLOSED) {
      es.close();
      retryTimer = setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30000);
    }
  });
}
