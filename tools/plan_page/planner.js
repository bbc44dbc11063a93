// rlflow planner page: builds the inputs, asks the WebAssembly planner (rlflow_planner.js, the C++
// of include/rlflow/config/planner.hpp) for the plan of the current key=value overrides, and draws what it
// returns: readouts with their formulas, violations with their fixes, the pools, the per-worker
// rows. No arithmetic of the plan is done here; the JavaScript only lays things out.
'use strict';
(function () {
  // The keys the page edits, grouped; slider: 'log2' (powers of two) or 'lin', range [min, max].
  const GROUPS = [
    { title: 'Batch and algorithm', keys: [
      ['data.train_batch_size', { slider: 'log2', min: 0, max: 14 }],
      ['actor_rollout_ref.actor.ppo_mini_batch_size', { slider: 'log2', min: 0, max: 14 }],
      ['actor_rollout_ref.rollout.n', { slider: 'log2', min: 0, max: 7 }],
      ['actor_rollout_ref.actor.ppo_epochs', { slider: 'lin', min: 1, max: 8 }],
      ['algorithm.adv_estimator', {}],
      ['actor_rollout_ref.actor.use_kl_loss', {}],
    ] },
    { title: 'Trainer pool', keys: [
      ['trainer.nnodes', { slider: 'lin', min: 1, max: 16 }],
      ['trainer.n_gpus_per_node', { slider: 'lin', min: 1, max: 16 }],
      ['max_colocate_count', { slider: 'lin', min: 1, max: 8 }],
      ['actor_rollout_ref.actor.ulysses_sequence_parallel_size', {}],
    ] },
    { title: 'Rollout replica (TP x DP x PP)', keys: [
      ['actor_rollout_ref.rollout.tensor_model_parallel_size', { slider: 'log2', min: 0, max: 4 }],
      ['actor_rollout_ref.rollout.data_parallel_size', { slider: 'log2', min: 0, max: 4 }],
      ['actor_rollout_ref.rollout.pipeline_model_parallel_size', { slider: 'log2', min: 0, max: 4 }],
    ] },
    { title: 'Placement and weight sync', keys: [
      ['trainer.v1.trainer_mode', {}],
      ['actor_rollout_ref.rollout.nnodes', { slider: 'lin', min: 0, max: 16 }],
      ['actor_rollout_ref.rollout.n_gpus_per_node', {}],
      ['trainer.v1.separate_async.parameter_sync_step', { slider: 'lin', min: 1, max: 16 }],
      ['actor_rollout_ref.rollout.checkpoint_engine.backend', {}],
    ] },
    { title: 'Micro-batches (rows per device)', keys: [
      ['actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu', {}],
      ['actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu', {}],
      ['actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu', {}],
      ['critic.ppo_micro_batch_size_per_gpu', {}],
      ['actor_rollout_ref.actor.use_dynamic_bsz', {}],
    ] },
  ];
  const KEYS = GROUPS.flatMap((g) => g.keys.map((k) => k[0]));
  const SLIDER = Object.fromEntries(GROUPS.flatMap((g) => g.keys));

  // verl's defaults leave the micro-batch sizes unset (null), which no trainer accepts; verl's
  // quickstart (docs/start/quickstart.rst) sets them to these, and so does the page's first view.
  const VERL_MICRO = { 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu': '4',
                       'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu': '8',
                       'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu': '4',
                       'critic.ppo_micro_batch_size_per_gpu': '4' };
  // The two worked groups of mission.md (with micro-batch sizes and grpo, so that they are valid).
  const MICRO = { 'algorithm.adv_estimator': 'grpo',
                  'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu': '8',
                  'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu': '8' };
  const PRESETS = {
    defaults: { ...VERL_MICRO },
    group_a: { ...MICRO },
    group_b: { ...MICRO, 'trainer.v1.trainer_mode': 'separate_async', 'actor_rollout_ref.rollout.n': '8',
               'actor_rollout_ref.rollout.nnodes': '1', 'actor_rollout_ref.rollout.n_gpus_per_node': '4',
               'actor_rollout_ref.rollout.checkpoint_engine.backend': 'nccl' },
  };

  // Readout cards: [JSON key of 'rlflow_plan --json', label].
  const CARDS = [
    ['samples_per_step', 'samples per step'],
    ['updates_per_step', 'actor updates per step'],
    ['critic.updates_per_step', 'critic updates per step'],
    ['rollout_replicas', 'rollout replicas'],
    ['replica_world_size', 'devices per replica'],
    ['samples_per_replica', 'samples per replica'],
    ['total_devices', 'total devices'],
    ['train_devices', 'trainer pool devices'],
    ['standalone_rollout_devices', 'standalone rollout devices'],
    ['idle_rollout_devices', 'idle rollout devices'],
    ['weight_syncs_per_step', 'weight syncs per step'],
    ['weight_sync_scope', 'weight sync scope'],
    ['weight_sync_backend', 'weight sync backend'],
    ['parameter_sync_step', 'local updates per weight sync'],
    ['device_share_per_worker', 'device share per worker'],
    ['rollout_device_share_per_worker', 'rollout device share per worker'],
  ];
  // Per-worker table rows: [field of the role object, label].
  const WORKER_ROWS = [
    ['dp_size', 'data-parallel workers'],
    ['rows_per_worker', 'rows per worker'],
    ['mini_batch_rows_per_worker', 'mini-batch rows per worker'],
    ['micro_batch_size_per_gpu', 'micro-batch per worker'],
    ['grad_accumulation_steps', 'grad accumulation steps'],
    ['micro_batches_per_step', 'micro-batches per step'],
    ['updates_per_step', 'optimizer updates per step'],
  ];

  let planner = null;   // the WebAssembly module
  let info = {};        // key -> {kind, choices, help, default}
  let extra = [];       // overrides of keys the page has no input for (from the URL)
  let last = null;      // the last evaluation

  const $ = (sel) => document.querySelector(sel);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const lookup = (obj, dotted) => dotted.split('.').reduce((o, k) => (o == null ? undefined : o[k]), obj);
  const call = (name, args) => planner.ccall(name, 'string', args.map(() => 'string'), args);
  // a key (or text holding keys) as HTML that may wrap after '.' and '_' only, never mid-word
  const keyHtml = (s) => esc(s).replace(/([._])/g, '$1<wbr>');
  const GIB = 1024 ** 3;
  const gib = (b) => (b / GIB >= 10 ? (b / GIB).toFixed(1) : (b / GIB).toFixed(2)) + ' GiB';

  function format(v) {
    if (v === null || v === undefined) return '\u2014';
    if (typeof v === 'number' && !Number.isInteger(v)) return v.toFixed(3);
    if (Array.isArray(v)) return v.length ? v.join(', ') : '\u2014';
    return String(v);
  }

  // ---- inputs ----
  function buildInputs() {
    const box = $('#inputs');
    box.innerHTML = '';
    for (const g of GROUPS) {
      const fs = document.createElement('fieldset');
      fs.innerHTML = `<legend>${esc(g.title)}</legend>`;
      for (const [key, opt] of g.keys) {
        const ki = info[key];
        const div = document.createElement('div');
        div.className = 'field';
        div.dataset.key = key;
        const short = key.split('.').slice(-2).join('.');
        let control;
        if (ki.choices.length) {
          control = `<select id="${esc(key)}">${ki.choices.map((c) => `<option>${esc(c)}</option>`).join('')}</select>`;
        } else if (ki.kind === 'bool') {
          control = `<input type="checkbox" id="${esc(key)}">`;
        } else {
          const nullable = ki.kind.includes('null');
          control = `<input type="number" id="${esc(key)}" step="1" ${nullable ? 'placeholder="null"' : ''}>`;
        }
        div.innerHTML = `<label for="${esc(key)}" title="${esc(key)}: ${esc(ki.help)}">${keyHtml(short)}` +
          `<small>${esc(ki.help)} (default ${esc(ki.default)})</small></label>${control}`;
        if (opt.slider) {
          const r = document.createElement('input');
          r.type = 'range';
          r.min = opt.min; r.max = opt.max; r.step = 1;
          r.dataset.for = key;
          r.setAttribute('aria-label', key + ' slider');
          div.appendChild(r);
          r.addEventListener('input', () => {
            const v = opt.slider === 'log2' ? 2 ** Number(r.value) : Number(r.value);
            document.getElementById(key).value = String(v);
            update();
          });
        }
        fs.appendChild(div);
      }
      box.appendChild(fs);
    }
    const other = document.createElement('fieldset');
    other.innerHTML = '<legend>Other keys (key=value, one per line)</legend>' +
      '<textarea data-role="extra-overrides" rows="3" style="width:100%" placeholder="critic.ppo_epochs=2"></textarea>';
    box.appendChild(other);
    for (const key of KEYS) {
      const el = document.getElementById(key);
      el.addEventListener(el.tagName === 'SELECT' || el.type === 'checkbox' ? 'change' : 'input', update);
    }
    $('[data-role=extra-overrides]').addEventListener('input', () => {
      extra = $('[data-role=extra-overrides]').value.split('\n').map((s) => s.trim()).filter(Boolean);
      update();
    });
  }

  function readInput(key) {
    const el = document.getElementById(key);
    if (el.type === 'checkbox') return el.checked ? 'true' : 'false';
    if (el.tagName !== 'SELECT' && el.value.trim() === '') return info[key].kind.includes('null') ? 'null' : '';
    return el.value.trim();
  }

  function writeInput(key, text) {
    const el = document.getElementById(key);
    if (el.type === 'checkbox') el.checked = text === 'true';
    else if (el.tagName === 'SELECT') el.value = text;
    else el.value = text === 'null' ? '' : text;
    const opt = SLIDER[key];
    const r = document.querySelector(`input[type=range][data-for="${key}"]`);
    if (r && opt.slider) {
      const n = Number(text);
      if (Number.isFinite(n) && n > 0) r.value = opt.slider === 'log2' ? Math.round(Math.log2(n)) : n;
    }
  }

  // key=value for every input that differs from verl's default, then the extra overrides.
  function overrides() {
    const out = [];
    for (const key of KEYS) {
      const v = readInput(key);
      const changed = v !== info[key].default;
      document.getElementById(key).closest('.field').classList.toggle('changed', changed);
      if (changed) out.push(`${key}=${v}`);
    }
    return out.concat(extra);
  }

  function applyOverrides(list) {
    for (const key of KEYS) writeInput(key, info[key].default);
    extra = [];
    for (const item of list) {
      const eq = item.indexOf('=');
      const key = eq < 0 ? item : item.slice(0, eq);
      if (eq > 0 && KEYS.includes(key)) writeInput(key, item.slice(eq + 1));
      else extra.push(item);
    }
    $('[data-role=extra-overrides]').value = extra.join('\n');
  }

  // ---- URL fragment: #key=value&key=value ----
  function fromHash() {
    const h = location.hash.replace(/^#/, '');
    return h ? h.split('&').filter(Boolean).map(decodeURIComponent) : [];
  }
  function toHash(list) {
    const h = list.map((s) => s.split('=').map(encodeURIComponent).join('=')).join('&');
    const url = location.href.replace(/#.*$/, '') + (h ? '#' + h : '');
    try { history.replaceState(null, '', url); } catch (e) { location.replace(url); }
  }

  function shellWord(s) { return /^[A-Za-z0-9_.,=:\/+@%-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`; }

  // ---- evaluation and drawing ----
  function update() {
    const list = overrides();
    toHash(list);
    $('#command-line').textContent = ['rlflow_plan'].concat(list).map(shellWord).join(' ');
    const res = JSON.parse(call('rlflow_page_plan', [list.join('\n'), JSON.stringify(KEYS), $('#model').value]));
    last = res;
    const status = $('#status');
    $('#results').classList.toggle('stale', !res.ok);  // the drawings below are of the last valid input
    if (!res.ok) {
      status.className = 'error';
      status.textContent = res.error;
      document.body.dataset.state = 'error';
      return;
    }
    const nv = res.plan.violations.length;
    status.className = nv ? 'violations' : 'ok';
    status.textContent = nv ? `${nv} violation${nv > 1 ? 's' : ''}: this configuration would not start`
                            : 'valid: every start-up check passes';
    document.body.dataset.state = nv ? 'violations' : 'valid';
    drawReadouts(res);
    drawViolations(res);
    drawWorkers(res);
    drawRows(res);
    drawPools(res);
    drawMemory(res);
  }

  // ---- memory per device: the C++ estimate (estimate_device_memory) for the chosen model ----
  const MEMORY_ROWS = [
    ['actor_state', 'actor: weights, gradients, AdamW moments'],
    ['ref_state', 'reference engine'],
    ['rollout_weights', 'rollout weights'],
    ['kv_cache', 'KV cache'],
    ['rollout_activations', 'rollout activations'],
    ['train_activations', 'training activations'],
    ['total', 'total per device'],
  ];
  function drawMemory(res) {
    const m = res.memory;
    if (!m) { $('#memory').innerHTML = ''; return; }
    $('#memory-model').textContent = `${m.repo}: ${(m.params / 1e9).toFixed(2)} B parameters; ` +
      `${m.rows_per_worker} rows x ${m.slots} slots per worker`;
    $('#memory').innerHTML = '<tr><th>part</th><th>bytes</th></tr>' + MEMORY_ROWS.map(([k, label]) =>
      `<tr${k === 'total' ? ' class="total"' : ''}><td>${esc(label)}</td>` +
      `<td class="num" data-memory="${k}" data-value="${m[k]}">${gib(m[k])}</td></tr>`).join('');
  }

  function rowFor(res, key) { return res.rows.concat(res.page_rows).find((r) => r.key === key); }

  function drawReadouts(res) {
    const html = [];
    for (const [key, label] of CARDS) {
      const v = lookup(res.plan, key);
      if (v === undefined || (key.startsWith('critic.') && res.plan.critic === null)) continue;
      const row = rowFor(res, key);
      html.push(`<div class="readout"><div class="label">${esc(label)}</div>` +
        `<div class="value" data-readout="${esc(key)}" data-value="${esc(JSON.stringify(v))}">${esc(format(v))}</div>` +
        (row ? `<div class="formula">${esc(row.formula)}</div><div class="filled">= ${esc(row.value)}</div>` : '') +
        `</div>`);
    }
    $('#readouts').innerHTML = html.join('');
  }

  function drawViolations(res) {
    const v = res.violations;
    $('#violations').innerHTML = v.length
      ? v.map((x) => `<div class="violation"><div class="problem">${keyHtml(x.problem)}</div>` +
          (x.fix ? `<div class="fix">${keyHtml(x.fix)}</div>` : '') + `</div>`).join('')
      : '<div class="none">none: every start-up check passes</div>';
    $('#warnings').innerHTML = res.plan.warnings.map((w) => `<div class="warning">warning: ${esc(w)}</div>`).join('');
  }

  function drawWorkers(res) {
    const roles = ['actor', 'critic'].filter((r) => res.plan[r] !== null);
    let html = `<tr><th>quantity</th><th>formula</th>${roles.map((r) => `<th>${r}</th>`).join('')}</tr>`;
    for (const [field, label] of WORKER_ROWS) {
      const row = rowFor(res, `actor.${field}`) || rowFor(res, `critic.${field}`) || rowFor(res, field);
      html += `<tr><td>${esc(label)}</td><td><code>${esc(row ? row.formula : '')}</code></td>` +
        roles.map((r) => {
          const v = res.plan[r][field];
          return `<td class="num" data-readout="${r}.${field}" data-value="${esc(JSON.stringify(v))}">${esc(format(v))}</td>`;
        }).join('') + '</tr>';
    }
    for (const [key, label] of [['log_prob_micro_batches_per_worker', 'old log-prob passes per worker'],
                                ['ref_micro_batches_per_worker', 'reference log-prob passes per worker']]) {
      const row = rowFor(res, key);
      const v = res.plan[key];
      html += `<tr><td>${esc(label)}</td><td><code>${esc(row ? row.formula : '')}</code></td>` +
        `<td class="num" colspan="${roles.length}" data-readout="${key}" data-value="${esc(JSON.stringify(v))}">${esc(format(v))}</td></tr>`;
    }
    $('#per-worker').innerHTML = html;
  }

  function drawRows(res) {
    $('#plan-rows').innerHTML = '<tr><th>quantity</th><th>formula</th><th>value</th></tr>' +
      res.rows.map((r) => `<tr data-row="${esc(r.key)}"><td>${esc(r.quantity)}</td><td><code>${esc(r.formula)}</code></td>` +
        `<td><code>${esc(r.value)}</code></td></tr>`).join('');
  }

  // ---- the picture of the pools: devices as boxes, replicas grouped, the weight-sync arrow ----
  const BOX_W = 92, GAP = 8, MAX_COLS = 16, MAX_ROWS = 8;
  const PALETTE = ['#dbe9f8', '#fde6cf', '#dff3e4', '#f1e0f5', '#fff3c4', '#e0f0f2', '#f8dede', '#e7e7f7'];

  function drawPool(p) {
    // p: {name, cls, nodes, perNode, roles, share, replicaSize, replicas}
    const lines = p.roles.length;
    const boxH = 30 + 12 * lines;
    const cols = Math.min(p.perNode, MAX_COLS), rows = Math.min(p.nodes, MAX_ROWS);
    const drawn = cols * rows, total = p.nodes * p.perNode;
    const w = 70 + cols * (BOX_W + GAP) + 10, h = 28 + rows * (boxH + GAP) + (drawn < total ? 16 : 4);
    let s = `<g class="pool" data-pool="${p.cls}" data-devices="${total}" transform="translate(8,__Y__)">`;
    s += `<rect x="0" y="0" width="${w}" height="${h}" rx="8" fill="none" stroke="var(--${p.cls})" stroke-width="2"/>`;
    s += `<text x="10" y="18" font-size="13" font-weight="600" fill="var(--${p.cls})">${esc(p.name)}` +
      ` \u2014 ${p.nodes} node${p.nodes === 1 ? '' : 's'} \u00d7 ${p.perNode} device${p.perNode === 1 ? '' : 's'}</text>`;
    const groups = new Map();
    for (let node = 0; node < rows; ++node) {
      s += `<text x="10" y="${28 + node * (boxH + GAP) + boxH / 2 + 4}" font-size="11" fill="#5b6575">node ${node}</text>`;
      for (let c = 0; c < cols; ++c) {
        const dev = node * p.perNode + c;
        const rep = p.replicaSize > 0 ? Math.floor(dev / p.replicaSize) : -1;
        const inRep = rep >= 0 && rep < p.replicas;
        const x = 70 + c * (BOX_W + GAP), y = 28 + node * (boxH + GAP);
        let d = `<rect class="device" data-device="${dev}" data-replica="${inRep ? rep : ''}" x="${x}" y="${y}" width="${BOX_W}" height="${boxH}" rx="4"` +
          ` fill="${inRep ? PALETTE[rep % PALETTE.length] : p.replicaSize > 0 ? '#eeeeee' : '#f4f6f9'}" stroke="#8a94a6"/>`;
        d += `<text x="${x + 6}" y="${y + 13}" font-size="10.5" fill="#1d2430">device ${dev}</text>`;
        d += `<text x="${x + 6}" y="${y + 25}" font-size="10" fill="#5b6575">${inRep ? 'replica ' + rep : p.replicaSize > 0 ? 'idle' : ''}</text>`;
        p.roles.forEach((r, i) => {
          d += `<text x="${x + 6}" y="${y + 37 + 12 * i}" font-size="9.5" fill="#1d2430">${esc(r)} ${esc(p.share)}</text>`;
        });
        const gk = inRep ? rep : 'none';
        if (!groups.has(gk)) groups.set(gk, []);
        groups.get(gk).push(d);
      }
    }
    for (const [gk, parts] of groups) {
      s += gk === 'none' ? parts.join('') : `<g class="replica" data-replica="${gk}">${parts.join('')}</g>`;
    }
    if (drawn < total) s += `<text x="70" y="${h - 5}" font-size="11" fill="#5b6575">\u2026 and ${total - drawn} more devices not drawn</text>`;
    return { svg: s + '</g>', w, h };
  }

  function drawPools(res) {
    const plan = res.plan, v = res.values;
    const separate = plan.trainer_mode === 'separate_async';
    const nodes = Number(v['trainer.nnodes']), gpn = Number(v['trainer.n_gpus_per_node']);
    const pic = $('#pool-picture');
    if (!(nodes > 0 && gpn > 0)) { pic.innerHTML = '<p>no trainer devices to draw</p>'; return; }
    const shareText = (s) => (s > 0 ? `(${Math.round(1 / s) === 1 / s ? '1/' + (1 / s) : s.toFixed(3)})` : '');
    const pools = [];
    pools.push(drawPool({ name: 'trainer pool (global_pool)', cls: 'trainer', nodes, perNode: gpn,
      roles: plan.trainer_pool_roles, share: shareText(plan.device_share_per_worker),
      replicaSize: separate ? 0 : plan.replica_world_size, replicas: separate ? 0 : plan.rollout_replicas }));
    if (separate) {
      const rn = Number(v['actor_rollout_ref.rollout.nnodes']);
      const rg = v['actor_rollout_ref.rollout.n_gpus_per_node'] === 'null' ? gpn : Number(v['actor_rollout_ref.rollout.n_gpus_per_node']);
      if (rn > 0 && rg > 0)
        pools.push(drawPool({ name: 'standalone rollout pool', cls: 'rollout', nodes: rn, perNode: rg,
          roles: plan.rollout_pool_roles, share: shareText(plan.rollout_device_share_per_worker),
          replicaSize: plan.replica_world_size, replicas: plan.rollout_replicas }));
    }
    if (plan.reward_devices > 0)
      pools.push(drawPool({ name: 'reward pool', cls: 'reward', nodes: 1, perNode: plan.reward_devices,
        roles: ['reward_model'], share: '', replicaSize: 0, replicas: 0 }));
    const ARROW = 56;
    let y = 8, width = 0, svg = '';
    const tops = [];
    pools.forEach((p, i) => {
      if (i > 0) y += ARROW;
      tops.push([y, p.h]);
      svg += p.svg.replace('__Y__', String(y));
      y += p.h;
      width = Math.max(width, p.w + 16);
    });
    // weight sync: an arrow from the trainer pool into the rollout pool (separate_async), or a loop
    // on the trainer pool (colocated: in place, same pool)
    const label = `weight sync: ${plan.weight_syncs_per_step} per step, ${plan.weight_sync_scope}, ${plan.weight_sync_backend}` +
      (separate ? ` (after ${plan.parameter_sync_step} local updates)` : ' (in place)');
    let arrow = `<g id="weight-sync" data-scope="${esc(plan.weight_sync_scope)}" data-backend="${esc(plan.weight_sync_backend)}">`;
    if (separate && pools.length > 1) {
      const y1 = tops[0][0] + tops[0][1], y2 = tops[1][0];
      arrow += `<line x1="60" y1="${y1 + 2}" x2="60" y2="${y2 - 4}" stroke="#c46a1b" stroke-width="3" marker-end="url(#arrowhead)"/>` +
        `<text x="72" y="${(y1 + y2) / 2 + 4}" font-size="12" fill="#c46a1b">${esc(label)}</text>`;
    } else {
      const x = pools[0].w + 8, yy = tops[0][0] + 20, hh = Math.max(30, tops[0][1] - 40);
      arrow += `<path d="M ${x} ${yy} C ${x + 40} ${yy}, ${x + 40} ${yy + hh}, ${x + 4} ${yy + hh}" fill="none" stroke="#2f6fb3" stroke-width="3" marker-end="url(#arrowhead-blue)"/>` +
        `<text x="${x + 46}" y="${yy + hh / 2 + 4}" font-size="12" fill="#2f6fb3">${esc(label)}</text>`;
      width += 46 + 7 * label.length;
    }
    arrow += '</g>';
    const defs = '<defs><marker id="arrowhead" markerWidth="10" markerHeight="8" refX="6" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#c46a1b"/></marker>' +
      '<marker id="arrowhead-blue" markerWidth="10" markerHeight="8" refX="6" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#2f6fb3"/></marker></defs>';
    pic.innerHTML = `<svg id="pools" xmlns="http://www.w3.org/2000/svg" width="${Math.max(width, 400)}" height="${y + 10}">${defs}${svg}${arrow}</svg>`;
  }

  // ---- start ----
  function start(M) {
    planner = M;
    const keys = JSON.parse(call('rlflow_page_keys', [JSON.stringify(KEYS)]));
    if (keys.error) throw new Error(keys.error);
    for (const k of keys) info[k.key] = k;
    $('#version').textContent = call('rlflow_page_version', []);
    const models = JSON.parse(call('rlflow_page_models', []));
    $('#model').innerHTML = models.map((m) =>
      `<option value="${esc(m.name)}">${esc(m.repo)} (${(m.params / 1e9).toFixed(2)} B)</option>`).join('');
    $('#model').addEventListener('change', update);
    buildInputs();
    // a shared link restores its configuration; a fresh page opens on verl's defaults with the
    // micro-batch sizes of verl's quickstart
    const h = fromHash();
    applyOverrides(h.length ? h : Object.entries(PRESETS.defaults).map(([k, v]) => `${k}=${v}`));
    for (const b of document.querySelectorAll('#presets button')) {
      b.addEventListener('click', () => {
        applyOverrides(Object.entries(PRESETS[b.dataset.preset]).map(([k, v]) => `${k}=${v}`));
        update();
      });
    }
    window.addEventListener('hashchange', () => { applyOverrides(fromHash()); update(); });
    $('#copy-command').addEventListener('click', async () => {
      const text = $('#command-line').textContent;
      let ok = false;
      try { await navigator.clipboard.writeText(text); ok = true; } catch (e) {
        const ta = document.createElement('textarea');
        ta.value = text; document.body.appendChild(ta); ta.select();
        try { ok = document.execCommand('copy'); } catch (e2) { ok = false; }
        ta.remove();
      }
      $('#copy-status').textContent = ok ? 'copied' : 'select the line below to copy it';
    });
    update();
    document.body.dataset.ready = 'true';
  }

  // For scripts and tests: the last evaluation (what the page shows) and a way to set inputs.
  window.rlflowPlanner = {
    result: () => last,
    set(key, value) { writeInput(key, String(value)); update(); },
    overrides: () => overrides(),
  };

  createRlflowPlanner().then(start).catch((e) => {
    const s = $('#status');
    s.className = 'error';
    s.textContent = 'the planner failed to load: ' + e;
    document.body.dataset.ready = 'error';
  });
})();
