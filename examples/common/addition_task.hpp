// examples/common/addition_task.hpp: a reward role for tasks::AdditionTask that gives each answer
// digit its own credit on its own token (and the EOS after the answer its share), instead of
// one score on the last token. With an estimator that keeps token-level rewards
// (ReinforcePlusPlus, algorithm.gamma = 0) each digit is credited for itself; see
// docs/trainer.md, "The addition task". The role follows docs/roles.md.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <rlflow/core/data_proto.hpp>
#include <rlflow/dispatch/dispatch.hpp>
#include <rlflow/dispatch/method.hpp>
#include <rlflow/dispatch/role.hpp>
#include <rlflow/roles/setup.hpp>

namespace rlflow::examples {

//! token_level_scores[i, t] = 1 / (len + 1) when response token t is the t-th character of the
//! answer (t < len) or EOS right after it (t == len); zero elsewhere. A row's total is the
//! fraction of the len + 1 positions right: 1 for an exact answer that stops.
class DigitTokenReward {
 public:
  using role_tag = reward_tag;
  static constexpr std::string_view role_name = "reward";

  explicit DigitTokenReward(roles::RoleSetup setup) : tok_(roles::role_tokenizer(setup)) {}

  DataProto compute_rm_score(DataProto const& data) { return DataProto::from_dict({{"token_level_scores", scores(data)}}); }

  using methods = rlflow::methods<rlflow::method<&DigitTokenReward::compute_rm_score, dispatch::DPComputeProto>>;

  //! The (B, R) float32 per-token credit described above.
  Tensor scores(DataProto const& data) const {
    Tensor const& resp = data.tensor("responses");
    Tensor const& mask = data.tensor("response_mask");
    auto const& rm = data.non_tensor("reward_model");
    std::int64_t const b = resp.dim(0), R = resp.dim(1);
    Tensor out = Tensor::zeros(DType::float32, Shape{b, R});
    for (std::int64_t i = 0; i < b; ++i) {
      auto const truth = tok_->encode(rm[static_cast<std::size_t>(i)].as_dict().get("ground_truth").as_string());
      auto const len = static_cast<std::int64_t>(truth.size());
      float const share = 1.0f / static_cast<float>(len + 1);
      for (std::int64_t t = 0; t < R && t <= len; ++t) {
        if (!mask.at<std::int32_t>(i, t)) break;
        std::int32_t const want = t < len ? truth[static_cast<std::size_t>(t)] : tok_->eos_id();
        if (resp.at<std::int32_t>(i, t) == want) out.at<float>(i, t) = share;
      }
    }
    return out;
  }

 private:
  std::shared_ptr<model::Tokenizer const> tok_;
};

//! DigitTokenReward's credit minus a per-position leave-one-out baseline: among the rows that
//! share a prompt ('uid', the rollout.n samples of one prompt), token t's credit less the mean
//! credit of the other rows of the group at position t (RLOO, one baseline per answer position;
//! positions past a row's end count as credit 0). The baseline does not depend on the row's own
//! sample, so the policy gradient stays unbiased, but each digit is now judged against the other
//! answers to the same prompt rather than against every token of the batch. With
//! ReinforcePlusPlus and algorithm.gamma = 0 this is a per-token RLOO. The scores are centred:
//! critic/score/mean is about 0; examples/08_grpo_addition prints the task's own score.
//! A group of one row (n = 1), or a batch without 'uid' (validation), keeps its raw credit.
class DigitTokenRLOOReward {
 public:
  using role_tag = reward_tag;
  static constexpr std::string_view role_name = "reward";

  explicit DigitTokenRLOOReward(roles::RoleSetup setup) : base_(std::move(setup)) {}

  DataProto compute_rm_score(DataProto const& data) {
    Tensor out = base_.scores(data);
    if (!data.has_non_tensor("uid")) return DataProto::from_dict({{"token_level_scores", out}});  // e.g. validation
    auto const& uid = data.non_tensor("uid");
    std::int64_t const b = out.dim(0), R = out.dim(1);
    std::map<std::string, std::vector<std::int64_t>> groups;
    for (std::int64_t i = 0; i < b; ++i) groups[uid[static_cast<std::size_t>(i)].as_string()].push_back(i);
    std::vector<double> sum(static_cast<std::size_t>(R));
    for (auto const& [id, rows] : groups) {
      auto const k = static_cast<double>(rows.size());
      if (rows.size() < 2) continue;
      std::fill(sum.begin(), sum.end(), 0.0);
      for (std::int64_t i : rows)
        for (std::int64_t t = 0; t < R; ++t) sum[static_cast<std::size_t>(t)] += out.at<float>(i, t);
      for (std::int64_t i : rows)
        for (std::int64_t t = 0; t < R; ++t) {
          double const own = out.at<float>(i, t);
          out.at<float>(i, t) = static_cast<float>(own - (sum[static_cast<std::size_t>(t)] - own) / (k - 1.0));
        }
    }
    return DataProto::from_dict({{"token_level_scores", out}});
  }

  using methods = rlflow::methods<rlflow::method<&DigitTokenRLOOReward::compute_rm_score, dispatch::DPComputeProto>>;

 private:
  DigitTokenReward base_;
};

}  // namespace rlflow::examples
