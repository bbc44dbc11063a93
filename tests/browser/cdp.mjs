// tests/browser/cdp.mjs: a small Chrome DevTools Protocol client for the browser tests. Starts
// headless Chromium with --remote-debugging-pipe (commands on fd 3, replies on fd 4, each JSON
// message ended by a NUL byte), so it needs Node.js only: no WebSocket library, no downloads.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const SKIP = 77;  // CTest SKIP_RETURN_CODE

//! The Chromium binary: $RLFLOW_CHROMIUM, else the first of chromium, chromium-browser,
//! google-chrome on PATH; null when there is none.
export function findChromium() {
  if (process.env.RLFLOW_CHROMIUM) return process.env.RLFLOW_CHROMIUM;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable']) {
    const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return null;
}

export function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i].startsWith('--')) out[argv[i].slice(2)] = argv[i + 1], ++i;
  }
  return out;
}

export class Browser {
  static async launch({ binary, width = 1400, height = 1000, timeoutMs = 20000 }) {
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'rlflow-chromium-'));
    const args = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
                  '--no-default-browser-check', '--disable-extensions', '--disable-background-networking',
                  '--disable-sync', '--disable-component-update', '--mute-audio', '--hide-scrollbars',
                  `--user-data-dir=${profile}`, `--window-size=${width},${height}`, '--remote-debugging-pipe',
                  'about:blank'];
    // HOME and the XDG folders point into the profile: Chromium writes nothing outside it
    const env = { ...process.env, HOME: profile, XDG_CONFIG_HOME: path.join(profile, 'config'),
                  XDG_CACHE_HOME: path.join(profile, 'cache') };
    const proc = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], detached: true, env });
    const b = new Browser(proc, profile);
    proc.stderr.on('data', (d) => { b.stderr += d.toString(); if (b.stderr.length > 20000) b.stderr = b.stderr.slice(-10000); });
    await b.withTimeout(b.send('Browser.getVersion'), timeoutMs, 'Chromium did not answer on the DevTools pipe');
    return b;
  }

  constructor(proc, profile) {
    this.proc = proc;
    this.profile = profile;
    this.stderr = '';
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = [];
    this.buffer = Buffer.alloc(0);
    this.exited = false;
    this.writer = proc.stdio[3];
    proc.stdio[4].on('data', (chunk) => this.onData(chunk));
    proc.on('exit', (code, sig) => {
      this.exited = true;
      for (const { reject } of this.pending.values()) reject(new Error(`Chromium exited (${code ?? sig}): ${this.stderr.slice(-2000)}`));
      this.pending.clear();
    });
  }

  onData(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    let end;
    while ((end = this.buffer.indexOf(0)) >= 0) {
      const msg = JSON.parse(this.buffer.subarray(0, end).toString('utf8'));
      this.buffer = this.buffer.subarray(end + 1);
      if (msg.id !== undefined && this.pending.has(msg.id)) {
        const { resolve, reject, method } = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.error) reject(new Error(`${method}: ${msg.error.message}`));
        else resolve(msg.result);
      } else if (msg.method) {
        for (const l of this.listeners) l(msg);
      }
    }
  }

  send(method, params = {}, sessionId = undefined) {
    if (this.exited) return Promise.reject(new Error('Chromium is not running'));
    const id = this.nextId++;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      this.writer.write(JSON.stringify(msg) + '\0');
    });
  }

  on(fn) { this.listeners.push(fn); }

  withTimeout(promise, ms, what) {
    let t;
    return Promise.race([promise, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`timeout after ${ms} ms: ${what}`)), ms); })])
      .finally(() => clearTimeout(t));
  }

  //! A new page (tab) with its session; records console errors, exceptions and every request.
  async newPage({ width = 1400, height = 1000 } = {}) {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this, sessionId, targetId);
    this.on((m) => { if (m.sessionId === sessionId) page.onEvent(m); });
    await page.send('Page.enable');
    await page.send('Runtime.enable');
    await page.send('Network.enable');
    await page.send('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });
    return page;
  }

  async close() {
    if (!this.exited) {
      try { await this.withTimeout(this.send('Browser.close'), 5000, 'Browser.close'); } catch (e) { /* killed below */ }
    }
    await new Promise((r) => setTimeout(r, 200));
    if (!this.exited) { try { process.kill(-this.proc.pid, 'SIGKILL'); } catch (e) { /* gone */ } }
    try { fs.rmSync(this.profile, { recursive: true, force: true }); } catch (e) { /* best effort */ }
  }
}

export class Page {
  constructor(browser, sessionId, targetId) {
    this.browser = browser;
    this.sessionId = sessionId;
    this.targetId = targetId;
    this.errors = [];
    this.requests = [];
    this.loadWaiters = [];
  }
  send(method, params = {}) { return this.browser.send(method, params, this.sessionId); }
  onEvent(m) {
    if (m.method === 'Runtime.exceptionThrown') {
      const d = m.params.exceptionDetails;
      this.errors.push(`exception: ${d.exception?.description ?? d.text}`);
    } else if (m.method === 'Runtime.consoleAPICalled' && (m.params.type === 'error' || m.params.type === 'warning')) {
      this.errors.push(`console.${m.params.type}: ${m.params.args.map((a) => a.value ?? a.description).join(' ')}`);
    } else if (m.method === 'Network.requestWillBeSent') {
      this.requests.push(m.params.request.url);
    } else if (m.method === 'Page.loadEventFired') {
      for (const w of this.loadWaiters.splice(0)) w();
    }
  }
  async goto(url, timeoutMs = 15000) {
    const loaded = new Promise((r) => this.loadWaiters.push(r));
    const res = await this.send('Page.navigate', { url });
    if (res.errorText) throw new Error(`navigate ${url}: ${res.errorText}`);
    await this.browser.withTimeout(loaded, timeoutMs, `load of ${url}`);
  }
  //! Evaluates an expression (awaiting a promise) and returns its value; a thrown error fails.
  async eval(expression) {
    const r = await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`eval failed: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}\n  in: ${expression.slice(0, 300)}`);
    return r.result.value;
  }
  async waitFor(expression, timeoutMs = 10000, what = expression) {
    const t0 = Date.now();
    while (Date.now() - t0 < timeoutMs) {
      if (await this.eval(`!!(${expression})`)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`timeout after ${timeoutMs} ms waiting for ${what}`);
  }
  //! A PNG of the whole page (its full height) written to 'file'.
  async screenshot(file, width = 1400) {
    const h = await this.eval('Math.ceil(Math.max(document.documentElement.scrollHeight, document.body.scrollHeight))');
    await this.send('Emulation.setDeviceMetricsOverride', { width, height: Math.min(Math.max(h, 600), 6000), deviceScaleFactor: 1, mobile: false });
    const { data } = await this.send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, Buffer.from(data, 'base64'));
    await this.send('Emulation.setDeviceMetricsOverride', { width, height: 1000, deviceScaleFactor: 1, mobile: false });
    return file;
  }
}

//! A tiny check list: check(cond, message) records; done() prints and returns the exit code.
export function checker(name) {
  const failures = [];
  let count = 0;
  return {
    check(cond, message) {
      ++count;
      if (!cond) { failures.push(message); console.log(`FAIL: ${message}`); }
    },
    equal(actual, expected, message) {
      ++count;
      const a = JSON.stringify(actual), e = JSON.stringify(expected);
      if (a !== e) { failures.push(`${message}: got ${a}, expected ${e}`); console.log(`FAIL: ${message}: got ${a}, expected ${e}`); }
    },
    done() {
      console.log(`${name}: ${count - failures.length}/${count} checks passed`);
      return failures.length ? 1 : 0;
    },
  };
}

//! Runs 'body(browser)' with Chromium; skips (exit 77) without one; kills Chromium at the end
//! and after 'limitMs' whatever happens.
export async function withChromium(name, limitMs, body) {
  const binary = findChromium();
  if (!binary) {
    console.log(`${name}: SKIPPED: Chromium is not installed (apt-get install chromium; 'make' installs it)`);
    process.exit(SKIP);
  }
  let browser = null;
  const killer = setTimeout(() => {
    console.log(`${name}: FAIL: still running after ${limitMs} ms; killing Chromium`);
    if (browser) { try { process.kill(-browser.proc.pid, 'SIGKILL'); } catch (e) { /* gone */ } }
    process.exit(1);
  }, limitMs);
  let code = 1;
  try {
    browser = await Browser.launch({ binary });
    code = await body(browser);
  } catch (e) {
    console.log(`${name}: FAIL: ${e.stack || e}`);
    if (browser && browser.stderr) console.log(`chromium stderr (tail):\n${browser.stderr.slice(-1500)}`);
    code = 1;
  } finally {
    if (browser) await browser.close();
    clearTimeout(killer);
  }
  process.exit(code);
}
