// Browser test of the run report: runs the demo (00_grpo_reverse) twice for a few steps with two
// seeds, writes one report of both with rlflow_report, opens it in headless Chromium and checks:
//  - every plot has a line per run with as many points as the run has steps with that metric
//    (counted from the metrics.jsonl files here, independently of the report's code);
//  - the stacked timing breakdown of each run; the config table shows both runs and the seed differs;
//  - the smoothing slider: at 0 the smoothed lines equal the raw ones, the page's EMA at the initial
//    weight reproduces the C++-drawn lines, and a high weight changes them;
//  - no network request and no script error. Screenshot: <out>/report.png.
// Usage: node run_report.test.mjs --demo build/examples/00_grpo_reverse --report build/examples/rlflow_report
//                                  --work DIR --out DIR
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { checker, parseArgs, withChromium } from './cdp.mjs';

const args = parseArgs(process.argv.slice(2));
const NAME = 'browser.run_report';
const STEPS = 12;

await withChromium(NAME, 110000, async (browser) => {
  const t = checker(NAME);
  fs.rmSync(args.work, { recursive: true, force: true });
  const runs = [['seed1', 1], ['seed2', 2]].map(([name, seed]) => {
    const dir = path.join(args.work, name);
    const r = spawnSync(args.demo, [`trainer.total_training_steps=${STEPS}`, `seed=${seed}`, `trainer.default_local_dir=${dir}`],
      { encoding: 'utf8', timeout: 60000, env: { ...process.env, OPENBLAS_NUM_THREADS: '1', OMP_NUM_THREADS: '1' } });
    if (r.status !== 0) throw new Error(`the demo failed (${r.status}): ${r.stderr}`);
    return dir;
  });
  const out = path.join(args.work, 'report.html');
  const rep = spawnSync(args.report, ['-o', out, ...runs], { encoding: 'utf8', timeout: 20000 });
  t.equal(rep.status, 0, `rlflow_report exits 0 (${rep.stderr.trim()})`);
  const html = fs.readFileSync(out, 'utf8');
  t.check(!/\b(src|href)\s*=\s*["']?(https?:)?\/\//i.test(html), 'the report references no external resource');

  // independent count of finite values per metric and run, from the files
  const counts = runs.map((dir) => {
    const c = {};
    for (const line of fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').split('\n').filter(Boolean)) {
      for (const [k, v] of Object.entries(JSON.parse(line))) if (typeof v === 'number') c[k] = (c[k] || 0) + 1;
    }
    return c;
  });
  t.equal(counts.map((c) => c.step), [STEPS, STEPS], `each demo run wrote ${STEPS} metrics lines`);

  const page = await browser.newPage();
  await page.goto(pathToFileURL(out).href);
  await page.waitFor("document.body.dataset.ready === 'true'", 10000, 'the report script');

  // line plots: raw and smoothed paths, one per (run, metric), with all the points
  const paths = await page.eval(`[...document.querySelectorAll('svg.plot path.raw')].map(p => ({
      panel: p.ownerSVGElement.dataset.panel, run: +p.dataset.run, key: p.dataset.key, points: +p.dataset.points,
      vertices: (p.getAttribute('d').match(/[ML]/g) || []).length }))`);
  const panels = new Set(paths.map((p) => p.panel));
  for (const id of ['score', 'entropy', 'response_length', 'clipfrac', 'kl', 'grad_norm', 'throughput', 'loss'])
    t.check(panels.has(id), `the ${id} plot is drawn`);
  for (const key of ['critic/score/mean', 'actor/entropy', 'response_length/mean', 'actor/pg_clipfrac', 'actor/ppo_kl',
    'actor/grad_norm', 'perf/throughput']) {
    for (const run of [0, 1]) {
      const p = paths.find((x) => x.key === key && x.run === run);
      t.check(p !== undefined, `run ${run} has a ${key} line`);
      if (p) {
        t.equal(p.vertices, counts[run][key], `run ${run} ${key}: one vertex per logged value`);
        t.equal(p.points, counts[run][key], `run ${run} ${key}: data-points counts them`);
      }
    }
  }
  // each vertex lies inside its plot frame
  const outside = await page.eval(`[...document.querySelectorAll('svg.plot path.raw')].flatMap(p => {
      const s = p.ownerSVGElement, W = +s.getAttribute('width'), H = +s.getAttribute('height');
      const nums = p.getAttribute('d').replace(/[ML]/g, ' ').trim().split(/\\s+/).map(Number);
      const bad = []; for (let i = 0; i < nums.length; i += 2) { const x = nums[i], y = nums[i+1];
        if (!(x >= +s.dataset.ml - 0.01 && x <= W - +s.dataset.mr + 0.01 && y >= +s.dataset.mt - 0.01 && y <= H - +s.dataset.mb + 0.01)) bad.push(p.dataset.key); }
      return bad; })`);
  t.equal(outside, [], 'every point lies inside its plot frame');

  // stacked timing breakdown, one per run
  const stacks = await page.eval(`[...document.querySelectorAll('svg.plot[data-panel=timing]')].map(s => ({
      run: +s.dataset.run, areas: [...s.querySelectorAll('path.area')].map(a => a.dataset.key), total: !!s.querySelector('path.total') }))`);
  t.equal(stacks.map((s) => s.run), [0, 1], 'a stacked timing plot per run');
  for (const s of stacks) {
    t.check(s.areas.includes('timing_s/gen') && s.areas.includes('timing_s/update_actor'), `run ${s.run}: gen and update_actor stacked (${s.areas})`);
    t.check(s.total, `run ${s.run}: the step total drawn over the stack`);
  }

  // config table: both runs, seed differs, train batch the same
  const seedRow = await page.eval(`[...document.querySelectorAll('#config tr[data-key="seed"] td')].map(td => td.textContent)`);
  t.equal(seedRow, ['seed', '1', '2'], 'the config table shows the seed of each run');
  t.equal(await page.eval(`document.querySelector('#config tr[data-key="seed"]').className`), 'differs', 'the differing key is marked');
  t.equal(await page.eval(`document.querySelector('#config tr[data-key="data.train_batch_size"]').className`), 'same', 'equal keys are not');
  const visible = () => page.eval(`[...document.querySelectorAll('#config tr[data-key]')].filter(r => r.offsetParent !== null).map(r => r.dataset.key)`);
  const diffOnly = await visible();
  t.check(diffOnly.includes('seed') && !diffOnly.includes('data.train_batch_size'), `comparing runs, the table starts with the differing keys (${diffOnly})`);
  await page.eval(`(() => { const c = document.getElementById('config-diff-only'); c.click(); })()`);
  t.check((await visible()).includes('data.train_batch_size'), 'unticking "only keys that differ" shows every key');

  // smoothing: initial lines (C++) = the page's EMA at the same weight; 0 = raw; 0.95 changes them
  const smoothed = () => page.eval(`[...document.querySelectorAll('path.smoothed')].map(p => p.getAttribute('d'))`);
  const raw = await page.eval(`[...document.querySelectorAll('path.raw')].map(p => p.getAttribute('d'))`);
  const initial = await smoothed();
  const w0 = await page.eval(`document.getElementById('smoothing').value`);
  const setW = (w) => page.eval(`(() => { const s = document.getElementById('smoothing'); s.value = '${w}'; s.dispatchEvent(new Event('input')); })()`);
  await setW(w0);
  t.equal(await smoothed(), initial, `the page's smoothing at ${w0} redraws exactly the C++ lines`);
  await setW(0);
  t.equal(await smoothed(), raw, 'smoothing 0 draws the raw values');
  await setW(0.95);
  const heavy = await smoothed();
  t.check(heavy.filter((d, i) => d !== raw[i]).length > heavy.length / 2, 'smoothing 0.95 changes the lines');
  await setW(w0);

  await page.eval(`document.getElementById('config-diff-only').click()`);  // back to the differing keys
  t.equal(await visible(), diffOnly, 'ticking it again hides the equal keys');
  await page.screenshot(path.join(args.out, 'report.png'));
  t.equal(page.errors, [], 'no script errors');
  t.equal(page.requests.filter((u) => !u.startsWith('file:') && !u.startsWith('data:') && u !== 'about:blank'), [], 'no network requests');
  return t.done();
});
