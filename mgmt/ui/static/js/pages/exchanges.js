// Exchanges: the paged list with a declare form, and one exchange's page
// with rates, bindings in both directions, bind, publish and delete.

import * as api from '../api.js';
import {h, add, fill, field, select, section, details, kvTable, route, link, fmtRate, parseJSONObject} from '../dom.js';
import {ListView} from '../table.js';
import {Chart, ageParams, rangePicker, rateSpecs} from '../chart.js';
import {
  actionForm, vhostPicker, features, bindingTable, bindForm, publishForm, deleteSection, refreshInto, exchangeLabel,
  exchangeSegment, wide,
} from '../common.js';

const rate = (key) => (x) => fmtRate(x.message_stats && x.message_stats[key + '_details'] ? x.message_stats[key + '_details'].rate : undefined);

function columns(allVhosts) {
  const cols = [{label: 'Name', sort: 'name', render: (x) => link(exchangeLabel(x.name), route('exchanges', x.vhost, exchangeSegment(x.name)))}];
  if (allVhosts) {
    cols.push({label: 'Virtual host', sort: 'vhost', render: (x) => x.vhost});
  }
  cols.push(
    {label: 'Type', sort: 'type', render: (x) => x.type},
    {label: 'Features', render: features},
    {label: 'Policy', sort: 'policy', render: (x) => x.policy || ''},
    {label: 'Rate in', sort: 'message_stats.publish_in_details.rate', num: true, render: rate('publish_in')},
    {label: 'Rate out', sort: 'message_stats.publish_out_details.rate', num: true, render: rate('publish_out')});
  return cols;
}

function declareForm(page, list) {
  const vh = vhostPicker(page.vhost, false);
  const name = h('input', {type: 'text', required: true, autocomplete: 'off', spellcheck: 'false'});
  const type = select(['direct', 'fanout', 'headers', 'topic'], 'direct');
  api.exchangeTypes().then((types) => fill(type, types.map((t) => h('option', {value: t, selected: t === 'direct'}, t))),
    () => {
      // Keep the four standard types if the overview is not readable.
    });
  const durable = select([['true', 'Durable'], ['false', 'Transient']], 'true');
  const autoDelete = h('input', {type: 'checkbox'});
  const internal = h('input', {type: 'checkbox'});
  const args = h('textarea', {rows: 2, placeholder: '{"alternate-exchange": "my-ae"}', spellcheck: 'false'});
  return actionForm([
    field('Virtual host', vh),
    field('Name', name),
    field('Type', type),
    field('Durability', durable),
    field('Auto delete', autoDelete),
    field('Internal', internal),
    wide(field('Arguments (JSON object)', args)),
  ], 'Add exchange', async () => {
    const xname = name.value;
    await api.request('PUT', api.path('exchanges', vh.value, xname), {
      body: {
        type: type.value, durable: durable.value === 'true', auto_delete: autoDelete.checked,
        internal: internal.checked, arguments: parseJSONObject(args.value, 'Arguments'),
      },
    });
    name.value = '';
    await list.refresh();
    return 'Exchange "' + xname + '" declared.';
  }, {'aria-label': 'Add an exchange'});
}

export function renderList(page) {
  const all = page.vhost === '';
  const list = new ListView({
    id: 'exchanges',
    caption: 'Exchanges',
    paged: true,
    path: () => (all ? '/exchanges' : api.path('exchanges', page.vhost)),
    columns: columns(all),
    rowKey: (x) => x.vhost + '/' + x.name,
    empty: 'No exchanges.',
  });
  add(page.main,
    h('h1', null, 'Exchanges'),
    h('p', {class: 'muted'}, all ? 'All virtual hosts.' : 'Virtual host ' + page.vhost + '.'),
    list.el,
    section('Add an exchange', declareForm(page, list)));
  page.refresh = () => list.refresh();
}

// ---- one exchange -------------------------------------------------------

export function renderDetail(page) {
  const vhost = page.params.vhost;
  // The route carries "amq.default" for the default exchange, as RabbitMQ's
  // paths do; its real name is "".
  const name = page.params.name === 'amq.default' ? '' : page.params.name;
  const base = api.path('exchanges', vhost, exchangeSegment(name));
  const isDefault = name === '';
  const builtin = isDefault || name.startsWith('amq.');
  const detailsBox = h('div');
  const sourceBox = h('div');
  const destBox = h('div');
  const rates = new Chart('Message rates', rateSpecs((d) => d.message_stats, [
    ['publish_in', 'Publish (in)'], ['publish_out', 'Publish (out)'],
  ]), fmtRate);
  // Nothing can be bound to the default exchange, so its page asks only
  // for the bindings from it.
  const refreshBindings = () => Promise.all([
    refreshInto(sourceBox, () => api.getJSON(base + '/bindings/source'),
      (list) => bindingTable(list, 'source', 'Bindings from this exchange', refreshBindings)),
    isDefault ? null : refreshInto(destBox, () => api.getJSON(base + '/bindings/destination'),
      (list) => bindingTable(list, 'destination', 'Bindings to this exchange', refreshBindings)),
  ]);
  add(page.main,
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/exchanges'}, 'Exchanges'), ' › ', vhost),
    h('h1', null, 'Exchange ', h('span', {class: 'name'}, exchangeLabel(name))),
    section('Details', detailsBox),
    rangePicker(() => page.refreshNow()),
    h('div', {class: 'charts'}, rates.el),
    section('Bindings from this exchange', sourceBox,
      isDefault
        ? h('p', {class: 'muted'}, 'The default exchange is bound to every queue by its name; it takes no other bindings.')
        : [h('h3', null, 'Add binding from this exchange'), bindForm(vhost, {source: name}, refreshBindings)]),
    isDefault ? null : section('Bindings to this exchange', destBox),
    section('Publish message', publishForm(vhost, name)),
    builtin
      ? null
      : deleteSection('exchange "' + name + '"', [['if-unused', 'Only if it has no bindings']], async (q) => {
        return page.removing(async () => {
          await api.request('DELETE', base + q);
          page.go('#/exchanges');
          return 'Exchange "' + name + '" deleted.';
        });
      }));

  page.refresh = async () => {
    const [x] = await Promise.all([api.getJSON(base + api.query(ageParams())), refreshBindings()]);
    if (!page.alive()) {
      return;
    }
    fill(detailsBox, details([
      ['Virtual host', x.vhost],
      ['Type', x.type],
      ['Features', [x.durable ? 'durable' : 'transient', x.auto_delete ? 'auto-delete' : null, x.internal ? 'internal' : null]
        .filter((v) => v).join(', ')],
      ['Policy', x.policy || null],
      ['Arguments', x.arguments && Object.keys(x.arguments).length ? kvTable(x.arguments) : null],
    ]));
    rates.update(x);
  };
}
