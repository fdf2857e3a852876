// Queues: the paged list with a declare form, and one queue's page with
// rates, consumers, bindings, publish, get, purge and delete.

import * as api from '../api.js';
import {
  h, add, fill, field, select, section, details, kvTable, route, link, notify, errorText, busy,
  fmtInt, fmtRate, fmtBytes, fmtBool, fmtValue, parseJSONObject, confirmAction, uid,
} from '../dom.js';
import {ListView} from '../table.js';
import {Chart, ageParams, queuedChart, rangePicker, rateSpecs} from '../chart.js';
import {
  actionForm, vhostPicker, features, bindingTable, bindForm, consumerTable, publishForm, deleteSection, refreshInto, wide,
} from '../common.js';

const rate = (key) => (q) => fmtRate(q.message_stats && q.message_stats[key + '_details'] ? q.message_stats[key + '_details'].rate : undefined);

// members is a replicated queue's member list, [] for other queues.
const members = (q) => (Array.isArray(q.members) ? q.members : []);

// nodeCell is the queue's node (a quorum queue's leader), with "+N" for
// its other members as RabbitMQ's list shows them.
function nodeCell(q) {
  const others = members(q).filter((n) => n !== q.node);
  if (others.length === 0) {
    return q.node || '–';
  }
  return h('span', null, q.node || '–', ' ',
    h('abbr', {class: 'muted', title: 'Members: ' + members(q).join(', ')}, '+' + others.length));
}

function columns(allVhosts) {
  const cols = [];
  cols.push({label: 'Name', sort: 'name', render: (q) => link(q.name, route('queues', q.vhost, q.name))});
  if (allVhosts) {
    cols.push({label: 'Virtual host', sort: 'vhost', render: (q) => q.vhost});
  }
  cols.push(
    {label: 'Type', sort: 'type', render: (q) => q.type || 'classic'},
    {label: 'Node', sort: 'node', render: nodeCell},
    {label: 'Features', render: features},
    {label: 'Policy', sort: 'policy', render: (q) => q.policy || ''},
    {label: 'State', sort: 'state', render: (q) => h('span', {class: 'state state-' + (q.state || 'unknown')}, q.state || '–')},
    {label: 'Ready', sort: 'messages_ready', num: true, render: (q) => fmtInt(q.messages_ready)},
    {label: 'Unacked', sort: 'messages_unacknowledged', num: true, render: (q) => fmtInt(q.messages_unacknowledged)},
    {label: 'Total', sort: 'messages', num: true, render: (q) => fmtInt(q.messages)},
    {label: 'Incoming', sort: 'message_stats.publish_details.rate', num: true, render: rate('publish')},
    {label: 'Deliver / get', sort: 'message_stats.deliver_get_details.rate', num: true, render: rate('deliver_get')},
    {label: 'Ack', sort: 'message_stats.ack_details.rate', num: true, render: rate('ack')},
    {label: 'Consumers', sort: 'consumers', num: true, render: (q) => fmtInt(q.consumers)});
  return cols;
}

function declareForm(page, list) {
  const vh = vhostPicker(page.vhost, false);
  const type = select([['classic', 'Classic'], ['quorum', 'Quorum'], ['stream', 'Stream']], 'classic');
  const name = h('input', {type: 'text', required: true, autocomplete: 'off', spellcheck: 'false', name: 'queue-name'});
  const durable = select([['true', 'Durable'], ['false', 'Transient']], 'true');
  const autoDelete = h('input', {type: 'checkbox'});
  const args = h('textarea', {rows: 2, placeholder: '{"x-message-ttl": 60000, "x-max-length": 1000}', spellcheck: 'false'});
  return actionForm([
    field('Virtual host', vh),
    field('Type', type),
    field('Name', name),
    field('Durability', durable),
    field('Auto delete', autoDelete),
    wide(field('Arguments (JSON object)', args, 'x-message-ttl, x-expires, x-max-length, x-max-length-bytes, x-overflow, x-dead-letter-exchange, x-dead-letter-routing-key, x-single-active-consumer, x-max-priority, …')),
  ], 'Add queue', async () => {
    const a = parseJSONObject(args.value, 'Arguments');
    if (type.value !== 'classic') {
      a['x-queue-type'] = type.value;
    }
    const qname = name.value;
    await api.request('PUT', api.path('queues', vh.value, qname), {
      body: {durable: durable.value === 'true', auto_delete: autoDelete.checked, arguments: a},
    });
    name.value = '';
    await list.refresh();
    return 'Queue "' + qname + '" declared.';
  }, {'aria-label': 'Add a queue'});
}

export function renderList(page) {
  const all = page.vhost === '';
  const list = new ListView({
    id: 'queues',
    caption: 'Queues',
    paged: true,
    path: () => (all ? '/queues' : api.path('queues', page.vhost)),
    columns: columns(all),
    rowKey: (q) => q.vhost + '/' + q.name,
    empty: 'No queues.',
  });
  add(page.main,
    h('h1', null, 'Queues'),
    h('p', {class: 'muted'}, all ? 'All virtual hosts.' : 'Virtual host ' + page.vhost + '.'),
    list.el,
    section('Add a queue', declareForm(page, list)));
  page.refresh = () => list.refresh();
}

// ---- one queue -----------------------------------------------------------

function queueDetails(q) {
  return details([
    ['Type', q.type || 'classic'],
    ['Features', [q.durable ? 'durable' : 'transient', q.auto_delete ? 'auto-delete' : null, q.exclusive ? 'exclusive' : null]
      .filter((x) => x).join(', ')],
    ['State', q.state],
    // A quorum queue shows its replicas as RabbitMQ's page does: leader,
    // the members online, all members; other queues their node.
    q.leader === undefined ? ['Node', q.node] : null,
    q.leader === undefined ? null : ['Leader', q.leader],
    q.leader === undefined ? null : ['Online', (Array.isArray(q.online) ? q.online : []).join(', ')],
    q.leader === undefined ? null : ['Members', members(q).join(', ')],
    ['Consumers', fmtInt(q.consumers)],
    ['Consumer capacity', typeof q.consumer_capacity === 'number' ? Math.round(q.consumer_capacity * 100) + '%'
      : (typeof q.consumer_utilisation === 'number' ? Math.round(q.consumer_utilisation * 100) + '%' : null)],
    ['Exclusive consumer', q.exclusive_consumer_tag || null],
    ['Policy', q.policy || null],
    ['Operator policy', q.operator_policy || null],
    ['Effective policy definition', q.effective_policy_definition && Object.keys(q.effective_policy_definition).length
      ? kvTable(q.effective_policy_definition) : null],
    ['Arguments', q.arguments && Object.keys(q.arguments).length ? kvTable(q.arguments) : null],
    ['Memory', fmtBytes(q.memory)],
    ['Idle since', q.idle_since || null],
  ]);
}

// streamDetails shows a stream queue's log: offsets, segments, bytes and
// where each consumer is (present only when the API sent first_offset).
function streamDetails(q) {
  const consumers = Array.isArray(q.stream_consumers) ? q.stream_consumers : [];
  const table = consumers.length === 0 ? h('p', {class: 'muted'}, 'No stream consumers.')
    : h('table', {class: 'list'},
      h('caption', {class: 'sr-only'}, 'Stream consumer offsets'),
      h('thead', null, h('tr', null,
        h('th', {scope: 'col'}, 'Consumer tag'), h('th', {scope: 'col'}, 'Channel'),
        h('th', {scope: 'col', class: 'num'}, 'Next offset'), h('th', {scope: 'col', class: 'num'}, 'In flight'),
        h('th', {scope: 'col'}, 'Tracking name'))),
      h('tbody', null, consumers.map((c) => h('tr', null,
        h('td', null, c.consumer_tag),
        h('td', null, c.channel_details ? c.channel_details.connection_name + ' (' + c.channel_details.number + ')' : '–'),
        h('td', {class: 'num'}, fmtInt(c.offset)),
        h('td', {class: 'num'}, fmtInt(c.in_flight)),
        h('td', null, c.tracking_name || '–')))));
  return h('div', null, details([
    ['First offset', fmtInt(q.first_offset)],
    ['Last offset (committed)', q.last_offset === null || q.last_offset === undefined ? 'none yet' : fmtInt(q.last_offset)],
    ['Next offset', fmtInt(q.next_offset)],
    ['Segments', fmtInt(q.segments)],
    ['Size', fmtBytes(q.bytes)],
  ]), table);
}

function messageCounts(q) {
  const row = (label, n, b) => h('tr', null, h('th', {scope: 'row'}, label),
    h('td', {class: 'num'}, fmtInt(n)), h('td', {class: 'num'}, fmtBytes(b)));
  return h('table', {class: 'list counts'},
    h('caption', {class: 'sr-only'}, 'Message counts'),
    h('thead', null, h('tr', null, h('td'), h('th', {scope: 'col', class: 'num'}, 'Messages'), h('th', {scope: 'col', class: 'num'}, 'Bytes'))),
    h('tbody', null,
      row('Total', q.messages, q.message_bytes),
      row('Ready', q.messages_ready, q.message_bytes_ready),
      row('Unacked', q.messages_unacknowledged, q.message_bytes_unacknowledged),
      row('Persistent', q.messages_persistent, q.message_bytes_persistent)));
}

function messageView(m, i) {
  const props = Object.assign({}, m.properties || {});
  const headers = props.headers;
  delete props.headers;
  return h('article', {class: 'message', 'aria-label': 'Message ' + (i + 1)},
    h('h3', null, 'Message ' + (i + 1)),
    details([
      ['Exchange', m.exchange === '' ? '(AMQP default)' : m.exchange],
      ['Routing key', m.routing_key],
      ['Redelivered', fmtBool(m.redelivered)],
      ['Messages left in queue', fmtInt(m.message_count)],
      ['Properties', Object.keys(props).length ? kvTable(props) : null],
      ['Headers', headers && Object.keys(headers).length ? kvTable(headers) : null],
      ['Payload', fmtInt(m.payload_bytes) + ' bytes, encoding: ' + fmtValue(m.payload_encoding)],
    ]),
    h('pre', {class: 'payload', tabindex: '0', 'aria-label': 'Payload of message ' + (i + 1)}, m.payload));
}

function getForm(vhost, name) {
  const ackmode = select([
    ['ack_requeue_true', 'Nack message requeue true'],
    ['ack_requeue_false', 'Automatic ack'],
    ['reject_requeue_true', 'Reject requeue true'],
    ['reject_requeue_false', 'Reject requeue false'],
  ], 'ack_requeue_true');
  const encoding = select([['auto', 'Automatic string/base64'], ['base64', 'Base64']], 'auto');
  const count = h('input', {type: 'number', min: 1, max: 1000, value: '1', required: true});
  const truncate = h('input', {type: 'number', min: 1, value: '50000'});
  const results = h('div', {class: 'messages', 'aria-live': 'polite'});
  const form = actionForm([
    field('Ack mode', ackmode, 'Requeue leaves the messages in the queue; automatic ack removes them.'),
    field('Encoding', encoding),
    field('Messages', count),
    field('Truncate payloads at (bytes)', truncate),
  ], 'Get messages', async () => {
    const body = {count: Number(count.value), ackmode: ackmode.value, encoding: encoding.value};
    if (truncate.value) {
      body.truncate = Number(truncate.value);
    }
    const msgs = await api.request('POST', api.path('queues', vhost, name, 'get'), {body: body});
    if (!Array.isArray(msgs) || msgs.length === 0) {
      fill(results, h('p', {class: 'muted'}, 'Queue is empty.'));
    } else {
      fill(results, h('p', null, msgs.length === 1 ? '1 message fetched.' : msgs.length + ' messages fetched.'), msgs.map(messageView));
    }
    return null;
  }, {'aria-label': 'Get messages'});
  return h('div', null, form, results);
}

export function renderDetail(page) {
  const {vhost, name} = page.params;
  const base = api.path('queues', vhost, name);
  const detailsBox = h('div');
  const countsBox = h('div');
  const consumersBox = h('div');
  const streamBox = h('div');
  const streamSection = section('Stream', streamBox);
  streamSection.hidden = true;
  const bindingsBox = h('div');
  const queued = queuedChart((d) => d);
  const rates = new Chart('Message rates', rateSpecs((d) => d.message_stats, [
    ['publish', 'Publish'], ['deliver_get', 'Deliver / get'], ['redeliver', 'Redelivered'], ['ack', 'Consumer ack'],
  ]), fmtRate);
  const purgeBtn = h('button', {type: 'button', class: 'btn btn-danger'}, 'Purge messages');
  purgeBtn.addEventListener('click', () => busy(purgeBtn, async () => {
    if (!await confirmAction('Remove all ready messages from queue "' + name + '"?', 'Purge')) {
      return;
    }
    try {
      await api.request('DELETE', base + '/contents');
      notify('Queue "' + name + '" purged.');
      page.refreshNow();
    } catch (e) {
      notify('Could not purge: ' + errorText(e), 'error');
    }
  }));
  const refreshBindings = () => refreshInto(bindingsBox, () => api.getJSON(base + '/bindings'),
    (list) => bindingTable(list, 'destination', 'Bindings', refreshBindings));
  const titleId = uid('qt');
  add(page.main,
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/queues'}, 'Queues'), ' › ', vhost),
    h('h1', {id: titleId}, 'Queue ', h('span', {class: 'name'}, name)),
    h('div', {class: 'two-col'}, section('Details', detailsBox), section('Messages', countsBox)),
    rangePicker(() => page.refreshNow()),
    h('div', {class: 'charts'}, queued.el, rates.el),
    streamSection,
    section('Consumers', consumersBox),
    section('Bindings', bindingsBox, h('h3', null, 'Add binding to this queue'),
      bindForm(vhost, {destType: 'q', destination: name}, refreshBindings)),
    section('Publish message', publishForm(vhost, '', name)),
    section('Get messages', getForm(vhost, name)),
    section('Purge', h('p', null, 'Purging removes every ready message; unacknowledged messages stay.'), purgeBtn),
    deleteSection('queue "' + name + '"', [['if-empty', 'Only if empty'], ['if-unused', 'Only if it has no consumers']], async (q) => {
      return page.removing(async () => {
        await api.request('DELETE', base + q);
        page.go('#/queues');
        return 'Queue "' + name + '" deleted.';
      });
    }));

  page.refresh = async () => {
    const [q] = await Promise.all([api.getJSON(base + api.query(ageParams())), refreshBindings()]);
    if (!page.alive()) {
      return;
    }
    fill(detailsBox, queueDetails(q));
    fill(countsBox, messageCounts(q));
    queued.update(q);
    rates.update(q);
    fill(consumersBox, consumerTable(q.consumer_details, false));
    streamSection.hidden = q.first_offset === undefined;
    if (!streamSection.hidden) {
      fill(streamBox, streamDetails(q));
    }
  };
}
