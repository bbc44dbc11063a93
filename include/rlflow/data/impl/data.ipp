// rlflow/data/impl/data.ipp: the bodies of rlflow/data/data.hpp's non-template functions (included by that
// header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL std::vector<PromptItem> PromptDataset::next_batch(DataPosition& pos, std::int64_t batch_size) const {
  if (batch_size <= 0 || batch_size > size())
    throw config_error(msg("rlflow::PromptDataset: data.train_batch_size=", batch_size, " but the dataset holds ",
                           size(), " prompts; lower data.train_batch_size or provide more prompts"));
  if (pos.index < 0)
    throw value_error(msg("rlflow::PromptDataset::next_batch: position index ", pos.index, " (epoch ", pos.epoch,
                          ") is negative; a position counts prompts from 0 within its epoch"));
  if (pos.index > size() - batch_size) {  // fewer than batch_size prompts left (no overflow: batch_size <= size())
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

RLFLOW_DECL std::vector<std::size_t> PromptDataset::epoch_order(std::int64_t epoch) const {
  std::vector<std::size_t> order(items_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (shuffle_) {
    std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

}  // namespace rlflow
