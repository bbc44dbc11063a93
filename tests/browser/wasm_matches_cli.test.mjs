// The planner page's WebAssembly module against the native 'rlflow_plan --json' (Node.js, no
// browser): for 40 random configurations over the keys the page edits, the page's plan (and its
// violations) equal the CLI's, and a bad argument gives the CLI's error text.
// Usage: node wasm_matches_cli.test.mjs --module build/planner/rlflow_planner.js --plan build/examples/rlflow_plan
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { checker, parseArgs, SKIP } from './cdp.mjs';

const args = parseArgs(process.argv.slice(2));
const NAME = 'tools.plan_page.wasm_matches_cli';
if (!fs.existsSync(args.module)) {
  console.log(`${NAME}: SKIPPED: ${args.module} was not built (needs emscripten: apt-get install emscripten)`);
  process.exit(SKIP);
}
const createRlflowPlanner = createRequire(import.meta.url)(args.module);
const M = await createRlflowPlanner();
const call = (name, a) => M.ccall(name, 'string', a.map(() => 'string'), a);
const t = checker(NAME);

// a small seeded generator (xorshift), so a failure can be replayed
let state = 0x2545f491;
const rnd = (n) => { state ^= state << 13; state ^= state >>> 17; state ^= state << 5; return (state >>> 0) % n; };
const pick = (a) => a[rnd(a.length)];
const CHOICES = {
  'data.train_batch_size': [256, 512, 768, 1000, 1024, 2048],
  'actor_rollout_ref.actor.ppo_mini_batch_size': [64, 128, 256, 300],
  'actor_rollout_ref.rollout.n': [1, 2, 4, 8, 16],
  'actor_rollout_ref.actor.ppo_epochs': [1, 2, 3],
  'trainer.nnodes': [1, 2, 4],
  'trainer.n_gpus_per_node': [1, 2, 4, 6, 8],
  'actor_rollout_ref.rollout.tensor_model_parallel_size': [1, 2, 4, 8],
  'actor_rollout_ref.rollout.data_parallel_size': [1, 2],
  'actor_rollout_ref.rollout.pipeline_model_parallel_size': [1, 2],
  max_colocate_count: [1, 2, 3, 4],
  'trainer.v1.trainer_mode': ['sync', 'colocate_async', 'separate_async'],
  'actor_rollout_ref.rollout.nnodes': [0, 1, 2],
  'actor_rollout_ref.rollout.n_gpus_per_node': ['null', 2, 4, 8],
  'trainer.v1.separate_async.parameter_sync_step': [1, 2, 4],
  'actor_rollout_ref.rollout.checkpoint_engine.backend': ['naive', 'nccl'],
  'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu': ['null', 4, 8, 16],
  'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu': ['null', 8, 32],
  'critic.ppo_micro_batch_size_per_gpu': ['null', 8],
  'algorithm.adv_estimator': ['gae', 'grpo', 'rloo'],
  'actor_rollout_ref.actor.use_kl_loss': ['true', 'false'],
};
for (let i = 0; i < 40; ++i) {
  const list = Object.entries(CHOICES).filter(() => rnd(2)).map(([k, v]) => `${k}=${pick(v)}`);
  const page = JSON.parse(call('rlflow_page_plan', [list.join('\n'), '[]']));
  const r = spawnSync(args.plan, ['--json', ...list], { encoding: 'utf8' });
  t.equal(r.status, 0, `case ${i}: rlflow_plan exits 0`);
  t.check(page.ok, `case ${i}: the page evaluates it`);
  if (page.ok && r.status === 0) t.equal(page.plan, JSON.parse(r.stdout), `case ${i}: page plan == rlflow_plan --json (${list.join(' ')})`);
}
const bad = JSON.parse(call('rlflow_page_plan', ['data.train_bach_size=3', '[]']));
const r = spawnSync(args.plan, ['data.train_bach_size=3'], { encoding: 'utf8' });
t.equal(r.status, 2, 'rlflow_plan rejects the misspelt key');
t.equal([bad.ok, bad.error], [false, r.stderr.trim()], 'the page reports the same error text');
process.exit(t.done());
