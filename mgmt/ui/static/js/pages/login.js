// The login page: checks the credentials against /api/whoami and keeps them
// in sessionStorage for this tab.

import * as api from '../api.js';
import {h, field, busy, errorText} from '../dom.js';

export function render(page) {
  const name = h('input', {type: 'text', name: 'username', autocomplete: 'username', required: true, autocapitalize: 'off', spellcheck: 'false'});
  const pass = h('input', {type: 'password', name: 'password', autocomplete: 'current-password'});
  const err = h('p', {class: 'error', role: 'alert', hidden: !page.loginMessage}, page.loginMessage || '');
  const submit = h('button', {type: 'submit', class: 'btn btn-primary'}, 'Log in');
  const form = h('form', {class: 'login-form', 'aria-labelledby': 'login-title'},
    field('Username', name), field('Password', pass), err, h('div', {class: 'actions'}, submit));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    err.hidden = true;
    busy(submit, async () => {
      try {
        await api.login(name.value, pass.value);
        window.dispatchEvent(new CustomEvent('warren:login'));
      } catch (ex) {
        err.hidden = false;
        err.textContent = ex && ex.status === 401
          ? 'Login failed: ' + errorText(ex)
          : 'Cannot log in: ' + errorText(ex);
        pass.select();
      }
    });
  });
  page.main.appendChild(h('div', {class: 'login'},
    h('div', {class: 'login-brand'}, h('img', {src: 'favicon.svg', alt: '', width: 48, height: 48}),
      h('h1', {id: 'login-title'}, 'Warren management')),
    form,
    h('p', {class: 'muted'}, 'Log in with a broker user that has a management tag (administrator, monitoring, policymaker or management).')));
  // Focus the first empty field so a keyboard user can type at once.
  setTimeout(() => (name.value ? pass : name).focus(), 0);
}
