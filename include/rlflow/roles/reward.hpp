// rlflow/roles/reward.hpp: roles::RuleReward<Score>, a rule-based reward role (verl: the reward
// manager with a compute_score function). Score is a type with
//   static double score(std::string_view response, std::string_view ground_truth);
// The response is decoded up to (not including) EOS. A non-finite score is an error naming the
// sample, never a silent NaN loss. roles::DefaultReward (the Trainer's default) scores each row
// with the scorer registered for its 'data_source' (tasks/reward_score.hpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/dispatch/dispatch.hpp>
#include <rlflow/dispatch/method.hpp>
#include <rlflow/model/tokenizer.hpp>
#include <rlflow/dispatch/role.hpp>
#include <rlflow/roles/setup.hpp>
#include <rlflow/rewards/custom.hpp>       // CustomScore (custom_reward_function)
#include <rlflow/tasks/reward_score.hpp>  // ScoreRegistry (DefaultReward)

namespace rlflow::roles {

namespace detail {
template <class S>
concept score_function = requires(std::string_view a, std::string_view b) {
  { S::score(a, b) } -> std::convertible_to<double>;
};

//! The rows' scores at their last valid response token: token_level_scores (b, R) float.
//! score(i, response, ground_truth) scores row i; the response is decoded up to (not including)
//! EOS. A non-finite score is a value_error naming the row, the rank, the uid and the texts.
template <class ScoreRow>
DataProto score_rows(char const* who, WorkerContext const& ctx, model::Tokenizer const& tok, DataProto const& data,
                     ScoreRow&& score) {
  Tensor const& resp = data.tensor("responses");
  Tensor const& rmask = data.tensor("response_mask");
  std::int64_t const b = resp.dim(0), R = resp.dim(1);
  auto const& rm = data.non_tensor("reward_model");
  Tensor out = Tensor::zeros(DType::float32, Shape{b, R});
  std::vector<std::int32_t> ids;
  for (std::int64_t i = 0; i < b; ++i) {
    ids.clear();
    std::int64_t last = -1;
    for (std::int64_t t = 0; t < R; ++t) {
      if (!rmask.at<std::int32_t>(i, t)) continue;
      last = t;
      std::int32_t const tk = resp.at<std::int32_t>(i, t);
      if (tk != tok.eos_id()) ids.push_back(tk);
    }
    std::string const text = tok.decode(ids);
    std::string const& truth = rm[static_cast<std::size_t>(i)].as_dict().get("ground_truth").as_string();
    double const s = score(i, std::string_view(text), std::string_view(truth));
    if (!std::isfinite(s)) {
      std::string uid = data.has_non_tensor("uid") ? data.non_tensor("uid")[static_cast<std::size_t>(i)].repr() : "?";
      throw value_error(msg(who, ": the score function returned ", s, " for row ", i, " of rank ", ctx.rank, " (uid ", uid,
                            ", response '", text, "', ground truth '", truth, "'); scores must be finite numbers"));
    }
    if (last >= 0) out.at<float>(i, last) = static_cast<float>(s);
  }
  return DataProto::from_dict({{"token_level_scores", out}});
}
}  // namespace detail

//! verl: the reward function path (NaiveRewardManager + compute_score). Puts each row's score
//! on its last valid response token: token_level_scores (b, R).
template <class Score>
class RuleReward {
  static_assert(detail::score_function<Score>,
                "rlflow::roles::RuleReward<Score>: Score needs 'static double score(std::string_view response, "
                "std::string_view ground_truth)'");

 public:
  using role_tag = reward_tag;
  static constexpr std::string_view role_name = "reward";

  RuleReward(WorkerContext const& ctx, RoleSetup setup) : ctx_(&ctx), tok_(role_tokenizer(setup)) {}

  //! token_level_scores (b, R) float: zero except score(response, ground_truth) at the last
  //! valid token. Reads responses, response_mask and non-tensor 'reward_model' {ground_truth}.
  //! verl: compute_rm_score / reward_fn
  DataProto compute_rm_score(DataProto const& data) {
    return detail::score_rows("rlflow::roles::RuleReward", *ctx_, *tok_, data,
                              [](std::int64_t, std::string_view text, std::string_view truth) { return Score::score(text, truth); });
  }

  using methods = rlflow::methods<rlflow::method<&RuleReward::compute_rm_score, dispatch::DPComputeProto>>;

 private:
  WorkerContext const* ctx_;
  std::shared_ptr<model::Tokenizer const> tok_;
};

//! The reward role a Trainer uses when it is given none. verl: the reward manager with
//! default_compute_score: each row is scored by the scorer registered for its non-tensor
//! 'data_source' (tasks::ScoreRegistry: "reverse" and "sort" built in, more with
//! tasks::register_score). A row whose data source has no scorer is a key_error naming it and
//! the registered ones; a batch without 'data_source' is a key_error naming the column.
class DefaultReward {
 public:
  using role_tag = reward_tag;
  static constexpr std::string_view role_name = "reward";

  DefaultReward(WorkerContext const& ctx, RoleSetup setup) : ctx_(&ctx), tok_(role_tokenizer(setup)) {
    auto const& crf = setup.cfg.custom_reward_function;
    if (!crf.path.empty()) custom_.emplace(std::string(crf.path.view()), std::string(crf.name.view()));
  }

  //! token_level_scores (b, R) float, as RuleReward, scored by data source.
  //! verl: compute_rm_score / reward_fn with default_compute_score
  DataProto compute_rm_score(DataProto const& data) {
    if (!data.has_non_tensor("data_source"))
      throw key_error("rlflow::roles::DefaultReward::compute_rm_score: the batch has no non-tensor column 'data_source'; "
                      "the default reward scores each row by its data source (PromptItem::data_source), or pass a "
                      "reward role such as rlflow::roles::RuleReward<Score>");
    auto const& src = data.non_tensor("data_source");
    if (custom_) {  // verl: custom_reward_function replaces default_compute_score for every row
      NonTensorColumn const* extra = data.has_non_tensor("extra_info") ? &data.non_tensor("extra_info") : nullptr;
      return detail::score_rows("rlflow::roles::DefaultReward (custom_reward_function)", *ctx_, *tok_, data,
                                [&](std::int64_t i, std::string_view text, std::string_view truth) {
                                  auto const k = static_cast<std::size_t>(i);
                                  return (*custom_)(src[k].as_string(), std::string(text), std::string(truth),
                                                    extra ? (*extra)[k].as_string() : std::string());
                                });
    }
    std::map<std::string, tasks::ScoreFn, std::less<>> fns;  // one registry look-up per data source and batch
    return detail::score_rows("rlflow::roles::DefaultReward", *ctx_, *tok_, data,
                              [&](std::int64_t i, std::string_view text, std::string_view truth) {
                                std::string const& ds = src[static_cast<std::size_t>(i)].as_string();
                                auto it = fns.find(ds);
                                if (it == fns.end()) it = fns.emplace(ds, tasks::ScoreRegistry::global().find(ds)).first;
                                return it->second(text, truth);
                              });
  }

  using methods = rlflow::methods<rlflow::method<&DefaultReward::compute_rm_score, dispatch::DPComputeProto>>;

 private:
  WorkerContext const* ctx_;
  std::shared_ptr<model::Tokenizer const> tok_;
  std::optional<rewards::CustomScore> custom_;
};

}  // namespace rlflow::roles
