// The application shell: hash routing, navigation, the vhost picker and the
// poller that refreshes the current page every 5 seconds while the tab is
// visible.

import * as api from './api.js';
import {h, fill, fmtClock, errorText, notify} from './dom.js';
import * as loginPage from './pages/login.js';
import * as overview from './pages/overview.js';
import * as queues from './pages/queues.js';
import * as exchanges from './pages/exchanges.js';
import * as connections from './pages/connections.js';
import * as admin from './pages/admin.js';
import * as definitions from './pages/definitions.js';
import * as settings from './pages/settings.js';
import * as plugins from './pages/plugins.js';

// POLL_MS is the refresh interval, RabbitMQ's and LavinMQ's default. The
// sessionStorage key "warren.poll-ms" overrides it for this tab (at least
// 100 ms); the browser test uses it to observe polling quickly.
const POLL_MS = Math.max(100, Number(sessionStorage.getItem('warren.poll-ms')) || 5000);

// Routes: a pattern of literal segments and :params, the page's render
// function, and the tag needed to see it.
const ROUTES = [
  ['login', loginPage.render, null],
  ['overview', overview.render, 'management'],
  ['connections', connections.renderConnections, 'management'],
  ['connections/:name', connections.renderConnection, 'management'],
  ['channels', connections.renderChannels, 'management'],
  ['channels/:name', connections.renderChannel, 'management'],
  ['exchanges', exchanges.renderList, 'management'],
  ['exchanges/:vhost/:name', exchanges.renderDetail, 'management'],
  ['queues', queues.renderList, 'management'],
  ['queues/:vhost/:name', queues.renderDetail, 'management'],
  ['users', admin.renderUsers, 'administrator'],
  ['vhosts', admin.renderVhosts, 'administrator'],
  ['permissions', admin.renderPermissions, 'administrator'],
  ['policies', admin.renderPolicies, 'management'],
  ['definitions', definitions.render, 'administrator'],
  ['limits', settings.renderLimits, 'management'],
  ['feature-flags', settings.renderFeatureFlags, 'administrator'],
  ['parameters', settings.renderParameters, 'policymaker'],
  ['shovels', plugins.renderShovels, 'management'],
  ['federation', plugins.renderFederation, 'management'],
].map(([pattern, render, tag]) => ({parts: pattern.split('/'), render: render, tag: tag}));

// NAV is the main navigation, in RabbitMQ's order; admin pages come last.
const NAV = [
  ['overview', 'Overview', 'management'],
  ['connections', 'Connections', 'management'],
  ['channels', 'Channels', 'management'],
  ['exchanges', 'Exchanges', 'management'],
  ['queues', 'Queues', 'management'],
  ['users', 'Users', 'administrator'],
  ['vhosts', 'Virtual hosts', 'administrator'],
  ['permissions', 'Permissions', 'administrator'],
  ['policies', 'Policies', 'management'],
  ['definitions', 'Definitions', 'administrator'],
  ['limits', 'Limits', 'administrator'],
  ['feature-flags', 'Feature flags', 'administrator'],
  ['parameters', 'Parameters', 'policymaker'],
  ['shovels', 'Shovels', 'management'],
  ['federation', 'Federation', 'management'],
];

const state = {
  page: null, // the current page context
  paused: false, // the user paused updates
  timer: null,
  loginMessage: '',
};

function el(id) {
  return document.getElementById(id);
}

// parseHash splits "#/queues/%2F/q" into decoded segments ["queues", "/", "q"].
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '').split('?')[0];
  if (raw === '') {
    return [];
  }
  return raw.split('/').map((seg) => {
    try {
      return decodeURIComponent(seg);
    } catch (e) {
      return seg;
    }
  });
}

function match(segments) {
  for (const r of ROUTES) {
    if (r.parts.length !== segments.length) {
      continue;
    }
    const params = {};
    let ok = true;
    for (let i = 0; i < r.parts.length; i += 1) {
      if (r.parts[i].startsWith(':')) {
        params[r.parts[i].slice(1)] = segments[i];
      } else if (r.parts[i] !== segments[i]) {
        ok = false;
        break;
      }
    }
    if (ok) {
      return {route: r, params: params};
    }
  }
  return null;
}

function selectedVhost() {
  return sessionStorage.getItem('warren.vhost') || '';
}

// ---- shell -------------------------------------------------------------

function renderNav(section) {
  fill(el('nav-list'), NAV.filter(([, , tag]) => api.can(tag)).map(([key, label]) => h('li', {class: key === 'users' ? 'nav-admin-start' : null},
    h('a', {href: '#/' + key, 'aria-current': key === section ? 'page' : null}, label))));
}

async function fillVhostSelect() {
  const sel = el('vhost-select');
  const current = selectedVhost();
  let names = [];
  try {
    names = await api.vhostNames();
  } catch (e) {
    notify('Could not list virtual hosts: ' + errorText(e), 'error');
  }
  if (current && !names.includes(current)) {
    sessionStorage.removeItem('warren.vhost');
  }
  fill(sel, h('option', {value: ''}, 'All'), names.map((n) => h('option', {value: n, selected: n === current}, n)));
}

function showShell(on) {
  el('topbar').hidden = !on;
  if (on) {
    const u = api.user();
    el('user-name').textContent = u ? 'User: ' + u.name : '';
  }
}

// showClusterName puts the cluster name next to the logo, as RabbitMQ's UI
// does, so operators with several brokers open can tell the tabs apart.
async function showClusterName() {
  try {
    const res = await api.getJSON('/cluster-name');
    el('brand-meta').textContent = res && res.name ? res.name : '';
  } catch (e) {
    el('brand-meta').textContent = '';
  }
}

function setUpdated(text) {
  el('updated').textContent = text;
}

// showRefreshed reports a finished refresh. A refresh that was in flight
// when the tab was hidden or updates were paused must not overwrite that
// state.
function showRefreshed(failed) {
  if (document.hidden) {
    setUpdated('Paused while the tab is hidden');
  } else if (state.paused) {
    setUpdated('Updates paused');
  } else {
    setUpdated((failed ? 'Update failed ' : 'Updated ') + fmtClock(Date.now()));
  }
}

// ---- polling -----------------------------------------------------------

function schedule() {
  clearTimeout(state.timer);
  state.timer = null;
  if (state.paused || document.hidden || !state.page || !state.page.refresh) {
    return;
  }
  state.timer = setTimeout(() => tick(state.page), POLL_MS);
}

// tick refreshes one page. A page that is no longer current, or whose
// previous refresh is still running, is skipped, so slow answers never pile
// up requests.
async function tick(page) {
  if (page !== state.page || page.inflight || !page.refresh) {
    return;
  }
  page.inflight = true;
  try {
    page.running = page.refresh();
    await page.running;
    if (page === state.page) {
      page.errorBox.hidden = true;
      showRefreshed(false);
    }
  } catch (e) {
    if (page === state.page && api.loggedIn()) {
      showRefreshed(true);
      page.errorBox.hidden = false;
      page.errorBox.textContent = e && e.status === 404
        ? 'Not found: it may have been deleted. (' + errorText(e) + ')'
        : 'Could not refresh: ' + errorText(e);
    }
  } finally {
    page.inflight = false;
    if (page === state.page) {
      schedule();
    }
  }
}

// refreshNow runs the current page's refresh at once.
function refreshNow() {
  if (state.page) {
    tick(state.page);
  }
}

function onVisibility() {
  if (document.hidden) {
    clearTimeout(state.timer);
    state.timer = null;
    setUpdated('Paused while the tab is hidden');
  } else if (!state.paused) {
    refreshNow();
  }
}

function togglePause() {
  state.paused = !state.paused;
  const btn = el('poll-toggle');
  btn.setAttribute('aria-pressed', String(state.paused));
  btn.textContent = state.paused ? 'Resume updates' : 'Pause updates';
  if (state.paused) {
    clearTimeout(state.timer);
    state.timer = null;
    setUpdated('Updates paused');
  } else {
    refreshNow();
  }
}

// ---- navigation --------------------------------------------------------

function navigate(initial) {
  const segments = parseHash();
  if (segments.length === 0) {
    location.replace('#/overview');
    return;
  }
  if (segments[0] !== 'login' && !api.loggedIn()) {
    sessionStorage.setItem('warren.next', location.hash);
    location.replace('#/login');
    return;
  }
  if (segments[0] === 'login' && api.loggedIn()) {
    location.replace('#/overview');
    return;
  }
  clearTimeout(state.timer);
  state.timer = null;
  const found = match(segments);
  const main = el('main');
  const errorBox = h('p', {class: 'error page-error', role: 'alert', hidden: true});
  const body = h('div', {class: 'page'});
  fill(main, errorBox, body);
  const page = {
    main: body,
    params: found ? found.params : {},
    vhost: selectedVhost(),
    errorBox: errorBox,
    refresh: null,
    inflight: false,
    alive: () => state.page === page,
    go: (hash) => {
      location.hash = hash;
    },
    refreshNow: () => tick(page),
    // removing runs the deletion of the object the page shows. Polling
    // stops first and a refresh in flight is let finish, so no refresh
    // asks for the object once it is gone (the browser would log the
    // 404); polling resumes if the deletion fails.
    removing: async (remove) => {
      const refresh = page.refresh;
      page.refresh = null;
      clearTimeout(state.timer);
      state.timer = null;
      if (page.inflight && page.running) {
        await page.running.catch(() => {});
      }
      try {
        return await remove();
      } catch (e) {
        page.refresh = refresh;
        if (page === state.page) {
          schedule();
        }
        throw e;
      }
    },
    loginMessage: state.loginMessage,
  };
  state.page = page;
  state.loginMessage = '';
  showShell(segments[0] !== 'login');
  if (segments[0] !== 'login') {
    renderNav(segments[0]);
  }
  if (!found) {
    document.title = 'Not found - Warren';
    fill(body, h('h1', {tabindex: '-1'}, 'Page not found'),
      h('p', null, 'There is no page at ', h('code', null, location.hash), '. ', h('a', {href: '#/overview'}, 'Go to the overview.')));
  } else if (found.route.tag && !api.can(found.route.tag)) {
    document.title = 'Not allowed - Warren';
    fill(body, h('h1', {tabindex: '-1'}, 'Not allowed'),
      h('p', null, 'This page needs the "' + found.route.tag + '" tag, which your user does not have.'));
  } else {
    try {
      found.route.render(page);
    } catch (e) {
      errorBox.hidden = false;
      errorBox.textContent = 'This page failed to render: ' + errorText(e);
    }
  }
  const heading = body.querySelector('h1');
  if (heading) {
    heading.setAttribute('tabindex', '-1');
    document.title = heading.textContent + ' - Warren';
    if (!initial) {
      heading.focus({preventScroll: false});
    }
  }
  if (page.refresh) {
    setUpdated('Loading…');
    tick(page);
  } else {
    setUpdated('');
  }
}

// afterLogin runs when the login page reports success ("warren:login").
function afterLogin() {
  const next = sessionStorage.getItem('warren.next');
  sessionStorage.removeItem('warren.next');
  fillVhostSelect();
  showClusterName();
  location.hash = next && !next.startsWith('#/login') ? next : '#/overview';
}

function start() {
  el('skip-link').addEventListener('click', (e) => {
    e.preventDefault();
    const heading = el('main').querySelector('h1');
    (heading || el('main')).focus();
  });
  el('logout').addEventListener('click', () => {
    api.logout();
    state.loginMessage = 'You have logged out.';
    location.hash = '#/login';
  });
  el('poll-toggle').addEventListener('click', togglePause);
  el('vhost-select').addEventListener('change', (e) => {
    if (e.target.value) {
      sessionStorage.setItem('warren.vhost', e.target.value);
    } else {
      sessionStorage.removeItem('warren.vhost');
    }
    // Re-render in place without moving focus off the picker.
    navigate(true);
  });
  window.addEventListener('hashchange', () => navigate(false));
  window.addEventListener('warren:logout', (e) => {
    state.loginMessage = e.detail || '';
    if (!location.hash.startsWith('#/login')) {
      sessionStorage.setItem('warren.next', location.hash);
      location.hash = '#/login';
    }
  });
  window.addEventListener('warren:vhosts', () => fillVhostSelect());
  window.addEventListener('warren:login', afterLogin);
  document.addEventListener('visibilitychange', onVisibility);
  if (api.loggedIn()) {
    fillVhostSelect();
    showClusterName();
  }
  navigate(true);
}

start();
