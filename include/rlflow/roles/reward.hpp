// rlflow/roles/reward.hpp: roles::RuleReward<Score>, a rule-based reward role (verl: the reward
// manager with a compute_score function). Score is a type with
//   static double score(std::string_view response, std::string_view ground_truth);
// The response is decoded up to (not including) EOS. A non-finite score is an error naming the
// sample, never a silent NaN loss.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/dispatch/dispatch.hpp>
#include <rlflow/method.hpp>
#include <rlflow/model/tokenizer.hpp>
#include <rlflow/roles/role.hpp>
#include <rlflow/roles/setup.hpp>

namespace rlflow::roles {

namespace detail {
template <class S>
concept score_function = requires(std::string_view a, std::string_view b) {
  { S::score(a, b) } -> std::convertible_to<double>;
};
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
        if (tk != tok_->eos_id()) ids.push_back(tk);
      }
      std::string const text = tok_->decode(ids);
      std::string const& truth = rm[static_cast<std::size_t>(i)].as_dict().get("ground_truth").as_string();
      double const s = Score::score(text, truth);
      if (!std::isfinite(s)) {
        std::string uid = data.has_non_tensor("uid") ? data.non_tensor("uid")[static_cast<std::size_t>(i)].repr() : "?";
        throw value_error(msg("rlflow::roles::RuleReward: the score function returned ", s, " for row ", i, " of rank ",
                              ctx_->rank, " (uid ", uid, ", response '", text, "', ground truth '", truth,
                              "'); scores must be finite numbers"));
      }
      if (last >= 0) out.at<float>(i, last) = static_cast<float>(s);
    }
    return DataProto::from_dict({{"token_level_scores", out}});
  }

  using methods = rlflow::methods<rlflow::method<&RuleReward::compute_rm_score, dispatch::DPComputeProto>>;

 private:
  WorkerContext const* ctx_;
  std::shared_ptr<model::Tokenizer const> tok_;
};

}  // namespace rlflow::roles
