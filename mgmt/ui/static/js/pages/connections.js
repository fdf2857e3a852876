// Connections and channels: paged lists, detail pages and force close.
//
// RabbitMQ's API closes connections only (DELETE /api/connections/{name});
// a channel's page offers to close the connection that carries it.

import * as api from '../api.js';
import {
  h, add, fill, field, section, details, kvTable, route, link, confirmAction, scrollBox,
  fmtInt, fmtRate, fmtByteRate, fmtBool, fmtTime, fmtValue,
} from '../dom.js';
import {ListView} from '../table.js';
import {Chart, ageParams, rangePicker, rateSpecs, MESSAGE_RATE_KEYS} from '../chart.js';
import {actionForm, consumerTable, refreshInto} from '../common.js';

const rateOf = (obj, key) => (obj && obj[key + '_details'] ? obj[key + '_details'].rate : undefined);

function clientLabel(c) {
  const p = c.client_properties || {};
  const parts = [p.product, p.version].filter((x) => x);
  return parts.length ? parts.join(' ') : '–';
}

function connectionColumns(allVhosts) {
  const cols = [{label: 'Name', sort: 'name', render: (c) => link(c.name, route('connections', c.name))}];
  if (allVhosts) {
    cols.push({label: 'Virtual host', sort: 'vhost', render: (c) => c.vhost});
  }
  cols.push(
    {label: 'User', sort: 'user', render: (c) => c.user},
    {label: 'State', sort: 'state', render: (c) => h('span', {class: 'state state-' + (c.state || 'unknown')}, c.state || '–')},
    {label: 'TLS', sort: 'ssl', render: (c) => fmtBool(c.ssl)},
    {label: 'Protocol', sort: 'protocol', render: (c) => c.protocol},
    {label: 'Client', render: clientLabel},
    {label: 'Channels', sort: 'channels', num: true, render: (c) => fmtInt(c.channels)},
    {label: 'From client', sort: 'recv_oct_details.rate', num: true, render: (c) => fmtByteRate(rateOf(c, 'recv_oct'))},
    {label: 'To client', sort: 'send_oct_details.rate', num: true, render: (c) => fmtByteRate(rateOf(c, 'send_oct'))},
    {label: 'Connected at', sort: 'connected_at', render: (c) => fmtTime(c.connected_at)});
  return cols;
}

export function renderConnections(page) {
  const all = page.vhost === '';
  const list = new ListView({
    id: 'connections',
    caption: 'Connections',
    paged: true,
    path: () => (all ? '/connections' : api.path('vhosts', page.vhost, 'connections')),
    columns: connectionColumns(all),
    rowKey: (c) => c.name,
    empty: 'No connections.',
  });
  add(page.main, h('h1', null, 'Connections'),
    h('p', {class: 'muted'}, all ? 'All virtual hosts.' : 'Virtual host ' + page.vhost + '.'), list.el);
  page.refresh = () => list.refresh();
}

// closeForm force-closes a connection with a reason the client sees in its
// connection.close (RabbitMQ's X-Reason header).
function closeForm(connName, page, intro) {
  const reason = h('input', {type: 'text', value: 'Closed via management plugin', autocomplete: 'off'});
  return section('Close connection', intro ? h('p', null, intro) : null, actionForm([field('Reason', reason)], 'Force close', async () => {
    if (!await confirmAction('Force close connection "' + connName + '"? Its clients see a CONNECTION_FORCED error.', 'Force close')) {
      return null;
    }
    return page.removing(async () => {
      await api.request('DELETE', api.path('connections', connName), {headers: {'X-Reason': reason.value}});
      page.go('#/connections');
      return 'Connection closed.';
    });
  }, {class: 'form form-danger', 'aria-label': 'Close connection'}));
}

function channelTable(list) {
  if (!Array.isArray(list) || list.length === 0) {
    return h('p', {class: 'muted'}, 'No channels.');
  }
  return scrollBox('Channels', h('table', {class: 'list'},
    h('caption', {class: 'sr-only'}, 'Channels'),
    h('thead', null, h('tr', null, ['Channel', 'State', 'Prefetch', 'Unacked', 'Consumers'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', null, list.map((ch) => h('tr', null,
      h('th', {scope: 'row'}, link(ch.name, route('channels', ch.name))),
      h('td', null, ch.state),
      h('td', null, fmtInt(ch.prefetch_count)),
      h('td', null, fmtInt(ch.messages_unacknowledged)),
      h('td', null, fmtInt(ch.consumer_count)))))));
}

export function renderConnection(page) {
  const name = page.params.name;
  const base = api.path('connections', name);
  const detailsBox = h('div');
  const clientBox = h('div');
  const channelsBox = h('div');
  const traffic = new Chart('Data rates', [
    {label: 'From client', kind: 'rate', details: (c) => c.recv_oct_details, value: (c) => rateOf(c, 'recv_oct')},
    {label: 'To client', kind: 'rate', details: (c) => c.send_oct_details, value: (c) => rateOf(c, 'send_oct')},
  ], fmtByteRate);
  add(page.main,
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/connections'}, 'Connections')),
    h('h1', null, 'Connection ', h('span', {class: 'name'}, name)),
    h('div', {class: 'two-col'}, section('Details', detailsBox), section('Client properties', clientBox)),
    rangePicker(() => page.refreshNow()),
    h('div', {class: 'charts'}, traffic.el),
    section('Channels', channelsBox),
    closeForm(name, page));
  page.refresh = async () => {
    const [c] = await Promise.all([
      api.getJSON(base + api.query(ageParams())),
      refreshInto(channelsBox, () => api.getJSON(base + '/channels'), channelTable),
    ]);
    if (!page.alive()) {
      return;
    }
    fill(detailsBox, details([
      ['Virtual host', c.vhost],
      ['User', c.user],
      ['State', c.state],
      ['Protocol', c.protocol],
      ['Authentication', c.auth_mechanism],
      ['Client address', fmtValue(c.peer_host) + ':' + fmtValue(c.peer_port)],
      ['Server address', fmtValue(c.host) + ':' + fmtValue(c.port)],
      ['TLS', fmtBool(c.ssl) + (c.ssl && c.ssl_protocol ? ' (' + c.ssl_protocol + ')' : '')],
      ['Heartbeat', typeof c.timeout === 'number' ? c.timeout + ' s' : null],
      ['Frame max', fmtInt(c.frame_max)],
      ['Channel max', fmtInt(c.channel_max)],
      ['Channels', fmtInt(c.channels)],
      ['Connected at', fmtTime(c.connected_at)],
      ['Node', c.node],
    ]));
    fill(clientBox, kvTable(c.client_properties));
    traffic.update(c);
  };
}

// ---- channels -----------------------------------------------------------

function channelColumns(allVhosts) {
  const rate = (key) => (ch) => fmtRate(rateOf(ch.message_stats, key));
  const cols = [{label: 'Channel', sort: 'name', render: (ch) => link(ch.name, route('channels', ch.name))}];
  if (allVhosts) {
    cols.push({label: 'Virtual host', sort: 'vhost', render: (ch) => ch.vhost});
  }
  cols.push(
    {label: 'User', sort: 'user', render: (ch) => ch.user},
    {label: 'Mode', render: (ch) => [ch.confirm ? h('abbr', {class: 'badge', title: 'confirm'}, 'C') : null,
      ch.transactional ? h('abbr', {class: 'badge', title: 'transactional'}, 'T') : null]},
    {label: 'State', sort: 'state', render: (ch) => ch.state},
    {label: 'Prefetch', sort: 'prefetch_count', num: true, render: (ch) => fmtInt(ch.prefetch_count)},
    {label: 'Unacked', sort: 'messages_unacknowledged', num: true, render: (ch) => fmtInt(ch.messages_unacknowledged)},
    {label: 'Unconfirmed', sort: 'messages_unconfirmed', num: true, render: (ch) => fmtInt(ch.messages_unconfirmed)},
    {label: 'Consumers', sort: 'consumer_count', num: true, render: (ch) => fmtInt(ch.consumer_count)},
    {label: 'Publish', sort: 'message_stats.publish_details.rate', num: true, render: rate('publish')},
    {label: 'Deliver / get', sort: 'message_stats.deliver_get_details.rate', num: true, render: rate('deliver_get')},
    {label: 'Ack', sort: 'message_stats.ack_details.rate', num: true, render: rate('ack')});
  return cols;
}

export function renderChannels(page) {
  const all = page.vhost === '';
  const list = new ListView({
    id: 'channels',
    caption: 'Channels',
    paged: true,
    path: () => (all ? '/channels' : api.path('vhosts', page.vhost, 'channels')),
    columns: channelColumns(all),
    rowKey: (ch) => ch.name,
    empty: 'No channels.',
  });
  add(page.main, h('h1', null, 'Channels'),
    h('p', {class: 'muted'}, all ? 'All virtual hosts.' : 'Virtual host ' + page.vhost + '.'), list.el);
  page.refresh = () => list.refresh();
}

function statsTable(list, caption, first) {
  if (!Array.isArray(list) || list.length === 0) {
    return h('p', {class: 'muted'}, 'None.');
  }
  return scrollBox(caption, h('table', {class: 'list'},
    h('caption', {class: 'sr-only'}, caption),
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, first.label), h('th', {scope: 'col'}, 'Statistics'))),
    h('tbody', null, list.map((row) => h('tr', null,
      h('th', {scope: 'row'}, first.render(row)),
      h('td', null, kvTable(Object.fromEntries(Object.entries(row.stats || {})
        .filter(([k]) => !k.endsWith('_details'))))))))));
}

export function renderChannel(page) {
  const name = page.params.name;
  const base = api.path('channels', name);
  const detailsBox = h('div');
  const consumersBox = h('div');
  const publishesBox = h('div');
  const deliveriesBox = h('div');
  const closeBox = h('div');
  const rates = new Chart('Message rates', rateSpecs((d) => d.message_stats, MESSAGE_RATE_KEYS.slice(0, 5)), fmtRate);
  let connName = null;
  add(page.main,
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/channels'}, 'Channels')),
    h('h1', null, 'Channel ', h('span', {class: 'name'}, name)),
    section('Details', detailsBox),
    rangePicker(() => page.refreshNow()),
    h('div', {class: 'charts'}, rates.el),
    section('Consumers', consumersBox),
    h('div', {class: 'two-col'}, section('Publishes to exchanges', publishesBox), section('Deliveries from queues', deliveriesBox)),
    closeBox);
  page.refresh = async () => {
    const ch = await api.getJSON(base + api.query(ageParams()));
    if (!page.alive()) {
      return;
    }
    const conn = ch.connection_details || {};
    fill(detailsBox, details([
      ['Connection', conn.name ? link(conn.name, route('connections', conn.name)) : null],
      ['Number', fmtInt(ch.number)],
      ['Virtual host', ch.vhost],
      ['User', ch.user],
      ['State', ch.state],
      ['Confirm mode', fmtBool(ch.confirm)],
      ['Transactional', fmtBool(ch.transactional)],
      ['Prefetch (per consumer)', fmtInt(ch.prefetch_count)],
      ['Prefetch (global)', fmtInt(ch.global_prefetch_count)],
      ['Consumers', fmtInt(ch.consumer_count)],
      ['Unacked', fmtInt(ch.messages_unacknowledged)],
      ['Unconfirmed', fmtInt(ch.messages_unconfirmed)],
      ['Uncommitted messages', fmtInt(ch.messages_uncommitted)],
      ['Uncommitted acks', fmtInt(ch.acks_uncommitted)],
    ]));
    rates.update(ch);
    fill(consumersBox, consumerTable(ch.consumer_details, true));
    fill(publishesBox, statsTable(ch.publishes, 'Publishes', {
      label: 'Exchange',
      render: (r) => (r.exchange ? link(r.exchange.name === '' ? '(AMQP default)' : r.exchange.name,
        route('exchanges', r.exchange.vhost, r.exchange.name === '' ? 'amq.default' : r.exchange.name)) : '–'),
    }));
    fill(deliveriesBox, statsTable(ch.deliveries, 'Deliveries', {
      label: 'Queue',
      render: (r) => (r.queue ? link(r.queue.name, route('queues', r.queue.vhost, r.queue.name)) : '–'),
    }));
    if (conn.name && conn.name !== connName) {
      connName = conn.name;
      fill(closeBox, closeForm(conn.name, page,
        'The management API closes whole connections, not single channels: this closes connection "' + conn.name + '" and all its channels.'));
    }
  };
}
