// Hash routes: #/pipelines?filters, #/pipelines/NS/NAME, #/templates, #/triggers,
// #/executors, #/history?namespace=NS. The list's filters live in the hash's query so that a reload keeps them.

export function parseHash(hash = window.location.hash) {
  let h = hash.replace(/^#/, '');
  let q = '';
  const i = h.indexOf('?');
  if (i >= 0) { q = h.slice(i + 1); h = h.slice(0, i); }
  const parts = h.split('/').filter(Boolean).map((p) => {
    try { return decodeURIComponent(p); } catch (e) { return p; }
  });
  return {parts, query: new URLSearchParams(q)};
}

// href builds a hash link from path segments and an optional {key: value} query (empty
// values are left out).
export function href(parts, query) {
  let out = '#/' + parts.map((p) => encodeURIComponent(p)).join('/');
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== '' && v !== null && v !== undefined) q.set(k, String(v));
    const qs = q.toString();
    if (qs) out += '?' + qs;
  }
  return out;
}

// setHash changes the address without a hashchange event: the page that calls it has
// already acted on the change. push adds a history entry (Back returns to the last one).
export function setHash(hash, push) {
  if (hash === window.location.hash) return;
  const url = window.location.pathname + window.location.search + hash;
  if (push) history.pushState(null, '', url);
  else history.replaceState(null, '', url);
}
