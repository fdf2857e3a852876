// Pieces several pages share: forms with inline errors, vhost pickers,
// feature badges, binding and consumer tables, the publish form.

import * as api from './api.js';
import {
  h, fill, field, select, notify, errorText, busy, parseJSONObject, route, link,
  fmtBool, fmtValue, fmtInt, kvTable, scrollBox, confirmAction, section,
} from './dom.js';

// actionForm builds a form whose submit runs onSubmit(form). Errors from it
// are shown under the form (role=alert) and success messages in the toast
// region; the submit button is disabled while the request runs.
export function actionForm(fields, submitLabel, onSubmit, attrs) {
  const err = h('p', {class: 'error', role: 'alert', hidden: true});
  const submit = h('button', {type: 'submit', class: 'btn btn-primary'}, submitLabel);
  const form = h('form', Object.assign({class: 'form'}, attrs || {}),
    h('div', {class: 'form-grid'}, fields), err, h('div', {class: 'actions'}, submit));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    err.hidden = true;
    busy(submit, async () => {
      try {
        const msg = await onSubmit(form);
        if (msg) {
          notify(msg);
        }
      } catch (ex) {
        err.hidden = false;
        err.textContent = errorText(ex);
      }
    });
  });
  return form;
}

// wide makes a field span the whole form row.
export function wide(fieldEl) {
  fieldEl.classList.add('field-wide');
  return fieldEl;
}

// vhostPicker is a <select> of the visible vhosts, filled asynchronously,
// preselecting the header's current vhost (or "/").
export function vhostPicker(current, withAll) {
  const sel = h('select', {required: !withAll});
  if (withAll) {
    sel.appendChild(h('option', {value: ''}, 'All virtual hosts'));
  }
  api.vhostNames().then((names) => {
    for (const n of names) {
      sel.appendChild(h('option', {value: n, selected: n === (current || (withAll ? '' : '/'))}, n));
    }
  }).catch((e) => notify('Could not list virtual hosts: ' + errorText(e), 'error'));
  return sel;
}

function badge(short, long) {
  return h('abbr', {class: 'badge', title: long}, short);
}

// features renders RabbitMQ's short feature labels (D, AD, Excl, I, Args).
export function features(obj) {
  const out = [];
  if (obj.durable) {
    out.push(badge('D', 'durable'));
  }
  if (obj.auto_delete) {
    out.push(badge('AD', 'auto-delete'));
  }
  if (obj.exclusive) {
    out.push(badge('Excl', 'exclusive'));
  }
  if (obj.internal) {
    out.push(badge('I', 'internal'));
  }
  const args = obj.arguments ? Object.keys(obj.arguments) : [];
  if (args.length) {
    out.push(badge('Args', args.map((k) => k + ': ' + fmtValue(obj.arguments[k])).join(', ')));
  }
  return out.length ? h('span', {class: 'badges'}, out) : '';
}

// exchangeLabel names the default exchange as RabbitMQ's UI does.
export function exchangeLabel(name) {
  return name === '' ? '(AMQP default)' : name;
}

// exchangeSegment is the path segment for an exchange: the default one is
// "amq.default", the alias RabbitMQ accepts in paths.
export function exchangeSegment(name) {
  return name === '' ? 'amq.default' : name;
}

function destLink(b) {
  if (b.destination_type === 'queue') {
    return link(b.destination, route('queues', b.vhost, b.destination));
  }
  return link(exchangeLabel(b.destination), route('exchanges', b.vhost, exchangeSegment(b.destination)));
}

function sourceLink(b) {
  if (b.source === '') {
    return '(Default exchange binding)';
  }
  return link(b.source, route('exchanges', b.vhost, b.source));
}

async function unbind(b, onDone) {
  const ok = await confirmAction('Remove the binding from "' + exchangeLabel(b.source) + '" to "' + b.destination +
    '" with routing key "' + b.routing_key + '"?', 'Unbind');
  if (!ok) {
    return;
  }
  try {
    await api.request('DELETE', api.path('bindings', b.vhost, 'e', b.source, b.destination_type === 'queue' ? 'q' : 'e',
      b.destination, b.properties_key));
    notify('Binding removed.');
    onDone();
  } catch (e) {
    notify('Could not unbind: ' + errorText(e), 'error');
  }
}

// bindingTable lists bindings; side is 'source' (show destinations) or
// 'destination' (show sources). Every binding but the implicit default one
// gets an Unbind button.
export function bindingTable(list, side, caption, onChange) {
  if (!list || list.length === 0) {
    return h('p', {class: 'muted'}, 'No bindings.');
  }
  const rows = list.map((b) => {
    const key = 'unbind:' + b.source + '>' + b.destination_type + ':' + b.destination + '#' + b.properties_key;
    const action = b.source === ''
      ? h('span', {class: 'muted'}, 'implicit')
      : h('button', {type: 'button', class: 'btn btn-small', 'data-focus-key': key, onclick: () => unbind(b, onChange)}, 'Unbind');
    return h('tr', null,
      h('th', {scope: 'row'}, side === 'source' ? destLink(b) : sourceLink(b)),
      side === 'source' ? h('td', null, b.destination_type) : null,
      h('td', null, h('code', null, b.routing_key)),
      h('td', null, b.arguments && Object.keys(b.arguments).length ? kvTable(b.arguments) : ''),
      h('td', null, action));
  });
  return scrollBox(caption, h('table', {class: 'list'},
    h('caption', {class: 'sr-only'}, caption),
    h('thead', null, h('tr', null,
      h('th', {scope: 'col'}, side === 'source' ? 'To' : 'From'),
      side === 'source' ? h('th', {scope: 'col'}, 'Type') : null,
      h('th', {scope: 'col'}, 'Routing key'),
      h('th', {scope: 'col'}, 'Arguments'),
      h('th', {scope: 'col'}, h('span', {class: 'sr-only'}, 'Actions')))),
    h('tbody', null, rows)));
}

// bindForm adds a binding. fixed is {source} or {destType, destination};
// the user supplies the other end, the routing key and arguments.
export function bindForm(vhost, fixed, onDone) {
  const other = h('input', {type: 'text', required: true, autocomplete: 'off'});
  const destType = select([['q', 'Queue'], ['e', 'Exchange']], 'q');
  const key = h('input', {type: 'text', autocomplete: 'off'});
  const args = h('textarea', {rows: 2, placeholder: '{"x-match": "all"}', spellcheck: 'false'});
  const fields = fixed.source !== undefined
    ? [field('Destination type', destType), field('Destination name', other)]
    : [field('From exchange', other)];
  fields.push(field('Routing key', key), field('Arguments (JSON object)', args));
  return actionForm(fields, 'Bind', async () => {
    const body = {routing_key: key.value, arguments: parseJSONObject(args.value, 'Arguments')};
    let p;
    if (fixed.source !== undefined) {
      p = api.path('bindings', vhost, 'e', exchangeSegment(fixed.source), destType.value, other.value);
    } else {
      p = api.path('bindings', vhost, 'e', exchangeSegment(other.value), fixed.destType, fixed.destination);
    }
    await api.request('POST', p, {body: body});
    key.value = '';
    onDone();
    return 'Binding added.';
  }, {'aria-label': 'Add binding'});
}

// consumerTable lists consumer_details entries of a queue or channel.
export function consumerTable(list, showQueue) {
  if (!list || list.length === 0) {
    return h('p', {class: 'muted'}, 'No consumers.');
  }
  return scrollBox('Consumers', h('table', {class: 'list'},
    h('caption', {class: 'sr-only'}, 'Consumers'),
    h('thead', null, h('tr', null,
      h('th', {scope: 'col'}, showQueue ? 'Queue' : 'Channel'),
      h('th', {scope: 'col'}, 'Consumer tag'),
      h('th', {scope: 'col'}, 'Ack required'),
      h('th', {scope: 'col'}, 'Exclusive'),
      h('th', {scope: 'col', class: 'num'}, 'Prefetch'),
      h('th', {scope: 'col'}, 'Active'),
      h('th', {scope: 'col'}, 'Arguments'))),
    h('tbody', null, list.map((c) => {
      const ch = c.channel_details || {};
      const q = c.queue || {};
      const first = showQueue
        ? (q.name ? link(q.name, route('queues', q.vhost, q.name)) : '–')
        : (ch.name ? link(ch.name, route('channels', ch.name)) : '–');
      return h('tr', null,
        h('th', {scope: 'row'}, first),
        h('td', null, c.consumer_tag),
        h('td', null, fmtBool(c.ack_required)),
        h('td', null, fmtBool(c.exclusive)),
        h('td', {class: 'num'}, fmtInt(c.prefetch_count)),
        h('td', null, c.activity_status || fmtBool(c.active)),
        h('td', null, c.arguments && Object.keys(c.arguments).length ? kvTable(c.arguments) : ''));
    }))));
}

// publishForm publishes through POST /api/exchanges/{vh}/{x}/publish. With
// fixedKey (a queue's page) the message goes to the default exchange with
// the queue's name as routing key.
export function publishForm(vhost, exchange, fixedKey) {
  const key = h('input', {type: 'text', autocomplete: 'off', value: fixedKey || ''});
  if (fixedKey !== undefined) {
    key.readOnly = true;
  }
  const mode = select([['1', '1 - Non-persistent'], ['2', '2 - Persistent']], '2');
  const headers = h('textarea', {rows: 2, placeholder: '{"x-source": "ui"}', spellcheck: 'false'});
  const props = h('textarea', {rows: 2, placeholder: '{"content_type": "text/plain", "priority": 1}', spellcheck: 'false'});
  const enc = select([['string', 'String'], ['base64', 'Base64']], 'string');
  const payload = h('textarea', {rows: 4, class: 'payload', spellcheck: 'false'});
  const result = h('p', {class: 'result', role: 'status'});
  const form = actionForm([
    field('Routing key', key, fixedKey !== undefined ? 'Published to the default exchange, so it goes to this queue.' : null),
    field('Delivery mode', mode),
    field('Headers (JSON object)', headers),
    field('Properties (JSON object)', props, 'AMQP basic properties: content_type, correlation_id, reply_to, expiration, message_id, priority, type, …'),
    field('Payload encoding', enc),
    wide(field('Payload', payload)),
  ], 'Publish message', async () => {
    const properties = parseJSONObject(props.value, 'Properties');
    properties.delivery_mode = Number(mode.value);
    const hdrs = parseJSONObject(headers.value, 'Headers');
    if (Object.keys(hdrs).length) {
      properties.headers = hdrs;
    }
    const res = await api.request('POST', api.path('exchanges', vhost, exchangeSegment(exchange), 'publish'), {
      body: {properties: properties, routing_key: key.value, payload: payload.value, payload_encoding: enc.value},
    });
    const routed = res && res.routed;
    result.textContent = routed ? 'Message published.' : 'Message published, but not routed to any queue.';
    return null;
  }, {'aria-label': 'Publish message'});
  form.appendChild(result);
  return form;
}

// deleteSection is a panel with "only if …" checkboxes and a delete button
// guarded by a confirmation dialog.
export function deleteSection(what, conditions, onDelete) {
  const boxes = conditions.map(([param, label]) => [param, h('input', {type: 'checkbox'}), label]);
  const form = actionForm(boxes.map(([, box, label]) => field(label, box)), 'Delete ' + what, async () => {
    const ok = await confirmAction('Delete ' + what + '? This cannot be undone.', 'Delete');
    if (!ok) {
      return null;
    }
    const q = {};
    for (const [param, box] of boxes) {
      if (box.checked) {
        q[param] = 'true';
      }
    }
    return onDelete(api.query(q));
  }, {class: 'form form-danger', 'aria-label': 'Delete ' + what});
  return section('Delete', form);
}

// refreshInto loads data for a region and fills it, showing errors in place
// of the content so one failing call does not blank the whole page.
export async function refreshInto(el, load, render) {
  try {
    const data = await load();
    fill(el, render(data));
  } catch (e) {
    if (e && e.status === 401) {
      fill(el, h('p', {class: 'muted'}, 'Not available to this user (' + errorText(e) + ').'));
      return;
    }
    fill(el, h('p', {class: 'error'}, 'Could not load: ' + errorText(e)));
  }
}
