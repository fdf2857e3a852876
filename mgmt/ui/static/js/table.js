// ListView: a filterable, sortable, paged table over one API list.
//
// Lists the API pages (queues, exchanges, connections, channels, vhosts) are
// filtered, sorted and paged by the server with page, page_size, name,
// use_regex, sort and sort_reverse, so the browser never holds more than one
// page. Lists the API returns whole (users, permissions, policies), or a
// server that ignores paging, are filtered, sorted and paged here instead.

import * as api from './api.js';
import {h, fill, get, uid, scrollBox, select} from './dom.js';

const PAGE_SIZES = [20, 50, 100, 500];

function loadState(id, defaults) {
  try {
    const saved = JSON.parse(sessionStorage.getItem('warren.list.' + id) || 'null');
    if (saved && typeof saved === 'object') {
      return Object.assign({}, defaults, saved);
    }
  } catch (e) {
    // A corrupt entry is replaced by the defaults below.
  }
  return Object.assign({}, defaults);
}

function compare(a, b) {
  if (typeof a === 'number' && typeof b === 'number') {
    return a - b;
  }
  if (a === undefined || a === null) {
    return b === undefined || b === null ? 0 : -1;
  }
  if (b === undefined || b === null) {
    return 1;
  }
  return String(a).localeCompare(String(b));
}

export class ListView {
  // opts: {id, caption, columns: [{label, sort, render, num}], path: () => string,
  //        paged: bool (server pages), filterKey: 'name', defaultSort, rowKey,
  //        empty: string, transform: (items) => rows, for unpaged lists
  //        whose API objects are not one row each}
  constructor(opts) {
    this.opts = opts;
    this.state = loadState(opts.id, {
      page: 1, pageSize: 50, sort: opts.defaultSort || '', reverse: false, filter: '', regex: false,
    });
    this.seq = 0;
    this.build();
  }

  save() {
    sessionStorage.setItem('warren.list.' + this.opts.id, JSON.stringify(this.state));
  }

  build() {
    const st = this.state;
    const filterInput = h('input', {type: 'search', value: st.filter, id: uid('filter'), autocomplete: 'off', spellcheck: 'false'});
    const regex = h('input', {type: 'checkbox', id: uid('regex'), checked: st.regex});
    let timer = null;
    filterInput.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        st.filter = filterInput.value;
        st.page = 1;
        this.save();
        this.refresh().catch((e) => this.showError(e));
      }, 300);
    });
    regex.addEventListener('change', () => {
      st.regex = regex.checked;
      st.page = 1;
      this.save();
      this.refresh().catch((e) => this.showError(e));
    });
    const filterForm = h('form', {class: 'filter', role: 'search', 'aria-label': this.opts.caption + ' filter', onsubmit: (e) => e.preventDefault()},
      h('label', {for: filterInput.id}, 'Filter by name'), filterInput,
      h('span', {class: 'field-check'}, regex, h('label', {for: regex.id}, 'Regular expression')));
    this.status = h('p', {class: 'list-status', 'aria-live': 'polite'});
    this.error = h('p', {class: 'error', role: 'alert', hidden: true});
    this.thead = h('thead');
    this.tbody = h('tbody');
    this.table = h('table', {class: 'list'}, h('caption', {class: 'sr-only'}, this.opts.caption), this.thead, this.tbody);
    this.prev = h('button', {type: 'button', class: 'btn', id: uid('prev'), onclick: () => this.go(-1)}, '‹ Previous');
    this.next = h('button', {type: 'button', class: 'btn', id: uid('next'), onclick: () => this.go(1)}, 'Next ›');
    this.pageLabel = h('span', {class: 'page-label'});
    const sizeSel = select(PAGE_SIZES.map((n) => [String(n), String(n)]), String(st.pageSize), {id: uid('size')});
    sizeSel.addEventListener('change', () => {
      st.pageSize = Number(sizeSel.value);
      st.page = 1;
      this.save();
      this.refresh().catch((e) => this.showError(e));
    });
    const pager = h('nav', {class: 'pager', 'aria-label': this.opts.caption + ' pages'},
      this.prev, this.pageLabel, this.next,
      h('label', {for: sizeSel.id}, 'Per page'), sizeSel);
    this.renderHead();
    this.el = h('div', {class: 'listview'}, filterForm, this.error, this.status,
      scrollBox(this.opts.caption, this.table), pager);
  }

  showError(e) {
    this.error.hidden = false;
    this.error.textContent = 'Could not load ' + this.opts.caption.toLowerCase() + ': ' + (e.reason || e.message || String(e));
  }

  // go moves by delta pages. The buttons use aria-disabled rather than
  // disabled at either end, so a keyboard user's focus stays on them.
  go(delta) {
    const target = this.state.page + delta;
    if (target < 1 || target > (this.pageCount || 1)) {
      return;
    }
    this.state.page = target;
    this.save();
    this.refresh().catch((e) => this.showError(e));
  }

  setSort(key) {
    const st = this.state;
    if (st.sort === key) {
      st.reverse = !st.reverse;
    } else {
      st.sort = key;
      st.reverse = false;
    }
    st.page = 1;
    this.save();
    this.renderHead();
    this.refresh().catch((e) => this.showError(e));
  }

  renderHead() {
    const st = this.state;
    fill(this.thead, h('tr', null, this.opts.columns.map((c) => {
      if (!c.sort) {
        return h('th', {scope: 'col', class: c.num ? 'num' : null}, c.label);
      }
      const active = st.sort === c.sort;
      const dir = active ? (st.reverse ? 'descending' : 'ascending') : 'none';
      return h('th', {scope: 'col', class: c.num ? 'num' : null, 'aria-sort': dir},
        h('button', {type: 'button', class: 'sort', 'data-focus-key': 'sort:' + c.sort, onclick: () => this.setSort(c.sort)},
          c.label, h('span', {class: 'sort-mark', 'aria-hidden': 'true'}, active ? (st.reverse ? ' ▼' : ' ▲') : ' ↕')));
    })));
  }

  // load fetches one page, from the server's pages when it offers them.
  async load() {
    const st = this.state;
    const base = this.opts.path();
    if (this.opts.paged) {
      const params = {page: st.page, page_size: st.pageSize, sort: st.sort, sort_reverse: st.sort && st.reverse ? 'true' : ''};
      if (st.filter) {
        params.name = st.filter;
        params.use_regex = st.regex ? 'true' : 'false';
      }
      const sep = base.includes('?') ? '&' : '?';
      const data = await api.getJSON(base + sep + api.query(params).slice(1));
      if (data && Array.isArray(data.items)) {
        return {
          items: data.items, page: data.page || st.page, pageCount: data.page_count || 1,
          filtered: data.filtered_count, total: data.total_count,
        };
      }
      if (Array.isArray(data)) {
        return this.localPage(data);
      }
      throw new Error('unexpected list response');
    }
    const data = await api.getJSON(base);
    const items = Array.isArray(data) ? data : (data && data.items) || [];
    return this.localPage(this.opts.transform ? this.opts.transform(items) : items);
  }

  // localPage filters, sorts and pages a whole list in the browser.
  localPage(all) {
    const st = this.state;
    const key = this.opts.filterKey || 'name';
    let items = all;
    if (st.filter) {
      let match;
      if (st.regex) {
        let re;
        try {
          re = new RegExp(st.filter, 'i');
        } catch (e) {
          throw new Error('invalid regular expression: ' + e.message);
        }
        match = (v) => re.test(v);
      } else {
        const needle = st.filter.toLowerCase();
        match = (v) => v.toLowerCase().includes(needle);
      }
      items = items.filter((it) => match(String(get(it, key) ?? '')));
    }
    if (st.sort) {
      items = items.slice().sort((a, b) => compare(get(a, st.sort), get(b, st.sort)));
      if (st.reverse) {
        items.reverse();
      }
    }
    const pageCount = Math.max(1, Math.ceil(items.length / st.pageSize));
    const page = Math.min(st.page, pageCount);
    return {
      items: items.slice((page - 1) * st.pageSize, page * st.pageSize),
      page: page, pageCount: pageCount, filtered: items.length, total: all.length,
    };
  }

  async refresh() {
    const seq = ++this.seq;
    let res;
    try {
      res = await this.load();
    } catch (e) {
      // Deleting rows can leave the saved page past the end; RabbitMQ answers
      // 400 for that, so start again from the first page.
      if (e && e.status === 400 && this.state.page > 1) {
        this.state.page = 1;
        this.save();
        res = await this.load();
      } else {
        throw e;
      }
    }
    if (seq !== this.seq || !this.el.isConnected) {
      return;
    }
    this.error.hidden = true;
    this.render(res);
  }

  render(res) {
    const st = this.state;
    st.page = res.page;
    const cols = this.opts.columns;
    if (res.items.length === 0) {
      fill(this.tbody, h('tr', null, h('td', {colspan: cols.length, class: 'muted'},
        st.filter ? 'Nothing matches the filter.' : (this.opts.empty || 'None.'))));
    } else {
      fill(this.tbody, res.items.map((it) => h('tr', {'data-key': this.opts.rowKey ? this.opts.rowKey(it) : null},
        cols.map((c, i) => {
          const v = c.render(it);
          return i === 0
            ? h('th', {scope: 'row', class: c.num ? 'num' : null}, v)
            : h('td', {class: c.num ? 'num' : null}, v);
        }))));
    }
    const shown = res.items.length;
    let text = shown + (shown === 1 ? ' item' : ' items') + ' shown';
    if (typeof res.filtered === 'number' && typeof res.total === 'number') {
      text += res.filtered === res.total ? ' of ' + res.total : ' of ' + res.filtered + ' matching (' + res.total + ' in all)';
    }
    this.status.textContent = text;
    this.pageLabel.textContent = 'Page ' + res.page + ' of ' + res.pageCount;
    this.pageCount = res.pageCount;
    this.prev.setAttribute('aria-disabled', String(res.page <= 1));
    this.next.setAttribute('aria-disabled', String(res.page >= res.pageCount));
  }
}
