// Plugin pages: shovels (status, add, restart, delete) and federation
// (upstreams: list, add, delete; links with their status), over
// rabbitmq_shovel_management's and rabbitmq_federation_management's
// endpoints and the runtime parameters they read.

import * as api from '../api.js';
import {h, add, field, select, section, notify, errorText, confirmAction, button} from '../dom.js';
import {ListView} from '../table.js';
import {actionForm, vhostPicker} from '../common.js';

// actionButton asks for confirmation, sends DELETE to apiPath (a delete or
// a restart) and refreshes the list.
function actionButton(label, verb, what, apiPath, list, danger) {
  return button(label, async () => {
    if (!await confirmAction(verb + ' ' + what + '?', label)) {
      return;
    }
    try {
      await api.request('DELETE', apiPath);
      notify(verb + (verb.endsWith('e') ? 'd ' : 'ed ') + what + '.');
      await list.refresh();
    } catch (e) {
      notify('Could not ' + verb.toLowerCase() + ' ' + what + ': ' + errorText(e), 'error');
    }
  }, {class: 'btn btn-small' + (danger ? ' btn-danger' : ''), 'data-focus-key': label + ':' + apiPath,
    'aria-label': label + ' ' + what});
}

// stateText is a shovel's or link's state with its reason or error.
function stateText(state, reason) {
  return reason ? state + ': ' + reason : state;
}

function vhostPath(page, base) {
  return page.vhost === '' ? '/' + base : api.path(base, page.vhost);
}

// ---- shovels -------------------------------------------------------------

const ACK_MODES = ['on-confirm', 'on-publish', 'no-ack'];

export function renderShovels(page) {
  const editable = api.can('policymaker');
  const list = new ListView({
    id: 'shovels',
    caption: 'Shovels',
    paged: false,
    path: () => vhostPath(page, 'shovels'),
    defaultSort: 'name',
    columns: [
      {label: 'Name', sort: 'name', render: (s) => s.name},
      {label: 'Virtual host', sort: 'vhost', render: (s) => s.vhost},
      {label: 'Type', sort: 'type', render: (s) => s.type},
      {label: 'State', sort: 'state', render: (s) => h('span', {class: 'state-' + s.state}, stateText(s.state, s.reason))},
      {label: 'Source', render: (s) => [s.src_uri || '', ' ', s.src_queue || s.src_exchange || ''].join('')},
      {label: 'Destination', render: (s) => [s.dest_uri || '', ' ', s.dest_queue || s.dest_exchange || ''].join('')},
      {label: 'Node', sort: 'node', render: (s) => s.node},
      {label: 'Actions', render: (s) => {
        if (!editable) {
          return '';
        }
        const what = 'shovel "' + s.name + '" in "' + s.vhost + '"';
        const base = api.path('shovels', 'vhost', s.vhost, s.name);
        const out = [actionButton('Restart', 'Restart', what, base + '/restart', list, false)];
        if (s.type !== 'static') {
          out.push(' ', actionButton('Delete', 'Delete', what, base, list, true));
        }
        return out;
      }},
    ],
    rowKey: (s) => s.vhost + '/' + s.name,
    empty: 'No shovels.',
  });
  const parts = [list.el];
  if (editable) {
    parts.push(shovelForm(page, list));
  }
  add(page.main, h('h1', null, 'Shovels'),
    h('p', {class: 'muted'}, 'A shovel moves messages from a queue or exchange of one broker to another; ' +
      'amqp:// with no host is this broker. In a cluster each shovel runs on one node.'),
    parts);
  page.refresh = () => list.refresh();
}

function shovelForm(page, list) {
  const text = (value, placeholder) => h('input', {type: 'text', value: value || '', placeholder: placeholder || '', autocomplete: 'off', spellcheck: 'false'});
  const vh = vhostPicker(page.vhost, false);
  const name = text();
  name.required = true;
  const srcURI = text('amqp://');
  const srcQueue = text('', 'a queue name');
  const destURI = text('amqp://');
  const destQueue = text('', 'a queue name');
  const ackMode = select(ACK_MODES, 'on-confirm');
  return section('Add a shovel', actionForm([
    field('Virtual host', vh),
    field('Name', name),
    field('Source URI', srcURI),
    field('Source queue', srcQueue),
    field('Destination URI', destURI),
    field('Destination queue', destQueue),
    field('Acknowledgement mode', ackMode),
  ], 'Add shovel', async () => {
    const sname = name.value;
    await api.request('PUT', api.path('parameters', 'shovel', vh.value, sname), {
      body: {value: {'src-uri': srcURI.value, 'src-queue': srcQueue.value, 'dest-uri': destURI.value,
        'dest-queue': destQueue.value, 'ack-mode': ackMode.value}},
    });
    name.value = '';
    await list.refresh();
    return 'Shovel "' + sname + '" added.';
  }, {'aria-label': 'Add a shovel'}));
}

// ---- federation ----------------------------------------------------------

export function renderFederation(page) {
  const editable = api.can('policymaker');
  const upstreams = new ListView({
    id: 'federation-upstreams',
    caption: 'Upstreams',
    paged: false,
    path: () => vhostPath(page, 'parameters/federation-upstream'),
    defaultSort: 'name',
    columns: [
      {label: 'Name', sort: 'name', render: (u) => u.name},
      {label: 'Virtual host', sort: 'vhost', render: (u) => u.vhost},
      {label: 'URI', render: (u) => [].concat((u.value || {}).uri || []).join(', ')},
      {label: 'Exchange', render: (u) => (u.value || {}).exchange || ''},
      {label: 'Queue', render: (u) => (u.value || {}).queue || ''},
      {label: 'Actions', render: (u) => (editable
        ? actionButton('Delete', 'Delete', 'upstream "' + u.name + '" in "' + u.vhost + '"',
          api.path('parameters', 'federation-upstream', u.vhost, u.name), upstreams, true)
        : '')},
    ],
    rowKey: (u) => u.vhost + '/' + u.name,
    empty: 'No upstreams.',
  });
  const links = new ListView({
    id: 'federation-links',
    caption: 'Links',
    paged: false,
    path: () => vhostPath(page, 'federation-links'),
    defaultSort: 'upstream',
    columns: [
      {label: 'Upstream', sort: 'upstream', render: (l) => l.upstream || l.upstream_set || ''},
      {label: 'Virtual host', sort: 'vhost', render: (l) => l.vhost},
      {label: 'Type', sort: 'type', render: (l) => l.type},
      {label: 'Object', render: (l) => l.exchange || l.queue || ''},
      {label: 'State', sort: 'status', render: (l) => h('span', {class: 'state-' + l.status}, stateText(l.status, l.error))},
      {label: 'URI', render: (l) => l.uri || ''},
      {label: 'Node', sort: 'node', render: (l) => l.node},
    ],
    rowKey: (l) => [l.vhost, l.type, l.exchange || l.queue, l.upstream].join('/'),
    empty: 'No links: a policy with federation-upstream or federation-upstream-set makes them.',
  });
  const parts = [section('Upstreams', upstreams.el)];
  if (editable) {
    parts.push(upstreamForm(page, upstreams));
  }
  parts.push(section('Links', links.el));
  add(page.main, h('h1', null, 'Federation'),
    h('p', {class: 'muted'}, 'An upstream is a broker to federate from; a policy with the federation-upstream ' +
      'or federation-upstream-set key federates the exchanges and queues it matches, one link per upstream.'),
    parts);
  page.refresh = () => Promise.all([upstreams.refresh(), links.refresh()]);
}

function upstreamForm(page, list) {
  const vh = vhostPicker(page.vhost, false);
  const name = h('input', {type: 'text', required: true, autocomplete: 'off', spellcheck: 'false'});
  const uri = h('input', {type: 'text', required: true, placeholder: 'amqp://user:password@host:5672', autocomplete: 'off', spellcheck: 'false'});
  const exchange = h('input', {type: 'text', placeholder: 'the downstream name', autocomplete: 'off', spellcheck: 'false'});
  const ackMode = select(ACK_MODES, 'on-confirm');
  return section('Add an upstream', actionForm([
    field('Virtual host', vh),
    field('Name', name),
    field('URI', uri),
    field('Upstream exchange', exchange),
    field('Acknowledgement mode', ackMode),
  ], 'Add upstream', async () => {
    const uname = name.value;
    const value = {uri: uri.value, 'ack-mode': ackMode.value};
    if (exchange.value !== '') {
      value.exchange = exchange.value;
    }
    await api.request('PUT', api.path('parameters', 'federation-upstream', vh.value, uname), {body: {value: value}});
    name.value = '';
    await list.refresh();
    return 'Upstream "' + uname + '" added.';
  }, {'aria-label': 'Add an upstream'}));
}
