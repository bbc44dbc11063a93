// tools/plan_page/plan_page.hpp: what the planner page asks of the C++ planner, as JSON text in
// and out. Compiled twice: to WebAssembly for the page (plan_page_wasm.cpp, emscripten) and
// natively for its tests (tests/tools), so the page runs the very code 'rlflow_plan' runs:
// parse_command_line, plan(cfg), Plan::as_json / rows, validate and warnings.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <rlflow/config/device_memory_estimate.hpp>  // estimate_device_memory
#include <rlflow/config/planner.hpp>                 // plan, Plan, parse_command_line, detail::find_key
#include <rlflow/model/published_models.hpp>         // published_models, published_model

namespace rlflow::plan_page {

//! Splits the page's argument text (one 'key=value' per line; empty lines ignored) into the
//! argument list rlflow_plan would get on its command line.
inline std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto const nl = text.find('\n');
    auto line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) out.emplace_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

//! A violation split into what is wrong and the fix: the project's messages read
//! "<what is wrong>; <the fix>", so the fix is the text after the last "; " (none without one).
inline nlohmann::json split_violation(std::string const& text) {
  auto const cut = text.rfind("; ");
  if (cut == std::string::npos) return {{"text", text}, {"problem", text}, {"fix", ""}};
  return {{"text", text}, {"problem", text.substr(0, cut)}, {"fix", text.substr(cut + 2)}};
}

//! The device memory one worker of the colocated trainer holds at its peak for the configuration
//! and a published model's shape (estimate_device_memory: rlflow's fp32 engines), in bytes:
//!   {"model", "repo", "params", "actor_state", "ref_state", "rollout_weights", "kv_cache",
//!    "rollout_activations", "train_activations", "total", "rows_per_worker", "slots"}
inline nlohmann::json memory_json(TrainerConfig const& cfg, model::PublishedModel const& m) {
  model::GPTConfig shape = m.config;
  shape.max_seq_len = static_cast<int>(std::max<std::int64_t>(shape.max_seq_len, cfg.data.max_prompt_length + cfg.data.max_response_length));
  auto const e = estimate_device_memory(cfg, shape);
  return {{"model", std::string(m.name)}, {"repo", std::string(m.repo)},
          {"params", model::ParamLayout(shape).count()},
          {"actor_state", e.actor_state}, {"ref_state", e.ref_state}, {"rollout_weights", e.rollout_weights},
          {"kv_cache", e.kv_cache}, {"rollout_activations", e.rollout_activations},
          {"train_activations", e.train_activations}, {"total", e.total()},
          {"rows_per_worker", e.rows_per_worker}, {"slots", e.slots}};
}

//! The published models the page offers: [{"name", "repo", "params"}].
inline nlohmann::json models() {
  nlohmann::json out = nlohmann::json::array();
  for (auto const& m : model::published_models())
    out.push_back({{"name", std::string(m.name)}, {"repo", std::string(m.repo)},
                   {"params", model::ParamLayout(m.config).count()}});
  return out;
}

//! The plan of the configuration given as 'key=value' lines, exactly as 'rlflow_plan --json
//! key=value ...' computes it, plus what the page shows next to it:
//!   {"ok": true, "plan": <Plan::as_json()>, "rows": [{quantity, formula, value, key}],
//!    "violations": [{text, problem, fix}], "values": {<key>: <value as text>} for 'keys',
//!    "memory": memory_json(...) when 'model' names a published model}
//! or {"ok": false, "error": "<the message rlflow_plan prints>"} for a bad argument.
inline nlohmann::json evaluate(std::string_view args_text, std::vector<std::string> const& keys = {},
                               std::string_view model = {}) {
  try {
    auto args = split_lines(args_text);
    args.insert(args.begin(), "rlflow_plan");
    std::vector<char const*> argv;
    for (auto const& a : args) argv.push_back(a.c_str());
    auto const cl = parse_command_line(static_cast<int>(argv.size()), argv.data());
    if (!cl.config_files.empty()) throw config_error("the planner page cannot read --config files; give key=value overrides");
    auto const p = plan(cl.config);
    nlohmann::json out = {{"ok", true}, {"plan", p.as_json()}};
    auto& rows = out["rows"] = nlohmann::json::array();
    for (auto const& r : p.rows())
      rows.push_back({{"quantity", r.quantity}, {"formula", r.formula}, {"value", r.value}, {"key", r.key}});
    // quantities the table leaves implicit, with their formulas filled in the same way
    auto const& c = cl.config;
    auto const& r = c.actor_rollout_ref.rollout;
    auto& extra = out["page_rows"] = nlohmann::json::array();
    auto add = [&](std::string q, std::string f, std::string v, std::string k) {
      extra.push_back({{"quantity", std::move(q)}, {"formula", std::move(f)}, {"value", std::move(v)}, {"key", std::move(k)}});
    };
    add("trainer pool devices", "trainer.nnodes x trainer.n_gpus_per_node",
        msg(c.trainer.nnodes, " x ", c.trainer.n_gpus_per_node, " = ", p.train_devices), "train_devices");
    add("standalone rollout devices", "separate_async: rollout.nnodes x rollout.n_gpus_per_node, else 0",
        c.is_separate_async() ? msg(r.nnodes, " x ", c.rollout_n_gpus_per_node(), " = ", p.standalone_rollout_devices)
                              : msg(p.standalone_rollout_devices),
        "standalone_rollout_devices");
    add("devices per replica", "TP x DP x PP",
        msg(r.tensor_model_parallel_size, " x ", r.data_parallel_size, " x ", r.pipeline_model_parallel_size, " = ",
            p.replica_world_size),
        "replica_world_size");
    add("idle rollout devices", "rollout devices mod (TP x DP x PP)",
        msg(p.rollout_devices, " mod ", p.replica_world_size, " = ", p.idle_rollout_devices), "idle_rollout_devices");
    add("weight sync scope", "colocated: in-pool; separate_async: cross-pool", p.weight_sync_scope, "weight_sync_scope");
    add("weight sync backend", "colocated: naive (in place); separate_async: checkpoint_engine.backend",
        p.weight_sync_backend, "weight_sync_backend");
    auto& viol = out["violations"] = nlohmann::json::array();
    for (auto const& v : p.violations) viol.push_back(split_violation(v));
    auto& values = out["values"] = nlohmann::json::object();
    for (auto const& k : keys) values[k] = cl.config.get(k);
    if (!model.empty()) out["memory"] = memory_json(cl.config, model::published_model(model));
    return out;
  } catch (error const& e) {
    return {{"ok", false}, {"error", std::string("rlflow_plan: ") + e.what()}};
  }
}

//! What the page needs to build an input for each key: its kind ("int", "int or null", "bool",
//! "string", ...), the allowed choices, the help text and verl's default (as text). An unknown
//! key throws config_error naming the closest known key.
inline nlohmann::json key_info(std::vector<std::string> const& keys) {
  TrainerConfig const defaults{};
  nlohmann::json out = nlohmann::json::array();
  for (auto const& k : keys) {
    auto const& info = detail::require_key(k, "plan page");
    nlohmann::json choices = nlohmann::json::array();
    for (auto c : detail::split_choices(info.choices))
      if (c != "null") choices.push_back(std::string(c));
    out.push_back({{"key", k},
                   {"kind", std::string(detail::kind_name(info.kind))},
                   {"choices", choices},
                   {"help", std::string(info.help)},
                   {"default", defaults.get(k)}});
  }
  return out;
}

}  // namespace rlflow::plan_page
