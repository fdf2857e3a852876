// The overview: totals, queued-message and message-rate charts, nodes with
// memory and disk, alarms, listeners and churn.

import * as api from '../api.js';
import {h, add, fill, section, fmtInt, fmtRate, fmtBytes, fmtDuration, fmtBool, errorText, scrollBox, route, details} from '../dom.js';
import {Chart, ageParams, queuedChart, rangePicker, rateSpecs, MESSAGE_RATE_KEYS} from '../chart.js';

function totals(ov) {
  const o = ov.object_totals || {};
  const q = ov.queue_totals || {};
  const card = (label, value, href) => h('li', {class: 'total'},
    h('span', {class: 'total-value'}, fmtInt(value)),
    href ? h('a', {class: 'total-label', href: href}, label) : h('span', {class: 'total-label'}, label));
  return h('ul', {class: 'totals'},
    card('Connections', o.connections, '#/connections'),
    card('Channels', o.channels, '#/channels'),
    card('Exchanges', o.exchanges, '#/exchanges'),
    card('Queues', o.queues, '#/queues'),
    card('Consumers', o.consumers),
    card('Messages ready', q.messages_ready),
    card('Unacked', q.messages_unacknowledged),
    card('Messages total', q.messages));
}

function bar(used, limit, alarm) {
  if (typeof used !== 'number' || typeof limit !== 'number' || limit <= 0) {
    return null;
  }
  const pct = Math.min(100, (used / limit) * 100);
  const fillEl = h('span', {class: 'bar-fill' + (alarm ? ' bar-alarm' : '')});
  fillEl.style.width = pct.toFixed(1) + '%';
  return h('span', {class: 'bar', 'aria-hidden': 'true'}, fillEl);
}

function nodeTable(nodes) {
  if (!Array.isArray(nodes) || nodes.length === 0) {
    return h('p', {class: 'muted'}, 'No node information.');
  }
  return scrollBox('Nodes', h('table', {class: 'list nodes'},
    h('caption', {class: 'sr-only'}, 'Nodes'),
    h('thead', null, h('tr', null,
      ['Name', 'Memory', 'Disk space', 'File descriptors', 'Sockets', 'Uptime', 'Running'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', null, nodes.map((n) => h('tr', null,
      h('th', {scope: 'row'}, n.name),
      h('td', null,
        h('div', null, fmtBytes(n.mem_used), ' used of ', fmtBytes(n.mem_limit), ' high watermark',
          n.mem_alarm ? h('strong', {class: 'alarm-text'}, ' (memory alarm)') : null),
        bar(n.mem_used, n.mem_limit, n.mem_alarm)),
      h('td', null,
        h('div', null, fmtBytes(n.disk_free), ' free, alarm below ', fmtBytes(n.disk_free_limit),
          n.disk_free_alarm ? h('strong', {class: 'alarm-text'}, ' (disk alarm)') : null)),
      h('td', null, fmtInt(n.fd_used), ' / ', fmtInt(n.fd_total)),
      h('td', null, fmtInt(n.sockets_used), ' / ', fmtInt(n.sockets_total)),
      h('td', null, fmtDuration(n.uptime)),
      h('td', null, fmtBool(n.running)))))));
}

// alarmsView shows the alarms health check: 200 means none, 503 lists them.
function alarmsView(res) {
  if (res.ok) {
    return h('p', {class: 'ok-text'}, 'No alarms are in effect.');
  }
  const e = res.error;
  if (e && e.status === 503 && e.body) {
    const alarms = Array.isArray(e.body.alarms) ? e.body.alarms : [];
    return h('div', {class: 'alarm-box', role: 'alert'},
      h('p', null, h('strong', null, 'Alarm: '), e.body.reason || 'resource alarm in effect'),
      alarms.length ? h('ul', null, alarms.map((a) => h('li', null,
        typeof a === 'object' ? (a.resource || 'alarm') + ' on ' + (a.node || 'node') : String(a)))) : null,
      h('p', null, 'Publishing connections are blocked until the alarm clears.'));
  }
  return h('p', {class: 'error'}, 'Could not check alarms: ' + errorText(e));
}

function listeners(ov) {
  const ls = ov.listeners || [];
  if (ls.length === 0) {
    return h('p', {class: 'muted'}, 'No listeners reported.');
  }
  return h('table', {class: 'list'},
    h('caption', {class: 'sr-only'}, 'Listeners'),
    h('thead', null, h('tr', null, ['Protocol', 'Bound to', 'Port'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', null, ls.map((l) => h('tr', null,
      h('th', {scope: 'row'}, l.protocol), h('td', null, l.ip_address), h('td', null, String(l.port))))));
}

function churn(ov) {
  const c = ov.churn_rates;
  if (!c) {
    return h('p', {class: 'muted'}, 'No churn statistics reported.');
  }
  const row = (label, created, closed) => h('tr', null, h('th', {scope: 'row'}, label),
    h('td', {class: 'num'}, fmtRate((c[created] || {}).rate)), h('td', {class: 'num'}, fmtRate((c[closed] || {}).rate)));
  return h('table', {class: 'list'},
    h('caption', {class: 'sr-only'}, 'Churn'),
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Object'),
      h('th', {scope: 'col', class: 'num'}, 'Created'), h('th', {scope: 'col', class: 'num'}, 'Closed / deleted'))),
    h('tbody', null,
      row('Connections', 'connection_created_details', 'connection_closed_details'),
      row('Channels', 'channel_created_details', 'channel_closed_details'),
      row('Queues', 'queue_created_details', 'queue_deleted_details')));
}

export function render(page) {
  const summary = h('div', {class: 'summary'});
  const totalsBox = h('div');
  const queued = queuedChart((d) => d.queue_totals || {});
  const rates = new Chart('Message rates', rateSpecs((d) => d.message_stats, MESSAGE_RATE_KEYS), fmtRate);
  const alarmsBox = h('div');
  const nodesBox = h('div');
  const listenersBox = h('div');
  const churnBox = h('div');
  const showNodes = api.can('monitoring');
  add(page.main,
    h('h1', null, 'Overview'),
    summary,
    section('Totals', totalsBox),
    rangePicker(() => page.refreshNow()),
    h('div', {class: 'charts'}, queued.el, rates.el),
    section('Alarms', alarmsBox),
    showNodes ? section('Nodes', nodesBox) : null,
    h('div', {class: 'two-col'}, section('Listeners', listenersBox), section('Churn', churnBox)),
    api.can('administrator')
      ? section('Definitions', h('p', null, 'Export or import users, virtual hosts, queues, exchanges, bindings and policies on the ',
        h('a', {href: route('definitions')}, 'definitions page'), '.'))
      : null);

  page.refresh = async () => {
    const [ov, alarm, nodes] = await Promise.all([
      api.getJSON('/overview' + api.query(ageParams())),
      api.getJSON('/health/checks/alarms').then(() => ({ok: true}), (e) => ({ok: false, error: e})),
      showNodes ? api.getJSON('/nodes').catch((e) => e) : Promise.resolve(null),
    ]);
    if (!page.alive()) {
      return;
    }
    fill(summary, details([
      ['Cluster', ov.cluster_name],
      ['Product', [ov.product_name, ov.product_version].filter((x) => x).join(' ') || null],
      ['RabbitMQ compatibility', ov.rabbitmq_version],
      ['Node', ov.node],
    ]));
    fill(totalsBox, totals(ov));
    queued.update(ov);
    rates.update(ov);
    fill(alarmsBox, alarmsView(alarm));
    if (showNodes) {
      fill(nodesBox, nodes instanceof Error ? h('p', {class: 'error'}, 'Could not load nodes: ' + errorText(nodes)) : nodeTable(nodes));
    }
    fill(listenersBox, listeners(ov));
    fill(churnBox, churn(ov));
  };
}
