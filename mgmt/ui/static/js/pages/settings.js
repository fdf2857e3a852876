// Node-wide settings pages, as RabbitMQ's Admin tab has them: vhost and user
// limits, feature flags, and runtime and global parameters.

import * as api from '../api.js';
import {h, add, fill, field, select, section, kvTable, notify, errorText, confirmAction, fmtValue, parseJSONObject, button} from '../dom.js';
import {ListView} from '../table.js';
import {actionForm, vhostPicker, wide} from '../common.js';

// removeButton asks for confirmation, sends DELETE and refreshes the list.
function removeButton(label, what, apiPath, list) {
  return button(label, async () => {
    if (!await confirmAction('Remove ' + what + '?', label)) {
      return;
    }
    try {
      await api.request('DELETE', apiPath);
      notify('Removed ' + what + '.');
      await list.refresh();
    } catch (e) {
      notify('Could not remove ' + what + ': ' + errorText(e), 'error');
    }
  }, {class: 'btn btn-small btn-danger', 'data-focus-key': 'del:' + apiPath, 'aria-label': label + ' ' + what});
}

// limitRows flattens [{vhost|user, value: {name: n}}] into one row per limit.
function limitRows(items, owner) {
  const rows = [];
  for (const it of Array.isArray(items) ? items : []) {
    for (const [name, value] of Object.entries(it.value || {})) {
      rows.push({owner: it[owner], name: name, value: value});
    }
  }
  return rows;
}

// limitView is the list and form of one kind of limit: kind is "vhost" or
// "user", names the limits RabbitMQ 3.10 knows for it.
function limitView(kind, names, ownerPicker) {
  const apiKind = kind + '-limits';
  const what = kind === 'vhost' ? 'virtual host' : 'user';
  const list = new ListView({
    id: apiKind,
    caption: kind === 'vhost' ? 'Virtual host limits' : 'User limits',
    paged: false,
    path: () => '/' + apiKind,
    transform: (items) => limitRows(items, kind),
    filterKey: 'owner',
    defaultSort: 'owner',
    columns: [
      {label: kind === 'vhost' ? 'Virtual host' : 'User', sort: 'owner', render: (r) => r.owner},
      {label: 'Limit', sort: 'name', render: (r) => r.name},
      {label: 'Value', num: true, render: (r) => fmtValue(r.value)},
      {label: 'Actions', render: (r) => removeButton('Clear', 'limit ' + r.name + ' of ' + what + ' "' + r.owner + '"',
        api.path(apiKind, r.owner, r.name), list)},
    ],
    rowKey: (r) => r.owner + '/' + r.name,
    empty: 'No ' + what + ' limits: the node-wide defaults apply.',
  });
  const owner = ownerPicker();
  const name = select(names, names[0]);
  const value = h('input', {type: 'number', required: true, min: '-1', step: '1', value: '0'});
  const form = actionForm([
    field(kind === 'vhost' ? 'Virtual host' : 'User', owner),
    field('Limit', name),
    field('Value', value, 'A negative value removes the limit; 0 refuses every new one.'),
  ], 'Set limit', async () => {
    const who = owner.value;
    await api.request('PUT', api.path(apiKind, who, name.value), {body: {value: Number(value.value)}});
    await list.refresh();
    return 'Limit ' + name.value + ' of "' + who + '" set to ' + value.value + '.';
  }, {'aria-label': 'Set a ' + what + ' limit'});
  return {list: list, el: section(list.opts.caption, list.el, form)};
}

function userPicker() {
  const sel = h('select', {required: true});
  api.getJSON('/users' + api.query({columns: 'name'})).then((users) => {
    fill(sel, (Array.isArray(users) ? users : []).map((u) => u.name).sort().map((n) => h('option', {value: n}, n)));
  }).catch((e) => notify('Could not list users: ' + errorText(e), 'error'));
  return sel;
}

export function renderLimits(page) {
  const vhost = limitView('vhost', ['max-connections', 'max-queues'], () => vhostPicker(page.vhost, false));
  const user = limitView('user', ['max-connections', 'max-channels'], userPicker);
  add(page.main, h('h1', null, 'Limits'),
    h('p', {class: 'muted'}, 'Limits of one virtual host or user replace the node-wide defaults for it; ' +
      'a connection, channel or queue beyond a limit is refused.'),
    vhost.el, user.el);
  page.refresh = () => Promise.all([vhost.list.refresh(), user.list.refresh()]);
}

// ---- feature flags -------------------------------------------------------

export function renderFeatureFlags(page) {
  const list = new ListView({
    id: 'feature-flags',
    caption: 'Feature flags',
    paged: false,
    path: () => '/feature-flags',
    defaultSort: 'name',
    columns: [
      {label: 'Name', sort: 'name', render: (f) => f.name},
      {label: 'State', sort: 'state', render: (f) => h('span', {class: f.state === 'enabled' ? 'ok-text' : 'muted'}, f.state)},
      {label: 'Description', render: (f) => f.desc || ''},
      {label: 'Provided by', sort: 'provided_by', render: (f) => f.provided_by || ''},
      {label: 'Actions', render: (f) => (f.state === 'enabled' ? '' : button('Enable', async () => {
        try {
          await api.request('PUT', api.path('feature-flags', f.name, 'enable'));
          notify('Feature flag "' + f.name + '" enabled.');
        } catch (e) {
          notify('Could not enable "' + f.name + '": ' + errorText(e), 'error');
        }
        await list.refresh();
      }, {class: 'btn btn-small', 'data-focus-key': 'enable:' + f.name, 'aria-label': 'Enable ' + f.name}))},
    ],
    rowKey: (f) => f.name,
    empty: 'No feature flags.',
  });
  add(page.main, h('h1', null, 'Feature flags'),
    h('p', {class: 'muted'}, 'The flags RabbitMQ 3.10 reports, each with the state this node has; ' +
      'a flag is enabled when the node has the feature it names.'),
    list.el);
  page.refresh = () => list.refresh();
}

// ---- runtime and global parameters -----------------------------------------

// COMPONENTS are the runtime parameter components RabbitMQ's plugins define
// and Warren validates.
const COMPONENTS = ['federation-upstream', 'federation-upstream-set', 'shovel'];

function valueCell(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? kvTable(v) : h('code', null, JSON.stringify(v));
}

// parseValue reads a parameter value typed as JSON (any JSON value).
function parseValue(text) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error('Value is not valid JSON: ' + e.message);
  }
}

function runtimeParams(page, editable) {
  const all = page.vhost === '';
  const list = new ListView({
    id: 'parameters',
    caption: 'Runtime parameters',
    paged: false,
    // The API lists one vhost's parameters per component only, so the
    // whole list is read and the header's vhost picked here.
    path: () => '/parameters',
    transform: (items) => (all ? items : items.filter((p) => p.vhost === page.vhost)),
    defaultSort: 'name',
    columns: [
      {label: 'Component', sort: 'component', render: (p) => p.component},
      {label: 'Virtual host', sort: 'vhost', render: (p) => p.vhost},
      {label: 'Name', sort: 'name', render: (p) => p.name},
      {label: 'Value', render: (p) => valueCell(p.value)},
      {label: 'Actions', render: (p) => (editable ? removeButton('Clear', 'parameter "' + p.name + '" (' + p.component + ') in "' + p.vhost + '"',
        api.path('parameters', p.component, p.vhost, p.name), list) : '')},
    ],
    rowKey: (p) => p.component + '/' + p.vhost + '/' + p.name,
    empty: 'No runtime parameters.',
  });
  if (!editable) {
    return {list: list, el: section('Runtime parameters', list.el)};
  }
  const component = select(COMPONENTS, COMPONENTS[0]);
  const vh = vhostPicker(page.vhost, false);
  const name = h('input', {type: 'text', required: true, autocomplete: 'off', spellcheck: 'false'});
  const value = h('textarea', {rows: 4, required: true, spellcheck: 'false', placeholder: '{"uri": "amqp://host"}'});
  const form = actionForm([
    field('Component', component),
    field('Virtual host', vh),
    field('Name', name),
    wide(field('Value (JSON object)', value)),
  ], 'Set parameter', async () => {
    const body = {component: component.value, vhost: vh.value, name: name.value, value: parseJSONObject(value.value, 'Value')};
    await api.request('PUT', api.path('parameters', component.value, vh.value, name.value), {body: body});
    const saved = name.value;
    name.value = '';
    await list.refresh();
    return 'Parameter "' + saved + '" set.';
  }, {'aria-label': 'Set a runtime parameter'});
  return {list: list, el: section('Runtime parameters', list.el, form)};
}

function globalParams(editable) {
  const list = new ListView({
    id: 'global-parameters',
    caption: 'Global parameters',
    paged: false,
    path: () => '/global-parameters',
    defaultSort: 'name',
    columns: [
      {label: 'Name', sort: 'name', render: (p) => p.name},
      {label: 'Value', render: (p) => valueCell(p.value)},
      {label: 'Actions', render: (p) => (editable ? removeButton('Clear', 'global parameter "' + p.name + '"',
        api.path('global-parameters', p.name), list) : '')},
    ],
    rowKey: (p) => p.name,
    empty: 'No global parameters.',
  });
  if (!editable) {
    return {list: list, el: section('Global parameters', list.el)};
  }
  const name = h('input', {type: 'text', required: true, autocomplete: 'off', spellcheck: 'false'});
  const value = h('textarea', {rows: 2, required: true, spellcheck: 'false', placeholder: '"a value", 5 or {"k": "v"}'});
  const form = actionForm([
    field('Name', name),
    wide(field('Value (JSON)', value)),
  ], 'Set global parameter', async () => {
    const saved = name.value;
    await api.request('PUT', api.path('global-parameters', saved), {body: {name: saved, value: parseValue(value.value)}});
    name.value = '';
    await list.refresh();
    return 'Global parameter "' + saved + '" set.';
  }, {'aria-label': 'Set a global parameter'});
  return {list: list, el: section('Global parameters', list.el, form)};
}

export function renderParameters(page) {
  const editable = api.can('policymaker');
  const views = [runtimeParams(page, editable), globalParams(editable)];
  add(page.main, h('h1', null, 'Parameters'),
    h('p', {class: 'muted'}, 'Runtime parameters configure federation upstreams and shovels per virtual host; ' +
      'global parameters hold node-wide values such as the cluster name.'),
    views.map((v) => v.el));
  page.refresh = () => Promise.all(views.map((v) => v.list.refresh()));
}
