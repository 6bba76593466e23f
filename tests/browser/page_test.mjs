// page_test.mjs -- the dashboard in headless Chromium (Debian's), driven by
// playwright-core. Run by tests/it_page_browser.py, which starts attuned on
// a small tuned database and passes:
//   ATTUNE_URL       the daemon's base URL
//   ATTUNE_TOKEN     its bearer token (to queue one tuning job through the API)
//   ATTUNE_SHOTS     folder for the screenshots (under the build folder)
//   ATTUNE_JOB       JSON body of the POST /v1/tune to queue
//   CHROMIUM         the browser binary (default /usr/bin/chromium)
// Checks: every shape of GET /v1/winners is drawn once with that winner
// (tactic, variant color, time); the shape view marks the same winner; a
// running job's progress moves on the page; the job's shapes appear with
// the API's winners within seconds of it finishing; no console error, page
// error or failed request, and no request but GET. Prints "N passed, N failed"; exit 1 on failure.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const URL_ = process.env.ATTUNE_URL;
const SHOTS = process.env.ATTUNE_SHOTS;
const results = { passed: 0, failed: 0 };

function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  results[cond ? 'passed' : 'failed']++;
  return cond;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function api(p, opts) {
  const r = await fetch(URL_ + p, opts);
  return { status: r.status, body: await r.json() };
}

// What the page must show for one winners row, read back from the DOM.
async function cellsOf(page) {
  return page.$$eval('#map g.cell', (cells) => cells.map((c) => ({
    shape: c.dataset.shape,
    tactic: c.dataset.tactic,
    stale: c.dataset.stale === '1',
    fill: c.querySelector('rect').getAttribute('fill'),
    time: c.querySelector('.cell-time').textContent,
  })));
}

function parseTime(s) {
  const m = /^([0-9.]+) (us|ms)$/.exec(s);
  return m ? parseFloat(m[1]) * (m[2] === 'ms' ? 1000 : 1) : NaN;
}

async function checkWinners(page, label, variants) {
  const { body: w } = await api('/v1/winners?device=' + encodeURIComponent(w0.device) +
    (variants ? '&variants=' + variants : ''));
  const cells = await cellsOf(page);
  const legend = await page.$$eval('#legend .swatch', (s) => s.map((e) => ({
    name: e.textContent, color: e.querySelector('i').style.background })));
  check(cells.length === w.winners.length,
    `${label}: ${cells.length} cells drawn for ${w.winners.length} shapes of /v1/winners`);
  let same = 0;
  for (const row of w.winners) {
    const c = cells.filter((x) => x.shape === row.shape);
    const want = row.winner ? row.winner.tactic : '';
    if (c.length !== 1 || c[0].tactic !== want || c[0].stale !== row.stale) {
      check(false, `${label}: ${row.shape} shows ${JSON.stringify(c.map((x) => x.tactic))}, ` +
        `API says ${want} (stale ${row.stale})`);
      continue;
    }
    if (row.winner) {
      // the time label is the winner's competing time, to its 3 printed digits
      const t = parseTime(c[0].time), wt = row.winner.time_us_total;
      if (!(Math.abs(t - wt) <= 0.01 * wt + 0.01)) {
        check(false, `${label}: ${row.shape} labelled ${c[0].time}, API time ${wt}`);
        continue;
      }
      // the cell's color is its variant's in the legend
      const sw = legend.find((s) => s.name === row.winner.variant);
      const probe = await page.evaluate(([a]) => {
        const e = document.createElement('i');
        e.style.background = a;
        return e.style.background;
      }, [c[0].fill]);
      if (!sw || sw.color !== probe) {
        check(false, `${label}: ${row.shape}: color ${c[0].fill} is not ${row.winner.variant}'s`);
        continue;
      }
    }
    same++;
  }
  check(same === w.winners.length, `${label}: every shape shows the winner of /v1/winners ` +
    `(${same}/${w.winners.length})`);
  return w;
}

let w0;

// At 800 px (issue 28), with a GPU of another host listed beside this
// host's devices (its UUID, driver, cuBLAS+cuDNN and power mode are the
// widest cells a Devices table holds), the table fits the window: no cell
// right of it, nothing to scroll to inside its box or on the page's width.
async function checkNarrow(ctx) {
  const narrow = await ctx.newPage();
  try {
    await narrow.setViewportSize({ width: 800, height: 900 });
    const real = (await api('/v1/devices')).body;
    const h200 = {
      id: 'GPU-5b79e132-7ecd-a1eb-8791-4969760a01e9', index: -1, name: 'NVIDIA H200',
      kind: 'cuda', cc: '9.0', sm_count: 132, memory_mb: 143155, clock_mhz: 1980,
      mem_clock_mhz: 3201, local: false, shapes: 0, measurements: 0,
      stack: { id: '4ba486189c247424', driver: '580.159.04/cuda-13.0', runtime: '13.0',
        blas: 'cublas-13.1.0+cudnn-9.19.0', attune: '0.1.0', kernels: 'e65143f54a048ca7',
        power: 'pl-700W' },
    };
    await narrow.route('**/v1/devices', (r) => r.fulfill({ status: 200,
      contentType: 'application/json',
      body: JSON.stringify({ devices: real.devices.concat([h200]) }) }));
    await narrow.goto(URL_ + '/', { waitUntil: 'load' });
    await narrow.waitForFunction((n) => document.body.dataset.ready === '1' &&
      document.querySelectorAll('tr.device').length === n, real.devices.length + 1,
    { timeout: 15000 });
    const fit = await narrow.evaluate(() => {
      const box = document.querySelector('#devices .table-wrap');
      const t = document.querySelector('#devices table').getBoundingClientRect();
      const right = Math.max(...[...document.querySelectorAll('#devices th, #devices td')]
        .map((c) => c.getBoundingClientRect().right));
      return { table: t.right, cells: right, inner: box.scrollWidth - box.clientWidth,
        page: document.documentElement.scrollWidth, width: window.innerWidth };
    });
    check(fit.table <= fit.width && fit.cells <= fit.width && fit.inner <= 0 &&
      fit.page <= fit.width, 'at 800 px the Devices table fits: right edge ' +
      `${fit.table.toFixed(0)}, cells to ${fit.cells.toFixed(0)}, page ${fit.page} wide`);
    await narrow.screenshot({ path: path.join(SHOTS, 'dashboard-800.png'), fullPage: true });
  } finally {
    await narrow.close();
  }
}

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'attune-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push('console: ' + m.text());
    });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('requestfailed', (r) => problems.push('request failed: ' + r.url()));
    page.on('request', (r) => {
      if (r.method() !== 'GET') problems.push('the page sent ' + r.method() + ' ' + r.url());
    });
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push('HTTP ' + r.status() + ': ' + r.url());
    });

    w0 = (await api('/v1/winners?device=cpu')).body;
    await page.goto(URL_ + '/', { waitUntil: 'load' });
    await page.waitForFunction((n) => document.body.dataset.ready === '1' &&
      document.querySelectorAll('#map g.cell').length === n, w0.winners.length,
    { timeout: 15000 });
    check(true, 'the page loads and draws the winner map');
    const devices = await page.$$eval('tr.device', (r) => r.map((e) => e.dataset.device));
    check(devices.includes(w0.device), 'the device list names ' + w0.device);
    await checkWinners(page, 'tuned database');

    // the stack-change view lists the shape measured on two stacks
    const changed = await page.$$eval('#stacks tr[data-shape]', (r) => r.map((e) =>
      e.dataset.shape));
    const want = w0.winners.filter((r) => r.previous && r.winner).map((r) => r.shape);
    check(want.length > 0 && JSON.stringify(changed) === JSON.stringify(want),
      'stack changes list ' + JSON.stringify(want));

    // one shape: the winner marked in the bars equals the API's
    const pick = w0.winners.find((r) => r.winner && r.runner_up);
    await page.click(`#map g.cell[data-shape="${pick.shape}"]`);
    await page.waitForFunction((k) => {
      const e = document.querySelector('.shape-info');
      return e && e.dataset.shape === k;
    }, pick.shape, { timeout: 10000 });
    const info = await page.$eval('.shape-info', (e) => e.dataset.tactic);
    const starred = await page.$$eval('svg.bars g.row.winner', (r) => r.map((e) =>
      e.dataset.tactic));
    check(info === pick.winner.tactic && starred.length === 1 &&
      starred[0] === pick.winner.tactic, `shape view of ${pick.shape} marks ${info}`);
    const { body: res } = await api('/v1/results?device=cpu&shape=' + pick.shape);
    const nrows = await page.$$eval('svg.bars g.row', (r) => r.length);
    check(nrows === res.measurements.length, `every tactic drawn (${nrows})`);
    const npts = await page.$$eval('svg.scatter circle', (r) => r.length);
    check(npts > 1, `time/error scatter has ${npts} points`);
    const bound = await page.$$('svg.bars line.bound');
    check(bound.length === 1, 'the accuracy bound is drawn');
    await page.screenshot({ path: path.join(SHOTS, 'dashboard.png'), fullPage: true });

    // the variants and their colours are the table's (GET /v1/variants)
    const { body: vt } = await api('/v1/variants');
    const boxes = await page.$$eval('#variants input', (r) => r.map((e) => e.dataset.variant));
    check(JSON.stringify(boxes) === JSON.stringify(vt.variants.map((v) => v.name)) &&
      boxes.includes('cudnn'), 'the variants filter lists the table\'s variants: ' + boxes);
    const colors = Object.fromEntries(vt.variants.map((v) => [v.name, v.color]));
    const fills = await page.$$eval('#map g.cell', (r) => r.filter((g) => g.dataset.tactic)
      .map((g) => [g.dataset.tactic.split('/')[0], g.querySelector('rect').getAttribute('fill')]));
    check(fills.length > 0 && fills.every(([v, f]) => f === colors[v]),
      'winners are drawn in the table\'s colours');

    // the variants filter: with split alone checked, the map is the winners
    // among split (GET /v1/winners?variants=split); all checked again: all
    const others = ['fused', 'fused_splitkv', 'split_repeat', 'folded', 'cudnn'];
    for (const v of others) await page.uncheck(`#variants input[data-variant="${v}"]`);
    await page.waitForFunction(() => document.body.dataset.winnersVariants === 'split', null,
      { timeout: 10000 });
    const ws = await checkWinners(page, 'variants=split', 'split');
    check(ws.winners.every((r) => !r.winner || r.winner.variant === 'split') &&
      w0.winners.some((r) => r.winner && r.winner.variant !== 'split'),
      'variants=split: every winner shown is a split tactic (not so without the filter)');
    const title = await page.$eval('#map-title', (e) => e.textContent);
    check(title.includes('variants split'), 'the map title names the variants: ' + title);
    for (const v of others) await page.check(`#variants input[data-variant="${v}"]`);
    await page.waitForFunction(() => document.body.dataset.winnersVariants === '', null,
      { timeout: 10000 });
    await checkWinners(page, 'every variant again');

    // a pin: listed at once, and the shape shown says lookups answer it
    const other = res.measurements.find((m) => m.status === 'ok' &&
      m.tactic !== pick.winner.tactic).tactic;
    const auth = { 'Content-Type': 'application/json',
      Authorization: 'Bearer ' + process.env.ATTUNE_TOKEN };
    const { status: pst, body: pinned } = await api('/v1/pins', { method: 'POST', headers: auth,
      body: JSON.stringify({ action: 'force', tactic: other, shape: pick.shape, device: 'cpu',
        reason: 'browser test', author: 'page_test' }) });
    check(pst === 201, 'POST /v1/pins forced ' + other);
    await page.waitForFunction((t) => document.querySelector(`#pins tr.pin[data-tactic="${t}"]`)
      && document.querySelector('.shape-pin[data-source="pinned"]')?.dataset.answer === t,
    other, { timeout: 10000 }).then(() => check(true, 'the pin is listed and the shape ' +
      'view says lookups answer ' + other), () => check(false, 'the pin is not shown'));
    await api('/v1/pins/' + pinned.pin.id, { method: 'DELETE', headers: auth });
    await page.waitForFunction(() => !document.querySelector('#pins tr.pin') &&
      !document.querySelector('.shape-pin'), null, { timeout: 10000 })
      .then(() => check(true, 'unpinned: the page shows no pin'),
        () => check(false, 'the removed pin is still shown'));

    // a job: its progress moves on the page, then its winners appear
    const job = JSON.parse(process.env.ATTUNE_JOB);
    const { status, body: queued } = await api('/v1/tune', {
      method: 'POST', body: JSON.stringify(job),
      headers: { 'Content-Type': 'application/json',
        Authorization: 'Bearer ' + process.env.ATTUNE_TOKEN },
    });
    check(status === 202, 'POST /v1/tune queued job ' + queued.job);
    const seen = [], named = [];
    let shot = false;
    const t0 = Date.now();
    let jobState = '';
    while (Date.now() - t0 < 120000) {
      const row = await page.$(`tr.job[data-job="${queued.job}"]`);
      if (row) {
        const p = await row.evaluate((e) => [e.dataset.state, e.dataset.progress,
          e.querySelector('.progress').textContent, e.querySelector('.tactic').textContent]);
        jobState = p[0];
        if (p[0] === 'running') named.push([p[2], p[3]]);
        if (p[0] === 'running' && (seen.length === 0 || seen[seen.length - 1] !== p[1])) {
          seen.push(p[1]);
          if (!shot && seen.length >= 2) {
            await page.screenshot({ path: path.join(SHOTS, 'dashboard-job.png'),
              fullPage: true });
            shot = true;
          }
        }
        if (p[0] === 'done' || p[0] === 'failed' || p[0] === 'canceled') break;
      }
      await sleep(150);
    }
    const nums = seen.map(Number);
    check(nums.length >= 2 && nums.every((v, i) => i === 0 || v > nums[i - 1]),
      'job progress moves on the page: ' + seen.join(' -> '));
    check(jobState === 'done', 'the job is shown done');
    const doneAt = Date.now();
    const keys = job.shapes.map((s) => `b${s.b}.hq${s.hq}.hkv${s.hkv}.sq${s.sq}.skv${s.skv}` +
      `.d${s.d}.${s.dtype}.${s.causal ? 'c' : 'nc'}`);
    // while running, the row names a shape of the job and the tactic measured
    const good = named.filter(([sh, ta]) => keys.some((k) => sh.includes(k)) &&
      /^tactic \d+ of \d+: [a-z_]+\/\S+$/.test(ta));
    check(good.length > 0, 'the running job names its shape and tactic, e.g. ' +
      JSON.stringify(good[0] || named[0]));
    await page.waitForFunction((ks) => ks.every((k) =>
      document.querySelector(`#map g.cell[data-shape="${k}"]`)), keys, { timeout: 10000 })
      .catch(() => {});
    const lag = (Date.now() - doneAt) / 1000;
    check(lag < 10, `the job's shapes are on the map ${lag.toFixed(1)} s after it finished`);
    await sleep(2500); // one more poll of /v1/winners, so the page and the API agree
    await checkWinners(page, 'after the job');
    await page.screenshot({ path: path.join(SHOTS, 'dashboard-after-job.png'), fullPage: true });
    await checkNarrow(ctx);
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  check(problems.length === 0, 'no console errors or failed requests' +
    (problems.length ? ': ' + problems.join('; ') : ''));
}

try {
  await main();
} catch (e) {
  check(false, 'browser test: ' + (e && e.stack ? e.stack : e));
}
console.log(`${results.passed} passed, ${results.failed} failed`);
process.exit(results.failed ? 1 : 0);
