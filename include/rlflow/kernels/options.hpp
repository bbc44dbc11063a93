// rlflow/kernels/options.hpp: the small value types every RL kernel takes or returns.
// Defines Dims (B rows x T tokens), AggMode + AggInfo (verl's loss_agg_mode and global batch
// info), KLKind (verl's kl_penalty names), PolicyLossMode + PolicyLossConfig, the metric
// structs, and Grad (where a gradient goes). Does not compute anything.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rlflow/core/config.hpp>  // RLFLOW_HD
#include <rlflow/core/error.hpp>  // config_error, msg

namespace rlflow::kernels {

//! Shape of a (B, T) response-token matrix: B rows (sequences), T padded response tokens.
struct Dims {
  std::int64_t rows = 0;  //!< B
  std::int64_t cols = 0;  //!< T
  constexpr std::int64_t numel() const { return rows * cols; }
};

// ---------------------------------------------------------------------------------------------
// Loss aggregation (verl: core_algos.agg_loss)

//! verl's loss_agg_mode names.
enum class AggMode : std::uint8_t { token_mean, token_sum, seq_mean_token_sum, seq_mean_token_mean, seq_mean_token_sum_norm };

inline constexpr const char* agg_mode_name(AggMode m) {
  switch (m) {
    case AggMode::token_mean: return "token-mean";
    case AggMode::token_sum: return "token-sum";
    case AggMode::seq_mean_token_sum: return "seq-mean-token-sum";
    case AggMode::seq_mean_token_mean: return "seq-mean-token-mean";
    case AggMode::seq_mean_token_sum_norm: return "seq-mean-token-sum-norm";
  }
  return "unknown";
}

//! Parses verl's loss_agg_mode string; throws config_error listing the five names otherwise.
inline AggMode parse_agg_mode(std::string_view s) {
  for (AggMode m : {AggMode::token_mean, AggMode::token_sum, AggMode::seq_mean_token_sum, AggMode::seq_mean_token_mean,
                    AggMode::seq_mean_token_sum_norm})
    if (s == agg_mode_name(m)) return m;
  throw config_error(msg("rlflow::kernels::parse_agg_mode: unknown loss_agg_mode '", s,
                         "'; use token-mean, token-sum, seq-mean-token-sum, seq-mean-token-mean or seq-mean-token-sum-norm"));
}

//! verl's global_batch_info (verl/workers/utils/losses.py): what the real trainer passes so that a
//! micro-batch's loss is a partial sum of the mini-batch loss. Leave the optionals empty for
//! verl's local fallbacks (count of local valid tokens / non-empty rows; width T for -norm).
struct AggInfo {
  int dp_size = 1;                                  //!< data-parallel world size
  std::optional<double> batch_num_tokens;           //!< sum of response_mask over the whole mini-batch, all DP ranks
  std::optional<double> global_batch_size;          //!< ppo_mini_batch_size * rollout.n
  std::optional<double> loss_scale_factor;          //!< seq-mean-token-sum-norm divisor (default: T)
};

// ---------------------------------------------------------------------------------------------
// KL estimators (verl: core_algos.kl_penalty)

enum class KLKind : std::uint8_t { k1, abs, k2, k3 };

//! A parsed kl_penalty name: the estimator plus verl's trailing '+' (straight-through: value of
//! the estimator, gradient of k2).
struct KLPenalty {
  KLKind kind = KLKind::k1;
  bool straight_through = false;
};

inline constexpr const char* kl_kind_name(KLKind k) {
  switch (k) {
    case KLKind::k1: return "kl";
    case KLKind::abs: return "abs";
    case KLKind::k2: return "mse";
    case KLKind::k3: return "low_var_kl";
  }
  return "unknown";
}

//! Parses verl's names: kl|k1, abs, mse|k2, low_var_kl|k3, each optionally followed by '+'.
//! "full" and anything else throw config_error (verl raises NotImplementedError).
inline KLPenalty parse_kl_penalty(std::string_view s) {
  KLPenalty p;
  std::string_view base = s;
  if (!base.empty() && base.back() == '+') {
    p.straight_through = true;
    base.remove_suffix(1);
  }
  if (base == "kl" || base == "k1") p.kind = KLKind::k1;
  else if (base == "abs") p.kind = KLKind::abs;
  else if (base == "mse" || base == "k2") p.kind = KLKind::k2;
  else if (base == "low_var_kl" || base == "k3") p.kind = KLKind::k3;
  else if (base == "full")
    throw config_error("rlflow::kernels::parse_kl_penalty: 'full' KL needs the whole vocabulary distribution and is not "
                       "implemented (nor is it in verl); use kl, abs, mse or low_var_kl");
  else
    throw config_error(msg("rlflow::kernels::parse_kl_penalty: unknown kl_penalty '", s,
                           "'; use kl|k1, abs, mse|k2 or low_var_kl|k3, optionally with a trailing '+'"));
  if (p.kind == KLKind::k2) p.straight_through = false;  // k2+ is k2
  return p;
}

// ---------------------------------------------------------------------------------------------
// Policy losses (verl: core_algos.POLICY_LOSS_REGISTRY, actor.policy_loss.loss_mode)

enum class PolicyLossMode : std::uint8_t { vanilla, gspo, sapo, gpg, clip_cov, kl_cov, geo_mean, cispo, dro, dppo_tv, dppo_kl, bypass_mode };

inline constexpr const char* policy_loss_mode_name(PolicyLossMode m) {
  switch (m) {
    case PolicyLossMode::vanilla: return "vanilla";
    case PolicyLossMode::gspo: return "gspo";
    case PolicyLossMode::sapo: return "sapo";
    case PolicyLossMode::gpg: return "gpg";
    case PolicyLossMode::clip_cov: return "clip_cov";
    case PolicyLossMode::kl_cov: return "kl_cov";
    case PolicyLossMode::geo_mean: return "geo_mean";
    case PolicyLossMode::cispo: return "cispo";
    case PolicyLossMode::dro: return "dro";
    case PolicyLossMode::dppo_tv: return "dppo_tv";
    case PolicyLossMode::dppo_kl: return "dppo_kl";
    case PolicyLossMode::bypass_mode: return "bypass_mode";
  }
  return "unknown";
}

inline PolicyLossMode parse_policy_loss_mode(std::string_view s) {
  for (PolicyLossMode m : {PolicyLossMode::vanilla, PolicyLossMode::gspo, PolicyLossMode::sapo, PolicyLossMode::gpg,
                           PolicyLossMode::clip_cov, PolicyLossMode::kl_cov, PolicyLossMode::geo_mean, PolicyLossMode::cispo,
                           PolicyLossMode::dro, PolicyLossMode::dppo_tv, PolicyLossMode::dppo_kl, PolicyLossMode::bypass_mode})
    if (s == policy_loss_mode_name(m)) return m;
  throw config_error(msg("rlflow::kernels::parse_policy_loss_mode: unknown loss_mode '", s,
                         "'; use vanilla, gspo, sapo, gpg, clip_cov, kl_cov, geo_mean, cispo, dro, dppo_tv, dppo_kl or bypass_mode"));
}

//! verl: algorithm.rollout_correction (RolloutCorrectionConfig, verl/trainer/config/algorithm.py) and
//! rollout_corr_helper.py. IS weights pi_train / pi_rollout per token or per sequence, truncated
//! (a single threshold: TIS) or zeroed outside [lower, upper] ("lower_upper": IcePop); rejection
//! sampling (rollout_rs, comma-separated options) masks tokens or sequences whose divergence exceeds
//! rollout_rs_threshold. bypass_mode uses the rollout's log-probs as old_log_probs and the loss
//! 'bypass_mode' (loss_type ppo_clip or reinforce).
struct RolloutCorrectionOptions {
  std::optional<std::string> rollout_is = std::string("sequence");  //!< token | sequence | none (nullopt)
  std::string rollout_is_threshold = "2";            //!< "upper" or "lower_upper"
  bool rollout_is_batch_normalize = false;
  std::optional<std::string> rollout_rs;             //!< e.g. "token_k1,seq_mean_k3"; nullopt: off
  std::optional<std::string> rollout_rs_threshold;   //!< one spec, or one per rollout_rs option
  bool bypass_mode = false;
  std::string loss_type = "ppo_clip";                //!< bypass_mode loss: ppo_clip | reinforce
};

//! The actor-config knobs the policy losses read (verl ActorConfig / policy_loss defaults).
struct PolicyLossConfig {
  PolicyLossMode mode = PolicyLossMode::vanilla;
  double clip_ratio = 0.2;                    //!< actor.clip_ratio
  std::optional<double> clip_ratio_low;       //!< falls back to clip_ratio
  std::optional<double> clip_ratio_high;      //!< falls back to clip_ratio
  double clip_ratio_c = 3.0;                  //!< dual clip; must be > 1
  double tau_pos = 1.0, tau_neg = 1.05;       //!< SAPO temperatures
  double clip_cov_ratio = 2e-4, clip_cov_lb = 1.0, clip_cov_ub = 5.0;
  double kl_cov_ratio = 2e-4, ppo_kl_coef = 0.1;
  double dro_beta = 1.0;                      //!< DRO quadratic coefficient; must be > 0
  RolloutCorrectionOptions rollout_correction{};  //!< read by bypass_mode only
  double low() const { return clip_ratio_low.value_or(clip_ratio); }
  double high() const { return clip_ratio_high.value_or(clip_ratio); }
};

//! verl's actor/pg_clipfrac, actor/ppo_kl, actor/pg_clipfrac_lower. A metric verl's function does
//! not return for the chosen mode has its has_* flag false (and value 0).
struct PolicyLossMetrics {
  double pg_clipfrac = 0, ppo_kl = 0, pg_clipfrac_lower = 0;
  bool has_pg_clipfrac = false, has_ppo_kl = false, has_pg_clipfrac_lower = false;
};

struct PolicyLossResult {
  double loss = 0;  //!< actor/pg_loss contribution of this micro-batch
  PolicyLossMetrics metrics;
  //! Further metrics under verl's full names (bypass_mode: the "rollout_corr/..." ones).
  std::vector<std::pair<std::string, double>> extra_metrics;
};

struct ValueLossResult {
  double vf_loss = 0;      //!< critic/vf_loss
  double vf_clipfrac = 0;  //!< critic/vf_clipfrac
  double vpred_mean = 0;   //!< critic/vpred_mean
};

//! Where a gradient goes: 'out' (same shape as the differentiated input; empty = not wanted),
//! multiplied by 'scale', written (accumulate = false) or added (accumulate = true). Masked
//! positions receive 0 (or are left unchanged when accumulating).
struct Grad {
  std::span<float> out{};
  double scale = 1.0;
  bool accumulate = false;
};

namespace detail {
//! A Grad as the token kernels use it on either backend (a raw pointer, copied into lambdas):
//! put(k, v) writes or adds v at token k, clear(k) zeroes a masked token unless accumulating.
//! Callers pass v already multiplied by 'scale'. Nothing is written when no gradient was asked for.
struct grad_sink {
  float* out = nullptr;
  double scale = 1.0;
  bool accumulate = false;
  explicit grad_sink(Grad const& g) : out(g.out.empty() ? nullptr : g.out.data()), scale(g.scale), accumulate(g.accumulate) {}
  RLFLOW_HD void put(std::int64_t k, double v) const {
    if (!out) return;
    float const f = static_cast<float>(v);
    out[k] = accumulate ? out[k] + f : f;
  }
  RLFLOW_HD void clear(std::int64_t k) const {
    if (out && !accumulate) out[k] = 0.0f;
  }
};
}  // namespace detail

}  // namespace rlflow::kernels
