// rlflow/data/data.hpp: PromptDataset, the prompt source of a Trainer, with verl's dataloader
// semantics (batches of train_batch_size prompts, drop_last, optional per-epoch shuffle from a
// seed) and a resumable position. Does not tokenize (the trainer does).
#pragma once
#include <algorithm>  // std::shuffle
#include <cstdint>
#include <numeric>    // std::iota
#include <random>     // std::mt19937_64
#include <initializer_list>
#include <string>
#include <vector>

#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>  // config_error

namespace rlflow {

//! One prompt with what the reward function needs. verl: a row of the RL dataset with
//! 'prompt', 'reward_model.ground_truth' and 'data_source'.
struct PromptItem {
  std::string prompt;
  std::string ground_truth;
  std::string data_source = "rlflow";
  std::string extra_info{};  //!< verl's extra_info, as JSON text ("" when absent)
};

//! Where a data loader stands: epoch and the index of the next prompt within that epoch's order.
struct DataPosition {
  std::int64_t epoch = 0;
  std::int64_t index = 0;
  friend bool operator==(DataPosition const&, DataPosition const&) = default;
};

//! A finite list of prompts iterated in batches, epoch after epoch (verl's StatefulDataLoader,
//! drop_last=True). Each epoch's order is a permutation seeded by (seed, epoch) when shuffling.
class PromptDataset {
 public:
  PromptDataset() = default;
  explicit PromptDataset(std::vector<PromptItem> items, bool shuffle = true, std::uint64_t seed = 1)
      : items_(std::move(items)), shuffle_(shuffle), seed_(seed) {}
  //! PromptDataset({{"abc=", "cba"}, {"ab=", "ba"}}): items as a braced list of {prompt, ground_truth}
  //! (without it the braces would also match std::vector's two-iterator constructor).
  PromptDataset(std::initializer_list<PromptItem> items, bool shuffle = true, std::uint64_t seed = 1)
      : PromptDataset(std::vector<PromptItem>(items), shuffle, seed) {}

  std::int64_t size() const { return static_cast<std::int64_t>(items_.size()); }
  PromptItem const& operator[](std::int64_t i) const { return items_.at(static_cast<std::size_t>(i)); }
  //! Batches per epoch with drop_last (verl: len(dataloader)).
  std::int64_t batches_per_epoch(std::int64_t batch_size) const { return batch_size > 0 ? size() / batch_size : 0; }

  //! The next batch of 'batch_size' prompts from 'pos'; advances 'pos' (to the next epoch when
  //! fewer than batch_size prompts remain, as drop_last does).
  std::vector<PromptItem> next_batch(DataPosition& pos, std::int64_t batch_size) const;

 private:
  std::vector<std::size_t> epoch_order(std::int64_t epoch) const;
  std::vector<PromptItem> items_;
  bool shuffle_ = true;
  std::uint64_t seed_ = 1;
};

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/data/impl/data.ipp>
#endif
