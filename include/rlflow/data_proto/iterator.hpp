// rlflow/data_proto/iterator.hpp: seeded mini-batch iteration over a DataProto (verl:
// DataProto.make_iterator). Part of rlflow/core/data_proto.hpp.
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
                    bool shuffle);
  //! Mini-batches in total (epochs * n / mini_batch_size).
  std::int64_t count() const { return per_epoch_ * epochs_; }
  //! The next mini-batch, or nullopt when done.
  std::optional<DataProto> next();

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
  void new_permutation();
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

#if RLFLOW_DEFINE_BODIES
#include <rlflow/data_proto/impl/iterator.ipp>
#endif
