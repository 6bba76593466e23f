/* app.js -- the attune dashboard: reads the API of the attuned that served
 * it (GET only) and draws plain SVG. No library, no build step.
 *
 * Polls /v1/jobs and /v1/pins every second, and /v1/devices + /v1/winners when a job's
 * progress moves (each tactic) or else every five seconds, so winners show
 * within a second of being measured. Everything drawn carries data-* attributes
 * with the values it shows: the browser test reads them back. */
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';
/* The variants and their colours: GET /v1/variants, the table of kernel
 * families that attuned was built with (kernels/variant.h), read at start. */
const VARIANT_COLORS = {};
const VARIANTS = [];
const state = {
  devices: [], device: null, winners: null, winnersText: '', variantsOff: new Set(), jobs: [], jobsText: '',
  shape: null, results: null, resultsKey: '', progress: {}, ticks: 0, lastDone: '',
  pins: [], pinsText: '',
};

/* ---- small helpers */

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
  })[c]);
}

function fmtUs(t) {
  if (t === null || t === undefined || !isFinite(t)) return '-';
  if (t === 0) return '0';
  if (t >= 10000) return (t / 1000).toFixed(1) + ' ms';
  if (t >= 1000) return (t / 1000).toFixed(2) + ' ms';
  if (t >= 100) return t.toFixed(0) + ' us';
  if (t >= 10) return t.toFixed(1) + ' us';
  return t.toFixed(2) + ' us';
}

function fmtErr(e) {
  return e === null || e === undefined || !isFinite(e) ? '-' : e.toExponential(2);
}

function fmtX(m) {
  return m === null || m === undefined || !isFinite(m) ? '-' : m.toFixed(2) + 'x';
}

function variantColor(v) {
  if (VARIANT_COLORS[v]) return VARIANT_COLORS[v];
  let h = 0;
  for (const c of String(v)) h = (h * 31 + c.charCodeAt(0)) % 360;
  return 'hsl(' + h + ',45%,55%)';
}

function variantOf(tactic) {
  return String(tactic).split('/')[0];
}

/* the time a tactic competes with: with its pad copies when it pads */
function totalTime(m) {
  return m.time_us_copies !== null && m.time_us_copies !== undefined ? m.time_us_copies
    : m.time_us;
}

async function api(path) {
  const r = await fetch(path, { headers: { Accept: 'application/json' }, cache: 'no-store' });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(path + ': ' + r.status + ' ' + (body.error || r.statusText));
  return body;
}

function setStatus(text, bad) {
  const el = document.getElementById('status');
  el.textContent = text;
  el.classList.toggle('bad', !!bad);
}

/* An SVG element from a tag and attributes (children appended by caller). */
function svg(tag, attrs, text) {
  const el = document.createElementNS(SVGNS, tag);
  for (const k in attrs) el.setAttribute(k, attrs[k]);
  if (text !== undefined) el.textContent = text;
  return el;
}

function title(el, text) {
  el.appendChild(svg('title', {}, text));
  return el;
}

/* log10 ticks covering [lo, hi] */
function logTicks(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(10 ** e);
  return out;
}

/* ---- devices */

function renderDevices() {
  const el = document.getElementById('devices');
  if (state.devices.length === 0) {
    el.innerHTML = '<p class="empty">No devices.</p>';
    return;
  }
  /* five columns whose cells wrap (style.css): the table fits 800 px with a
   * GPU's UUID, driver and libraries in it (issue 28) */
  let h = '<div class="table-wrap"><table class="devices"><thead><tr><th>device</th>' +
    '<th>id / stack</th><th>driver / runtime / BLAS, power mode, attune</th>' +
    '<th>tuned</th><th></th></tr></thead><tbody>';
  for (const d of state.devices) {
    const s = d.stack || {};
    const what = [d.kind, d.kind === 'cuda' ? 'cc ' + d.cc : '',
      d.sm_count ? d.sm_count + (d.kind === 'cuda' ? ' SMs' : ' cores') : '',
      d.memory_mb ? d.memory_mb + ' MB' : ''].filter((x) => x).join(' \u00b7 ');
    h += '<tr class="device' + (state.device === d.id ? ' selected' : '') + '" data-device="' +
      esc(d.id) + '"><td><b>' + esc(d.name) + '</b><br><span class="sub">' + esc(what) +
      '</span></td><td class="mono">' + esc(d.id) + '<br><span class="sub">stack ' +
      esc(s.id || '-') + '</span></td><td>' + esc([s.driver, s.runtime, s.blas]
      .filter((x) => x).join(' / ') || '-') + '<br><span class="sub">power ' +
      esc(s.power || '-') + ' \u00b7 attune ' + esc(s.attune || '-') + '</span></td><td>' +
      esc(d.shapes) + ' shapes<br><span class="sub">' + esc(d.measurements) +
      ' measurements</span></td><td>' + (d.local ? 'this host' : 'fleet') + '</td></tr>';
  }
  el.innerHTML = h + '</tbody></table></div>';
  for (const tr of el.querySelectorAll('tr.device')) {
    tr.addEventListener('click', () => selectDevice(tr.dataset.device));
  }
}

function selectDevice(id) {
  if (state.device === id) return;
  state.device = id;
  state.winners = null;
  state.winnersText = '';
  state.shape = null;
  state.results = null;
  state.resultsKey = '';
  history.replaceState(null, '', '#device=' + encodeURIComponent(id));
  renderDevices();
  refreshWinners().catch(showError);
}

/* ---- jobs: shape i of n, tactic j of m, ETA from the progress this page saw */

function jobFraction(j) {
  if (j.state === 'done') return 1;
  let f = j.done;
  if (j.state === 'running' && j.tactic_count > 0) f += j.tactic_index / j.tactic_count;
  return j.total > 0 ? Math.min(1, f / j.total) : 0;
}

function jobEta(j, frac) {
  if (j.state !== 'running') return '';
  const now = Date.now() / 1000;
  let p = state.progress[j.id];
  if (!p) p = state.progress[j.id] = { t0: now, f0: frac };
  const rate = (frac - p.f0) / (now - p.t0);
  if (!(rate > 0)) return 'estimating';
  const s = (1 - frac) / rate;
  return s < 90 ? Math.ceil(s) + ' s' : Math.ceil(s / 60) + ' min';
}

function renderJobs() {
  const el = document.getElementById('jobs');
  const jobs = state.jobs.slice(0, 12);
  if (jobs.length === 0) {
    el.innerHTML = '<p class="empty">No tuning jobs yet.</p>';
    return;
  }
  let h = '<div class="table-wrap"><table><thead><tr><th>job</th><th>device</th>' +
    '<th>state</th><th>progress</th>' +
    '<th>shape</th><th>tactic</th><th>ETA</th><th>updated</th></tr></thead><tbody>';
  for (const j of jobs) {
    const frac = jobFraction(j);
    const running = j.state === 'running';
    const shape = running ? 'shape ' + Math.min(j.done + 1, j.total) + ' of ' + j.total
      : j.done + ' of ' + j.total + ' shapes';
    let tactic = running && j.tactic_count ? 'tactic ' + Math.min(j.tactic_index + 1,
      j.tactic_count) + ' of ' + j.tactic_count : '';
    if (running && j.tactic) tactic += ': ' + j.tactic;
    const dev = state.devices.find((d) => d.id === j.device);
    h += '<tr class="job ' + esc(j.state) + '" data-job="' + esc(j.id) + '" data-state="' +
      esc(j.state) + '" data-done="' + esc(j.done) + '" data-total="' + esc(j.total) +
      '" data-progress="' + frac.toFixed(4) + '" data-kind="' + esc(j.kind || 'tune') +
      '"><td>' + esc(j.id) +
      /* tune on miss (issue 28 item 2): a lookup's shape, not a submitted job */
      (j.kind === 'miss' ? ' <span class="kind" title="tuned because a lookup missed it">miss' +
        '</span>' : '') + '</td><td>' +
      esc(dev ? dev.name : j.device) + '</td><td>' + esc(j.state) +
      (j.cancel_requested ? ' (cancel requested)' : '') + (j.error ? ': ' + esc(j.error) : '') +
      '</td><td><div class="bar"><div data-frac="' + frac.toFixed(4) +
      '"></div></div></td><td class="progress">' + esc(shape) + (running && j.shape
      ? ' <span class="mono">' + esc(j.shape) + '</span>' : '') + '</td><td class="tactic">' +
      esc(tactic) +
      '</td><td>' + esc(jobEta(j, frac)) + '</td><td>' +
      esc(new Date(j.updated_at * 1000).toLocaleTimeString()) + '</td></tr>';
  }
  el.innerHTML = h + '</tbody></table></div>';
  /* widths through the CSSOM: the CSP refuses style="" attributes */
  for (const b of el.querySelectorAll('.bar div')) {
    b.style.width = (100 * Number(b.dataset.frac)).toFixed(1) + '%';
  }
}

/* ---- pins: force / exclude rules (issue 28 item 1) */

function pinWhere(p) {
  if (p.device) {
    const dev = state.devices.find((d) => d.id === p.device);
    return dev ? dev.name + ' (' + p.device + ')' : p.device;
  }
  return p.model ? 'every ' + p.model : 'every device';
}

function renderPins() {
  const el = document.getElementById('pins');
  if (state.pins.length === 0) {
    el.innerHTML = '<p class="empty">No pins: every answer comes from the measurements.</p>';
    return;
  }
  let h = '<div class="table-wrap"><table><thead><tr><th>pin</th><th>action</th>' +
    '<th>tactic</th><th>shape</th>' +
    '<th>where</th><th>reason</th><th>author</th><th>since</th></tr></thead><tbody>';
  for (const p of state.pins) {
    h += '<tr class="pin ' + esc(p.action) + '" data-pin="' + esc(p.id) + '" data-action="' +
      esc(p.action) + '" data-tactic="' + esc(p.tactic) + '" data-shape="' + esc(p.shape) +
      '"><td>' + esc(p.id) + '</td><td>' + esc(p.action) + '</td><td class="mono">' +
      esc(p.tactic) + (p.action === 'exclude' ? ' (and under it)' : '') +
      '</td><td class="mono">' + esc(p.shape || 'every shape') + '</td><td>' +
      esc(pinWhere(p)) + '</td><td>' + esc(p.reason) + '</td><td>' + esc(p.author) +
      '</td><td>' + esc(new Date(p.created_at * 1000).toLocaleString()) + '</td></tr>';
  }
  el.innerHTML = h + '</tbody></table></div>';
}

/* Every second (a few rules, from memory): a pin written or removed shows
 * at once, and the shape shown says what lookups answer under it. */
async function refreshPins() {
  const p = await api('/v1/pins');
  const text = JSON.stringify(p.pins);
  if (text === state.pinsText) return;
  state.pins = p.pins;
  state.pinsText = text;
  renderPins();
  if (state.results) await refreshResults(true);
}

/* ---- the winner map */

function panelKey(w) {
  return w.dtype + ' d=' + w.d + ' g=' + w.g + (w.causal ? ' causal' : ' non-causal');
}

function renderLegend(rows) {
  const seen = new Set();
  for (const w of rows) if (w.winner) seen.add(w.winner.variant);
  const el = document.getElementById('legend');
  el.innerHTML = '';
  for (const v of [...seen].sort()) {
    const s = document.createElement('span');
    s.className = 'swatch';
    const box = document.createElement('i');
    box.style.background = variantColor(v);
    s.appendChild(box);
    s.appendChild(document.createTextNode(v));
    el.appendChild(s);
  }
  if (rows.some((w) => w.stale)) {
    const s = document.createElement('span');
    s.className = 'swatch';
    s.innerHTML = '<i class="stale-box"></i>stale (measured on another stack)';
    el.appendChild(s);
  }
  if (rows.some((w) => !w.winner)) {
    const s = document.createElement('span');
    s.className = 'swatch';
    s.innerHTML = '<i class="none-box"></i>no accurate tactic';
    el.appendChild(s);
  }
}

function drawPanel(name, rows) {
  const sqs = [...new Set(rows.map((w) => w.sq))].sort((a, b) => a - b);
  const skvs = [...new Set(rows.map((w) => w.skv))].sort((a, b) => a - b);
  /* shapes sharing a (sq, skv) cell (other b or hq) split it: widen it */
  let per = 1;
  for (const w of rows) {
    per = Math.max(per, rows.filter((x) => x.sq === w.sq && x.skv === w.skv).length);
  }
  const cw = 126 * per, ch = 46, left = 64, top = 34;
  const width = left + cw * skvs.length + 8, height = top + ch * sqs.length + 8;
  const root = svg('svg', { width, height, class: 'panel', 'data-panel': name });
  root.appendChild(svg('text', { x: left, y: 12, class: 'axis-title' }, 'skv (keys) \u2192'));
  root.appendChild(svg('text', { x: 2, y: 12, class: 'axis-title' }, 'sq \u2193'));
  skvs.forEach((v, i) => root.appendChild(svg('text', {
    x: left + cw * i + cw / 2, y: top - 6, class: 'tick', 'text-anchor': 'middle' }, v)));
  sqs.forEach((v, i) => root.appendChild(svg('text', {
    x: left - 6, y: top + ch * i + ch / 2 + 4, class: 'tick', 'text-anchor': 'end' }, v)));
  for (let i = 0; i < sqs.length; i++) {
    for (let k = 0; k < skvs.length; k++) {
      const here = rows.filter((w) => w.sq === sqs[i] && w.skv === skvs[k]);
      here.forEach((w, n) => {
        const sw = cw / here.length;
        const x = left + cw * k + sw * n, y = top + ch * i;
        const g = svg('g', { class: 'cell' + (w.stale ? ' stale' : '') +
          (w.winner ? '' : ' none') + (state.shape === w.shape ? ' selected' : ''),
        'data-shape': w.shape, 'data-tactic': w.winner ? w.winner.tactic : '',
        'data-stale': w.stale ? '1' : '0', tabindex: 0 });
        g.appendChild(svg('rect', { x: x + 1, y: y + 1, width: sw - 2, height: ch - 2, rx: 3,
          fill: w.winner ? variantColor(w.winner.variant) : '#ccc' }));
        const lines = w.winner ? [fmtUs(w.winner.time_us_total), w.runner_up
          ? fmtX(w.margin) + ' vs ' + w.runner_up.variant : 'only tactic'] : ['none', ''];
        g.appendChild(svg('text', { x: x + sw / 2, y: y + 19, 'text-anchor': 'middle',
          class: 'cell-time' }, lines[0]));
        g.appendChild(svg('text', { x: x + sw / 2, y: y + 35, 'text-anchor': 'middle',
          class: 'cell-margin' }, (w.stale ? 'stale ' : '') + lines[1]));
        let tip = w.shape + '\n';
        tip += w.winner ? 'winner ' + w.winner.tactic + ': ' + fmtUs(w.winner.time_us_total) +
          ', rel_err ' + fmtErr(w.winner.rel_err) : 'no tactic within the accuracy bounds';
        if (w.runner_up) {
          tip += '\nrunner-up ' + w.runner_up.tactic + ': ' + fmtUs(w.runner_up.time_us_total);
        }
        if (w.stale) tip += '\nstale: measured on stack ' + w.stack;
        if (here.length > 1) tip += '\n(b=' + w.b + ', hq=' + w.hq + ')';
        title(g, tip);
        g.addEventListener('click', () => selectShape(w.shape));
        g.addEventListener('keydown', (e) => { if (e.key === 'Enter') selectShape(w.shape); });
        root.appendChild(g);
      });
    }
  }
  return root;
}

function renderMap() {
  const el = document.getElementById('map');
  const w = state.winners;
  el.innerHTML = '';
  if (!w) return;
  document.getElementById('map-title').textContent = '\u2014 ' + w.name + ', stack ' + w.stack +
    (w.variants ? ', variants ' + w.variants.replace(/,/g, ', ') : '');
  renderLegend(w.winners);
  if (w.winners.length === 0) {
    el.innerHTML = '<p class="empty">Nothing tuned on this device yet: winners appear here ' +
      'as soon as a job has measured a shape.</p>';
    return;
  }
  const panels = new Map();
  for (const row of w.winners) {
    const k = panelKey(row);
    if (!panels.has(k)) panels.set(k, []);
    panels.get(k).push(row);
  }
  for (const [name, rows] of panels) {
    const fig = document.createElement('figure');
    const cap = document.createElement('figcaption');
    cap.textContent = name;
    fig.appendChild(cap);
    fig.appendChild(drawPanel(name, rows));
    el.appendChild(fig);
  }
}

/* ---- one shape: every tactic's time and error */

function selectShape(key) {
  state.shape = key;
  for (const c of document.querySelectorAll('#map .cell')) {
    c.classList.toggle('selected', c.dataset.shape === key);
  }
  refreshResults(true).catch(showError);
}

function winnerRow() {
  if (!state.winners) return null;
  return state.winners.winners.find((w) => w.shape === state.shape) || null;
}

function sortedRows(res, cur) {
  const rank = (m) => (m.stack === cur ? 0 : 1);
  return res.measurements.slice().sort((a, b) => {
    const ta = totalTime(a), tb = totalTime(b);
    const fa = ta === null ? Infinity : ta, fb = tb === null ? Infinity : tb;
    return rank(a) - rank(b) || (a.stack < b.stack ? -1 : a.stack > b.stack) || fa - fb ||
      (a.tactic < b.tactic ? -1 : 1);
  });
}

function drawBars(rows, win, res, wrow) {
  const rowH = 22, top = 30, labelW = 250, timeW = 340, gap = 44, errW = 260;
  const height = top + rowH * rows.length + 24;
  const root = svg('svg', { width: labelW + timeW + gap + errW + 90, height, class: 'bars' });
  let tmax = 0, emin = Infinity, emax = 0;
  for (const m of rows) {
    for (const t of [m.time_us, m.time_us_max, m.time_us_copies]) {
      if (t !== null && isFinite(t)) tmax = Math.max(tmax, t);
    }
    if (m.rel_err !== null && m.rel_err > 0) {
      emin = Math.min(emin, m.rel_err);
      emax = Math.max(emax, m.rel_err);
    }
  }
  const bound = res.max_rel_err;
  const okErrs = rows.filter((m) => m.status === 'ok' && m.stack === res.stack &&
    m.rel_err !== null).map((m) => m.rel_err);
  const best = okErrs.length ? Math.min(...okErrs) : null;
  const ratioBound = best > 0 ? best * res.max_ratio : null;
  const elo = 10 ** Math.floor(Math.log10(Math.min(emin, bound) / 2));
  const ehi = 10 ** Math.ceil(Math.log10(Math.max(emax, bound, ratioBound || 0) * 2));
  const tx = (t) => labelW + (tmax > 0 ? (t / tmax) * timeW : 0);
  const ex = (e) => labelW + timeW + gap +
    (Math.log10(e) - Math.log10(elo)) / (Math.log10(ehi) - Math.log10(elo)) * errW;
  root.appendChild(svg('text', { x: labelW, y: 12, class: 'axis-title' },
    'time per call (bar: kernel median, thin bar: with pad copies, whiskers: min-max)'));
  root.appendChild(svg('text', { x: labelW + timeW + gap, y: 24, class: 'axis-title' },
    'relative error (log)'));
  /* time axis ticks: 0, tmax/2, tmax */
  for (const f of [0, 0.5, 1]) {
    const x = tx(f * tmax);
    root.appendChild(svg('line', { x1: x, x2: x, y1: top - 4, y2: height - 20, class: 'grid' }));
    root.appendChild(svg('text', { x, y: height - 6, class: 'tick', 'text-anchor': 'middle' },
      fmtUs(f * tmax)));
  }
  for (const t of logTicks(elo, ehi)) {
    if (t < elo || t > ehi) continue;
    const x = ex(t);
    root.appendChild(svg('line', { x1: x, x2: x, y1: top - 4, y2: height - 20, class: 'grid' }));
    root.appendChild(svg('text', { x, y: height - 6, class: 'tick', 'text-anchor': 'middle' },
      '1e' + Math.round(Math.log10(t))));
  }
  const bx = ex(bound);
  root.appendChild(title(svg('line', { x1: bx, x2: bx, y1: top - 8, y2: height - 20,
    class: 'bound' }), 'accuracy bound for ' + res.shape.split('.')[6] + ': ' + fmtErr(bound)));
  root.appendChild(svg('text', { x: bx + 3, y: top - 2, class: 'bound-label' },
    'bound ' + fmtErr(bound)));
  if (ratioBound && ratioBound < ehi) {
    const rx = ex(ratioBound);
    root.appendChild(title(svg('line', { x1: rx, x2: rx, y1: top - 8, y2: height - 20,
      class: 'ratio-bound' }), res.max_ratio + 'x the most accurate tactic: ' +
      fmtErr(ratioBound)));
  }
  rows.forEach((m, i) => {
    const y = top + rowH * i;
    const isWin = win && m.tactic === win.tactic && m.stack === win.stack;
    const stale = m.stack !== res.stack;
    const g = svg('g', { class: 'row ' + m.status + (isWin ? ' winner' : '') +
      (stale ? ' stale' : '') + (m.noisy ? ' noisy' : ''), 'data-tactic': m.tactic,
    'data-status': m.status,
    'data-stack': m.stack });
    if (i % 2 === 0) {
      g.appendChild(svg('rect', { x: 0, y, width: labelW + timeW + gap + errW + 20,
        height: rowH, class: 'stripe' }));
    }
    let label = (isWin ? '\u2605 ' : '') + m.tactic;
    if (m.status !== 'ok') label += '  [' + m.status + ']';
    if (m.noisy) label += '  [noisy]'; /* never an answer until measured again */
    const dev = state.devices.find((d) => d.id === state.device);
    const power = dev && dev.stack ? dev.stack.power || '' : '';
    if (stale && m.power !== undefined && (m.power || '') !== power) {
      label += '  [power mode ' + (m.power || 'unset') + ']'; /* never served in this mode */
    } else if (stale) {
      label += '  [stale]';
    }
    g.appendChild(svg('text', { x: 4, y: y + 15, class: 'label' }, label));
    const color = variantColor(m.variant);
    if (m.time_us !== null && isFinite(m.time_us)) {
      g.appendChild(svg('rect', { x: labelW, y: y + 4, width: Math.max(1, tx(m.time_us) - labelW),
        height: 9, fill: color, class: 'bar-kernel' }));
      if (m.time_us_copies !== null && isFinite(m.time_us_copies)) {
        g.appendChild(svg('rect', { x: labelW, y: y + 14, height: 4, fill: color,
          width: Math.max(1, tx(m.time_us_copies) - labelW), class: 'bar-copies' }));
      }
      if (m.time_us_min !== null && m.time_us_max !== null) {
        const x1 = tx(m.time_us_min), x2 = tx(m.time_us_max), ym = y + 8.5;
        g.appendChild(svg('line', { x1, x2, y1: ym, y2: ym, class: 'whisker' }));
        g.appendChild(svg('line', { x1, x2: x1, y1: ym - 4, y2: ym + 4, class: 'whisker' }));
        g.appendChild(svg('line', { x1: x2, x2, y1: ym - 4, y2: ym + 4, class: 'whisker' }));
      }
    } else {
      g.appendChild(svg('text', { x: labelW + 4, y: y + 15, class: 'note' },
        m.note || 'no time'));
    }
    if (m.rel_err !== null && m.rel_err > 0) {
      g.appendChild(svg('circle', { cx: ex(m.rel_err), cy: y + 11, r: 5, fill: color,
        class: 'err-dot' }));
    }
    title(g, m.tactic + ' (' + m.status + ', stack ' + m.stack + ')\nkernel ' +
      fmtUs(m.time_us) + ' [' + fmtUs(m.time_us_min) + ' .. ' + fmtUs(m.time_us_max) + '], ' +
      'with copies ' + fmtUs(m.time_us_copies) + ', n=' + m.n + '\nrel_err ' +
      fmtErr(m.rel_err) + ', max_abs_err ' + fmtErr(m.max_abs_err) +
      (m.note ? '\n' + m.note : ''));
    root.appendChild(g);
  });
  return root;
}

function drawScatter(rows, win, res) {
  const pts = rows.filter((m) => totalTime(m) > 0 && m.rel_err > 0);
  const W = 520, H = 300, L = 64, B = 40, T = 16, R = 16;
  const root = svg('svg', { width: W, height: H, class: 'scatter' });
  if (pts.length === 0) return root;
  const ts = pts.map(totalTime), es = pts.map((m) => m.rel_err);
  const tlo = Math.min(...ts) / 1.3, thi = Math.max(...ts) * 1.3;
  const elo = Math.min(...es, res.max_rel_err) / 3, ehi = Math.max(...es, res.max_rel_err) * 3;
  const X = (t) => L + (Math.log10(t) - Math.log10(tlo)) / (Math.log10(thi) -
    Math.log10(tlo)) * (W - L - R);
  const Y = (e) => H - B - (Math.log10(e) - Math.log10(elo)) / (Math.log10(ehi) -
    Math.log10(elo)) * (H - B - T);
  root.appendChild(svg('rect', { x: L, y: T, width: W - L - R, height: H - B - T,
    class: 'frame' }));
  for (const t of logTicks(tlo, thi)) {
    if (t < tlo || t > thi) continue;
    root.appendChild(svg('line', { x1: X(t), x2: X(t), y1: T, y2: H - B, class: 'grid' }));
    root.appendChild(svg('text', { x: X(t), y: H - B + 14, class: 'tick',
      'text-anchor': 'middle' }, fmtUs(t)));
  }
  for (const e of logTicks(elo, ehi)) {
    if (e < elo || e > ehi) continue;
    root.appendChild(svg('line', { x1: L, x2: W - R, y1: Y(e), y2: Y(e), class: 'grid' }));
    root.appendChild(svg('text', { x: L - 4, y: Y(e) + 4, class: 'tick', 'text-anchor': 'end' },
      '1e' + Math.round(Math.log10(e))));
  }
  const by = Y(res.max_rel_err);
  root.appendChild(svg('line', { x1: L, x2: W - R, y1: by, y2: by, class: 'bound' }));
  root.appendChild(svg('text', { x: W - R - 4, y: by - 4, class: 'bound-label',
    'text-anchor': 'end' }, 'accuracy bound'));
  root.appendChild(svg('text', { x: L + (W - L - R) / 2, y: H - 6, class: 'axis-title',
    'text-anchor': 'middle' }, 'time per call, with pad copies (log)'));
  root.appendChild(svg('text', { x: 12, y: T + (H - B - T) / 2, class: 'axis-title',
    'text-anchor': 'middle', transform: 'rotate(-90 12 ' + (T + (H - B - T) / 2) + ')' },
  'relative error (log)'));
  for (const m of pts) {
    const isWin = win && m.tactic === win.tactic && m.stack === win.stack;
    const stale = m.stack !== res.stack;
    const c = svg('circle', { cx: X(totalTime(m)), cy: Y(m.rel_err), r: isWin ? 7 : 5,
      fill: stale ? 'none' : variantColor(m.variant), stroke: isWin ? '#000'
        : variantColor(m.variant), 'stroke-width': isWin ? 2.5 : 1.5,
      class: 'pt ' + m.status, 'data-tactic': m.tactic });
    title(c, m.tactic + (stale ? ' (stale, stack ' + m.stack + ')' : '') + ': ' +
      fmtUs(totalTime(m)) + ', rel_err ' + fmtErr(m.rel_err) + ' [' + m.status + ']');
    root.appendChild(c);
  }
  return root;
}

function renderShape() {
  const el = document.getElementById('shape');
  const res = state.results;
  el.innerHTML = '';
  document.getElementById('shape-title').textContent = state.shape ? '\u2014 ' + state.shape : '';
  if (!state.shape || !res) {
    el.innerHTML = '<p class="empty">Click a cell of the winner map.</p>';
    return;
  }
  const wrow = winnerRow();
  const win = wrow && wrow.winner;
  const rows = sortedRows(res, res.stack);
  const info = document.createElement('p');
  info.className = 'shape-info';
  info.setAttribute('data-shape', res.shape);
  info.setAttribute('data-tactic', win ? win.tactic : '');
  let txt = win ? 'Winner ' + win.tactic + ' at ' + fmtUs(win.time_us_total) + ', rel_err ' +
    fmtErr(win.rel_err) : 'No tactic within the accuracy bounds.';
  if (wrow && wrow.runner_up) {
    txt += '; runner-up ' + wrow.runner_up.tactic + ' at ' +
      fmtUs(wrow.runner_up.time_us_total) + ' (' + fmtX(wrow.margin) + ')';
  }
  if (wrow && wrow.stale) txt += '. Stale: measured on stack ' + wrow.stack + ', not this one.';
  const bad = rows.filter((m) => m.status !== 'ok').length;
  txt += '. ' + rows.length + ' rows, ' + bad + ' not ok (inaccurate, failed or unsupported).';
  info.textContent = txt;
  el.appendChild(info);
  const a = state.answer;
  if (a && (a.error || a.source === 'pinned' || a.pins_excluding > 0)) {
    const p = document.createElement('p');
    p.className = 'shape-pin';
    p.setAttribute('data-answer', a.tactic || '');
    p.setAttribute('data-source', a.source || '');
    p.textContent = a.error ? 'Pins leave no tactic to answer: ' + a.error
      : a.source === 'pinned' ? 'Pinned: lookups answer ' + a.tactic + ' (pin ' + a.pin_id +
        ', ' + a.pin_reason + ', by ' + a.pin_author + ').'
      : a.pins_excluding + ' exclusion pin(s) apply: lookups answer ' + a.tactic + ' (' +
        a.source + ').';
    el.appendChild(p);
  }
  const wrap = document.createElement('div');
  wrap.className = 'charts';
  const f1 = document.createElement('figure');
  f1.innerHTML = '<figcaption>Every tactic: time and error</figcaption>';
  f1.appendChild(drawBars(rows, win, res, wrow));
  const f2 = document.createElement('figure');
  f2.innerHTML = '<figcaption>Time against error (ringed: the winner; hollow: stale)' +
    '</figcaption>';
  f2.appendChild(drawScatter(rows, win, res));
  wrap.appendChild(f1);
  wrap.appendChild(f2);
  el.appendChild(wrap);
}

/* ---- stack changes: per shape, the winner of the previous stack against now */

function renderStacks() {
  const el = document.getElementById('stacks');
  const w = state.winners;
  if (!w) {
    el.innerHTML = '';
    return;
  }
  const changed = w.winners.filter((r) => r.previous && r.winner);
  const stale = w.winners.filter((r) => r.stale);
  if (changed.length === 0 && stale.length === 0) {
    el.innerHTML = '<p class="empty">Every shape of this device was measured on one stack ' +
      'only: nothing to compare.</p>';
    return;
  }
  let h = '';
  if (changed.length) {
    h += '<div class="table-wrap"><table class="stack-changes"><thead><tr><th>shape</th>' +
      '<th>previous stack</th>' +
      '<th>its winner</th><th>time</th><th>now (stack)</th><th>winner</th><th>time</th>' +
      '<th>time now / before</th><th>error now / before</th></tr></thead><tbody>';
    for (const r of changed) {
      const p = r.previous, c = r.winner;
      const tr = totalTime(c) / totalTime(p), er = c.rel_err / p.rel_err;
      h += '<tr data-shape="' + esc(r.shape) + '" class="' + (p.tactic !== c.tactic
        ? 'changed' : '') + '"><td class="mono">' + esc(r.shape) + '</td><td class="mono">' +
        esc(p.stack) + '</td><td>' + esc(p.tactic) + '</td><td>' + fmtUs(totalTime(p)) +
        '</td><td class="mono">' + esc(r.stack) + '</td><td>' + esc(c.tactic) +
        (p.tactic !== c.tactic ? ' <b>(changed)</b>' : '') + '</td><td>' +
        fmtUs(totalTime(c)) + '</td><td class="' + (tr > 1.05 ? 'worse' : tr < 0.95
        ? 'better' : '') + '">' + fmtX(tr) + '</td><td class="' + (er > 2 ? 'worse' : '') +
        '">' + fmtX(er) + '</td></tr>';
    }
    h += '</tbody></table></div>';
  }
  if (stale.length) {
    h += '<p>Not re-measured on the current stack ' + esc(w.stack) +
      ' (answers come from an older one until it is): ' +
      stale.map((r) => '<span class="mono">' + esc(r.shape) + '</span> (' + esc(r.stack) +
      ')').join(', ') + '</p>';
  }
  el.innerHTML = h;
}

/* ---- polling */

function showError(e) {
  setStatus('attuned: ' + (e && e.message ? e.message : e), true);
}

/* ---- the variants filter: the winners a runtime that runs only some
 * variants gets (GET /v1/winners?variants=, as /v1/tactic?variants=) */

/* The checked variants as the API's list; '' when all are (no filter). */
function variantsParam() {
  const on = VARIANTS.filter((v) => !state.variantsOff.has(v));
  return on.length === VARIANTS.length ? '' : on.join(',');
}

function renderVariants() {
  const el = document.getElementById('variants');
  el.innerHTML = 'Variants this runtime can run: ' + VARIANTS.map((v) =>
    '<label><input type="checkbox" data-variant="' + v + '"' +
    (state.variantsOff.has(v) ? '' : ' checked') + '> ' + v + '</label>').join(' ');
  for (const box of el.querySelectorAll('input')) {
    box.addEventListener('change', () => {
      if (box.checked) state.variantsOff.delete(box.dataset.variant);
      else state.variantsOff.add(box.dataset.variant);
      if (!variantsParam() && state.variantsOff.size) { /* none checked: all again */
        state.variantsOff.clear();
        renderVariants();
      }
      state.winnersText = '';
      refreshWinners().catch(showError);
    });
  }
}

async function refreshWinners() {
  if (!state.device) return;
  const dev = state.device;
  const vs = variantsParam();
  const w = await api('/v1/winners?device=' + encodeURIComponent(dev) +
    (vs ? '&variants=' + encodeURIComponent(vs) : ''));
  if (dev !== state.device || vs !== variantsParam()) return;
  const text = JSON.stringify(w);
  if (text !== state.winnersText) {
    state.winners = w;
    state.winnersText = text;
    if (!state.shape && w.winners.length) state.shape = w.winners[0].shape;
    renderMap();
    renderStacks();
    await refreshResults(false);
  }
  document.body.dataset.winnersDevice = dev;
  document.body.dataset.winnersVariants = vs;
  document.body.dataset.winnersShapes = String(w.winners.length);
}

async function refreshResults(force) {
  if (!state.shape || !state.device) {
    renderShape();
    return;
  }
  const key = state.device + ' ' + state.shape;
  const res = await api('/v1/results?device=' + encodeURIComponent(state.device) +
    '&shape=' + encodeURIComponent(state.shape));
  /* what a lookup answers now: pins may differ from the measured winner */
  const answer = state.pins.length === 0 ? null : await api('/v1/tactic?device=' +
    encodeURIComponent(state.device) + '&shape=' + encodeURIComponent(state.shape))
    .catch((e) => ({ error: String(e.message || e) }));
  const text = key + JSON.stringify(res) + JSON.stringify(winnerRow()) + JSON.stringify(answer);
  if (force || text !== state.resultsKey) {
    state.results = res;
    state.answer = answer;
    state.resultsKey = text;
    renderShape();
  }
}

async function refreshDevices() {
  const d = await api('/v1/devices');
  state.devices = d.devices;
  if (!state.device || !state.devices.some((x) => x.id === state.device)) {
    const m = /device=([^&]+)/.exec(location.hash);
    const want = m ? decodeURIComponent(m[1]) : null;
    const pick = state.devices.find((x) => x.id === want) ||
      state.devices.find((x) => x.local && x.shapes > 0) ||
      state.devices.find((x) => x.shapes > 0) || state.devices[0];
    state.device = pick ? pick.id : null;
  }
  renderDevices();
}

async function tick() {
  try {
    const jobs = await api('/v1/jobs?limit=20');
    state.jobs = jobs.jobs;
    const done = state.jobs.map((j) => j.id + ':' + j.state + ':' + j.done + ':' +
      (j.tactic_index || 0)).join(',');
    const moved = done !== state.lastDone;
    state.lastDone = done;
    renderJobs();
    await refreshPins();
    /* winners are read from the database: at each step of a job, else
     * every 5 s (writes by `attune tune --db` and imports) */
    if (state.ticks % 5 === 0 || moved) {
      await refreshDevices();
      await refreshWinners();
    }
    setStatus('live, updated ' + new Date().toLocaleTimeString(), false);
    document.body.dataset.ready = '1';
  } catch (e) {
    showError(e);
  }
  state.ticks++;
  setTimeout(tick, 1000);
}

/* The variants' names and colours from the table (a variant the page
 * has not read gets a colour from its name: variantColor). */
async function loadVariants() {
  const t = await api('/v1/variants');
  VARIANTS.length = 0;
  for (const v of t.variants || []) {
    VARIANTS.push(v.name);
    VARIANT_COLORS[v.name] = v.color;
  }
}

async function start() {
  try {
    await loadVariants();
  } catch (e) {
    showError(e);
  }
  renderVariants();
  try {
    const h = await api('/v1/health');
    document.getElementById('version').textContent = 'attuned ' + h.version;
  } catch (e) {
    showError(e);
  }
  tick();
}

start();
