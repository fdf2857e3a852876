// Admin pages: users, virtual hosts, permissions and policies (list, add,
// delete).

import * as api from '../api.js';
import {h, add, fill, field, select, section, kvTable, notify, errorText, confirmAction, fmtInt, fmtRate, parseJSONObject, button} from '../dom.js';
import {ListView} from '../table.js';
import {actionForm, vhostPicker, wide} from '../common.js';

// deleteButton asks for confirmation, sends DELETE and refreshes the list.
function deleteButton(label, what, apiPath, list, after) {
  const btn = button(label, async () => {
    if (!await confirmAction('Delete ' + what + '?', 'Delete')) {
      return;
    }
    try {
      await api.request('DELETE', apiPath);
      notify('Deleted ' + what + '.');
      if (after) {
        after();
      }
      await list.refresh();
    } catch (e) {
      notify('Could not delete ' + what + ': ' + errorText(e), 'error');
    }
  }, {class: 'btn btn-small btn-danger', 'data-focus-key': 'del:' + apiPath, 'aria-label': label + ' ' + what});
  return btn;
}

function tagText(tags) {
  if (Array.isArray(tags)) {
    return tags.join(', ');
  }
  return tags || '';
}

// ---- users ---------------------------------------------------------------

export function renderUsers(page) {
  const me = (api.user() || {}).name;
  const list = new ListView({
    id: 'users',
    caption: 'Users',
    paged: false,
    path: () => '/users',
    defaultSort: 'name',
    columns: [
      {label: 'Name', sort: 'name', render: (u) => u.name},
      {label: 'Tags', render: (u) => tagText(u.tags)},
      {label: 'Password', render: (u) => (u.password_hash ? 'set' : 'none (no password login)')},
      {label: 'Hashing', render: (u) => u.hashing_algorithm || ''},
      {label: 'Actions', render: (u) => (u.name === me
        ? h('span', {class: 'muted'}, 'you')
        : deleteButton('Delete', 'user "' + u.name + '"', api.path('users', u.name), list))},
    ],
    rowKey: (u) => u.name,
    empty: 'No users.',
  });
  const name = h('input', {type: 'text', required: true, autocomplete: 'off', spellcheck: 'false'});
  const pass = h('input', {type: 'password', autocomplete: 'new-password'});
  const pass2 = h('input', {type: 'password', autocomplete: 'new-password'});
  const tags = h('input', {type: 'text', autocomplete: 'off', spellcheck: 'false'});
  const quick = h('div', {class: 'quick-tags', role: 'group', 'aria-label': 'Add a tag'},
    ['administrator', 'monitoring', 'policymaker', 'management'].map((t) => button(t, () => {
      const cur = tags.value.split(',').map((x) => x.trim()).filter((x) => x);
      if (!cur.includes(t)) {
        cur.push(t);
      }
      tags.value = cur.join(', ');
    }, {class: 'btn btn-small'})));
  const form = actionForm([
    field('Username', name),
    field('Password', pass, 'Leave empty for a user without password login. Saving an existing user replaces it, so an empty password removes its password, as in RabbitMQ.'),
    field('Password (again)', pass2),
    wide(h('div', {class: 'field'}, field('Tags (comma-separated)', tags), quick)),
  ], 'Add or update user', async () => {
    if (pass.value !== pass2.value) {
      throw new Error('The two passwords differ.');
    }
    const body = {tags: tags.value.split(',').map((x) => x.trim()).filter((x) => x).join(',')};
    if (pass.value) {
      body.password = pass.value;
    }
    const uname = name.value;
    await api.request('PUT', api.path('users', uname), {body: body});
    name.value = '';
    pass.value = '';
    pass2.value = '';
    tags.value = '';
    await list.refresh();
    return 'User "' + uname + '" saved.';
  }, {'aria-label': 'Add or update a user'});
  add(page.main, h('h1', null, 'Users'), list.el, section('Add or update a user', form));
  page.refresh = () => list.refresh();
}

// ---- virtual hosts ---------------------------------------------------------

export function renderVhosts(page) {
  const rate = (key) => (v) => fmtRate(v.message_stats && v.message_stats[key + '_details'] ? v.message_stats[key + '_details'].rate : undefined);
  const list = new ListView({
    id: 'vhosts',
    caption: 'Virtual hosts',
    paged: true,
    path: () => '/vhosts',
    columns: [
      {label: 'Name', sort: 'name', render: (v) => v.name},
      {label: 'Description', render: (v) => v.description || ''},
      {label: 'Tags', render: (v) => tagText(v.tags)},
      {label: 'Default queue type', render: (v) => v.default_queue_type || ''},
      {label: 'Ready', sort: 'messages_ready', num: true, render: (v) => fmtInt(v.messages_ready)},
      {label: 'Unacked', sort: 'messages_unacknowledged', num: true, render: (v) => fmtInt(v.messages_unacknowledged)},
      {label: 'Total', sort: 'messages', num: true, render: (v) => fmtInt(v.messages)},
      {label: 'Publish', num: true, render: rate('publish')},
      {label: 'Deliver / get', num: true, render: rate('deliver_get')},
      {label: 'Actions', render: (v) => deleteButton('Delete', 'virtual host "' + v.name + '" and everything in it',
        api.path('vhosts', v.name), list, api.invalidateVhosts)},
    ],
    rowKey: (v) => v.name,
    empty: 'No virtual hosts.',
  });
  const name = h('input', {type: 'text', required: true, autocomplete: 'off', spellcheck: 'false'});
  const desc = h('input', {type: 'text', autocomplete: 'off'});
  const tags = h('input', {type: 'text', autocomplete: 'off'});
  const qtype = select([['classic', 'Classic'], ['quorum', 'Quorum'], ['stream', 'Stream']], 'classic');
  const form = actionForm([
    field('Name', name),
    field('Description', desc),
    field('Tags (comma-separated)', tags),
    field('Default queue type', qtype),
  ], 'Add virtual host', async () => {
    const vname = name.value;
    await api.request('PUT', api.path('vhosts', vname), {
      body: {description: desc.value, tags: tags.value, default_queue_type: qtype.value},
    });
    name.value = '';
    desc.value = '';
    tags.value = '';
    api.invalidateVhosts();
    await list.refresh();
    return 'Virtual host "' + vname + '" added. Grant users access on the permissions page.';
  }, {'aria-label': 'Add a virtual host'});
  add(page.main, h('h1', null, 'Virtual hosts'), list.el, section('Add a virtual host', form));
  page.refresh = () => list.refresh();
}

// ---- permissions -----------------------------------------------------------

export function renderPermissions(page) {
  const list = new ListView({
    id: 'permissions',
    caption: 'Permissions',
    paged: false,
    path: () => '/permissions',
    filterKey: 'user',
    defaultSort: 'user',
    columns: [
      {label: 'User', sort: 'user', render: (p) => p.user},
      {label: 'Virtual host', sort: 'vhost', render: (p) => p.vhost},
      {label: 'Configure', render: (p) => h('code', null, p.configure)},
      {label: 'Write', render: (p) => h('code', null, p.write)},
      {label: 'Read', render: (p) => h('code', null, p.read)},
      {label: 'Actions', render: (p) => deleteButton('Clear', 'permissions of "' + p.user + '" on "' + p.vhost + '"',
        api.path('permissions', p.vhost, p.user), list)},
    ],
    rowKey: (p) => p.user + '@' + p.vhost,
    empty: 'No permissions.',
  });
  const user = h('select', {required: true});
  api.getJSON('/users' + api.query({columns: 'name'})).then((users) => {
    const names = (Array.isArray(users) ? users : []).map((u) => u.name).sort();
    fill(user, names.map((n) => h('option', {value: n}, n)));
  }).catch((e) => notify('Could not list users: ' + errorText(e), 'error'));
  const vh = vhostPicker(page.vhost, false);
  const conf = h('input', {type: 'text', value: '.*', spellcheck: 'false'});
  const write = h('input', {type: 'text', value: '.*', spellcheck: 'false'});
  const read = h('input', {type: 'text', value: '.*', spellcheck: 'false'});
  const form = actionForm([
    field('User', user),
    field('Virtual host', vh),
    field('Configure regexp', conf),
    field('Write regexp', write),
    field('Read regexp', read),
  ], 'Set permission', async () => {
    await api.request('PUT', api.path('permissions', vh.value, user.value), {
      body: {configure: conf.value, write: write.value, read: read.value},
    });
    await list.refresh();
    return 'Permissions of "' + user.value + '" on "' + vh.value + '" set.';
  }, {'aria-label': 'Set permission'});
  add(page.main, h('h1', null, 'Permissions'), list.el, section('Set permission', form));
  page.refresh = () => list.refresh();
}

// ---- policies --------------------------------------------------------------

const APPLY_TO = [
  ['all', 'Exchanges and queues'], ['queues', 'Queues'], ['exchanges', 'Exchanges'],
  ['classic_queues', 'Classic queues'], ['quorum_queues', 'Quorum queues'], ['streams', 'Streams'],
];

// policyKeys are the definition keys Warren applies, offered as quick inserts.
const POLICY_KEYS = [
  ['message-ttl', 60000], ['expires', 1800000], ['max-length', 10000], ['max-length-bytes', 104857600],
  ['overflow', 'reject-publish'], ['dead-letter-exchange', 'dlx'], ['dead-letter-routing-key', 'dead'],
  ['alternate-exchange', 'ae'], ['delivery-limit', 20], ['consumer-timeout', 1800000], ['queue-mode', 'lazy'],
];

// VALUE_TYPES are the types of a definition row, as RabbitMQ's policy form
// offers them; a list is typed comma-separated.
const VALUE_TYPES = [['string', 'String'], ['number', 'Number'], ['boolean', 'Boolean'], ['list', 'List']];

// typedValue converts a row's text to its type, or throws saying why not.
function typedValue(key, text, type) {
  const t = text.trim();
  switch (type) {
    case 'number': {
      const n = Number(t);
      if (t === '' || !Number.isFinite(n)) {
        throw new Error('The value of "' + key + '" is not a number: "' + text + '".');
      }
      return n;
    }
    case 'boolean':
      if (t !== 'true' && t !== 'false') {
        throw new Error('The value of "' + key + '" must be true or false.');
      }
      return t === 'true';
    case 'list':
      return t === '' ? [] : t.split(',').map((x) => x.trim());
    default:
      return text;
  }
}

// typedRows is the policy form's key / value / type rows. put fills the
// first empty row (or a new one) with a key and its default value.
function typedRows() {
  const box = h('div', {class: 'typed-rows', role: 'group', 'aria-label': 'Definition keys'});
  const rows = [];
  const addRow = () => {
    const n = rows.length + 1;
    const r = {
      key: h('input', {type: 'text', autocomplete: 'off', spellcheck: 'false'}),
      value: h('input', {type: 'text', autocomplete: 'off', spellcheck: 'false'}),
      type: select(VALUE_TYPES, 'string'),
    };
    rows.push(r);
    box.insertBefore(h('div', {class: 'typed-row'}, field('Key ' + n, r.key), field('Value ' + n, r.value), field('Type ' + n, r.type)), more);
    return r;
  };
  const more = button('Add key', () => addRow().key.focus(), {class: 'btn btn-small'});
  box.appendChild(more);
  addRow();
  return {
    el: box,
    put: (key, value) => {
      const r = rows.find((x) => x.key.value.trim() === '' || x.key.value.trim() === key) || addRow();
      r.key.value = key;
      r.value.value = String(value);
      r.type.value = typeof value === 'number' ? 'number' : typeof value === 'boolean' ? 'boolean' : 'string';
    },
    read: () => {
      const out = {};
      for (const r of rows) {
        const key = r.key.value.trim();
        if (key === '') {
          continue;
        }
        if (key in out) {
          throw new Error('Key "' + key + '" is in two rows.');
        }
        out[key] = typedValue(key, r.value.value, r.type.value);
      }
      return out;
    },
  };
}

function policyView(page, kind, title) {
  const editable = kind === 'operator-policies' ? api.can('administrator') : api.can('policymaker');
  const all = page.vhost === '';
  const list = new ListView({
    id: kind,
    caption: title,
    paged: false,
    path: () => (all ? '/' + kind : api.path(kind, page.vhost)),
    defaultSort: 'name',
    columns: [
      {label: 'Name', sort: 'name', render: (p) => p.name},
      {label: 'Virtual host', sort: 'vhost', render: (p) => p.vhost},
      {label: 'Pattern', sort: 'pattern', render: (p) => h('code', null, p.pattern)},
      {label: 'Apply to', sort: 'apply-to', render: (p) => p['apply-to']},
      {label: 'Definition', render: (p) => kvTable(p.definition)},
      {label: 'Priority', sort: 'priority', num: true, render: (p) => fmtInt(p.priority)},
      {label: 'Actions', render: (p) => (editable
        ? deleteButton('Delete', (kind === 'operator-policies' ? 'operator policy "' : 'policy "') + p.name + '" in "' + p.vhost + '"',
          api.path(kind, p.vhost, p.name), list)
        : '')},
    ],
    rowKey: (p) => p.vhost + '/' + p.name,
    empty: 'No ' + title.toLowerCase() + '.',
  });
  const parts = [list.el];
  if (editable) {
    const vh = vhostPicker(page.vhost, false);
    const name = h('input', {type: 'text', required: true, autocomplete: 'off', spellcheck: 'false'});
    const pattern = h('input', {type: 'text', required: true, value: '^', spellcheck: 'false'});
    const applyTo = select(APPLY_TO, 'queues');
    const priority = h('input', {type: 'number', value: '0'});
    const def = h('textarea', {rows: 4, spellcheck: 'false', placeholder: '{"max-length": 10000}'});
    const rows = typedRows();
    const quick = h('div', {class: 'quick-tags', role: 'group', 'aria-label': 'Add a definition key'},
      POLICY_KEYS.map(([k, v]) => button(k, () => rows.put(k, v), {class: 'btn btn-small'})));
    parts.push(section(kind === 'operator-policies' ? 'Add or update an operator policy' : 'Add or update a policy', actionForm([
      field('Virtual host', vh),
      field('Name', name),
      field('Pattern (regular expression)', pattern),
      field('Apply to', applyTo),
      field('Priority', priority),
      wide(h('div', {class: 'field'}, rows.el, quick)),
      wide(field('Definition (JSON object)', def, 'Keys typed here are added to those in the rows above.')),
    ], 'Save policy', async () => {
      const definition = parseJSONObject(def.value, 'Definition');
      for (const [k, v] of Object.entries(rows.read())) {
        if (k in definition) {
          throw new Error('Key "' + k + '" is both in a row and in the JSON definition.');
        }
        definition[k] = v;
      }
      if (Object.keys(definition).length === 0) {
        throw new Error('A policy needs at least one definition key.');
      }
      const pname = name.value;
      await api.request('PUT', api.path(kind, vh.value, pname), {
        body: {pattern: pattern.value, definition: definition, priority: Number(priority.value) || 0, 'apply-to': applyTo.value},
      });
      name.value = '';
      await list.refresh();
      return 'Policy "' + pname + '" saved.';
    }, {'aria-label': title + ': add or update'})));
  }
  return {list: list, el: section(title, parts)};
}

export function renderPolicies(page) {
  const user = policyView(page, 'policies', 'User policies');
  const views = [user];
  if (api.can('administrator')) {
    views.push(policyView(page, 'operator-policies', 'Operator policies'));
  }
  add(page.main, h('h1', null, 'Policies'),
    h('p', {class: 'muted'}, 'A policy applies its definition to every queue or exchange whose name matches its pattern; ' +
      'of several matching policies the one with the highest priority wins.'),
    views.map((v) => v.el));
  page.refresh = () => Promise.all(views.map((v) => v.list.refresh()));
}
