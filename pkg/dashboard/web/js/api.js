// The dashboard API: the session token and fetch.
//
// The token comes once in the page's address (/?token=...). It is kept in this module's
// memory only, and taken out of the address bar at once so that it does not stay in the
// history, in a bookmark or on a screen share.

let token = '';

// The token is kept in sessionStorage, this tab's and this origin's only, so that a reload
// (the server lets it in with a cookie) still has it for the API's header.
export function initToken() {
  const url = new URL(window.location.href);
  const t = url.searchParams.get('token');
  if (t !== null) {
    token = t;
    sessionStorage.setItem('stepwise-token', t);
    url.searchParams.delete('token');
    history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  } else {
    token = sessionStorage.getItem('stepwise-token') || '';
  }
}

export const hasToken = () => token !== '';

// eventsURL is the address of the live stream; EventSource cannot send headers, so the
// token goes in its query.
export const eventsURL = () => (token ? '/api/events?token=' + encodeURIComponent(token) : '/api/events');

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
  get forbidden() { return this.status === 403; }
  get notFound() { return this.status === 404; }
}

// api fetches /api/<path> and returns the decoded JSON body; it throws an ApiError with
// the server's {"error": ...} message on an HTTP error.
export async function api(path, {method = 'GET', body, signal} = {}) {
  const headers = {Accept: 'application/json'};
  if (token) headers['X-Stepwise-Token'] = token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch('/api/' + path, {
      method, headers, signal, credentials: 'same-origin', cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'the dashboard server cannot be reached (has kubectl stepwise dashboard stopped?)');
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try { data = JSON.parse(text); } catch (e) { data = null; }
  }
  if (!res.ok) {
    const msg = data && typeof data.error === 'string' && data.error ? data.error : `${res.status} ${res.statusText}`.trim();
    throw new ApiError(res.status, msg);
  }
  return data || {};
}

// errorText is what the alert region says of an error.
export function errorText(err) {
  if (!(err instanceof ApiError)) return 'Error: ' + (err && err.message ? err.message : String(err));
  switch (err.status) {
    case 0: return 'Offline: ' + err.message;
    case 401: return 'Not signed in: the session token is missing or no longer valid. ' +
      'Open the address that kubectl stepwise dashboard printed again. (' + err.message + ')';
    case 403: return 'Forbidden: ' + err.message;
    case 404: return 'Not found: ' + err.message;
    case 409: return 'Conflict: ' + err.message;
    default: return `Error (${err.status}): ` + err.message;
  }
}

export const isAbort = (e) => e && e.name === 'AbortError';

// Path segments of a resource, escaped.
export const seg = (...parts) => parts.map((p) => encodeURIComponent(p)).join('/');
