// tests/trainer/test_lora_trainer.cpp <-> the Trainer with actor_rollout_ref.model.lora_rank
// (roles/actor_rollout_ref.hpp: LoRA on the actor, the rollout synced to base + adapters): after
// GRPO steps on a Qwen2-shaped folder the checkpoint's base tensors equal the folder's bit for bit,
// the adapters moved, and the rollout's weights equal base + s B A computed here with plain loops
// from the checkpoint's tensors; bad LoRA keys are refused before any work.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <rlflow/trainer/trainer.hpp>

#include "common/files_demo.hpp"
#include "fixtures.hpp"
#include "trainer/trainer_fixtures.hpp"

namespace test_lora_trainer {

namespace fs = std::filesystem;
using rlflow::TrainerConfig;
using LoraTrainer = rlflow::Trainer<rlflow::GRPO, rlflow::Colocate<3>>;
using actor_role = LoraTrainer::actor_role;

namespace {
TrainerConfig lora_run(rlflow::examples::DemoFiles const& f, fs::path const& out) {
  TrainerConfig c = LoraTrainer::program_defaults();
  c.actor_rollout_ref.model.path = f.model_dir.string();
  c.data.train_files = f.train_file.string();
  c.data.val_files = f.val_file.string();
  c.data.max_prompt_length = 96;
  c.data.max_response_length = 6;
  c.data.filter_overlong_prompts = true;
  c.data.train_batch_size = 4;
  c.actor_rollout_ref.actor.ppo_mini_batch_size = 2;
  c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 2;
  c.actor_rollout_ref.actor.optim.lr = 1e-2;
  c.actor_rollout_ref.rollout.n = 2;
  c.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu = 8;
  c.actor_rollout_ref.actor.use_kl_loss = true;  // the reference (the base model) is used
  c.actor_rollout_ref.actor.entropy_coeff = 0.01;  // a gradient whatever the rewards
  c.actor_rollout_ref.model.lora_rank = 4;
  c.actor_rollout_ref.model.lora_alpha = 8;
  c.actor_rollout_ref.model.target_modules = "q_proj,v_proj,o_proj,down_proj";
  c.trainer.nnodes = 1;
  c.trainer.n_gpus_per_node = 2;
  c.trainer.total_training_steps = 2;
  c.trainer.save_freq = 2;
  c.trainer.val_before_train = false;
  c.trainer.logger = "console";
  c.trainer.default_local_dir = out.string();
  c.seed = 5;
  return c;
}
}  // namespace

TEST_CASE("GRPO with LoRA trains the adapters only and the rollout samples from base + adapters", "[trainer][lora]") {
  fixtures::TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 6, 12, 3, 1, 4, 16, 128, 120, rlflow::model::Arch::qwen2);
  LoraTrainer t(lora_run(f, d.p / "run"), rlflow::testing::quiet());
  t.fit();
  auto const init = rlflow::model::hf::load_model(f.model_dir);
  rlflow::model::ParamLayout const lay(init.config);
  auto const ck = rlflow::engine::safetensors::File::load(d.p / "run" / "global_step_2" / "actor.safetensors");
  // the base: bit-identical to the folder's weights
  std::vector<float> base(lay.size());
  for (auto const& ten : lay.tensors()) {
    auto const b = ck.bytes(ten.name);
    REQUIRE(b.size() == ten.numel * 4);
    std::memcpy(base.data() + ten.offset, b.data(), b.size());
  }
  REQUIRE(std::equal(base.begin(), base.end(), init.params.begin()));
  // base + s B A with plain loops (o_proj and down_proj are stored (in, out))
  double const s = 8.0 / 4.0;
  std::vector<float> merged = base;
  int moved = 0;
  for (int l = 0; l < init.config.n_layer; ++l)
    for (std::string const mod : {"self_attn.q_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.down_proj"}) {
      std::string const p = "model.layers." + std::to_string(l) + "." + mod;
      auto const A = rlflow::model::hf::tensor_as_f32(ck, "lora.base_model.model." + p + ".lora_A.weight");
      auto const B = rlflow::model::hf::tensor_as_f32(ck, "lora.base_model.model." + p + ".lora_B.weight");
      auto const& ia = ck.info("lora.base_model.model." + p + ".lora_A.weight");
      auto const& ib = ck.info("lora.base_model.model." + p + ".lora_B.weight");
      int const r = int(ia.shape[0]), in = int(ia.shape[1]), out = int(ib.shape[0]);
      REQUIRE(r == 4);
      for (float x : B) moved += x != 0.0f;  // B starts at zero
      bool const stored_in_out = mod == "self_attn.o_proj" || mod == "mlp.down_proj";
      std::size_t const off = lay.find(p + ".weight").offset;
      for (int o = 0; o < out; ++o)
        for (int i = 0; i < in; ++i) {
          double d = 0.0;
          for (int k = 0; k < r; ++k) d += double(B[std::size_t(o) * r + k]) * double(A[std::size_t(k) * in + i]);
          std::size_t const at = stored_in_out ? off + std::size_t(i) * out + o : off + std::size_t(o) * in + i;
          merged[at] = float(double(merged[at]) + s * d);
        }
    }
  CHECK(moved > 0);
  auto const ro = t.actor_rollout_wg().template call<&actor_role::rollout_weights>();
  for (auto const& w : ro) {
    REQUIRE(w.size() == merged.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::abs(double(w[i]) - double(merged[i])) / std::max(1.0, std::abs(double(merged[i]))));
    CHECK(worst < 1e-5);
  }
  CHECK(t.actor_weights() == ro[0]);  // the policy's weights as tools see them: merged
}

TEST_CASE("LoRA keys the Trainer does not support are refused before any work", "[trainer][lora]") {
  fixtures::TempDir d;
  auto const f = rlflow::examples::write_demo_files(d.p / "in", 6, 12, 3, 1, 4, 16, 128, 120, rlflow::model::Arch::qwen2);
  {
    auto c = lora_run(f, d.p / "run");
    c.actor_rollout_ref.model.target_modules = "q_proj,c_attn";  // a GPT-2 name on a Qwen2 folder
    CHECK_THROWS_WITH(LoraTrainer(c, rlflow::testing::quiet()), Catch::Contains("'c_attn'") && Catch::Contains("gate_proj"));
  }
  {
    auto c = lora_run(f, d.p / "run");
    c.actor_rollout_ref.model.lora_rank = -4;
    CHECK_THROWS_WITH(LoraTrainer(c, rlflow::testing::quiet()), Catch::Contains("lora_rank=-4"));
  }
  {
    auto c = lora_run(f, d.p / "run");
    c.actor_rollout_ref.actor.megatron.tensor_model_parallel_size = 2;
    CHECK_THROWS_WITH(LoraTrainer(c, rlflow::testing::quiet()), Catch::Contains("tensor_model_parallel_size=1"));
  }
}

}  // namespace test_lora_trainer
