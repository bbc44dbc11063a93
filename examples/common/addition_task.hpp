// examples/common/addition_task.hpp: a reward role for tasks::AdditionTask that gives each answer
// digit its own credit on its own token (and the EOS after the answer its share), instead of
// one score on the last token. With an estimator that keeps token-level rewards
// (ReinforcePlusPlus, algorithm.gamma = 0) each digit is credited for itself; see
// docs/trainer.md, "The addition task". The role follows docs/roles.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <rlflow/data_proto.hpp>
#include <rlflow/dispatch/dispatch.hpp>
#include <rlflow/method.hpp>
#include <rlflow/roles/role.hpp>
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

  DataProto compute_rm_score(DataProto const& data) {
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
    return DataProto::from_dict({{"token_level_scores", out}});
  }

  using methods = rlflow::methods<rlflow::method<&DigitTokenReward::compute_rm_score, dispatch::DPComputeProto>>;

 private:
  std::shared_ptr<model::Tokenizer const> tok_;
};

}  // namespace rlflow::examples
