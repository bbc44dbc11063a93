// Browser test of the planner page (build/planner/index.html) in headless Chromium:
//  - every input's id is a config key (rlflow_plan accepts all of them at once);
//  - typing the mission's group A (colocate, n=1) and group B (separate_async, n=8) into the inputs
//    shows 1024/4/4/8 and 8192/4/2/12, and every readout equals 'rlflow_plan --json' run on the
//    page's own "copy as command line" text;
//  - data.train_batch_size=1000 in group B shows the violations rlflow_plan lists, with fixes;
//  - the pool picture has the devices, replicas and weight-sync arrow of the plan;
//  - the URL fragment restores the configuration in a fresh page; sliders drive the inputs;
//  - a fresh page opens valid on verl's defaults (micro-batch sizes of verl's quickstart filled)
//    and shows the memory per device of the chosen model; in a 1280 x 800 window the document is
//    never wider than the window (fresh, groups A and B, a violation, a long command line).
// Screenshots: <out>/planner_group_a.png, planner_group_b.png, planner_violation.png.
// Usage: node planner_page.test.mjs --page build/planner/index.html --plan build/examples/rlflow_plan --out DIR
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { checker, parseArgs, withChromium, SKIP } from './cdp.mjs';

const args = parseArgs(process.argv.slice(2));
const NAME = 'browser.planner_page';
if (!fs.existsSync(args.page)) {
  console.log(`${NAME}: SKIPPED: ${args.page} was not built (the planner page needs emscripten: apt-get install emscripten; 'make' installs it)`);
  process.exit(SKIP);
}

function cli(list) {
  const r = spawnSync(args.plan, ['--json', ...list], { encoding: 'utf8', timeout: 20000 });
  if (r.status !== 0) throw new Error(`rlflow_plan ${list.join(' ')} exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
// The page's command line ("rlflow_plan k=v ..."): words, with the page's shell quoting undone.
function words(line) {
  const out = [];
  const re = /'((?:[^']|'\\'')*)'|(\S+)/g;
  let m;
  while ((m = re.exec(line))) out.push(m[1] !== undefined ? m[1].replace(/'\\''/g, "'") : m[2]);
  return out;
}
const lookup = (obj, dotted) => dotted.split('.').reduce((o, k) => (o == null ? undefined : o[k]), obj);

await withChromium(NAME, 90000, async (browser) => {
  const t = checker(NAME);
  const W = 1280, H = 800;
  const page = await browser.newPage({ width: W, height: H });
  const url = pathToFileURL(path.resolve(args.page)).href;
  await page.goto(url);
  await page.waitFor("document.body.dataset.ready === 'true' || document.body.dataset.ready === 'error'", 15000, 'the planner to load');
  t.equal(await page.eval('document.body.dataset.ready'), 'true', 'the WebAssembly planner loaded');

  // the document fits the window: no horizontal scroll, nothing cut off on the right
  async function fits(label) {
    const [doc, win] = await page.eval('[Math.max(document.documentElement.scrollWidth, document.body.scrollWidth), window.innerWidth]');
    t.check(doc <= win, `${label}: the page is ${doc} px wide in a ${win} px window`);
  }
  t.equal(await page.eval('window.innerWidth'), W, `the window is ${W} px wide`);
  t.equal(await page.eval('document.body.dataset.state'), 'valid', "a fresh page opens valid on verl's defaults");
  t.equal(await page.eval(`document.getElementById('critic.ppo_micro_batch_size_per_gpu').value`), '4',
    "the critic's micro-batch is verl's quickstart value (4)");
  const mem = await page.eval(`Object.fromEntries([...document.querySelectorAll('[data-memory]')].map(e => [e.dataset.memory, Number(e.dataset.value)]))`);
  const parts = ['actor_state', 'ref_state', 'rollout_weights', 'kv_cache', 'rollout_activations', 'train_activations'];
  t.check(parts.every((k) => mem[k] > 0), `the memory table has every part (${JSON.stringify(mem)})`);
  t.equal(mem.total, parts.reduce((a, k) => a + mem[k], 0), 'the total is the sum of the parts');
  // Qwen2.5-0.5B (the first model): 494,032,768 parameters; the actor keeps weights, gradients and
  // both AdamW moments in fp32 plus a byte of decay mask each
  t.equal(await page.eval(`document.getElementById('model').value`), 'qwen2.5-0.5b', 'the memory is for Qwen2.5-0.5B first');
  t.equal(mem.actor_state, 494032768 * 17, "the actor's state is 17 bytes per parameter");
  // KV cache: each row's blocks of 16 positions at full length, rows = B n / devices, S = prompt + response:
  // rows x (ceil(S / 16) + 1) blocks of L x 2 x 16 x NKV x head_dim x 4 bytes
  t.equal(mem.kv_cache, (1024 / 8) * (1024 / 16 + 1) * 24 * 2 * 16 * 2 * 64 * 4, "the KV cache is the rows' blocks at full length");
  await page.eval(`(() => { const e = document.getElementById('model'); e.value = 'llama-3.1-8b'; e.dispatchEvent(new Event('change', {bubbles: true})); })()`);
  t.equal(Number(await page.eval(`document.querySelector('[data-memory=actor_state]').dataset.value`)), 8030261248 * 17,
    'choosing Llama-3.1-8B recomputes the estimate (8,030,261,248 parameters)');
  t.check((await page.eval(`document.getElementById('memory-model').textContent`)).includes('meta-llama/Llama-3.1-8B-Instruct'),
    'and names the repository');
  await fits('fresh page');

  // inputs: ids are config keys, all accepted by rlflow_plan
  const ids = await page.eval(`[...document.querySelectorAll('#inputs input:not([type=range]), #inputs select')].map(e => e.id)`);
  t.check(ids.every((id) => id !== ''), 'every input and drop-down has an id');
  t.equal(await page.eval(`[...document.querySelectorAll('#inputs input[type=range]')].filter(r => !document.getElementById(r.dataset.for)).length`), 0,
    'every slider drives an input (data-for = its key)');
  t.check(ids.length >= 19, `the page has an input per accounting key (${ids.length})`);
  for (const key of ['data.train_batch_size', 'actor_rollout_ref.actor.ppo_mini_batch_size', 'actor_rollout_ref.rollout.n',
    'actor_rollout_ref.actor.ppo_epochs', 'trainer.nnodes', 'trainer.n_gpus_per_node', 'actor_rollout_ref.rollout.tensor_model_parallel_size',
    'actor_rollout_ref.rollout.data_parallel_size', 'actor_rollout_ref.rollout.pipeline_model_parallel_size', 'max_colocate_count',
    'trainer.v1.trainer_mode', 'actor_rollout_ref.rollout.nnodes', 'actor_rollout_ref.rollout.n_gpus_per_node',
    'trainer.v1.separate_async.parameter_sync_step', 'actor_rollout_ref.rollout.checkpoint_engine.backend',
    'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu', 'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu'])
    t.check(ids.includes(key), `an input with id=${key}`);
  const current = await page.eval(`[...document.querySelectorAll('#inputs input:not([type=range]), #inputs select')].map(e => e.id + '=' + (e.type === 'checkbox' ? e.checked : (e.value === '' ? 'null' : e.value)))`);
  const all = spawnSync(args.plan, ['--json', ...current], { encoding: 'utf8' });
  t.equal(all.status, 0, `rlflow_plan accepts every input id as a key (${all.stderr.trim()})`);

  // type values into the inputs the way a person does (value + input/change event)
  async function type(key, value) {
    await page.eval(`(() => { const e = document.getElementById(${JSON.stringify(key)});
      if (e.type === 'checkbox') { e.checked = ${JSON.stringify(String(value))} === 'true'; e.dispatchEvent(new Event('change', {bubbles: true})); }
      else { e.value = ${JSON.stringify(String(value))}; e.dispatchEvent(new Event(e.tagName === 'SELECT' ? 'change' : 'input', {bubbles: true})); } })()`);
  }
  async function readouts() {
    return page.eval(`Object.fromEntries([...document.querySelectorAll('[data-readout]')].map(e => [e.dataset.readout, JSON.parse(e.dataset.value)]))`);
  }
  async function text(key) { return page.eval(`document.querySelector('[data-readout="${key}"]').textContent`); }
  // every readout equals rlflow_plan --json of the page's command line
  async function matchesCli(label) {
    const line = await page.eval(`document.getElementById('command-line').textContent`);
    const w = words(line);
    t.equal(w[0], 'rlflow_plan', `${label}: the command line starts with rlflow_plan`);
    const json = cli(w.slice(1));
    const ro = await readouts();
    t.check(Object.keys(ro).length >= 20, `${label}: ${Object.keys(ro).length} readouts on the page`);
    for (const [k, v] of Object.entries(ro)) t.equal(v, lookup(json, k), `${label}: readout ${k} equals rlflow_plan --json`);
    const viol = await page.eval(`[...document.querySelectorAll('#violations .violation')].map(e => e.querySelector('.problem').textContent + (e.querySelector('.fix') ? '; ' + e.querySelector('.fix').textContent : ''))`);
    t.equal(viol, json.violations, `${label}: the violations are rlflow_plan's`);
    return json;
  }

  // group A: colocate, n = 1 (verl's defaults, micro-batches set, grpo)
  await type('algorithm.adv_estimator', 'grpo');
  await type('actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu', 8);
  await type('actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu', 8);
  let ro = await readouts();
  t.equal([ro.samples_per_step, ro.updates_per_step, ro.rollout_replicas, ro.total_devices], [1024, 4, 4, 8], 'group A: 1024 / 4 / 4 / 8');
  t.equal([ro.weight_syncs_per_step, ro.weight_sync_scope, ro.weight_sync_backend], [1, 'in-pool', 'naive'], 'group A: one in-pool sync');
  t.equal(await text('device_share_per_worker'), '0.333', 'group A: device share 0.333 shown');
  t.equal(await page.eval(`document.querySelectorAll('#violations .violation').length`), 0, 'group A: no violations');
  t.equal(await page.eval(`document.body.dataset.state`), 'valid', 'group A: the status says valid');
  t.check((await page.eval(`document.querySelector('[data-readout=samples_per_step]').parentElement.textContent`)).includes('1024 x 1 = 1024'),
    'group A: the samples formula is filled in (1024 x 1 = 1024)');
  await matchesCli('group A');
  t.equal(await page.eval(`document.querySelectorAll('#pools .pool[data-pool=trainer] rect.device').length`), 8, 'group A picture: 8 devices');
  t.equal(await page.eval(`document.querySelectorAll('#pools .replica').length`), 4, 'group A picture: 4 replicas');
  t.equal(await page.eval(`document.getElementById('weight-sync').dataset.scope`), 'in-pool', 'group A picture: in-pool weight sync');
  await page.screenshot(path.join(args.out, 'planner_group_a.png'), W);
  await fits('group A');

  // group B: separate_async, n = 8, 8 train + 4 rollout devices
  await type('trainer.v1.trainer_mode', 'separate_async');
  await type('actor_rollout_ref.rollout.n', 8);
  await type('actor_rollout_ref.rollout.nnodes', 1);
  await type('actor_rollout_ref.rollout.n_gpus_per_node', 4);
  await type('actor_rollout_ref.rollout.checkpoint_engine.backend', 'nccl');
  ro = await readouts();
  t.equal([ro.samples_per_step, ro.updates_per_step, ro.rollout_replicas, ro.total_devices], [8192, 4, 2, 12], 'group B: 8192 / 4 / 2 / 12');
  t.equal([ro.weight_sync_scope, ro.weight_sync_backend, ro.rollout_device_share_per_worker], ['cross-pool', 'nccl', 0.5], 'group B: cross-pool nccl sync');
  t.equal(await page.eval(`document.querySelectorAll('#violations .violation').length`), 0, 'group B: no violations');
  await matchesCli('group B');
  t.equal(await page.eval(`document.querySelectorAll('#pools .pool[data-pool=trainer] rect.device').length`), 8, 'group B picture: 8 trainer devices');
  t.equal(await page.eval(`document.querySelectorAll('#pools .pool[data-pool=rollout] rect.device').length`), 4, 'group B picture: 4 rollout devices');
  t.equal(await page.eval(`document.querySelectorAll('#pools .pool[data-pool=rollout] .replica').length`), 2, 'group B picture: 2 rollout replicas');
  t.equal(await page.eval(`document.getElementById('weight-sync').dataset.scope`), 'cross-pool', 'group B picture: cross-pool arrow');
  await page.screenshot(path.join(args.out, 'planner_group_b.png'), W);
  await fits('group B');

  // the URL fragment records the configuration: a fresh page at that URL shows the same plan
  const shared = await page.eval('location.href');
  t.check(shared.includes('#') && shared.includes('trainer.v1.trainer_mode=separate_async'), `the URL fragment holds the configuration (${shared.split('#')[1]})`);
  const page2 = await browser.newPage();
  await page2.goto(shared);
  await page2.waitFor("document.body.dataset.ready === 'true'", 15000, 'the shared page to load');
  const ro2 = await page2.eval(`Object.fromEntries([...document.querySelectorAll('[data-readout]')].map(e => [e.dataset.readout, JSON.parse(e.dataset.value)]))`);
  t.equal(ro2, ro, 'the shared link shows the same readouts');
  t.equal(await page2.eval(`document.getElementById('trainer.v1.trainer_mode').value`), 'separate_async', 'the shared link sets the inputs');
  t.equal(page2.errors, [], 'no script errors on the shared page');

  // copy as command line
  await page.eval(`document.getElementById('copy-command').click()`);
  await page.waitFor(`document.getElementById('copy-status').textContent !== ''`, 5000, 'the copy button to answer');
  const line = await page.eval(`document.getElementById('command-line').textContent`);
  const overrides = await page.eval('window.rlflowPlanner.overrides()');
  t.equal(words(line), ['rlflow_plan', ...overrides], 'the command line is rlflow_plan with the changed keys');

  // the violation: train_batch_size=1000 breaks train_batch_size == parameter_sync_step * ppo_mini_batch_size
  await type('data.train_batch_size', 1000);
  const json = await matchesCli('B with train_batch_size=1000');
  const viol = await page.eval(`[...document.querySelectorAll('#violations .violation')].map(e => ({problem: e.querySelector('.problem').textContent, fix: e.querySelector('.fix') ? e.querySelector('.fix').textContent : ''}))`);
  const sync = viol.find((v) => v.problem.includes('parameter_sync_step'));
  t.check(sync !== undefined, `the separate_async batch violation is shown (${JSON.stringify(viol)})`);
  t.check(sync && sync.problem.includes('1000') && sync.fix.startsWith('set '), `it names 1000 and gives a fix (${sync && sync.fix})`);
  t.check(json.violations.length === viol.length && viol.length >= 1, 'as many violations as rlflow_plan lists');
  t.equal(await page.eval(`document.body.dataset.state`), 'violations', 'the status says the configuration would not start');
  await page.screenshot(path.join(args.out, 'planner_violation.png'), W);
  await fits('a violation');

  // a slider drives its input: 2^11 = 2048 prompts -> 2048 x 8 samples
  await page.eval(`(() => { const r = document.querySelector('input[type=range][data-for="data.train_batch_size"]'); r.value = '11'; r.dispatchEvent(new Event('input', {bubbles: true})); })()`);
  t.equal(await page.eval(`document.getElementById('data.train_batch_size').value`), '2048', 'the slider sets train_batch_size to 2048');
  t.equal((await readouts()).samples_per_step, 16384, 'and samples per step follow (2048 x 8)');

  // other keys from the free-text box: a reward model with its own pool of 2 devices
  const before = (await readouts()).total_devices;
  await page.eval(`(() => { const e = document.querySelector('[data-role=extra-overrides]');
    e.value = 'reward.reward_model.enable=true\\nreward.reward_model.enable_resource_pool=true\\nreward.reward_model.nnodes=1\\nreward.reward_model.n_gpus_per_node=2';
    e.dispatchEvent(new Event('input', {bubbles: true})); })()`);
  const withReward = await matchesCli('with a reward pool');
  await fits('a long command line');
  t.equal([withReward.reward_devices, (await readouts()).total_devices], [2, before + 2], 'the other keys reach the planner (2 reward devices)');
  t.equal(await page.eval(`document.querySelectorAll('#pools .pool[data-pool=reward] rect.device').length`), 2, 'the picture has the reward pool');
  t.check((await page.eval('location.hash')).includes('reward.reward_model.enable=true'), 'the URL records the other keys too');
  await page.eval(`(() => { const e = document.querySelector('[data-role=extra-overrides]'); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); })()`);

  // a bad value: the C++ parser's error is shown, nothing else breaks
  await type('data.train_batch_size', '');
  t.check((await page.eval(`document.getElementById('status').textContent`)).includes('data.train_batch_size'),
    'an empty integer is reported by the parser, naming the key');
  t.equal(await page.eval(`document.getElementById('results').classList.contains('stale')`), true, 'the last drawing is marked stale');
  await type('data.train_batch_size', 1024);
  t.equal(await page.eval(`document.getElementById('results').classList.contains('stale')`), false, 'and fresh again after a valid value');

  t.equal(page.errors, [], 'no script errors or console errors');
  t.equal(page.requests.filter((u) => !u.startsWith('file:') && !u.startsWith('data:') && u !== 'about:blank'), [], 'no network requests');
  return t.done();
});
