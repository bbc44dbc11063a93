// rlflow/algorithm/impl/advantage_step.ipp: the bodies of rlflow/algorithm/advantage_step.hpp's non-template functions (config.hpp, RLFLOW_DECL).
#pragma once

namespace rlflow::detail::adv {

RLFLOW_DECL Tensor int32_mask(Tensor const& m, const char* fn) {
  if (m.dtype() == DType::int32) return m;
  Tensor out = Tensor::empty(DType::int32, m.shape());
  auto o = out.span<std::int32_t>();
  auto convert = [&](auto s) {
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = s[i] != 0;
  };
  switch (m.dtype()) {
    case DType::int64: convert(m.span<std::int64_t>()); break;
    case DType::uint8: convert(m.span<std::uint8_t>()); break;
    case DType::bool_: convert(m.span<bool>()); break;
    case DType::float32: convert(m.span<float>()); break;
    default:
      throw format_error(msg("rlflow::", fn, ": response_mask has dtype ", dtype_name(m.dtype()),
                             "; use int32, int64, uint8, bool or float32"));
  }
  return out;
}

RLFLOW_DECL Tensor response_mask_of(DataProto const& batch, const char* fn) {
  if (batch.has_tensor("response_mask")) return batch.tensor("response_mask");
  if (!batch.has_tensor("responses") || !batch.has_tensor("attention_mask"))
    throw key_error(msg("rlflow::", fn, ": the batch has no 'response_mask' and no 'responses' + 'attention_mask' to derive it "
                        "from; add response_mask (B, T)"));
  Tensor const& am = batch.tensor("attention_mask");
  std::int64_t const B = am.dim(0), L = am.dim(1), T = batch.tensor("responses").dim(1);
  Tensor rm = Tensor::zeros(DType::int32, Shape{B, T});
  Tensor const am32 = int32_mask(am, fn);
  auto const fm = am32.span<std::int32_t>();
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t t = 0; t < T; ++t) rm.at<std::int32_t>(i, t) = fm[static_cast<std::size_t>(i * L + L - T + t)] != 0;
  return rm;
}

RLFLOW_DECL Tensor const& need_tensor(DataProto const& batch, const char* key, const char* fn, const char* why) {
  if (!batch.has_tensor(key))
    throw key_error(msg("rlflow::", fn, ": the batch has no tensor '", key, "', which ", why, "; add it to the batch"));
  return batch.tensor(key);
}

RLFLOW_DECL group_ids_t group_ids(DataProto const& batch, const char* fn, std::string_view estimator) {
  if (!batch.has_non_tensor("uid"))
    throw key_error(msg("rlflow::", fn, ": algorithm.adv_estimator=", estimator,
                        " groups rows by the non-tensor key 'uid' (one id per prompt), which the batch lacks; add it"));
  auto const& col = batch.non_tensor("uid");
  std::vector<std::string> reprs;  // only when some uid is not a string (verl's are uuid strings)
  for (std::size_t i = 0; i < col.size(); ++i)
    if (!col[i].is_string()) {
      if (reprs.empty()) reprs.resize(col.size());
      reprs[i] = col[i].repr();
    }
  group_ids_t out{Tensor::empty(DType::int64, Shape{static_cast<std::int64_t>(col.size())})};
  kernels::detail::hashed_group_ids<std::string_view>(
      col.size(), [&](std::size_t i) { return col[i].is_string() ? std::string_view(col[i].as_string()) : std::string_view(reprs[i]); },
      out.ids.span<std::int64_t>().data());
  return out;
}

RLFLOW_DECL std::vector<double> parse_weights(string_list const& l) {
  std::vector<double> w;
  for (auto const& s : l.items()) {
    char* end = nullptr;
    double const v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
      throw config_error(msg("rlflow::compute_advantage: algorithm.gdpo_reward_weights entry '", s, "' is not a finite number"));
    w.push_back(v);
  }
  return w;
}

RLFLOW_DECL floats_t estimator_args::scores() const {
  floats_t s{Tensor::empty(DType::float32, Shape{d.rows})};
  kernels::sequence_scores(cpu::par, d, rewards, s.t.span<float>());
  return s;
}

RLFLOW_DECL group_ids_t estimator_args::groups() const { return group_ids(batch, fn, est); }

// The estimators' kernels: the 'kernel' column of rlflow/config/estimators.hpp.
using ids_view = std::span<std::int64_t const>;
using floats_view = std::span<float const>;

RLFLOW_DECL void gae(estimator_args& a) {
  Tensor const& values = need_tensor(a.batch, "values", a.fn, "GAE needs (the critic's values)");
  kernels::gae_advantage_return(cpu::par, a.d, a.rewards, values.span<float>(), a.mask, a.algo.gamma, a.algo.lam, a.adv, a.ret);
  a.resample = a.algo.use_pf_ppo;
}

//! grpo and grpo_vectorized (verl: the same function); returns = advantages (one buffer).
RLFLOW_DECL void grpo(estimator_args& a) {
  auto s = a.scores();
  auto idx = a.groups();
  kernels::grpo_outcome_advantage(cpu::par, a.d, floats_view(s), a.mask, ids_view(idx), a.adv, {}, a.go);
}

RLFLOW_DECL void gdpo(estimator_args& a) {
  auto idx = a.groups();
  auto const keys = a.algo.gdpo_reward_keys.items();
  if (keys.empty())
    throw config_error(msg("rlflow::", a.fn, ": algorithm.adv_estimator=gdpo needs algorithm.gdpo_reward_keys, the per-sample "
                           "reward components to normalise separately (verl asserts it is set); e.g. "
                           "[format_reward,accuracy_reward]"));
  std::vector<float> dims;
  for (auto const& k : keys) {
    if (!a.batch.has_non_tensor(k))
      throw key_error(msg("rlflow::", a.fn, ": GDPO reward key '", k, "' is not a non-tensor column of the batch; the reward "
                          "function must return it per sample"));
    auto const& col = a.batch.non_tensor(k);
    if (static_cast<std::int64_t>(col.size()) != a.d.rows)
      throw shape_error(
          msg("rlflow::", a.fn, ": GDPO reward key '", k, "' has ", col.size(), " entries for ", a.d.rows, " rows"));
    for (auto const& v : col) dims.push_back(static_cast<float>(v.as_number()));
  }
  auto w = parse_weights(a.algo.gdpo_reward_weights);
  kernels::gdpo_outcome_advantage(cpu::par, a.d, static_cast<std::int64_t>(keys.size()), floats_view(dims),
                                  std::span<double const>(w), a.mask, ids_view(idx), a.adv, a.ret, a.go);
}

RLFLOW_DECL void grpo_passk(estimator_args& a) {
  auto s = a.scores();
  auto idx = a.groups();
  kernels::grpo_passk_outcome_advantage(cpu::par, a.d, floats_view(s), a.mask, ids_view(idx), a.adv, a.ret, a.go);
}

RLFLOW_DECL void rloo(estimator_args& a) {
  auto s = a.scores();
  auto idx = a.groups();
  kernels::rloo_outcome_advantage(cpu::par, a.d, floats_view(s), a.mask, ids_view(idx), a.adv, a.ret);
}

RLFLOW_DECL void rloo_vectorized(estimator_args& a) {
  auto s = a.scores();
  auto idx = a.groups();
  kernels::rloo_vectorized_outcome_advantage(cpu::par, a.d, floats_view(s), a.mask, ids_view(idx), a.adv, a.ret);
}

RLFLOW_DECL void opo(estimator_args& a) {
  auto s = a.scores();
  auto idx = a.groups();
  kernels::opo_outcome_advantage(cpu::par, a.d, floats_view(s), a.mask, ids_view(idx), a.adv, a.ret);
}

RLFLOW_DECL void gpg(estimator_args& a) {
  auto s = a.scores();
  auto idx = a.groups();
  kernels::gpg_outcome_advantage(cpu::par, a.d, floats_view(s), a.mask, ids_view(idx), a.adv, a.ret);
}

RLFLOW_DECL void reinforce_plus_plus(estimator_args& a) {
  kernels::reinforce_plus_plus_outcome_advantage(cpu::par, a.d, a.rewards, a.mask, a.algo.gamma, a.adv, a.ret);
}

RLFLOW_DECL void reinforce_plus_plus_baseline(estimator_args& a) {
  auto s = a.scores();
  auto idx = a.groups();
  kernels::reinforce_plus_plus_baseline_outcome_advantage(cpu::par, a.d, floats_view(s), a.mask, ids_view(idx), a.adv, a.ret);
}

RLFLOW_DECL void remax(estimator_args& a) {
  Tensor const& base = need_tensor(a.batch, "reward_baselines", a.fn, "ReMax needs (the greedy rollout's scores)");
  kernels::remax_outcome_advantage(cpu::par, a.d, a.rewards, base.span<float>(), a.mask, a.adv, a.ret);
}

//! The inputs of both optimal-token-baseline estimators, checked in verl's order, then 'run'.
template <class Run>
void otb_family(estimator_args& a, Run run) {
  if (!a.batch.has_tensor("sum_pi_squared"))
    throw key_error(msg("rlflow::", a.fn, ": algorithm.adv_estimator=", a.est, " needs the tensor 'sum_pi_squared' (B, T); set "
                        "actor_rollout_ref.actor.calculate_sum_pi_squared=true (verl asserts it too)"));
  auto idx = a.groups();
  floats_view isw = a.batch.has_tensor("rollout_is_weights") ? a.batch.tensor("rollout_is_weights").span<float>() : floats_view{};
  floats_view old = need_tensor(a.batch, "old_log_probs", a.fn, "the optimal token baseline weights use").span<float>();
  floats_view sps = a.batch.tensor("sum_pi_squared").span<float>();
  run(ids_view(idx), old, sps, isw);
}

RLFLOW_DECL void optimal_token_baseline(estimator_args& a) {
  otb_family(a, [&](ids_view idx, floats_view old, floats_view sps, floats_view isw) {
    kernels::optimal_token_baseline_advantage(cpu::par, a.d, a.rewards, a.mask, idx, old, sps, isw, a.adv, a.ret);
  });
}

RLFLOW_DECL void tir_optimal_token_baseline(estimator_args& a) {
  otb_family(a, [&](ids_view idx, floats_view old, floats_view sps, floats_view isw) {
    kernels::tir_optimal_token_baseline_advantage(cpu::par, a.d, a.rewards, a.mask, idx, old, sps, isw, a.adv, a.ret);
  });
}

}  // namespace rlflow::detail::adv

namespace rlflow {

RLFLOW_DECL kernels::RolloutCorrectionOptions rollout_correction_options(RolloutCorrectionConfig const& rc) {
  kernels::RolloutCorrectionOptions o;
  o.rollout_is = rc.rollout_is.empty() ? std::nullopt : std::optional<std::string>(rc.rollout_is.str());
  o.rollout_is_threshold = rc.rollout_is_threshold.str();
  o.rollout_is_batch_normalize = rc.rollout_is_batch_normalize;
  o.rollout_rs = rc.rollout_rs.empty() ? std::nullopt : std::optional<std::string>(rc.rollout_rs.str());
  o.rollout_rs_threshold = rc.rollout_rs_threshold.empty() ? std::nullopt : std::optional<std::string>(rc.rollout_rs_threshold.str());
  o.bypass_mode = rc.bypass_mode;
  o.loss_type = rc.loss_type.str();
  return o;
}

RLFLOW_DECL DataProto compute_pf_ppo_reweight_data(DataProto const& data, std::string_view reweight_method,
                                                   double weight_pow, std::uint64_t seed) {
  const char* fn = "compute_pf_ppo_reweight_data";
  Tensor const& sc = detail::adv::need_tensor(data, "token_level_scores", fn, "the sample weights come from");
  std::int64_t const B = sc.dim(0), T = sc.dim(1);
  std::vector<double> s(static_cast<std::size_t>(B), 0.0);
  auto const v = sc.span<float>();
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t t = 0; t < T; ++t) s[static_cast<std::size_t>(i)] += v[static_cast<std::size_t>(i * T + t)];
  std::vector<double> w(static_cast<std::size_t>(B));
  if (B == 0) return data;
  double const mx = *std::max_element(s.begin(), s.end()), mn = *std::min_element(s.begin(), s.end());
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (reweight_method == "pow") w[i] = std::pow(std::fabs(s[i]), weight_pow);
    else if (reweight_method == "max_min") w[i] = (s[i] == mx || s[i] == mn) ? 1.0 : 0.0;
    else if (reweight_method == "max_random") w[i] = s[i] == mx ? 0.4 : 0.1;
    else
      throw config_error(msg("rlflow::", fn, ": unsupported reweight_method '", std::string(reweight_method),
                             "'; use pow, max_min or max_random (verl raises ValueError)"));
    w[i] = std::max(static_cast<double>(static_cast<float>(w[i]) + 1e-8f), 1e-8);  // torch.clamp(w + 1e-8, min=1e-8), float32
    if (!std::isfinite(w[i]))
      throw value_error(msg("rlflow::", fn, ": the weight of row ", i, " is ", w[i], " (score ", s[i], ", weight_pow ", weight_pow,
                            "); use finite scores and a smaller algorithm.pf_ppo.weight_pow"));
  }
  std::mt19937_64 gen(seed);
  std::discrete_distribution<std::int64_t> pick(w.begin(), w.end());
  std::vector<std::int64_t> idx(static_cast<std::size_t>(B));
  for (auto& x : idx) x = pick(gen);
  return data.index(idx);
}

RLFLOW_DECL Metrics compute_rollout_correction_and_add_to_batch(DataProto& batch, RolloutCorrectionConfig const& rc) {
  const char* fn = "compute_rollout_correction_and_add_to_batch";
  Tensor const mt = detail::adv::response_mask_of(batch, fn);
  std::int64_t const B = mt.dim(0), T = mt.dim(1);
  Tensor const mask = detail::adv::int32_mask(mt, fn);
  auto const o = rollout_correction_options(rc);
  auto res = kernels::compute_rollout_correction_and_rejection_mask(
      cpu::par, kernels::Dims{B, T}, detail::adv::need_tensor(batch, "old_log_probs", fn, "is the training policy").span<float>(),
      detail::adv::need_tensor(batch, "rollout_log_probs", fn, "is the rollout policy (rollout.calculate_log_probs=true)")
          .span<float>(),
      mask.span<std::int32_t>(), o);
  Tensor nm = Tensor::zeros(DType::int32, Shape{B, T});
  auto nms = nm.span<std::int32_t>();
  for (std::size_t k = 0; k < nms.size(); ++k) nms[k] = res.response_mask[k] != 0.0f;
  batch.set_tensor("response_mask", nm);
  if (!res.rollout_is_weights.empty()) {
    Tensor w = Tensor::empty(DType::float32, Shape{B, T});
    std::copy(res.rollout_is_weights.begin(), res.rollout_is_weights.end(), w.span<float>().begin());
    batch.set_tensor("rollout_is_weights", w);
  }
  Metrics m;
  for (auto const& [k, v] : res.metrics) m[k] = v;
  return m;
}

RLFLOW_DECL void compute_advantage(DataProto& batch, AlgorithmConfig const& algo, std::uint64_t pf_ppo_seed) {
  const char* fn = "compute_advantage";
  std::string_view const est = algo.adv_estimator.view();
  Tensor const mt = detail::adv::response_mask_of(batch, fn);
  if (!batch.has_tensor("response_mask")) batch.set_tensor("response_mask", mt);
  std::int64_t const B = mt.dim(0), T = mt.dim(1);
  // Every estimator reads the int32 mask in place (converted once above when the batch's is not).
  Tensor const mask32 = detail::adv::int32_mask(mt, fn);
  Tensor const& rewards = detail::adv::need_tensor(batch, "token_level_rewards", fn, "every estimator reads");
  estimator_info const* entry = find_estimator(est);
  if (entry == nullptr) {
    std::string names;
    for (std::size_t i = 0; i < estimator_count; ++i)
      names += msg(i == 0 ? "" : i + 1 == estimator_count ? " or " : ", ", estimator_table[i].name);
    throw config_error(msg("rlflow::", fn, ": unknown algorithm.adv_estimator '", est, "'; use ", names));
  }
  // The kernel of each entry, in table order.
#define RLFLOW_DETAIL_ESTIMATOR_KERNEL_PTR(n, Type, k, ...) &detail::adv::k,
  static constexpr detail::adv::estimator_kernel kernel_of[] = {RLFLOW_ADV_ESTIMATORS(RLFLOW_DETAIL_ESTIMATOR_KERNEL_PTR)};
#undef RLFLOW_DETAIL_ESTIMATOR_KERNEL_PTR
  static_assert(std::size(kernel_of) == estimator_count);
  // verl's GRPO returns one tensor as both advantages and returns, and its kernel writes every
  // element: no zero fill, one buffer (the other estimators keep two zeroed ones).
  bool const one = entry->returns_are_advantages;
  Tensor adv = one ? Tensor::empty(DType::float32, Shape{B, T}) : Tensor::zeros(DType::float32, Shape{B, T});
  Tensor ret = one ? adv : Tensor::zeros(DType::float32, Shape{B, T});
  detail::adv::estimator_args args{batch, algo, fn, est, kernels::Dims{B, T}, rewards.span<float>(), mask32.span<std::int32_t>(),
                                   adv.span<float>(), ret.span<float>(), kernels::GRPOOptions{}};
  args.go.norm_adv_by_std_in_grpo = algo.norm_adv_by_std_in_grpo;
  kernel_of[static_cast<std::size_t>(entry - estimator_table)](args);
  batch.set_tensor("advantages", adv);
  batch.set_tensor("returns", ret);
  if (args.resample)
    batch = compute_pf_ppo_reweight_data(batch, algo.pf_ppo.reweight_method.view(), algo.pf_ppo.weight_pow, pf_ppo_seed);
}

RLFLOW_DECL void compute_advantage_for_multi_trajectories(DataProto& batch, std::vector<std::string> const& batch_keys,
                                                          AlgorithmConfig const& algo, std::uint64_t pf_ppo_seed) {
  if (algo.adv_estimator.view() != "grpo") {
    compute_advantage(batch, algo, pf_ppo_seed);
    return;
  }
  const char* fn = "compute_advantage_for_multi_trajectories";
  std::int64_t const B = batch.size();
  if (static_cast<std::int64_t>(batch_keys.size()) != B)
    throw shape_error(msg("rlflow::", fn, ": ", batch_keys.size(), " batch_keys for ", B, " rows; give one key per row"));
  std::vector<std::string> session(static_cast<std::size_t>(B));
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> final_of;  // session -> (index, row)
  std::vector<std::string> order;                                         // sessions in first-seen order (verl's dict)
  for (std::int64_t i = 0; i < B; ++i) {
    std::string const& key = batch_keys[static_cast<std::size_t>(i)];
    auto const p2 = key.rfind('_');
    auto const p1 = p2 == std::string::npos || p2 == 0 ? std::string::npos : key.rfind('_', p2 - 1);
    std::int64_t index = 0;
    bool ok = p1 != std::string::npos;
    if (ok) {
      std::string const tail = key.substr(p2 + 1);
      char* end = nullptr;
      index = std::strtoll(tail.c_str(), &end, 10);
      ok = !tail.empty() && end == tail.c_str() + tail.size();
    }
    if (!ok)
      throw value_error(msg("rlflow::", fn, ": batch key '", key, "' of row ", i, " is not '{uid}_{session}_{index}'"));
    session[static_cast<std::size_t>(i)] = key.substr(0, p2);
    auto it = final_of.find(session[static_cast<std::size_t>(i)]);
    if (it == final_of.end()) {
      final_of.emplace(session[static_cast<std::size_t>(i)], std::pair(index, i));
      order.push_back(session[static_cast<std::size_t>(i)]);
    } else if (it->second.first < index) {
      it->second = {index, i};
    }
  }
  std::vector<std::int64_t> rows;
  std::map<std::string, std::size_t> local;
  for (auto const& sname : order) {
    local[sname] = rows.size();
    rows.push_back(final_of.at(sname).second);
  }
  DataProto sub = batch.index(rows);
  compute_advantage(sub, algo, pf_ppo_seed);
  Tensor const& sa = sub.tensor("advantages");
  Tensor const sm32 = detail::adv::int32_mask(detail::adv::response_mask_of(sub, fn), fn);
  auto const sm = sm32.span<std::int32_t>();
  std::int64_t const T = sa.dim(1);
  std::vector<float> value(rows.size(), 0.0f);
  for (std::size_t j = 0; j < rows.size(); ++j) {
    std::int64_t first = 0;  // torch argmax of the mask: the first valid token, 0 when none
    for (std::int64_t t = 0; t < T; ++t)
      if (sm[j * static_cast<std::size_t>(T) + static_cast<std::size_t>(t)] != 0) {
        first = t;
        break;
      }
    value[j] = sa.span<float>()[j * static_cast<std::size_t>(T) + static_cast<std::size_t>(first)];
  }
  Tensor const fm32 = detail::adv::int32_mask(detail::adv::response_mask_of(batch, fn), fn);
  auto const fm = fm32.span<std::int32_t>();
  Tensor adv = Tensor::zeros(DType::float32, Shape{B, T});
  auto as = adv.span<float>();
  for (std::int64_t i = 0; i < B; ++i) {
    float const a = value[local.at(session[static_cast<std::size_t>(i)])];
    for (std::int64_t t = 0; t < T; ++t)
      if (fm[static_cast<std::size_t>(i * T + t)] != 0) as[static_cast<std::size_t>(i * T + t)] = a;
  }
  batch.set_tensor("advantages", adv);
  batch.set_tensor("returns", adv.clone());
}

RLFLOW_DECL KLInRewardController::KLInRewardController(AlgorithmConfig const& a) {
  if (a.kl_ctrl.type.view() == "adaptive")
    adaptive.emplace(a.kl_ctrl.kl_coef, a.kl_ctrl.target_kl, static_cast<double>(a.kl_ctrl.horizon));
  else
    fixed.value = a.kl_ctrl.kl_coef;
}

RLFLOW_DECL Metrics compute_advantage_step(DataProto& batch, TrainerConfig const& cfg, KLInRewardController& kl,
                                           std::uint64_t pf_ppo_seed) {
  Metrics m;
  if (cfg.algorithm.use_kl_in_reward) {
    auto const km = kl.adaptive ? apply_kl_penalty(batch, *kl.adaptive, cfg.algorithm.kl_penalty.view())
                                : apply_kl_penalty(batch, kl.fixed, cfg.algorithm.kl_penalty.view());
    m.insert(km.begin(), km.end());
  } else {
    batch.set_tensor("token_level_rewards", detail::adv::need_tensor(batch, "token_level_scores", "compute_advantage_step",
                                                                     "holds the rewards")
                                                .clone());
  }
  auto const& rc = cfg.algorithm.rollout_correction;
  if ((!rc.rollout_is.empty() || !rc.rollout_rs.empty()) && !rc.bypass_mode && batch.has_tensor("rollout_log_probs")) {
    auto const cm = compute_rollout_correction_and_add_to_batch(batch, rc);
    m.insert(cm.begin(), cm.end());
  }
  compute_advantage(batch, cfg.algorithm, pf_ppo_seed);
  return m;
}

}  // namespace rlflow
