// Definitions export (download) and import (file upload to POST
// /api/definitions), for all virtual hosts or one.

import * as api from '../api.js';
import {h, add, field, section} from '../dom.js';
import {actionForm, vhostPicker} from '../common.js';

// fileName follows RabbitMQ's "rabbit_<host>_<date>.json" pattern.
function fileName(vhost) {
  const d = new Date();
  const pad = (n) => (n < 10 ? '0' + n : String(n));
  const date = d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate());
  const host = location.hostname.replace(/[^A-Za-z0-9.-]/g, '_') || 'warren';
  const vh = vhost ? '_' + vhost.replace(/[^A-Za-z0-9.-]/g, '_') : '';
  return 'warren_' + host + vh + '_' + date + '.json';
}

function readFile(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result));
    r.onerror = () => reject(new Error('Cannot read ' + file.name + ': ' + (r.error ? r.error.message : 'unknown error')));
    r.readAsText(file);
  });
}

function exportForm() {
  const vh = vhostPicker('', true);
  const out = h('p', {class: 'result', role: 'status'});
  const form = actionForm([field('Virtual host', vh)], 'Download definitions', async () => {
    const blob = await api.download(vh.value ? api.path('definitions', vh.value) : '/definitions');
    const url = URL.createObjectURL(blob);
    const name = fileName(vh.value);
    const a = h('a', {href: url, download: name, class: 'sr-only'}, name);
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    out.textContent = 'Saved ' + name + ' (' + blob.size + ' bytes).';
    return null;
  }, {'aria-label': 'Export definitions'});
  form.appendChild(out);
  return form;
}

function importForm() {
  const file = h('input', {type: 'file', accept: '.json,application/json', required: true});
  const vh = vhostPicker('', true);
  const out = h('p', {class: 'result', role: 'status'});
  const form = actionForm([
    field('Definitions file', file, 'A JSON file exported from Warren or RabbitMQ 3.x.'),
    field('Into virtual host', vh, 'All: the file\'s own virtual hosts. A single vhost: a per-vhost export is loaded into it.'),
  ], 'Upload definitions', async () => {
    const f = file.files && file.files[0];
    if (!f) {
      throw new Error('Choose a file first.');
    }
    const text = await readFile(f);
    try {
      JSON.parse(text);
    } catch (e) {
      throw new Error(f.name + ' is not JSON: ' + e.message);
    }
    await api.request('POST', vh.value ? api.path('definitions', vh.value) : '/definitions', {body: text});
    api.invalidateVhosts();
    out.textContent = 'Imported ' + f.name + '.';
    return 'Definitions imported.';
  }, {'aria-label': 'Import definitions'});
  form.appendChild(out);
  return form;
}

export function render(page) {
  add(page.main,
    h('h1', null, 'Definitions'),
    h('p', null, 'Definitions are the broker\'s topology and accounts: users, virtual hosts, permissions, policies, ' +
      'queues, exchanges and bindings, but no messages. Import merges: existing queues, exchanges and bindings are kept, ' +
      'users, permissions and policies are overwritten.'),
    h('div', {class: 'two-col'}, section('Export', exportForm()), section('Import', importForm())));
  // Nothing to poll on this page.
  page.refresh = null;
}
