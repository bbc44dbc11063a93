// rlflow/data_proto/iterator.hpp: seeded mini-batch iteration over a DataProto (verl:
// DataProto.make_iterator). Part of rlflow/data_proto.hpp.
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include <rlflow/data_proto/core.hpp>

namespace rlflow {

//! Seeded mini-batch iteration over a DataProto (verl: make_iterator's DataLoader). Use
//! next() or a range-for loop. Holds its own copy of the DataProto (tensors shared).
class MiniBatchIterator {
 public:
  MiniBatchIterator(DataProto data, std::int64_t mini_batch_size, std::int64_t epochs, std::optional<std::uint64_t> seed,
                    bool shuffle)
      : data_(std::move(data)), mbs_(mini_batch_size), epochs_(epochs), shuffle_(shuffle),
        rng_(seed ? *seed : std::random_device{}()) {
    std::int64_t const n = data_.size();
    if (mbs_ <= 0) throw value_error(msg("rlflow::DataProto::make_iterator: mini_batch_size ", mbs_, " must be > 0"));
    if (epochs_ < 0) throw value_error(msg("rlflow::DataProto::make_iterator: epochs ", epochs_, " must be >= 0"));
    if (n % mbs_ != 0)
      throw value_error(msg("rlflow::DataProto::make_iterator: ", n, " % ", mbs_, " != 0; the batch size must be a ",
                            "multiple of mini_batch_size (pad with pad_to_divisor or change mini_batch_size)"));
    per_epoch_ = n / mbs_;
  }
  //! Mini-batches in total (epochs * n / mini_batch_size).
  std::int64_t count() const { return per_epoch_ * epochs_; }
  //! The next mini-batch, or nullopt when done.
  std::optional<DataProto> next() {
    if (produced_ >= count()) return std::nullopt;
    std::int64_t const j = produced_ % per_epoch_;
    if (j == 0 && shuffle_) new_permutation();
    ++produced_;
    if (!shuffle_) return data_.view(j * mbs_, (j + 1) * mbs_);
    return data_.gather(std::span<std::int64_t const>(perm_).subspan(static_cast<std::size_t>(j * mbs_),
                                                                     static_cast<std::size_t>(mbs_)));
  }

  struct sentinel {};
  class iterator {
   public:
    explicit iterator(MiniBatchIterator* it) : it_(it) { cur_ = it_->next(); }
    DataProto const& operator*() const { return *cur_; }
    DataProto const* operator->() const { return &*cur_; }
    iterator& operator++() { cur_ = it_->next(); return *this; }
    friend bool operator==(iterator const& a, sentinel) { return !a.cur_.has_value(); }
   private:
    MiniBatchIterator* it_;
    std::optional<DataProto> cur_;
  };
  iterator begin() { return iterator(this); }
  sentinel end() { return {}; }

 private:
  void new_permutation() {
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
  DataProto data_;
  std::int64_t mbs_, epochs_, per_epoch_ = 0, produced_ = 0;
  bool shuffle_;
  std::mt19937_64 rng_;
  std::vector<std::int64_t> perm_;
};

inline MiniBatchIterator DataProto::make_iterator(std::int64_t mini_batch_size, std::int64_t epochs,
                                                  std::optional<std::uint64_t> seed, bool shuffle) const {
  return MiniBatchIterator(*this, mini_batch_size, epochs, seed, shuffle);
}

}  // namespace rlflow
