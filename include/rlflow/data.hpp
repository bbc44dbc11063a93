// rlflow/data.hpp: PromptDataset, the prompt source of a Trainer, with verl's dataloader
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

#include <rlflow/error.hpp>  // config_error

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
  std::vector<PromptItem> next_batch(DataPosition& pos, std::int64_t batch_size) const {
    if (batch_size <= 0 || batch_size > size())
      throw config_error(msg("rlflow::PromptDataset: data.train_batch_size=", batch_size, " but the dataset holds ",
                             size(), " prompts; lower data.train_batch_size or provide more prompts"));
    if (pos.index + batch_size > size()) {
      ++pos.epoch;
      pos.index = 0;
    }
    auto order = epoch_order(pos.epoch);
    std::vector<PromptItem> out;
    out.reserve(static_cast<std::size_t>(batch_size));
    for (std::int64_t i = 0; i < batch_size; ++i) out.push_back(items_[order[static_cast<std::size_t>(pos.index + i)]]);
    pos.index += batch_size;
    return out;
  }

 private:
  std::vector<std::size_t> epoch_order(std::int64_t epoch) const {
    std::vector<std::size_t> order(items_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (shuffle_) {
      std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch));
      std::shuffle(order.begin(), order.end(), rng);
    }
    return order;
  }
  std::vector<PromptItem> items_;
  bool shuffle_ = true;
  std::uint64_t seed_ = 1;
};

}  // namespace rlflow
