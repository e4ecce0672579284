/* Sluice's web console: a page per hash route (#/, #/topics, #/topics/NAME,
 * #/groups, #/groups/ID), each drawn from the admin endpoint's JSON under
 * /v1/ (docs/console.md), live charts from /v1/history and the /v1/stream
 * Server-Sent Events. Read-only. Text from the broker goes into the page as
 * text, never as HTML. */
'use strict';
(function () {
  const page = document.getElementById('page');
  const POLL_MS = 2000;
  let timers = [], charts = [], stream = null, gen = 0;

  /* ---- small helpers ---------------------------------------------------- */
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('data-')) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of kids.flat()) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  async function get(path) {
    const r = await fetch(path, { cache: 'no-store' });
    if (!r.ok) throw new Error(path + ': ' + r.status + ' ' + (await r.text()).trim());
    return r.json();
  }
  const nf = new Intl.NumberFormat('en');
  const num = (v) => (v === undefined || v === null || v < 0 ? '\u2014' : nf.format(Math.round(v)));
  function bytes(v) {
    if (v === undefined || v === null || v < 0) return '\u2014';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(v < 10 ? 2 : 1) : v) + ' ' + u[i];
  }
  function age(ms) {
    if (ms === undefined || ms === null || ms < 0) return '\u2014';
    if (ms < 1000) return ms + ' ms';
    const s = ms / 1000;
    if (s < 120) return s.toFixed(1) + ' s';
    if (s < 7200) return (s / 60).toFixed(1) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }
  const retention = (ms) => (ms < 0 ? 'forever' : age(ms));
  const enc = encodeURIComponent;
  function table(head, rows, test) {
    const t = el('table', { 'data-test': test },
      el('thead', {}, el('tr', {}, head.map((h) => el('th', { class: h.n ? 'n' : '' }, h.t)))),
      el('tbody', {}, rows));
    return el('div', { class: 'scroll' }, t);
  }
  const td = (v, attrs) => el('td', attrs || {}, v);
  const tdn = (v, attrs) => el('td', Object.assign({ class: 'n' }, attrs || {}), v);
  const card = (k, v, test) => el('div', { class: 'card' }, el('div', { class: 'k' }, k), el('div', { class: 'v', 'data-test': test }, v));
  function fail(e) {
    /* one error shown, not one a poll: the page stops until it is left or reloaded */
    timers.forEach(clearInterval); timers = [];
    if (stream) { stream.close(); stream = null; }
    page.replaceChildren(el('div', { class: 'error' }, String(e.message || e)));
    document.body.dataset.ready = 'error';
  }
  /* rates from two readings of cumulative counters */
  function rater() {
    let prev = null, prevT = 0;
    return (key, obj) => {
      const now = performance.now();
      const out = {};
      if (prev && now > prevT) for (const k of Object.keys(obj)) out[k] = Math.max(0, (obj[k] - (prev[k] || 0)) * 1000 / (now - prevT));
      prev = obj; prevT = now;
      return prev && Object.keys(out).length ? out : null;
    };
  }

  /* ---- charts: uPlot, with a table of the last values beside each ---------- */
  function chart(title, unit, names, fmt) {
    const box = el('div', { class: 'plot' });
    const side = el('div', { class: 'scroll' });
    const wrap = el('div', { class: 'chart', 'data-test': 'chart' }, el('div', {}, el('h2', {}, title + ' (' + unit + ')'), box), side);
    const data = [[], ...names.map(() => [])];
    const colors = ['#1f6feb', '#e3a03a', '#2e7d32', '#c62828', '#8250df', '#0a7b83', '#9a6700', '#6e7781'];
    let u = null;
    function draw() {
      if (!u) {
        const width = Math.max(260, box.clientWidth || 600);
        u = new uPlot({
          width, height: 200,
          series: [{}, ...names.map((n, i) => ({ label: n, stroke: colors[i % colors.length], width: 1.5 }))],
          axes: [{ stroke: getComputedStyle(document.body).color },
                 { stroke: getComputedStyle(document.body).color, label: unit, size: 90, values: (s, vs) => vs.map((v) => fmt(v)) }],
          /* rates and lags from 0, so a small change does not look like a cliff */
          scales: { x: { time: true }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        }, data, box);
        charts.push(u);
      } else {
        u.setData(data);
      }
      const rows = [];
      for (let i = data[0].length - 1; i >= 0 && rows.length < 8; i--)
        rows.push(el('tr', {}, td(new Date(data[0][i] * 1000).toLocaleTimeString()), names.map((n, j) => tdn(fmt(data[j + 1][i])))));
      side.replaceChildren(table([{ t: 'time' }, ...names.map((n) => ({ t: n + ' (' + unit + ')', n: 1 }))], rows, 'chart-table'));
    }
    return {
      el: wrap,
      add(tMs, values) {
        data[0].push(tMs / 1000);
        values.forEach((v, i) => data[i + 1].push(v));
        if (data[0].length > 300) data.forEach((s) => s.shift());
      },
      draw,
    };
  }
  window.addEventListener('resize', () => charts.forEach((u) => {
    const w = u.root.parentElement.clientWidth;
    if (w) u.setSize({ width: Math.max(260, w), height: 200 });
  }));

  /* fn now and every POLL_MS while the page is shown; the promise is the
   * first run's, so the page is ready only once its data is drawn */
  function every(fn) {
    const mine = gen;
    const run = () => (mine === gen ? fn().catch(fail) : Promise.resolve());
    timers.push(setInterval(run, POLL_MS));
    return run();
  }

  /* ---- overview ------------------------------------------------------------ */
  async function overview() {
    const [c, hist] = await Promise.all([get('/v1/cluster'), get('/v1/history')]);
    const nsh = c.shards.length;
    const recs = chart('Produced', 'records/s', ['records'], num);
    const thr = chart('Throughput', 'bytes/s', ['produced', 'fetched'], bytes);
    const busy = chart('Shard busy', '%', c.shards.map((s) => 'shard ' + s.shard), (v) => (v === undefined || v === null ? '\u2014' : v.toFixed(1)));
    let last = 0;
    let lastSample = null;
    function sample(s) {
      if (s.seq <= last) return;
      last = s.seq;
      lastSample = s;
      recs.add(s.time_ms, [s.produce_records_per_sec]);
      thr.add(s.time_ms, [s.produce_bytes_per_sec, s.fetch_bytes_per_sec]);
      busy.add(s.time_ms, Array.from({ length: nsh }, (_, i) => 100 * (s.shard_busy[i] || 0)));
    }
    hist.samples.forEach(sample);
    const cards = el('div', { class: 'cards' });
    const body = el('div', {});
    page.replaceChildren(el('h1', {}, 'Overview'), cards, el('h2', {}, 'Live'), recs.el, thr.el, busy.el, body);
    [recs, thr, busy].forEach((x) => x.draw());
    stream = new EventSource('/v1/stream?from=' + (last + 1));
    stream.addEventListener('sample', (ev) => { sample(JSON.parse(ev.data)); [recs, thr, busy].forEach((x) => x.draw()); });
    /* this node against its hardware profile's limits (hardware.profile) */
    function profileTable(c) {
      const p = c.profile;
      if (!p) return el('p', { class: 'muted' }, 'No hardware profile loaded (hardware.profile): nothing to hold the figures against.');
      const s = lastSample;
      const rows = [];
      const pct = (v, lim) => (lim > 0 && v >= 0 ? (100 * v / lim).toFixed(1) + ' %' : '\u2014');
      if (p.disk_write_bytes_per_sec) rows.push(['disk writes (produced)', s ? bytes(s.produce_bytes_per_sec) + '/s' : '\u2014', bytes(p.disk_write_bytes_per_sec) + '/s', pct(s ? s.produce_bytes_per_sec : -1, p.disk_write_bytes_per_sec), 'disk-write']);
      if (p.disk_bytes) rows.push(['disk space (logs)', bytes(c.size_bytes), bytes(p.disk_bytes), pct(c.size_bytes, p.disk_bytes), 'disk-space']);
      if (p.nic_bytes_per_sec) rows.push(['network (produced + fetched)', s ? bytes(s.produce_bytes_per_sec + s.fetch_bytes_per_sec) + '/s' : '\u2014', bytes(p.nic_bytes_per_sec) + '/s', pct(s ? s.produce_bytes_per_sec + s.fetch_bytes_per_sec : -1, p.nic_bytes_per_sec), 'nic']);
      if (p.cores) rows.push(['cores (shards)', String(c.shards.length), String(p.cores), pct(c.shards.length, p.cores), 'cores']);
      return el('div', {}, el('h2', {}, 'Against the hardware profile: ' + p.description),
        table([{ t: 'resource' }, { t: 'now', n: 1 }, { t: 'limit', n: 1 }, { t: 'share', n: 1 }],
          rows.map((r) => el('tr', {}, td(r[0]), tdn(r[1]), tdn(r[2], { 'data-test': 'limit-' + r[4] }), tdn(r[3]))), 'profile'));
    }
    function logRow(d) {
      if (d.error) return el('tr', {}, td(d.path), el('td', { class: 'bad', colSpan: 4 }, d.error));
      const free = d.fs_free_bytes / d.fs_total_bytes;
      return el('tr', {}, td(d.path), tdn(bytes(d.fs_total_bytes - d.fs_free_bytes)), tdn(bytes(d.fs_free_bytes)),
        tdn(bytes(d.fs_total_bytes)), tdn((100 * (1 - free)).toFixed(1), { class: 'n' + (free < 0.1 ? ' bad' : '') }));
    }
    function render(c) {
      const p = c.partitions;
      cards.replaceChildren(
        card('status', c.status, 'status'), card('node', c.node_id), card('brokers', c.brokers.filter((b) => !b.fenced).length + (c.brokers.some((b) => b.fenced) ? ' (+' + c.brokers.filter((b) => b.fenced).length + ' fenced)' : ''), 'brokers'),
        card('topics', c.topics, 'topics'), card('partitions online', num(p.online) + ' / ' + num(p.total), 'online'),
        card('under-replicated', num(p.under_replicated), 'under-replicated'), card('offline', num(p.offline), 'offline'),
        card('controller', c.controller < 0 ? 'none' : c.controller));
      body.replaceChildren(
        el('h2', {}, 'Brokers'),
        table([{ t: 'id' }, { t: 'host' }, { t: 'port', n: 1 }, { t: 'rack' }, { t: 'state' }, { t: '' }],
          c.brokers.map((b) => el('tr', {}, tdn(b.id), td(b.host), tdn(b.port), td(b.rack || '\u2014'),
            td(b.fenced ? 'fenced' : 'serving', { class: b.fenced ? 'bad' : '', 'data-test': 'broker-' + b.id }), td(b.this ? 'this node' : ''))), 'brokers'),
        el('h2', {}, 'Shards of this node'),
        table([{ t: 'shard', n: 1 }, { t: 'partitions', n: 1 }, { t: 'size', n: 1 }, { t: 'connections', n: 1 }, { t: 'busy' }],
          c.shards.map((s) => el('tr', {}, tdn(s.shard), tdn(num(s.partitions)), tdn(bytes(s.size_bytes)), tdn(num(s.connections)),
            el('td', {}, el('span', { class: 'bar', style: 'width:' + Math.round(100 * s.busy) + 'px' }), ' ' + (100 * s.busy).toFixed(1) + ' %'))), 'shards'),
        profileTable(c),
        el('h2', {}, 'Log directories'),
        table([{ t: 'path' }, { t: 'used', n: 1 }, { t: 'free', n: 1 }, { t: 'size', n: 1 }, { t: 'used %', n: 1 }],
          c.log_dirs.map(logRow), 'log-dirs'));
    }
    render(c);
    let first = true;
    await every(async () => { if (first) { first = false; return; } render(await get('/v1/cluster')); });
  }

  /* ---- topics ---------------------------------------------------------------- */
  async function topics() {
    const rates = {};
    const body = el('div', {});
    page.replaceChildren(el('h1', {}, 'Topics'), body);
    await every(async () => {
      const j = await get('/v1/topics');
      body.replaceChildren(table(
        [{ t: 'topic' }, { t: 'partitions', n: 1 }, { t: 'replicas', n: 1 }, { t: 'size', n: 1 }, { t: 'records/s', n: 1 },
         { t: 'in bytes/s', n: 1 }, { t: 'out bytes/s', n: 1 }, { t: 'retention' }, { t: 'cleanup' }, { t: 'health' }],
        j.topics.map((t) => {
          const r = (rates[t.name] = rates[t.name] || rater())(t.name, { rec: t.produce_records, pin: t.produce_bytes, pout: t.fetch_bytes }) || {};
          const health = t.offline ? el('span', { class: 'bad' }, t.offline + ' offline') : t.under_replicated ? el('span', { class: 'warn' }, t.under_replicated + ' under-replicated') : 'ok';
          return el('tr', {}, td(el('a', { href: '#/topics/' + enc(t.name) }, t.name), t.internal ? el('span', { class: 'muted' }, ' internal') : ''),
            tdn(t.partitions), tdn(t.replication_factor), tdn(bytes(t.size_bytes)), tdn(num(r.rec)), tdn(bytes(r.pin)), tdn(bytes(r.pout)),
            td(retention(t.retention_ms)), td(t.cleanup_policy), td(health));
        }), 'topics'));
    });
  }

  async function topic(name) {
    const rates = {};
    const cards = el('div', { class: 'cards' });
    const rc = chart('Produced to ' + name, 'records/s', ['records'], num);
    const body = el('div', {});
    const total = rater();
    page.replaceChildren(el('h1', {}, 'Topic ', el('span', { 'data-test': 'topic-name' }, name)), cards, rc.el, body);
    await every(async () => {
      const t = await get('/v1/topics/' + enc(name));
      let sum = 0, size = 0, hot = 0;
      const rows = t.partition_list.map((p) => {
        const r = (rates[p.partition] = rates[p.partition] || rater())(p.partition, { rec: p.produce_records || 0, pin: p.produce_bytes || 0, pout: p.fetch_bytes || 0 }) || {};
        sum += r.rec || 0;
        size += p.size_bytes || 0;
        return { p, r };
      });
      const mean = sum / Math.max(1, rows.length);
      const tr = total('t', { rec: rows.reduce((a, x) => a + (x.p.produce_records || 0), 0) });
      if (tr) { rc.add(Date.now(), [tr.rec]); rc.draw(); }
      cards.replaceChildren(card('partitions', t.partitions), card('replication factor', t.replication_factor), card('size', bytes(size)),
        card('retention', retention(t.retention_ms)), card('cleanup', t.cleanup_policy));
      body.replaceChildren(el('h2', {}, 'Partitions'), table(
        [{ t: 'partition', n: 1 }, { t: 'leader', n: 1 }, { t: 'replicas' }, { t: 'ISR' }, { t: 'shard', n: 1 }, { t: 'log start', n: 1 },
         { t: 'high watermark', n: 1 }, { t: 'size', n: 1 }, { t: 'records/s', n: 1 }, { t: 'in bytes/s', n: 1 }, { t: 'out bytes/s', n: 1 }, { t: '' }],
        rows.map(({ p, r }) => {
          const isHot = rows.length > 1 && (r.rec || 0) > 0 && (r.rec || 0) > 2 * mean;
          hot += isHot;
          const under = p.isr.length < p.replicas.length;
          return el('tr', { class: isHot ? 'hot' : '' }, tdn(el('a', { href: '#/topics/' + enc(name) + '/records/' + p.partition, title: 'browse its records' }, p.partition)), tdn(p.leader < 0 ? 'none' : p.leader, { class: 'n' + (p.leader < 0 ? ' bad' : '') }),
            td(p.replicas.join(', ')), td(p.isr.join(', '), { class: under ? 'warn' : '' }), tdn(p.shard < 0 ? '\u2014' : p.shard),
            tdn(num(p.log_start_offset)), tdn(num(p.high_watermark), { 'data-test': 'hw-' + p.partition }), tdn(bytes(p.size_bytes)),
            tdn(num(r.rec)), tdn(bytes(r.pin)), tdn(bytes(r.pout)),
            td(el('a', { href: '#/topics/' + enc(name) + '/records/' + p.partition }, 'records'), ' \u00b7 ',
              el('a', { href: '#/topics/' + enc(name) + '/producers/' + p.partition }, 'producers')));
        }), 'partitions'),
        hot ? el('p', { class: 'warn' }, hot + ' hot partition(s): more than twice the topic\u2019s mean rate (highlighted)') : '',
        Object.keys(t.configs).length ? el('h2', {}, 'Configuration set on the topic') : '',
        Object.keys(t.configs).length ? table([{ t: 'key' }, { t: 'value' }], Object.entries(t.configs).map(([k, v]) => el('tr', {}, td(k), td(v))), 'configs') : '');
    });
  }

  /* ---- records ---------------------------------------------------------------- */
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  function unb64(s) {
    if (s === null || s === undefined) return null;
    const bin = atob(s);
    const a = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
    return a;
  }
  const hex = (a) => Array.from(a, (b) => b.toString(16).padStart(2, '0')).join(' ');
  /* bytes as the format asks: auto is JSON when it parses, text when it is
   * UTF-8 without control characters, else hex */
  function show(bytes, format) {
    if (bytes === null) return el('span', { class: 'muted' }, 'null');
    let text = null;
    try { text = utf8.decode(bytes); } catch (e) { text = null; }
    if (format === 'hex' || text === null) return el('code', {}, hex(bytes));
    if (format === 'json' || format === 'auto') {
      try {
        const j = JSON.parse(text);
        if (format === 'json' || (typeof j === 'object' && j !== null)) return el('pre', {}, JSON.stringify(j, null, 2));
      } catch (e) {
        if (format === 'json') return el('span', { class: 'bad' }, 'not JSON: ' + text);
      }
    }
    if (format === 'auto' && /[\u0000-\u0008\u000e-\u001f]/.test(text)) return el('code', {}, hex(bytes));
    return el('span', { class: 'text' }, text);
  }

  async function records(name, part, query) {
    const q = new URLSearchParams(query);
    const mode = q.get('timestamp') ? 'time' : q.get('offset') ? 'offset' : 'newest';
    const format = q.get('format') || 'auto';
    const limit = q.get('limit') || '50';
    const order = q.get('order') || (mode === 'newest' ? 'newest' : 'oldest');
    const api = new URLSearchParams({ limit, order });
    if (mode === 'offset') api.set('offset', q.get('offset'));
    if (mode === 'time') api.set('timestamp', q.get('timestamp'));
    const r = await get('/v1/records/' + enc(name) + '/' + part + '?' + api);
    const go = (o) => { location.hash = '#/topics/' + enc(name) + '/records/' + part + '?' + new URLSearchParams(Object.assign({ limit, format, order }, o)); };
    const offIn = el('input', { type: 'number', min: 0, value: q.get('offset') || '', placeholder: 'offset', 'data-test': 'offset-input' });
    const timeIn = el('input', { type: 'datetime-local', step: 1 });
    const fmt = el('select', { 'data-test': 'format' }, ['auto', 'text', 'json', 'hex'].map((f) => el('option', { value: f, selected: f === format }, f)));
    fmt.addEventListener('change', () => go(Object.assign({}, Object.fromEntries(q), { format: fmt.value })));
    const recs = r.records;
    const first = recs.length ? Math.min(...recs.map((x) => x.offset)) : r.from;
    const last = recs.length ? Math.max(...recs.map((x) => x.offset)) : r.from - 1;
    const controls = el('div', { class: 'controls' },
      el('button', { type: 'button', onclick: () => go({ order: 'newest' }) }, 'Newest'),
      el('button', { type: 'button', onclick: () => go({ offset: r.log_start_offset, order: 'oldest' }) }, 'Oldest'),
      offIn, el('button', { type: 'button', onclick: () => offIn.value !== '' && go({ offset: offIn.value, order: 'oldest' }) }, 'From offset'),
      timeIn, el('button', { type: 'button', onclick: () => timeIn.value && go({ timestamp: String(new Date(timeIn.value).getTime()), order: 'oldest' }) }, 'From time'),
      el('button', { type: 'button', disabled: first <= r.log_start_offset, onclick: () => go({ offset: Math.max(0, first - 1), order: 'newest' }) }, '\u2190 Older'),
      el('button', { type: 'button', disabled: last + 1 >= r.high_watermark, onclick: () => go({ offset: last + 1, order: 'oldest' }) }, 'Newer \u2192'),
      el('label', {}, ' as ', fmt));
    page.replaceChildren(
      el('h1', {}, 'Records of ', el('a', { href: '#/topics/' + enc(name) }, name), ' partition ' + part),
      el('p', { class: 'muted' }, 'Log start ' + num(r.log_start_offset) + ', high watermark ' + num(r.high_watermark) + '; ' +
        recs.length + ' record(s), ' + (order === 'newest' ? 'newest first' : 'oldest first') + ', at most ' + limit + ' a page.'),
      controls,
      recs.length ? table([{ t: 'offset', n: 1 }, { t: 'timestamp' }, { t: 'key' }, { t: 'value' }, { t: 'headers' }],
        recs.map((x) => el('tr', {}, tdn(x.offset), td(new Date(x.timestamp).toISOString()),
          el('td', { 'data-test': 'rec-' + x.offset + '-key' }, show(unb64(x.key), format)),
          el('td', { class: 'value', 'data-test': 'rec-' + x.offset + '-value' }, show(unb64(x.value), format)),
          el('td', { 'data-test': 'rec-' + x.offset + '-headers' }, x.headers.map((h) => el('div', {}, show(unb64(h.key), 'text'), ': ', show(unb64(h.value), format)))))),
        'records') : el('p', { class: 'muted', 'data-test': 'records' }, 'No records here.'));
  }

  async function producers(name, part) {
    const body = el('div', {});
    page.replaceChildren(el('h1', {}, 'Producers of ', el('a', { href: '#/topics/' + enc(name) }, name), ' partition ' + part), body);
    await every(async () => {
      const j = await get('/v1/producers/' + enc(name) + '/' + part);
      const now = Date.now();
      body.replaceChildren(
        el('p', { class: 'muted' }, j.total + ' idempotent producer(s) known to the partition' +
          (j.total > j.producers.length ? ', the ' + j.producers.length + ' most recent shown' : '') + '.'),
        j.producers.length ? table([{ t: 'producer id', n: 1 }, { t: 'epoch', n: 1 }, { t: 'last sequence', n: 1 }, { t: 'last offset', n: 1 },
          { t: 'last append' }, { t: 'open transaction from' }],
        j.producers.map((x) => el('tr', {}, tdn(x.producer_id), tdn(x.epoch), tdn(x.last_sequence < 0 ? '\u2014' : x.last_sequence, { 'data-test': 'seq-' + x.producer_id }),
          tdn(x.last_offset < 0 ? '\u2014' : num(x.last_offset)), td(age(now - x.last_append_ms) + ' ago'),
          td(x.transaction_first_offset < 0 ? '\u2014' : 'offset ' + num(x.transaction_first_offset), { 'data-test': 'txn-' + x.producer_id }))), 'producers')
          : el('p', { class: 'muted', 'data-test': 'producers' }, 'None: no idempotent producer has written here lately.'));
    });
  }

  /* ---- consumer groups ------------------------------------------------------ */
  async function groups() {
    const body = el('div', {});
    page.replaceChildren(el('h1', {}, 'Consumer groups'), body);
    await every(async () => {
      const j = await get('/v1/groups');
      body.replaceChildren(j.groups.length ? table(
        [{ t: 'group' }, { t: 'state' }, { t: 'generation', n: 1 }, { t: 'members', n: 1 }, { t: 'assignor' }, { t: 'partitions', n: 1 }, { t: 'lag (records)', n: 1 }],
        j.groups.map((g) => el('tr', {}, td(el('a', { href: '#/groups/' + enc(g.group) }, g.group)), td(g.state), tdn(g.generation), tdn(g.members),
          td(g.protocol || '\u2014'), tdn(g.partitions), tdn(num(g.lag), { 'data-test': 'group-lag-' + g.group }))), 'groups')
        : el('p', { class: 'muted' }, 'No consumer groups yet.'));
    });
  }

  async function group(id) {
    const cards = el('div', { class: 'cards' });
    const lc = chart('Lag of ' + id, 'records', ['lag'], num);
    const body = el('div', {});
    page.replaceChildren(el('h1', {}, 'Consumer group ', el('span', { 'data-test': 'group-id' }, id)), cards, lc.el, body);
    let seeded = false;
    await every(async () => {
      const g = await get('/v1/groups/' + enc(id));
      const byTp = (a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition);
      g.offsets.sort(byTp);
      g.members.forEach((m) => m.assignment.sort(byTp));
      const owner = {};
      for (const m of g.members) for (const a of m.assignment) owner[a.topic + '\u0000' + a.partition] = m.client_id || m.member_id;
      const known = g.offsets.filter((o) => o.lag >= 0);
      const lag = known.reduce((a, o) => a + o.lag, 0);
      const oldest = g.offsets.reduce((a, o) => Math.max(a, o.oldest_unconsumed_age_ms), -1);
      if (!seeded) {
        /* the broker's last minutes first (a sample each 5 s), then live */
        seeded = true;
        for (const [t, v] of g.lag_history || []) lc.add(t, [v]);
      }
      if (known.length) lc.add(Date.now(), [lag]);
      if (known.length || (g.lag_history || []).length) lc.draw();
      cards.replaceChildren(card('state', g.state, 'group-state'), card('generation', g.generation), card('members', g.members.length),
        card('lag (records)', known.length ? num(lag) : '\u2014', 'group-lag'), card('oldest unconsumed', age(oldest)), card('assignor', g.protocol || '\u2014'));
      body.replaceChildren(
        el('h2', {}, 'Committed offsets'),
        g.offsets.length ? table(
          [{ t: 'topic' }, { t: 'partition', n: 1 }, { t: 'committed', n: 1 }, { t: 'high watermark', n: 1 }, { t: 'lag', n: 1 }, { t: 'oldest unconsumed' }, { t: 'owner' }],
          g.offsets.map((o) => el('tr', {}, td(el('a', { href: '#/topics/' + enc(o.topic) }, o.topic)), tdn(o.partition),
            tdn(num(o.committed), { 'data-test': 'committed-' + o.topic + '-' + o.partition }), tdn(num(o.high_watermark)),
            tdn(num(o.lag), { 'data-test': 'lag-' + o.topic + '-' + o.partition, class: 'n' + (o.lag > 0 ? ' warn' : '') }),
            td(age(o.oldest_unconsumed_age_ms)), td(owner[o.topic + '\u0000' + o.partition] || '\u2014'))), 'offsets')
          : el('p', { class: 'muted' }, 'No committed offsets.'),
        el('h2', {}, 'Rebalances, newest first'),
        g.rebalances.length ? table([{ t: 'time' }, { t: 'what' }, { t: 'member' }, { t: 'generation', n: 1 }, { t: 'members', n: 1 }],
          g.rebalances.slice().reverse().map((e) => el('tr', {}, td(new Date(e.time_ms).toLocaleString()),
            td(e.what === 'generation' ? 'generation ' + e.generation + ' completed' : 'started: ' + e.what.replace(/_/g, ' '), { class: e.what === 'generation' ? '' : 'warn' }),
            td(e.who || '\u2014'), tdn(e.generation), tdn(e.members))), 'rebalances')
          : el('p', { class: 'muted', 'data-test': 'rebalances' }, 'None since this node became its coordinator.'),
        el('h2', {}, 'Members'),
        g.members.length ? table([{ t: 'member' }, { t: 'client id' }, { t: 'host' }, { t: 'assigned partitions' }],
          g.members.map((m) => el('tr', {}, td(m.member_id), td(m.client_id), td(m.host),
            td(m.assignment.map((a) => a.topic + '-' + a.partition).join(', ') || '\u2014'))), 'members')
          : el('p', { class: 'muted' }, 'No members: nobody consumes as this group now.'));
    });
  }

  /* ---- transactions ------------------------------------------------------------ */
  async function transactions() {
    const body = el('div', {});
    page.replaceChildren(el('h1', {}, 'Transactions'), body);
    await every(async () => {
      const j = await get('/v1/transactions');
      const open = j.transactions.filter((x) => x.open).sort((a, b) => b.age_ms - a.age_ms);
      const rest = j.transactions.filter((x) => !x.open).sort((a, b) => (a.transactional_id < b.transactional_id ? -1 : 1));
      const row = (x) => el('tr', {}, td(x.transactional_id), td(x.state, { 'data-test': 'txn-state-' + x.transactional_id, class: x.open ? 'warn' : '' }),
        tdn(x.producer_id), tdn(x.epoch), td(age(x.age_ms), { 'data-test': 'txn-age-' + x.transactional_id }), td(age(x.timeout_ms)),
        td(x.partitions.map((p) => p.topic + '-' + p.partition).join(', ') || '\u2014'));
      const head = [{ t: 'transactional id' }, { t: 'state' }, { t: 'producer id', n: 1 }, { t: 'epoch', n: 1 }, { t: 'open for' }, { t: 'timeout' }, { t: 'partitions' }];
      body.replaceChildren(
        el('h2', {}, 'What read_committed consumers wait for'),
        j.held_back.length ? table([{ t: 'partition' }, { t: 'last stable offset', n: 1 }, { t: 'high watermark', n: 1 }, { t: 'records held back', n: 1 }],
          j.held_back.map((h) => el('tr', {}, td(el('a', { href: '#/topics/' + enc(h.topic) }, h.topic + '-' + h.partition)), tdn(num(h.last_stable_offset)),
            tdn(num(h.high_watermark)), tdn(num(h.records_held), { 'data-test': 'held-' + h.topic + '-' + h.partition }))), 'held-back')
          : el('p', { class: 'muted', 'data-test': 'held-back' }, 'Nothing: every partition here is readable up to its high watermark.'),
        el('h2', {}, 'Open transactions, oldest first'),
        open.length ? table(head, open.map(row), 'open-transactions') : el('p', { class: 'muted', 'data-test': 'open-transactions' }, 'None open.'),
        el('h2', {}, 'Other transactional ids coordinated here'),
        rest.length ? table(head, rest.map(row), 'other-transactions') : el('p', { class: 'muted' }, 'None.'));
    });
  }

  /* ---- routing, health, theme ------------------------------------------------ */
  function route() {
    gen++;
    timers.forEach(clearInterval); timers = [];
    charts.forEach((u) => u.destroy()); charts = [];
    if (stream) { stream.close(); stream = null; }
    document.body.dataset.ready = '';
    const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
    const parts = (path || '').split('/').map(decodeURIComponent);
    const name = parts[0] || 'overview';
    document.querySelectorAll('nav a').forEach((a) => a.classList.toggle('on', a.dataset.nav === name));
    let p;
    if (name === 'topics' && parts[2] === 'records') p = records(parts[1], Number(parts[3]), query);
    else if (name === 'topics' && parts[2] === 'producers') p = producers(parts[1], Number(parts[3]));
    else if (name === 'topics' && parts[1]) p = topic(parts.slice(1).join('/'));
    else if (name === 'topics') p = topics();
    else if (name === 'groups' && parts[1]) p = group(parts.slice(1).join('/'));
    else if (name === 'groups') p = groups();
    else if (name === 'transactions') p = transactions();
    else p = overview();
    const mine = gen;
    p.then(() => new Promise((r) => setTimeout(r, 50))).then(() => { if (mine === gen && document.body.dataset.ready !== 'error') document.body.dataset.ready = name + (parts[2] ? '-' + parts[2] : parts[1] ? '-one' : ''); }).catch(fail);
  }
  async function health() {
    const s = document.getElementById('status');
    try {
      const r = await fetch('/v1/health', { cache: 'no-store' });
      const j = await r.json();
      s.className = 'status ' + (r.ok ? 'ok' : 'bad');
      s.textContent = r.ok ? 'healthy' : (j.reasons || []).join('; ') || 'unhealthy';
    } catch (e) {
      s.className = 'status bad';
      s.textContent = 'broker unreachable';
    }
  }
  const theme = localStorage.getItem('sluice-theme') || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
  document.documentElement.dataset.theme = theme;
  document.getElementById('theme').addEventListener('click', () => {
    const t = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
    document.documentElement.dataset.theme = t;
    localStorage.setItem('sluice-theme', t);
    route();
  });
  window.addEventListener('hashchange', route);
  health();
  setInterval(health, 5000);
  route();
})();
