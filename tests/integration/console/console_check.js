// tests/integration/console/console_check.js — loads pages of the web
// console in Debian's chromium (headless, through puppeteer-core) and
// prints, as one JSON object on stdout, for each page: the console errors,
// failed requests and error responses seen while it loaded, and the text
// of every element marked data-test. It saves a screenshot of each page.
//
//   node console_check.js BASE_URL SHOT_DIR PAGE...
//   PAGE: NAME|HASH|READY[|WIDTHxHEIGHT[|dark]], e.g. 'topic|#/topics/t|topics-one'
//
// It waits for the page's body[data-ready=READY] (the console sets it once
// the page's data is drawn), at most 20 s a page; the Python test checks
// the figures against the broker's JSON, /metrics and sluicectl.
'use strict';
const puppeteer = require('puppeteer-core');

async function main() {
  const [base, shots, ...pages] = process.argv.slice(2);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
  });
  const out = {};
  try {
    for (const spec of pages) {
      const [name, hash, ready, size, theme] = spec.split('|');
      const [w, h] = (size || '1280x800').split('x').map(Number);
      const page = await browser.newPage();
      const errors = [];
      page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
      page.on('pageerror', (e) => errors.push('page error: ' + e.message));
      page.on('requestfailed', (r) => {
        // the live stream is cut when the page goes: not an error
        if (!r.url().endsWith('/v1/stream') && !r.url().includes('/v1/stream?')) errors.push('request failed: ' + r.url() + ' ' + (r.failure() || {}).errorText);
      });
      page.on('response', (r) => { if (r.status() >= 400) errors.push('response ' + r.status() + ': ' + r.url()); });
      await page.setViewport({ width: w, height: h });
      // each page its own theme (the browser keeps localStorage between pages)
      await page.evaluateOnNewDocument((t) => localStorage.setItem('sluice-theme', t), theme || 'light');
      await page.goto(base + '/ui/' + hash, { waitUntil: 'load', timeout: 20000 });
      let state = '';
      try {
        await page.waitForFunction((r) => document.body.dataset.ready === r, { timeout: 20000 }, ready);
        state = ready;
      } catch (e) {
        state = await page.evaluate(() => document.body.dataset.ready || '(not set)');
        errors.push('not ready within 20 s: body data-ready is ' + state + ', page says: ' +
          (await page.evaluate(() => document.getElementById('page').innerText.slice(0, 300))));
      }
      // CONSOLE_SETTLE_MS: wait for later polls (rates need two readings;
      // the docs' screenshots use it, the test's checks do not)
      await new Promise((r) => setTimeout(r, Number(process.env.CONSOLE_SETTLE_MS || 0)));
      const texts = await page.evaluate(() => {
        const o = {};
        for (const e of document.querySelectorAll('[data-test]')) {
          const k = e.getAttribute('data-test');
          if (!(k in o)) o[k] = e.innerText.trim();
        }
        o.__charts = document.querySelectorAll('[data-test=chart] canvas').length;
        o.__width = document.documentElement.scrollWidth;
        o.__theme = document.documentElement.dataset.theme;
        return o;
      });
      await page.screenshot({ path: shots + '/' + name + '.png', fullPage: true });
      out[name] = { ready: state, errors, texts };
      await page.close();
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
main().catch((e) => { console.error('console_check: ' + (e.stack || e)); process.exit(2); });
