// rlflow/config/impl/planner.ipp: the bodies of rlflow/config/planner.hpp's functions (the resource
// planner and its command line; included by that header when RLFLOW_DEFINE_BODIES; see
// rlflow/core/config.hpp).
#pragma once

namespace rlflow {
namespace detail {
RLFLOW_DECL std::int64_t safe_div(std::int64_t a, std::int64_t b) { return b > 0 ? a / b : 0; }

RLFLOW_DECL std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

RLFLOW_DECL RolePlan role_plan(std::int64_t B, std::int64_t n, std::int64_t mini, std::int64_t epochs, std::int64_t dp,
                               bool dynamic, nullable<std::int64_t> micro_per_gpu, nullable<std::int64_t> micro_global) {
  RolePlan p;
  p.enabled = true;
  p.dp_size = dp;
  p.ppo_mini_batch_size = mini;
  p.ppo_epochs = epochs;
  p.mini_batch_rows = mini * n;
  p.updates_per_step = ceil_div(B, mini) * epochs;  // (B·n)/(M·n): n cancels
  p.rows_per_worker = safe_div(B * n, dp);
  p.mini_batch_rows_per_worker = safe_div(mini * n, dp);
  p.dynamic_bsz = dynamic;
  if (!dynamic) {
    // verl's deprecated global micro-batch becomes micro // world per GPU
    p.micro_batch_size_per_gpu =
        micro_per_gpu.has_value ? micro_per_gpu.stored : micro_global.has_value ? safe_div(micro_global.stored, dp) : 0;
    p.grad_accumulation_steps = ceil_div(p.mini_batch_rows_per_worker, p.micro_batch_size_per_gpu);
    p.micro_batches_per_step = p.grad_accumulation_steps * p.updates_per_step;
  }
  return p;
}

}  // namespace detail
RLFLOW_DECL Plan plan(TrainerConfig const& cfg) {
  Plan p;
  auto const& a = cfg.actor_rollout_ref.actor;
  auto const& r = cfg.actor_rollout_ref.rollout;
  bool const separate = cfg.is_separate_async();
  p.trainer_mode = cfg.trainer.v1.trainer_mode.str();
  p.train_batch_size = cfg.data.train_batch_size;
  p.rollout_n = r.n;
  p.samples_per_step = cfg.data.train_batch_size * r.n;
  p.parameter_sync_step = cfg.parameter_sync_step();

  p.actor = detail::role_plan(cfg.data.train_batch_size, r.n, a.ppo_mini_batch_size, a.ppo_epochs, cfg.actor_dp_size(),
                              a.use_dynamic_bsz, a.ppo_micro_batch_size_per_gpu, a.ppo_micro_batch_size);
  p.updates_per_step = p.actor.updates_per_step;
  if (cfg.uses_critic())
    p.critic = detail::role_plan(cfg.data.train_batch_size, r.n, cfg.critic_ppo_mini_batch_size(),
                                 cfg.critic_ppo_epochs(), cfg.critic_dp_size(), cfg.critic.use_dynamic_bsz,
                                 cfg.critic.ppo_micro_batch_size_per_gpu, cfg.critic.ppo_micro_batch_size);

  auto const lp_micro = [&](nullable<std::int64_t> per_gpu, nullable<std::int64_t> global) -> std::int64_t {
    return per_gpu.has_value ? per_gpu.stored : global.has_value ? detail::safe_div(global.stored, cfg.actor_dp_size()) : 0;
  };
  if (!cfg.rollout_log_prob_use_dynamic_bsz())
    p.log_prob_micro_batches_per_worker = detail::ceil_div(
        p.actor.rows_per_worker, lp_micro(r.log_prob_micro_batch_size_per_gpu, r.log_prob_micro_batch_size));
  auto const& ref = cfg.actor_rollout_ref.ref;
  if (cfg.uses_reference() && !cfg.ref_log_prob_use_dynamic_bsz())
    p.ref_micro_batches_per_worker = detail::ceil_div(
        p.actor.rows_per_worker, lp_micro(ref.log_prob_micro_batch_size_per_gpu, ref.log_prob_micro_batch_size));

  // ---- devices and pools (verl's resource pools) ----
  p.train_devices = cfg.world_size();
  p.standalone_rollout_devices = separate ? r.nnodes * cfg.rollout_n_gpus_per_node() : 0;
  auto const& rm = cfg.reward.reward_model;
  p.reward_devices = rm.enable && rm.enable_resource_pool ? rm.nnodes * rm.n_gpus_per_node : 0;
  p.total_devices = p.train_devices + p.standalone_rollout_devices + p.reward_devices;
  p.rollout_devices = cfg.rollout_devices();
  p.replica_world_size = cfg.rollout_replica_world_size();
  p.rollout_replicas = detail::safe_div(p.rollout_devices, p.replica_world_size);
  p.idle_rollout_devices = p.replica_world_size > 0 ? p.rollout_devices % p.replica_world_size : p.rollout_devices;
  p.samples_per_replica = detail::ceil_div(p.samples_per_step, p.rollout_replicas);

  p.weight_syncs_per_step = 1;  // after the step's last update (separate_async: after parameter_sync_step updates)
  p.weight_sync_scope = separate ? "cross-pool" : "in-pool";
  p.weight_sync_backend = separate ? r.checkpoint_engine.backend.str() : "naive";
  p.max_colocate_count = cfg.max_colocate_count;
  p.device_share_per_worker = cfg.max_colocate_count > 0 ? 1.0 / static_cast<double>(cfg.max_colocate_count) : 0.0;
  p.rollout_device_share_per_worker = separate ? 0.5 : p.device_share_per_worker;

  p.trainer_pool_roles.push_back(cfg.uses_reference() ? "actor_rollout_ref" : "actor_rollout");
  if (cfg.uses_critic()) p.trainer_pool_roles.push_back("critic");
  if (rm.enable && !rm.enable_resource_pool) p.trainer_pool_roles.push_back("reward_model");
  if (separate) p.rollout_pool_roles.push_back("rollout");

  p.violations = validate(cfg);
  p.warnings = warnings(cfg);
  return p;
}

RLFLOW_DECL nlohmann::json role_plan_json(RolePlan const& r) {
  if (!r.enabled) return nullptr;
  nlohmann::json j = {{"dp_size", r.dp_size},
                      {"ppo_mini_batch_size", r.ppo_mini_batch_size},
                      {"ppo_epochs", r.ppo_epochs},
                      {"mini_batch_rows", r.mini_batch_rows},
                      {"updates_per_step", r.updates_per_step},
                      {"rows_per_worker", r.rows_per_worker},
                      {"mini_batch_rows_per_worker", r.mini_batch_rows_per_worker},
                      {"dynamic_bsz", r.dynamic_bsz}};
  auto const unknown = r.dynamic_bsz || r.micro_batch_size_per_gpu == 0;
  j["micro_batch_size_per_gpu"] = unknown ? nlohmann::json(nullptr) : nlohmann::json(r.micro_batch_size_per_gpu);
  j["grad_accumulation_steps"] = unknown ? nlohmann::json(nullptr) : nlohmann::json(r.grad_accumulation_steps);
  j["micro_batches_per_step"] = unknown ? nlohmann::json(nullptr) : nlohmann::json(r.micro_batches_per_step);
  return j;
}

RLFLOW_DECL nlohmann::json Plan::as_json() const {
  nlohmann::json j;
  j["trainer_mode"] = trainer_mode;
  j["train_batch_size"] = train_batch_size;
  j["rollout_n"] = rollout_n;
  j["samples_per_step"] = samples_per_step;
  j["updates_per_step"] = updates_per_step;
  j["parameter_sync_step"] = parameter_sync_step;
  j["train_devices"] = train_devices;
  j["standalone_rollout_devices"] = standalone_rollout_devices;
  j["reward_devices"] = reward_devices;
  j["total_devices"] = total_devices;
  j["rollout_devices"] = rollout_devices;
  j["replica_world_size"] = replica_world_size;
  j["rollout_replicas"] = rollout_replicas;
  j["idle_rollout_devices"] = idle_rollout_devices;
  j["samples_per_replica"] = samples_per_replica;
  j["weight_syncs_per_step"] = weight_syncs_per_step;
  j["weight_sync_scope"] = weight_sync_scope;
  j["weight_sync_backend"] = weight_sync_backend;
  j["max_colocate_count"] = max_colocate_count;
  j["device_share_per_worker"] = device_share_per_worker;
  j["rollout_device_share_per_worker"] = rollout_device_share_per_worker;
  j["trainer_pool_roles"] = trainer_pool_roles;
  j["rollout_pool_roles"] = rollout_pool_roles;
  j["actor"] = role_plan_json(actor);
  j["critic"] = role_plan_json(critic);
  j["log_prob_micro_batches_per_worker"] = log_prob_micro_batches_per_worker;
  j["ref_micro_batches_per_worker"] = ref_micro_batches_per_worker;
  j["violations"] = violations;
  j["warnings"] = warnings;
  return j;
}

RLFLOW_DECL std::vector<PlanRow> Plan::rows() const {
  std::vector<PlanRow> rows;
  auto add = [&](std::string q, std::string f, std::string v, std::string key = {}) {  // key: the JSON key of the value
    rows.push_back({std::move(q), std::move(f), std::move(v), std::move(key)});
  };
  auto share = [](double s) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(3) << s;
    return os.str();
  };
  bool const separate = trainer_mode == "separate_async";
  add("trainer mode", "trainer.v1.trainer_mode", trainer_mode, "trainer_mode");
  add("samples per step", "B x n", msg(train_batch_size, " x ", rollout_n, " = ", samples_per_step), "samples_per_step");
  add("actor updates per step", "(B*n)/(M*n) x ppo_epochs",
      msg(train_batch_size, "/", actor.ppo_mini_batch_size, " x ", actor.ppo_epochs, " = ", updates_per_step),
      "updates_per_step");
  if (critic.enabled)
    add("critic updates per step", "(B*n)/(M_critic*n) x critic.ppo_epochs",
        msg(train_batch_size, "/", critic.ppo_mini_batch_size, " x ", critic.ppo_epochs, " = ", critic.updates_per_step),
        "critic.updates_per_step");
  if (separate) add("local updates per weight sync", "parameter_sync_step", msg(parameter_sync_step), "parameter_sync_step");
  add("rollout replicas", "rollout devices / (TP x DP x PP)",
      msg(rollout_devices, "/", replica_world_size, " = ", rollout_replicas,
          idle_rollout_devices > 0 ? msg(" (", idle_rollout_devices, " idle)") : std::string()),
      "rollout_replicas");
  add("samples per replica", "ceil(B*n / replicas)", msg(samples_per_replica), "samples_per_replica");
  add("devices", "train + standalone rollout + reward pool",
      msg(train_devices, " + ", standalone_rollout_devices, " + ", reward_devices, " = ", total_devices), "total_devices");
  add("weight syncs per step", separate ? "1, across pools" : "1, same pool",
      msg(weight_syncs_per_step, " ", weight_sync_scope, " (", weight_sync_backend, ")"), "weight_syncs_per_step");
  add("device share per worker", "1 / max_colocate_count", msg(share(device_share_per_worker), " (1/", max_colocate_count, ")"),
      "device_share_per_worker");
  if (separate) add("rollout device share per worker", "1/2 (standalone pools)", share(rollout_device_share_per_worker),
                    "rollout_device_share_per_worker");
  auto join = [](std::vector<std::string> const& v) {
    std::string s;
    for (auto const& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? std::string("-") : s;
  };
  add("trainer pool roles", "fused per device", join(trainer_pool_roles), "trainer_pool_roles");
  if (separate) add("rollout pool roles", "standalone replicas", join(rollout_pool_roles), "rollout_pool_roles");
  auto role_rows = [&](std::string const& name, RolePlan const& rp) {
    if (!rp.enabled) return;
    add(name + " DP workers", "devices / ulysses_sequence_parallel_size", msg(rp.dp_size), name + ".dp_size");
    add(name + " rows per worker", "B*n / DP", msg(rp.rows_per_worker), name + ".rows_per_worker");
    add(name + " mini-batch rows per worker", "M*n / DP", msg(rp.mini_batch_rows_per_worker),
        name + ".mini_batch_rows_per_worker");
    if (rp.dynamic_bsz || rp.micro_batch_size_per_gpu == 0) {
      add(name + " grad accumulation steps", "(M*n/DP) / micro_per_gpu", rp.dynamic_bsz ? "dynamic (token packed)" : "unset",
          name + ".grad_accumulation_steps");
    } else {
      add(name + " micro-batch per worker", "ppo_micro_batch_size_per_gpu", msg(rp.micro_batch_size_per_gpu),
          name + ".micro_batch_size_per_gpu");
      add(name + " grad accumulation steps", "(M*n/DP) / micro_per_gpu", msg(rp.grad_accumulation_steps),
          name + ".grad_accumulation_steps");
      add(name + " micro-batches per step", "accumulation x updates", msg(rp.micro_batches_per_step),
          name + ".micro_batches_per_step");
    }
  };
  role_rows("actor", actor);
  role_rows("critic", critic);
  add("old log-prob passes per worker", "(B*n/DP) / log_prob_micro_per_gpu",
      log_prob_micro_batches_per_worker > 0 ? msg(log_prob_micro_batches_per_worker) : std::string("dynamic or unset"),
      "log_prob_micro_batches_per_worker");
  if (ref_micro_batches_per_worker > 0)
    add("ref log-prob passes per worker", "(B*n/DP) / ref micro_per_gpu", msg(ref_micro_batches_per_worker),
        "ref_micro_batches_per_worker");

  return rows;
}

RLFLOW_DECL std::string Plan::to_table() const {
  auto const table = rows();
  std::size_t w0 = 8, w1 = 7;
  for (auto const& r : table) {
    w0 = std::max(w0, r.quantity.size());
    w1 = std::max(w1, r.formula.size());
  }
  std::ostringstream os;
  os << std::left << std::setw(static_cast<int>(w0)) << "quantity" << " | " << std::setw(static_cast<int>(w1))
     << "formula" << " | value\n";
  os << std::string(w0, '-') << "-+-" << std::string(w1, '-') << "-+-" << std::string(24, '-') << "\n";
  for (auto const& r : table)
    os << std::setw(static_cast<int>(w0)) << r.quantity << " | " << std::setw(static_cast<int>(w1)) << r.formula << " | "
       << r.value << "\n";
  if (violations.empty()) {
    os << "\nviolations: none\n";
  } else {
    os << "\nviolations (" << violations.size() << "):\n";
    for (auto const& v : violations) os << "  - " << v << "\n";
  }
  for (auto const& w : warnings) os << "warning: " << w << "\n";
  return os.str();
}

RLFLOW_DECL int plan_main(int argc, char const* const* argv, std::ostream& out, std::ostream& err) {
  try {
    auto const cl = parse_command_line(argc, argv);
    if (cl.help) {
      out << "usage: rlflow_plan [--config FILE.{yaml,json}] [key=value ...] [--json]\n"
             "Prints the resource plan of one training step and the violated constraints.\n\n"
          << config_help();
      return 0;
    }
    auto const p = plan(cl.config);
    out << (cl.json ? p.to_json() + "\n" : p.to_table());
    return 0;
  } catch (error const& e) {
    err << "rlflow_plan: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace rlflow
