// rlflow/data_proto/impl/iterator.ipp: the bodies of rlflow/data_proto/iterator.hpp's non-template functions
// (included by that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL MiniBatchIterator::MiniBatchIterator(DataProto data, std::int64_t mini_batch_size, std::int64_t epochs,
                                                  std::optional<std::uint64_t> seed, bool shuffle)
    : data_(std::move(data)), mbs_(mini_batch_size), epochs_(epochs), shuffle_(shuffle),
      rng_(seed ? *seed : std::random_device{}()) {
  std::int64_t const n = data_.size();
  if (mbs_ <= 0) throw value_error(msg("rlflow::DataProto::make_iterator: mini_batch_size ", mbs_, " must be > 0"));
  if (epochs_ < 0) throw value_error(msg("rlflow::DataProto::make_iterator: epochs ", epochs_, " must be >= 0"));
  if (n % mbs_ != 0)
    throw value_error(msg("rlflow::DataProto::make_iterator: ", n, " % ", mbs_, " != 0; the batch size must be a ",
                          "multiple of mini_batch_size (pad with pad_to_divisor or change mini_batch_size)"));
  per_epoch_ = n / mbs_;
  if (std::int64_t c = 0; __builtin_mul_overflow(per_epoch_, epochs_, &c))
    throw value_error(msg("rlflow::DataProto::make_iterator: ", epochs_, " epochs of ", per_epoch_,
                          " mini-batches overflow int64; ask for fewer epochs"));
}

RLFLOW_DECL std::optional<DataProto> MiniBatchIterator::next() {
  if (produced_ >= count()) return std::nullopt;
  std::int64_t const j = produced_ % per_epoch_;
  if (j == 0 && shuffle_) new_permutation();
  ++produced_;
  if (!shuffle_) return data_.view(j * mbs_, (j + 1) * mbs_);
  return data_.gather(std::span<std::int64_t const>(perm_).subspan(static_cast<std::size_t>(j * mbs_),
                                                                   static_cast<std::size_t>(mbs_)));
}

RLFLOW_DECL void MiniBatchIterator::new_permutation() {
  std::int64_t const n = data_.size();
  perm_.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) perm_[static_cast<std::size_t>(i)] = i;
  // Fisher-Yates with our own bounded draw (portable, unlike std::shuffle's distribution).
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::uint64_t const bound = static_cast<std::uint64_t>(i) + 1;
    std::uint64_t const limit = UINT64_MAX - UINT64_MAX % bound;
    std::uint64_t r;
    do { r = rng_(); } while (r >= limit);
    std::swap(perm_[static_cast<std::size_t>(i)], perm_[static_cast<std::size_t>(r % bound)]);
  }
}

}  // namespace rlflow
