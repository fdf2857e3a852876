// The management HTTP API client: RabbitMQ's /api paths with HTTP basic auth.
//
// Credentials live in sessionStorage (per tab, cleared when the tab closes),
// never in localStorage or a cookie. Requests go to the relative path "api/",
// so the UI works at the root of the listener and behind a path prefix.

const AUTH_KEY = 'warren.auth';
const USER_KEY = 'warren.user';
const BASE = 'api';

// Look-ups that rarely change, cached until logout or invalidation.
let vhostCache = null;
let exchangeTypeCache = null;

// ApiError is a failed request: status is the HTTP status (0 when the server
// was unreachable), error and reason come from RabbitMQ's error body.
export class ApiError extends Error {
  constructor(status, error, reason, body) {
    super(reason || error || ('HTTP ' + status));
    this.name = 'ApiError';
    this.body = body === undefined ? null : body;
    this.status = status;
    this.error = error || '';
    this.reason = reason || error || ('HTTP ' + status);
  }
}

function basic(user, pass) {
  const bytes = new TextEncoder().encode(user + ':' + pass);
  let bin = '';
  for (const b of bytes) {
    bin += String.fromCharCode(b);
  }
  return 'Basic ' + btoa(bin);
}

export function loggedIn() {
  return sessionStorage.getItem(AUTH_KEY) !== null;
}

// user returns the /api/whoami answer saved at login: {name, tags: [...]}.
export function user() {
  try {
    return JSON.parse(sessionStorage.getItem(USER_KEY) || 'null');
  } catch (e) {
    return null;
  }
}

// logout forgets the credentials and everything cached for this user: the
// next user of the tab may see other vhosts.
export function logout() {
  sessionStorage.removeItem(AUTH_KEY);
  sessionStorage.removeItem(USER_KEY);
  sessionStorage.removeItem('warren.vhost');
  vhostCache = null;
  exchangeTypeCache = null;
}

function tagList(u) {
  if (!u) {
    return [];
  }
  if (Array.isArray(u.tags)) {
    return u.tags;
  }
  if (typeof u.tags === 'string') {
    return u.tags.split(',').map((t) => t.trim()).filter((t) => t);
  }
  return [];
}

// can reports whether the logged-in user has a tag, with RabbitMQ's
// hierarchy: administrator implies monitoring and policymaker, and each of
// those implies management.
export function can(tag) {
  const tags = tagList(user());
  const has = (t) => tags.includes(t);
  switch (tag) {
    case 'administrator':
      return has('administrator');
    case 'monitoring':
      return has('administrator') || has('monitoring');
    case 'policymaker':
      return has('administrator') || has('policymaker');
    case 'management':
      return has('administrator') || has('monitoring') || has('policymaker') || has('management');
    default:
      return has(tag);
  }
}

// path joins raw segments into an API path, percent-encoding each one, so
// the vhost "/" becomes %2F as RabbitMQ expects.
export function path(...segments) {
  return '/' + segments.map((x) => encodeURIComponent(x)).join('/');
}

// query builds "?a=1&b=2" from an object, leaving out empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') {
      q.set(k, String(v));
    }
  }
  const str = q.toString();
  return str ? '?' + str : '';
}

async function decode(res) {
  if (res.status === 204) {
    return null;
  }
  const text = await res.text();
  if (text === '') {
    return null;
  }
  const ct = res.headers.get('Content-Type') || '';
  if (ct.includes('json')) {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new ApiError(res.status, 'bad_response', 'The server sent invalid JSON: ' + e.message);
    }
  }
  return text;
}

async function send(method, p, opts, auth) {
  const headers = Object.assign({Accept: 'application/json'}, (opts && opts.headers) || {});
  if (auth) {
    headers.Authorization = auth;
  }
  let body;
  if (opts && opts.body !== undefined) {
    if (typeof opts.body === 'string' || opts.body instanceof Blob) {
      body = opts.body;
    } else {
      body = JSON.stringify(opts.body);
    }
    headers['Content-Type'] = 'application/json';
  }
  try {
    return await fetch(BASE + p, {method: method, headers: headers, body: body, cache: 'no-store', credentials: 'omit'});
  } catch (e) {
    throw new ApiError(0, 'network', 'Cannot reach the server: ' + e.message);
  }
}

function toError(res, data) {
  if (data && typeof data === 'object') {
    return new ApiError(res.status, data.error, data.reason, data);
  }
  return new ApiError(res.status, res.statusText, typeof data === 'string' && data ? data : res.statusText);
}

// request sends one API call and returns the decoded JSON (null for 204).
//
// A 401 means either that the credentials no longer work or that this user
// lacks the tag for this endpoint (RabbitMQ uses 401 for both). The two are
// told apart by asking /api/whoami: only if that fails too is the session
// ended, with a "warren:logout" event the app turns into the login page.
export async function request(method, p, opts) {
  const auth = sessionStorage.getItem(AUTH_KEY);
  if (auth === null) {
    window.dispatchEvent(new CustomEvent('warren:logout', {detail: 'Please log in.'}));
    throw new ApiError(401, 'not_authorised', 'Not logged in');
  }
  const res = await send(method, p, opts, auth);
  if (res.ok) {
    return decode(res);
  }
  let data = null;
  try {
    data = await decode(res);
  } catch (e) {
    data = null;
  }
  if (res.status === 401 && p !== '/whoami') {
    const check = await send('GET', '/whoami', null, auth);
    if (check.status === 401) {
      logout();
      window.dispatchEvent(new CustomEvent('warren:logout', {detail: 'Your credentials were refused; please log in again.'}));
    }
  } else if (res.status === 401) {
    logout();
    window.dispatchEvent(new CustomEvent('warren:logout', {detail: 'Your credentials were refused; please log in again.'}));
  }
  throw toError(res, data);
}

export function getJSON(p) {
  return request('GET', p);
}

// login checks the credentials against /api/whoami and keeps them for this
// tab only if they work.
export async function login(name, password) {
  const auth = basic(name, password);
  const res = await send('GET', '/whoami', null, auth);
  let data = null;
  try {
    data = await decode(res);
  } catch (e) {
    data = null;
  }
  if (!res.ok) {
    throw toError(res, data);
  }
  if (!data || typeof data !== 'object') {
    throw new ApiError(res.status, 'bad_response', 'Unexpected answer from /api/whoami');
  }
  sessionStorage.setItem(AUTH_KEY, auth);
  sessionStorage.setItem(USER_KEY, JSON.stringify(data));
  return data;
}

// download fetches an API resource as a Blob (for definitions export).
export async function download(p) {
  const auth = sessionStorage.getItem(AUTH_KEY);
  const res = await send('GET', p, null, auth);
  if (!res.ok) {
    let data = null;
    try {
      data = await decode(res);
    } catch (e) {
      data = null;
    }
    if (res.status === 401) {
      const check = await send('GET', '/whoami', null, auth);
      if (check.status === 401) {
        logout();
        window.dispatchEvent(new CustomEvent('warren:logout', {detail: 'Your credentials were refused; please log in again.'}));
      }
    }
    throw toError(res, data);
  }
  return res.blob();
}

// ---- shared look-ups ------------------------------------------------------

// vhostNames returns the names of the vhosts this user can see, cached until
// invalidateVhosts is called (after adding or deleting one).
export async function vhostNames() {
  if (vhostCache === null) {
    const list = await getJSON('/vhosts' + query({columns: 'name'}));
    vhostCache = (Array.isArray(list) ? list : (list && list.items) || []).map((v) => v.name).sort();
  }
  return vhostCache;
}

export function invalidateVhosts() {
  vhostCache = null;
  window.dispatchEvent(new CustomEvent('warren:vhosts'));
}

// exchangeTypes lists the enabled exchange types from /api/overview.
export async function exchangeTypes() {
  if (exchangeTypeCache === null) {
    const ov = await getJSON('/overview');
    const types = ((ov && ov.exchange_types) || []).filter((t) => t.enabled !== false).map((t) => t.name);
    exchangeTypeCache = types.length ? types.sort() : ['direct', 'fanout', 'headers', 'topic'];
  }
  return exchangeTypeCache;
}
