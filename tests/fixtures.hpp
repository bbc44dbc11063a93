// tests/fixtures.hpp: helpers that several test areas share. GPT weights perturbed away from the
// initialisation, tiny random Llama-family configs covering the family's variants (and a loop over
// them), the policy GPT
// a TrainerConfig describes, one thread per rank of an in-process communicator group, and a
// temporary folder removed at scope exit. Tests build their GPTConfig
// with designated initializers:
//   GPTConfig const cfg{.vocab_size = 13, .max_seq_len = 24, .n_layer = 2, .n_head = 4, .n_embd = 32};
#pragma once
#include <cstddef>
#include <exception>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include <unistd.h>  // getpid

#include <rlflow/comm/communicator.hpp>  // comm::LocalCommunicator
#include <rlflow/model/param_layout.hpp>     // GPTConfig, param_count, init_params

namespace fixtures {

static_assert(std::is_aggregate_v<rlflow::model::GPTConfig>,
              "rlflow::model::GPTConfig: the tests build it with designated initializers; keep it an aggregate");

//! Adds N(0, stddev) noise to every element of p, drawn in order from std::mt19937(seed).
inline void perturb(std::span<float> p, unsigned seed, float stddev) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.0f, stddev);
  for (auto& x : p) x += n(g);
}

//! The GPT-2 initialisation of c, perturbed by perturb(seed, stddev): weights far from the
//! initialisation (biases and layer norms included), so outputs are far from uniform.
inline std::vector<float> perturbed_weights(rlflow::model::GPTConfig const& c, unsigned seed, float stddev) {
  std::vector<float> w(rlflow::model::param_count(c));
  rlflow::model::init_params(c, w);
  perturb(w, seed, stddev);
  return w;
}

//! A random tiny Llama-family configuration; 'k' picks the variant so that every feature is
//! covered: GQA ratios 1, 2 and 7, head_dim != hidden / heads, tied and untied heads, the three
//! rope types, biases, odd widths.
inline rlflow::model::GPTConfig tiny_llama_config(rlflow::model::Arch arch, int k, std::uint64_t seed) {
  using rlflow::model::Arch;
  rlflow::model::GPTConfig c;
  c.arch = arch;
  c.seed = seed;
  c.vocab_size = 37 + 2 * k;
  c.max_seq_len = 64;
  c.n_layer = 2;
  int const ratio = k % 3 == 0 ? 1 : k % 3 == 1 ? 2 : 7;
  c.n_kv_head = k % 2 == 0 ? 1 : 2;
  c.n_head = c.n_kv_head * ratio;
  c.n_embd = arch == Arch::qwen2 ? c.n_head * 6 : 20 + k;  // qwen2: head_dim = hidden / heads
  if (arch != Arch::qwen2) c.head_size = k % 2 == 0 ? 6 : 10;
  c.intermediate_size = 23 + 3 * k;
  c.rms_norm_eps = k % 2 ? 1e-6f : 1e-5f;
  c.rope_theta = k % 2 ? 10000.0 : 1000000.0;
  c.qkv_bias = arch == Arch::qwen2 || (arch != Arch::qwen2 && k % 2 == 1);
  c.o_bias = arch != Arch::qwen2 && c.qkv_bias;
  c.mlp_bias = arch == Arch::llama && k % 2 == 0;
  c.qk_norm = arch == Arch::qwen3;
  c.tie_word_embeddings = k % 2 == 0;
  if (arch == Arch::llama && k % 3 == 1) {
    c.rope_type = rlflow::model::RopeType::llama3;
    c.rope_factor = 8.0;
    c.rope_low_freq_factor = 1.0;
    c.rope_high_freq_factor = 4.0;
    c.rope_original_max_position = 16;  // so the tiny head dims reach all three wavelength bands
  } else if (k % 3 == 2) {
    c.rope_type = rlflow::model::RopeType::linear;
    c.rope_factor = 2.0;
  }
  c.validate();
  return c;
}

//! Calls f(cfg, weights) for every variant of tiny_llama_config (llama, qwen2 and qwen3, variants
//! 0 to 3), with config seeds seed + k and weights perturbed_weights(cfg, weight_seed + k, 0.2).
template <class F>
void for_each_tiny_llama(std::uint64_t seed, unsigned weight_seed, F&& f) {
  for (auto arch : {rlflow::model::Arch::llama, rlflow::model::Arch::qwen2, rlflow::model::Arch::qwen3})
    for (int k = 0; k < 4; ++k) {
      auto const cfg = tiny_llama_config(arch, k, seed + std::uint64_t(k));
      f(cfg, perturbed_weights(cfg, weight_seed + unsigned(k), 0.2f));
    }
}

//! A config in one line for test messages: its family, heads, key/value heads, head width, width
//! and whether the head is tied.
inline std::string describe(rlflow::model::GPTConfig const& c) {
  return "arch " + std::string(rlflow::model::arch_name(c.arch)) + " NH " + std::to_string(c.n_head) + " NKV " +
         std::to_string(c.kv_heads()) + " hd " + std::to_string(c.head_dim()) + " C " + std::to_string(c.n_embd) + " tied " +
         std::to_string(int(c.tie_word_embeddings));
}

//! The policy GPT of a trainer configuration (the Trainer's own mapping: max_seq_len = prompt +
//! response length, the actor's layers, heads and width) for a vocabulary of 'vocab' tokens.
//! A template on the config type, so that this header does not need the trainer's headers.
template <class Config>
rlflow::model::GPTConfig policy_gpt(Config const& c, int vocab) {
  return {.vocab_size = vocab,
          .max_seq_len = static_cast<int>(c.data.max_prompt_length + c.data.max_response_length),
          .n_layer = static_cast<int>(c.actor_rollout_ref.model.n_layer),
          .n_head = static_cast<int>(c.actor_rollout_ref.model.n_head),
          .n_embd = static_cast<int>(c.actor_rollout_ref.model.n_embd)};
}

//! Runs f(rank, comm) on one thread per rank of a fresh LocalCommunicator group of n ranks. A rank
//! that throws aborts its communicator (so its peers' collectives fail instead of waiting); after
//! every thread has joined, the lowest rank's error is rethrown. Returns each rank's result, in
//! rank order, when f returns one.
template <class F>
auto on_ranks(int n, F&& f) {
  using R = std::invoke_result_t<F&, int, rlflow::comm::LocalCommunicator&>;
  auto comms = rlflow::comm::LocalCommunicator::make_group(n);
  std::size_t const N = static_cast<std::size_t>(n);
  std::vector<std::exception_ptr> errs(N);
  std::conditional_t<std::is_void_v<R>, int, std::vector<R>> out{};
  if constexpr (!std::is_void_v<R>) out.resize(N);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      std::size_t const i = static_cast<std::size_t>(r);
      try {
        if constexpr (std::is_void_v<R>) f(r, *comms[i]);
        else out[i] = f(r, *comms[i]);
      } catch (...) {
        errs[i] = std::current_exception();
        comms[i]->abort();
      }
    });
  for (auto& t : th) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
  if constexpr (!std::is_void_v<R>) return out;
}

//! A fresh folder <tmp>/rlflow_tmp_<pid>_<n> (n counts this process's folders), removed with its
//! contents when the object goes out of scope.
struct TempDir {
  std::filesystem::path p;
  TempDir() {
    static int counter = 0;
    p = std::filesystem::temp_directory_path() / ("rlflow_tmp_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(p);
  }
  TempDir(TempDir const&) = delete;
  TempDir& operator=(TempDir const&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
};

}  // namespace fixtures
