// rlflow/data_proto.hpp: DataProto, the record that flows between the stages of RL post-training
// (verl's verl/protocol.py DataProto): named tensor columns sharing the first dimension
// ('batch'), named columns of host Values ('non_tensor_batch') and an ordered map of Values
// ('meta_info'). Defines the row operations (slice, index, mask, chunk, split, concat, repeat,
// reorder, padding, fold/unfold, mini-batch iteration), the key operations (select, pop,
// rename, union) and a self-describing, versioned, checksummed binary format (bytes and files).
// Value semantics: derived objects COPY meta_info and non-tensor Values (verl shares them by
// reference) and share tensor storage where the rows are contiguous (slice/chunk/split are
// zero-copy views). Does not move data between devices; the format carries host tensors only.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>       // std::rename, std::remove
#include <filesystem>
#include <fstream>
#include <optional>
#include <memory>       // std::unique_ptr
#include <random>       // std::mt19937_64, std::random_device
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>  // duplicate-key checks in the deserializer
#include <utility>
#include <vector>

#include <rlflow/detail/serialize.hpp>
#include <rlflow/error.hpp>
#include <rlflow/tensor.hpp>
#include <rlflow/value.hpp>

namespace rlflow {

//! One Value per row.
using NonTensorColumn = std::vector<Value>;
//! meta_info: an insertion-ordered string -> Value map (get / set / contains / erase).
using Meta = Dict;
using TensorColumns = std::vector<std::pair<std::string, Tensor>>;
using NonTensorColumns = std::vector<std::pair<std::string, NonTensorColumn>>;

//! The meta_info key that turns on auto-padding for one DataProto (verl: "_verl_auto_padding").
inline constexpr std::string_view auto_padding_key = "_rlflow_auto_padding";
//! The meta_info key whose values concat collects into a dict of lists (verl: "metrics").
inline constexpr std::string_view metrics_key = "metrics";

//! The two padding policies of verl, named (verl quirk Q-10).
enum class PadPolicy {
  cycle_from_first,  //!< rows 0,1,..,n-1,0,1,.. appended (verl pad_dataproto_to_divisor)
  repeat_last,       //!< the last row appended pad_size times (verl DataProto.padding, auto-padding)
};

//! One row of a DataProto (verl: DataProtoItem): tensor rows as views with the first dimension
//! dropped, the row's Values, and a copy of meta_info.
struct DataProtoItem {
  TensorColumns batch;
  std::vector<std::pair<std::string, Value>> non_tensor_batch;
  Meta meta_info;
  Tensor const& tensor(std::string_view key) const {
    for (auto const& [k, t] : batch)
      if (k == key) return t;
    throw key_error(msg("rlflow::DataProtoItem: no tensor '", key, "'"));
  }
  Value const& non_tensor(std::string_view key) const {
    for (auto const& [k, v] : non_tensor_batch)
      if (k == key) return v;
    throw key_error(msg("rlflow::DataProtoItem: no non-tensor '", key, "'"));
  }
};

class MiniBatchIterator;

//! verl: verl.protocol.DataProto. See docs/tensor_and_dataproto.md for every rule.
class DataProto {
 public:
  DataProto() = default;

  // ---- construction ---------------------------------------------------------------------------

  //! verl: DataProto.from_dict. Tensors must be defined, of rank >= 1 and share dim 0; each
  //! non-tensor column must have that many rows (or, without tensors, all the same count —
  //! verl quirk Q-1 fixed); keys are unique across both maps. No tensors -> no batch.
  static DataProto from_dict(TensorColumns tensors, NonTensorColumns non_tensors = {}, Meta meta = {}) {
    DataProto d;
    d.has_batch_ = !tensors.empty();
    d.batch_size_ = tensors.empty() ? 0 : tensors.front().second.rows();
    d.batch_ = std::move(tensors);
    d.non_tensor_ = std::move(non_tensors);
    d.meta_ = std::move(meta);
    d.check_consistency("from_dict");
    return d;
  }
  //! A DataProto with a batch of 'rows' rows and no tensor keys yet (verl: an empty TensorDict
  //! with a batch size; regression P-37).
  static DataProto with_batch_size(std::int64_t rows, Meta meta = {}) {
    if (rows < 0) throw value_error(msg("rlflow::DataProto::with_batch_size: rows = ", rows, " must be >= 0"));
    DataProto d;
    d.has_batch_ = true;
    d.batch_size_ = rows;
    d.meta_ = std::move(meta);
    return d;
  }

  //! verl: DataProto.check_consistency (+ Q-1: batch-less columns checked against each other).
  void check_consistency(const char* where = "check_consistency") const;

  // ---- sizes and access -----------------------------------------------------------------------

  //! verl: len(). Batch size if a batch is present, else the first non-tensor column's length, else 0.
  std::int64_t size() const {
    if (has_batch_) return batch_size_;
    return non_tensor_.empty() ? 0 : static_cast<std::int64_t>(non_tensor_.front().second.size());
  }
  bool empty() const { return size() == 0; }
  bool has_batch() const { return has_batch_; }

  bool has_tensor(std::string_view key) const { return find_tensor(key) != nullptr; }
  bool has_non_tensor(std::string_view key) const { return find_non_tensor(key) != nullptr; }
  std::vector<std::string> tensor_keys() const { return keys_of(batch_); }
  std::vector<std::string> non_tensor_keys() const { return keys_of(non_tensor_); }
  TensorColumns const& tensors() const { return batch_; }
  NonTensorColumns const& non_tensors() const { return non_tensor_; }

  //! The tensor column 'key'; key_error naming the available keys.
  Tensor const& tensor(std::string_view key) const {
    if (auto const* t = find_tensor(key)) return *t;
    throw key_error(msg("rlflow::DataProto::tensor: no tensor key '", key, "'; tensor keys: ", key_list(batch_),
                        "; non-tensor keys: ", key_list(non_tensor_)));
  }
  Tensor& tensor(std::string_view key) {
    return const_cast<Tensor&>(static_cast<DataProto const&>(*this).tensor(key));
  }
  //! Adds or replaces a tensor column (rank >= 1, dim 0 == size(); the first column of an empty
  //! DataProto sets the batch size).
  void set_tensor(std::string key, Tensor t);

  NonTensorColumn const& non_tensor(std::string_view key) const {
    if (auto const* c = find_non_tensor(key)) return *c;
    throw key_error(msg("rlflow::DataProto::non_tensor: no non-tensor key '", key, "'; non-tensor keys: ",
                        key_list(non_tensor_), "; tensor keys: ", key_list(batch_)));
  }
  NonTensorColumn& non_tensor(std::string_view key) {
    return const_cast<NonTensorColumn&>(static_cast<DataProto const&>(*this).non_tensor(key));
  }
  //! Adds or replaces a non-tensor column (length must equal size() unless this is empty).
  void set_non_tensor(std::string key, NonTensorColumn c);

  Meta& meta_info() { return meta_; }
  Meta const& meta_info() const { return meta_; }

  //! verl: is_padding_enabled() (per-object flag; there is no process-global switch in rlflow).
  bool auto_padding() const {
    Value const* v = meta_.find(auto_padding_key);
    return v && v->is_bool() && v->as_bool();
  }
  void set_auto_padding(bool on) {
    if (on) meta_.set(std::string(auto_padding_key), true);
    else meta_.erase(auto_padding_key);
  }

  // ---- row selection --------------------------------------------------------------------------

  //! verl: dp[i] with an int -> DataProtoItem. Negative i counts from the end.
  DataProtoItem item(std::int64_t i) const;
  //! verl: DataProto.slice. Rows [begin, end) with Python's negative-index and clamping rules;
  //! step 1 gives zero-copy tensor views, other positive steps gather.
  DataProto slice(std::int64_t begin, std::int64_t end, std::int64_t step = 1) const;
  //! verl: select_idxs with integer indices (gather; duplicates and any order; negative from the end).
  DataProto index(std::span<std::int64_t const> idx) const;
  DataProto index(std::vector<std::int64_t> const& idx) const { return index(std::span<std::int64_t const>(idx)); }
  DataProto index(std::initializer_list<std::int64_t> idx) const { return index(std::span<std::int64_t const>(idx.begin(), idx.size())); }
  //! verl: select_idxs with a boolean mask (length must equal size()).
  DataProto mask(std::span<bool const> m) const;
  DataProto mask(std::vector<bool> const& m) const;
  //! verl: dp[tensor]: a bool tensor is a mask, an int32/int64 tensor an index list (1-d, host);
  //! any other dtype is a dtype_error (verl's TypeError for unsupported index types).
  DataProto index(Tensor const& idx) const;

  // ---- key operations ---------------------------------------------------------------------------

  //! verl: DataProto.select. nullopt keeps every key of that map; a missing key is a key_error in
  //! every map (verl quirk Q-2: verl ignored missing non-tensor/meta keys). Tensors are shared.
  DataProto select(std::optional<std::vector<std::string>> batch_keys,
                   std::optional<std::vector<std::string>> non_tensor_keys = std::nullopt,
                   std::optional<std::vector<std::string>> meta_keys = std::nullopt) const;
  //! select({"obs", "act"}) with a braced list of tensor keys.
  DataProto select(std::vector<std::string> const& batch_keys,
                   std::optional<std::vector<std::string>> non_tensor_keys = std::nullopt,
                   std::optional<std::vector<std::string>> meta_keys = std::nullopt) const {
    return select(std::optional<std::vector<std::string>>(batch_keys), std::move(non_tensor_keys), std::move(meta_keys));
  }
  //! verl: DataProto.pop. Removes the keys from *this (all must exist; checked before anything
  //! is removed) and returns them as a new DataProto. Popped tensors form its batch.
  DataProto pop(std::vector<std::string> const& batch_keys, std::vector<std::string> const& non_tensor_keys = {},
                std::vector<std::string> const& meta_keys = {});
  //! verl: DataProto.rename (in place, returns *this). Renames tensor keys and, as an rlflow
  //! extension, non-tensor keys; the new names must not collide.
  DataProto& rename(std::vector<std::string> const& old_keys, std::vector<std::string> const& new_keys);
  DataProto& rename(std::string const& old_key, std::string const& new_key) {
    return rename(std::vector<std::string>{old_key}, std::vector<std::string>{new_key});
  }
  //! verl: DataProto.union (in place, returns *this). Keys in both must be equal (tensors
  //! bit-exact, Values deep-equal with NaN == NaN, meta equal); a missing batch counts as empty
  //! row counts are re-validated before anything changes.
  DataProto& union_with(DataProto const& other);

  // ---- batch operations -----------------------------------------------------------------------

  //! verl: DataProto.chunk with one rule (quirks ): always exactly k contiguous pieces,
  //! the first size()%k have ceil(n/k) rows, the rest floor(n/k) (k > n gives empty tail
  //! pieces). Tensors are zero-copy views. k <= 0 is a value_error.
  std::vector<DataProto> chunk(std::int64_t k) const;
  //! chunk(k) that insists on size() % k == 0 (verl's behaviour without auto-padding).
  std::vector<DataProto> chunk_equal(std::int64_t k) const;
  //! verl: DataProto.split. Consecutive pieces of split_size rows (last may be shorter); n == 0 -> {}.
  std::vector<DataProto> split(std::int64_t split_size) const;
  //! verl: DataProto.concat. Parts must agree on batch presence, key sets, dtypes and
  //! trailing shapes; meta merge: first value wins, a differing value is a value_error, the
  //! "metrics" key is collected into a dict of lists. Empty input is a value_error.
  static DataProto concat(std::span<DataProto const> parts);
  static DataProto concat(std::vector<DataProto> const& parts) { return concat(std::span<DataProto const>(parts)); }
  static DataProto concat(std::initializer_list<DataProto> parts) {
    return concat(std::span<DataProto const>(parts.begin(), parts.size()));
  }
  //! verl: DataProto.repeat. interleave: a,a,b,b; tile: a,b,a,b.
  DataProto repeat(std::int64_t times, bool interleave = true) const;
  //! verl: DataProto.sample_level_repeat. Row i repeated counts[i] times, rows in order.
  DataProto sample_level_repeat(std::span<std::int64_t const> counts) const;
  DataProto sample_level_repeat(std::vector<std::int64_t> const& counts) const {
    return sample_level_repeat(std::span<std::int64_t const>(counts));
  }
  DataProto sample_level_repeat(Tensor const& counts) const;
  //! verl: DataProto.reorder (in place gather by idx).
  void reorder(std::span<std::int64_t const> idx) { *this = index(idx); }
  void reorder(std::vector<std::int64_t> const& idx) { reorder(std::span<std::int64_t const>(idx)); }
  void reorder(Tensor const& idx) { *this = index(idx); }

  //! verl: fold_batch_dim(data, new_batch_size): rows become new_batch_size groups; tensors
  //! (n, ...) -> (g, n/g, ...) views, non-tensor rows -> lists of n/g Values. Returns a new
  //! object.
  DataProto fold_batch_dim(std::int64_t new_batch_size) const;
  //! verl: unfold_batch_dim(data, 2): the inverse of fold_batch_dim.
  DataProto unfold_batch_dim() const;
  //! verl: DataProto.unfold_column_chunks. Keys in split_keys: (n, d, ...) -> (n*n_split,
  //! d/n_split, ...) (non-tensor rows: lists split in n_split pieces); every other key is
  //! repeated n_split times interleaved. An empty split_keys repeats everything.
  DataProto unfold_column_chunks(std::int64_t n_split, std::vector<std::string> const& split_keys = {}) const;

  // ---- padding --------------------------------------------------------------------------------

  //! Rows needed to make n a multiple of divisor (0 when it already is).
  static std::int64_t pad_size_for(std::int64_t n, std::int64_t divisor) {
    if (divisor <= 0) throw value_error(msg("rlflow::DataProto: pad divisor ", divisor, " must be > 0"));
    return n % divisor == 0 ? 0 : divisor - n % divisor;
  }
  //! A copy with pad_size rows appended by the given policy; *this is not modified. An empty
  //! DataProto cannot be padded by a positive amount (value_error).
  DataProto padded(std::int64_t pad_size, PadPolicy policy) const;
  //! verl: DataProto.padding (auto-padding policy: repeat the last row), as a copy.
  DataProto padded_repeat_last(std::int64_t pad_size) const { return padded(pad_size, PadPolicy::repeat_last); }
  //! verl: pad_dataproto_to_divisor: {copy padded cyclically from the first row, pad_size}.
  //! n == 0 is returned unchanged with pad 0.
  std::pair<DataProto, std::int64_t> pad_to_divisor(std::int64_t divisor) const {
    std::int64_t const pad = pad_size_for(size(), divisor);
    if (size() == 0) return {*this, 0};
    return {padded(pad, PadPolicy::cycle_from_first), pad};
  }
  //! verl: unpad_dataproto: drops the trailing pad_size rows (a zero-copy view).
  DataProto unpad(std::int64_t pad_size) const {
    if (pad_size < 0 || pad_size > size())
      throw value_error(msg("rlflow::DataProto::unpad: pad_size ", pad_size, " is outside [0, ", size(), "]"));
    return slice(0, size() - pad_size);
  }

  // ---- iteration ------------------------------------------------------------------------------

  //! verl: DataProto.make_iterator. epochs * n / mini_batch_size mini-batches (n % mbs == 0
  //! required); with shuffle, each epoch is a fresh permutation from one mt19937_64 seeded once
  //! (same seed -> same sequence; no seed -> random_device).
  MiniBatchIterator make_iterator(std::int64_t mini_batch_size, std::int64_t epochs = 1,
                                  std::optional<std::uint64_t> seed = std::nullopt, bool shuffle = false) const;

  // ---- serialization --------------------------------------------------------------------------

  //! Bytes serialize() produces.
  std::size_t serialized_size() const;
  //! Self-describing binary form (format below / in the docs). Host tensors only.
  std::vector<std::byte> serialize() const {
    std::vector<std::byte> out;
    serialize_into(out);
    return out;
  }
  //! serialize() into a reused buffer (resized to serialized_size()).
  void serialize_into(std::vector<std::byte>& out) const;
  //! Parses serialize()'s output. Truncated, corrupt, unknown-version input -> format_error.
  static DataProto deserialize(std::span<std::byte const> bytes);
  //! verl: save_to_disk / load_from_disk. Writes via a temporary file and rename.
  void save(std::filesystem::path const& path) const;
  static DataProto load(std::filesystem::path const& path);

  static constexpr char format_magic[8] = {'R', 'L', 'F', 'D', 'P', 'R', 'O', 'T'};
  static constexpr std::uint32_t format_version = 1;
  static constexpr int max_value_depth = 64;

  // ---- misc -----------------------------------------------------------------------------------

  //! A deep copy (tensors cloned).
  DataProto clone() const {
    DataProto d = *this;
    for (auto& [k, t] : d.batch_) t = t.clone();
    return d;
  }
  //! Keys, shapes and dtypes, one per line (verl: get_data_info).
  std::string describe() const;

  //! Same batch presence and size; same key sets (order ignored); tensors bit-exact; Values and
  //! meta deep-equal (NaN == NaN).
  friend bool operator==(DataProto const& a, DataProto const& b);

 private:
  template <class Col>
  static std::vector<std::string> keys_of(std::vector<std::pair<std::string, Col>> const& m) {
    std::vector<std::string> k;
    k.reserve(m.size());
    for (auto const& it : m) k.push_back(it.first);
    return k;
  }
  template <class Col>
  static std::string key_list(std::vector<std::pair<std::string, Col>> const& m) {
    std::string s;
    for (auto const& it : m) s += (s.empty() ? "'" : ", '") + it.first + "'";
    return s.empty() ? "(none)" : s;
  }
  template <class Col>
  static Col const* find_in(std::vector<std::pair<std::string, Col>> const& m, std::string_view key) {
    for (auto const& it : m)
      if (it.first == key) return &it.second;
    return nullptr;
  }
  Tensor const* find_tensor(std::string_view key) const { return find_in(batch_, key); }
  NonTensorColumn const* find_non_tensor(std::string_view key) const { return find_in(non_tensor_, key); }

  //! Gather rows (validated, non-negative indices) into a new DataProto with a copy of meta.
  DataProto gather(std::span<std::int64_t const> idx) const;
  //! Contiguous rows [b, e) as views.
  DataProto view(std::int64_t b, std::int64_t e) const;
  std::vector<std::int64_t> normalize_indices(std::span<std::int64_t const> idx, const char* where) const;
  static Meta merge_meta(std::span<DataProto const> parts);
  static DataProto parse_body(detail::ByteReader& r);

  TensorColumns batch_;
  bool has_batch_ = false;
  std::int64_t batch_size_ = 0;
  NonTensorColumns non_tensor_;
  Meta meta_;

  friend class MiniBatchIterator;
};

//! verl: pad_dataproto_to_divisor(data, size_divisor).
inline std::pair<DataProto, std::int64_t> pad_dataproto_to_divisor(DataProto const& d, std::int64_t divisor) {
  return d.pad_to_divisor(divisor);
}
//! verl: unpad_dataproto(data, pad_size).
inline DataProto unpad_dataproto(DataProto const& d, std::int64_t pad_size) { return d.unpad(pad_size); }
//! verl: fold_batch_dim / unfold_batch_dim as free functions (return new objects).
inline DataProto fold_batch_dim(DataProto const& d, std::int64_t new_batch_size) { return d.fold_batch_dim(new_batch_size); }
inline DataProto unfold_batch_dim(DataProto const& d) { return d.unfold_batch_dim(); }

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

// =============================================================================================
// Implementation

namespace detail {
inline std::string hex32(std::uint32_t v) {
  char buf[11];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}
}  // namespace detail

inline void DataProto::check_consistency(const char* where) const {
  auto const fail_dup = [&](std::string const& k, const char* what) {
    throw key_error(msg("rlflow::DataProto::", where, ": ", what, " key '", k, "' appears more than once; ",
                        "tensor and non-tensor keys must be unique across both maps"));
  };
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (batch_[j].first == batch_[i].first) fail_dup(batch_[i].first, "tensor");
    for (auto const& nt : non_tensor_)
      if (nt.first == batch_[i].first) fail_dup(batch_[i].first, "tensor/non-tensor");
  }
  for (std::size_t i = 0; i < non_tensor_.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (non_tensor_[j].first == non_tensor_[i].first) fail_dup(non_tensor_[i].first, "non-tensor");
  if (!has_batch_ && !batch_.empty())
    throw value_error(msg("rlflow::DataProto::", where, ": internal error: tensors without a batch"));
  if (batch_size_ < 0) throw value_error(msg("rlflow::DataProto::", where, ": batch size ", batch_size_, " is negative"));
  for (auto const& [k, t] : batch_) {
    if (!t.defined())
      throw value_error(msg("rlflow::DataProto::", where, ": tensor '", k, "' is undefined (default-constructed); ",
                            "pass a tensor made by Tensor::empty/zeros/from"));
    if (t.rank() == 0)
      throw shape_error(msg("rlflow::DataProto::", where, ": tensor '", k, "' has rank 0; every tensor needs one leading ",
                            "batch dimension (only num_batch_dims=1 is supported); reshape it to (1,) or (n, ...)"));
    if (t.rows() != batch_size_)
      throw shape_error(msg("rlflow::DataProto::", where, ": not all tensors have the same batch size: '",
                            batch_.front().first, "' has ", batch_size_, " rows, '", k, "' has shape ", t.shape().str(),
                            "; give every tensor the same first dimension"));
  }
  std::int64_t const n = size();
  for (auto const& [k, c] : non_tensor_) {
    auto const len = static_cast<std::int64_t>(c.size());
    if (len == n) continue;
    if (has_batch_)
      throw shape_error(msg("rlflow::DataProto::", where, ": key ", k, " length ", len, " is not equal to batch size ", n,
                            "; give non-tensor column '", k, "' one value per row"));
    throw shape_error(msg("rlflow::DataProto::", where, ": non-tensor key ", k, " length ", len,
                          " is not equal to the length ", n, " of the first non-tensor key '", non_tensor_.front().first,
                          "'; every column needs one value per row"));
  }
}

inline void DataProto::set_tensor(std::string key, Tensor t) {
  if (!t.defined() || t.rank() == 0)
    throw shape_error(msg("rlflow::DataProto::set_tensor('", key, "'): the tensor is ",
                          t.defined() ? "rank 0" : "undefined", "; a column needs a leading batch dimension"));
  if (find_non_tensor(key))
    throw key_error(msg("rlflow::DataProto::set_tensor: '", key, "' is already a non-tensor key; pop it or choose another name"));
  std::int64_t const n = size();
  bool const fresh = !has_batch_ && non_tensor_.empty();
  if (!fresh && t.rows() != n)
    throw shape_error(msg("rlflow::DataProto::set_tensor('", key, "'): tensor ", t.describe(), " has ", t.rows(),
                          " rows but the DataProto has ", n, "; every column needs one entry per row"));
  if (!has_batch_) {
    has_batch_ = true;
    batch_size_ = t.rows();
  }
  for (auto& [k, v] : batch_)
    if (k == key) { v = std::move(t); return; }
  batch_.emplace_back(std::move(key), std::move(t));
}

inline void DataProto::set_non_tensor(std::string key, NonTensorColumn c) {
  if (find_tensor(key))
    throw key_error(msg("rlflow::DataProto::set_non_tensor: '", key, "' is already a tensor key; pop it or choose another name"));
  std::optional<std::int64_t> need;
  if (has_batch_) need = batch_size_;
  else
    for (auto const& [k, col] : non_tensor_)
      if (k != key) { need = static_cast<std::int64_t>(col.size()); break; }
  if (need && static_cast<std::int64_t>(c.size()) != *need)
    throw shape_error(msg("rlflow::DataProto::set_non_tensor: key ", key, " length ", c.size(), " is not equal to batch size ",
                          *need, "; give the column one value per row"));
  for (auto& [k, v] : non_tensor_)
    if (k == key) { v = std::move(c); return; }
  non_tensor_.emplace_back(std::move(key), std::move(c));
}

inline DataProtoItem DataProto::item(std::int64_t i) const {
  std::int64_t const n = size();
  std::int64_t const j = i < 0 ? i + n : i;
  if (j < 0 || j >= n)
    throw value_error(msg("rlflow::DataProto::item(", i, "): index out of range for ", n, " rows"));
  DataProtoItem it;
  for (auto const& [k, t] : batch_) it.batch.emplace_back(k, t.row(j));
  for (auto const& [k, c] : non_tensor_) it.non_tensor_batch.emplace_back(k, c[static_cast<std::size_t>(j)]);
  it.meta_info = meta_;
  return it;
}

inline DataProto DataProto::view(std::int64_t b, std::int64_t e) const {
  for (auto const& [k, c] : non_tensor_)  // a column edited through non_tensor(key) may be short
    if (b < 0 || e < b || static_cast<std::int64_t>(c.size()) < e)
      throw shape_error(msg("rlflow::DataProto::view(", b, ", ", e, "): non-tensor key ", k, " length ", c.size(),
                            " does not cover rows [", b, ", ", e, ") of batch size ", size(),
                            "; give the column one value per row (check_consistency)"));
  DataProto d;
  d.has_batch_ = has_batch_;
  d.batch_size_ = has_batch_ ? e - b : 0;
  d.batch_.reserve(batch_.size());
  for (auto const& [k, t] : batch_) d.batch_.emplace_back(k, t.slice_rows(b, e));
  d.non_tensor_.reserve(non_tensor_.size());
  for (auto const& [k, c] : non_tensor_)
    d.non_tensor_.emplace_back(k, NonTensorColumn(c.begin() + b, c.begin() + e));
  d.meta_ = meta_;
  return d;
}

inline DataProto DataProto::gather(std::span<std::int64_t const> idx) const {
  DataProto d;
  d.has_batch_ = has_batch_;
  d.batch_size_ = has_batch_ ? static_cast<std::int64_t>(idx.size()) : 0;
  d.batch_.reserve(batch_.size());
  for (auto const& [k, t] : batch_) d.batch_.emplace_back(k, t.index_rows(idx));
  d.non_tensor_.reserve(non_tensor_.size());
  for (auto const& [k, c] : non_tensor_) {
    NonTensorColumn out;
    out.reserve(idx.size());
    for (auto i : idx) {
      if (i < 0 || static_cast<std::size_t>(i) >= c.size())
        throw shape_error(msg("rlflow::DataProto::gather: non-tensor key ", k, " length ", c.size(), " has no row ", i,
                              " (batch size ", size(), "); give the column one value per row (check_consistency)"));
      out.push_back(c[static_cast<std::size_t>(i)]);
    }
    d.non_tensor_.emplace_back(k, std::move(out));
  }
  d.meta_ = meta_;
  return d;
}

inline std::vector<std::int64_t> DataProto::normalize_indices(std::span<std::int64_t const> idx, const char* where) const {
  std::int64_t const n = size();
  std::vector<std::int64_t> out(idx.begin(), idx.end());
  for (std::size_t p = 0; p < out.size(); ++p) {
    std::int64_t const i = out[p];
    std::int64_t const j = i < 0 ? i + n : i;
    if (j < 0 || j >= n)
      throw value_error(msg("rlflow::DataProto::", where, ": index ", i, " at position ", p, " is out of range for ", n,
                            " rows (valid: ", -n, " .. ", n - 1, ")"));
    out[p] = j;
  }
  return out;
}

inline DataProto DataProto::slice(std::int64_t begin, std::int64_t end, std::int64_t step) const {
  if (step <= 0)
    throw value_error(msg("rlflow::DataProto::slice: step ", step, " must be > 0; use index() with explicit indices ",
                          "for reversed order"));
  std::int64_t const n = size();
  auto const clamp = [n](std::int64_t i) {
    if (i < 0) i += n;
    return std::clamp<std::int64_t>(i, 0, n);
  };
  std::int64_t const b = clamp(begin), e = std::max(b, clamp(end));
  if (step == 1) return view(b, e);
  std::vector<std::int64_t> idx;
  for (std::int64_t i = b; i < e; i += step) idx.push_back(i);
  return gather(idx);
}

inline DataProto DataProto::index(std::span<std::int64_t const> idx) const {
  auto const norm = normalize_indices(idx, "index");
  return gather(norm);
}

inline DataProto DataProto::mask(std::span<bool const> m) const {
  if (static_cast<std::int64_t>(m.size()) != size())
    throw shape_error(msg("rlflow::DataProto::mask: the mask has ", m.size(), " entries but the DataProto has ", size(),
                          " rows; give one bool per row"));
  std::vector<std::int64_t> idx;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i]) idx.push_back(static_cast<std::int64_t>(i));
  return gather(idx);
}

inline DataProto DataProto::mask(std::vector<bool> const& m) const {
  std::unique_ptr<bool[]> tmp(new bool[m.size() ? m.size() : 1]);
  for (std::size_t i = 0; i < m.size(); ++i) tmp[i] = m[i];
  return mask(std::span<bool const>(tmp.get(), m.size()));
}

inline DataProto DataProto::index(Tensor const& idx) const {
  if (!idx.defined() || idx.rank() != 1)
    throw shape_error(msg("rlflow::DataProto::index: an index tensor must be 1-d, got ",
                          idx.defined() ? idx.describe() : std::string("an undefined tensor")));
  if (idx.device() != Device::cpu)
    throw value_error(msg("rlflow::DataProto::index: index tensor ", idx.describe(), " lives on the device; copy it to the host"));
  switch (idx.dtype()) {
    case DType::bool_: return mask(idx.span<bool>());
    case DType::int64: return index(idx.span<std::int64_t>());
    case DType::int32: {
      auto s = idx.span<std::int32_t>();
      std::vector<std::int64_t> v(s.begin(), s.end());
      return index(std::span<std::int64_t const>(v));
    }
    default:
      throw dtype_error(msg("rlflow::DataProto::index: indexing with a ", dtype_name(idx.dtype()),
                            " tensor is not supported; use a bool mask or int32/int64 indices"));
  }
}

inline DataProto DataProto::select(std::optional<std::vector<std::string>> batch_keys,
                                   std::optional<std::vector<std::string>> non_tensor_keys,
                                   std::optional<std::vector<std::string>> meta_keys) const {
  DataProto d;
  d.has_batch_ = has_batch_;
  d.batch_size_ = batch_size_;
  if (batch_keys) {
    for (auto const& k : *batch_keys) {
      Tensor const* t = find_tensor(k);
      if (!t)
        throw key_error(msg("rlflow::DataProto::select: no tensor key '", k, "'; tensor keys: ", key_list(batch_)));
      if (!find_in(d.batch_, k)) d.batch_.emplace_back(k, *t);
    }
  } else {
    d.batch_ = batch_;
  }
  if (non_tensor_keys) {
    for (auto const& k : *non_tensor_keys) {
      auto const* c = find_non_tensor(k);
      if (!c)
        throw key_error(msg("rlflow::DataProto::select: no non-tensor key '", k, "'; non-tensor keys: ", key_list(non_tensor_)));
      if (!find_in(d.non_tensor_, k)) d.non_tensor_.emplace_back(k, *c);
    }
  } else {
    d.non_tensor_ = non_tensor_;
  }
  if (meta_keys) {
    for (auto const& k : *meta_keys) {
      Value const* v = meta_.find(k);
      if (!v) throw key_error(msg("rlflow::DataProto::select: no meta_info key '", k, "'; meta keys: ", meta_.key_list()));
      d.meta_.set(k, *v);
    }
  } else {
    d.meta_ = meta_;
  }
  if (!d.has_batch_ && d.non_tensor_.empty()) d.batch_size_ = 0;
  return d;
}

inline DataProto DataProto::pop(std::vector<std::string> const& batch_keys, std::vector<std::string> const& non_tensor_keys,
                                std::vector<std::string> const& meta_keys) {
  auto const check = [](std::vector<std::string> const& keys, auto const& has, const char* what, std::string const& avail) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!has(keys[i]))
        throw key_error(msg("rlflow::DataProto::pop: no ", what, " key '", keys[i], "'; ", what, " keys: ", avail));
      for (std::size_t j = 0; j < i; ++j)
        if (keys[j] == keys[i]) throw key_error(msg("rlflow::DataProto::pop: ", what, " key '", keys[i], "' requested twice"));
    }
  };
  check(batch_keys, [&](std::string const& k) { return find_tensor(k) != nullptr; }, "tensor", key_list(batch_));
  check(non_tensor_keys, [&](std::string const& k) { return find_non_tensor(k) != nullptr; }, "non-tensor",
        key_list(non_tensor_));
  check(meta_keys, [&](std::string const& k) { return meta_.contains(k); }, "meta_info", meta_.key_list());

  DataProto out;
  if (!batch_keys.empty()) {
    out.has_batch_ = true;
    out.batch_size_ = batch_size_;
  }
  for (auto const& k : batch_keys) {
    auto it = std::find_if(batch_.begin(), batch_.end(), [&](auto const& p) { return p.first == k; });
    out.batch_.emplace_back(k, std::move(it->second));
    batch_.erase(it);
  }
  for (auto const& k : non_tensor_keys) {
    auto it = std::find_if(non_tensor_.begin(), non_tensor_.end(), [&](auto const& p) { return p.first == k; });
    out.non_tensor_.emplace_back(k, std::move(it->second));
    non_tensor_.erase(it);
  }
  for (auto const& k : meta_keys) {
    out.meta_.set(k, meta_.get(k));
    meta_.erase(k);
  }
  return out;
}

inline DataProto& DataProto::rename(std::vector<std::string> const& old_keys, std::vector<std::string> const& new_keys) {
  if (old_keys.size() != new_keys.size())
    throw value_error(msg("rlflow::DataProto::rename: new_keys and old_keys must have the same length, but got ",
                          new_keys.size(), " and ", old_keys.size()));
  std::vector<std::string> names;  // every key after renaming
  for (auto const& [k, t] : batch_) names.push_back(k);
  for (auto const& [k, c] : non_tensor_) names.push_back(k);
  std::vector<std::string> const before = names;
  for (std::size_t i = 0; i < old_keys.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (old_keys[j] == old_keys[i]) throw key_error(msg("rlflow::DataProto::rename: key '", old_keys[i], "' is renamed twice"));
    auto it = std::find(before.begin(), before.end(), old_keys[i]);
    if (it == before.end())
      throw key_error(msg("rlflow::DataProto::rename: no key '", old_keys[i], "'; tensor keys: ", key_list(batch_),
                          "; non-tensor keys: ", key_list(non_tensor_)));
    names[static_cast<std::size_t>(it - before.begin())] = new_keys[i];
  }
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (names[i] == names[j])
        throw key_error(msg("rlflow::DataProto::rename: after renaming, key '", names[i],
                            "' would appear twice; pick names that do not collide"));
  std::size_t p = 0;
  for (auto& col : batch_) col.first = names[p++];
  for (auto& col : non_tensor_) col.first = names[p++];
  return *this;
}

inline DataProto& DataProto::union_with(DataProto const& other) {
  bool const mine_rows = has_batch_ || !non_tensor_.empty();
  bool const theirs_rows = other.has_batch_ || !other.non_tensor_.empty();
  if (mine_rows && theirs_rows && size() != other.size())
    throw shape_error(msg("rlflow::DataProto::union_with: the two DataProtos must have identical batch size. Got ",
                          size(), " and ", other.size()));
  for (auto const& [k, t] : other.batch_) {
    if (find_non_tensor(k))
      throw key_error(msg("rlflow::DataProto::union_with: '", k, "' is a tensor in one DataProto and a non-tensor in the other"));
    if (Tensor const* mine = find_tensor(k); mine && !bit_equal(*mine, t))
      throw value_error(msg("rlflow::DataProto::union_with: tensor '", k, "' differs (", mine->describe(), " vs ",
                            t.describe(), "); keys in both must hold equal values; rename or pop one of them"));
  }
  for (auto const& [k, c] : other.non_tensor_) {
    if (find_tensor(k))
      throw key_error(msg("rlflow::DataProto::union_with: '", k, "' is a non-tensor in one DataProto and a tensor in the other"));
    if (auto const* mine = find_non_tensor(k); mine && !(*mine == c))
      throw value_error(msg("rlflow::DataProto::union_with: non-tensor '", k, "' differs between the two DataProtos; ",
                            "keys in both must hold deep-equal values; rename or pop one of them"));
  }
  for (auto const& [k, v] : other.meta_)
    if (Value const* mine = meta_.find(k); mine && !(*mine == v))
      throw value_error(msg("rlflow::DataProto::union_with: meta_info key '", k, "' differs: ", mine->repr(), " vs ",
                            v.repr(), "; keys in both must be equal"));
  if (other.has_batch_ && !has_batch_) {
    has_batch_ = true;
    batch_size_ = other.batch_size_;
  }
  for (auto const& [k, t] : other.batch_)
    if (!find_tensor(k)) batch_.emplace_back(k, t);
  for (auto const& [k, c] : other.non_tensor_)
    if (!find_non_tensor(k)) non_tensor_.emplace_back(k, c);
  for (auto const& [k, v] : other.meta_)
    if (!meta_.contains(k)) meta_.set(k, v);
  check_consistency("union_with");
  return *this;
}

inline std::vector<DataProto> DataProto::chunk(std::int64_t k) const {
  if (k <= 0) throw value_error(msg("rlflow::DataProto::chunk: chunks = ", k, " must be > 0"));
  std::int64_t const n = size(), base = n / k, rem = n % k;
  std::vector<DataProto> out;
  out.reserve(static_cast<std::size_t>(k));
  std::int64_t b = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    std::int64_t const e = b + base + (i < rem ? 1 : 0);
    out.push_back(view(b, e));
    b = e;
  }
  return out;
}

inline std::vector<DataProto> DataProto::chunk_equal(std::int64_t k) const {
  if (k <= 0) throw value_error(msg("rlflow::DataProto::chunk_equal: chunks = ", k, " must be > 0"));
  if (size() % k != 0)
    throw value_error(msg("rlflow::DataProto::chunk_equal: only support equal chunk. Got size of DataProto ", size(),
                          " and chunk ", k, "; pad first (pad_to_divisor, padded_repeat_last) or use chunk(k) for ",
                          "pieces that differ by one row"));
  return chunk(k);
}

inline std::vector<DataProto> DataProto::split(std::int64_t split_size) const {
  if (split_size <= 0) throw value_error(msg("rlflow::DataProto::split: split_size = ", split_size, " must be > 0"));
  std::vector<DataProto> out;
  std::int64_t const n = size();
  for (std::int64_t b = 0; b < n; b += split_size) out.push_back(view(b, std::min(n, b + split_size)));
  return out;
}

inline Meta DataProto::merge_meta(std::span<DataProto const> parts) {
  Meta out;
  bool any_metrics = false;
  std::vector<Dict const*> collected;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    for (auto const& [k, v] : parts[p].meta_) {
      if (k == metrics_key) {
        if (!any_metrics) out.set(k, Value());  // keeps the key's first-seen position
        any_metrics = true;
        if (v.is_none()) continue;
        if (v.is_dict()) { collected.push_back(&v.as_dict()); continue; }
        if (v.is_list()) {
          for (auto const& e : v.as_list()) {
            if (!e.is_dict())
              throw value_error(msg("rlflow::DataProto::concat: meta_info['metrics'] of part ", p,
                                    " is a list holding a ", value_kind_name(e.kind()), "; metrics must be a dict or a list of dicts"));
            collected.push_back(&e.as_dict());
          }
          continue;
        }
        throw value_error(msg("rlflow::DataProto::concat: meta_info['metrics'] of part ", p, " is a ",
                              value_kind_name(v.kind()), "; metrics must be None, a dict or a list of dicts"));
      }
      if (Value const* seen = out.find(k)) {
        if (!(*seen == v))
          throw value_error(msg("rlflow::DataProto::concat: Conflicting values for meta_info key '", k, "': ", seen->repr(),
                                " (earlier part) vs ", v.repr(), " (part ", p, "); make them equal or pop the key first"));
      } else {
        out.set(k, v);
      }
    }
  }
  if (any_metrics) {
    Dict lists;  // dict of lists, keys in first-seen order across all collected dicts
    for (Dict const* d : collected)
      for (auto const& [mk, mv] : *d) {
        Value* l = lists.find(mk);
        if (!l) {
          lists.set(mk, Value::List{});
          l = lists.find(mk);
        }
        l->as_list().push_back(mv);
      }
    out.set(std::string(metrics_key), std::move(lists));
  }
  return out;
}

inline DataProto DataProto::concat(std::span<DataProto const> parts) {
  if (parts.empty()) throw value_error("rlflow::DataProto::concat: cannot concatenate an empty list of DataProtos");
  DataProto const& first = parts[0];
  for (std::size_t p = 1; p < parts.size(); ++p) {
    DataProto const& d = parts[p];
    if (d.has_batch_ != first.has_batch_)
      throw value_error(msg("rlflow::DataProto::concat: part ", p, (d.has_batch_ ? " has" : " has no"), " batch but part 0",
                            (first.has_batch_ ? " has one" : " has none"), "; all parts must agree (mixed presence)"));
    auto const same_keys = [&](auto const& a, auto const& b, const char* what) {
      bool ok = a.size() == b.size();
      for (auto const& it : a) ok = ok && find_in(b, it.first) != nullptr;
      if (!ok)
        throw key_error(msg("rlflow::DataProto::concat: part ", p, " has ", what, " keys ", key_list(b), " but part 0 has ",
                            key_list(a), "; every part needs the same keys"));
    };
    same_keys(first.batch_, d.batch_, "tensor");
    same_keys(first.non_tensor_, d.non_tensor_, "non-tensor");
  }
  DataProto out;
  out.has_batch_ = first.has_batch_;
  for (auto const& p : parts) out.batch_size_ += p.has_batch_ ? p.batch_size_ : 0;
  std::vector<Tensor> ts(parts.size());
  for (auto const& [k, t0] : first.batch_) {
    for (std::size_t p = 0; p < parts.size(); ++p) {
      Tensor const& t = *find_in(parts[p].batch_, k);
      if (t.dtype() != t0.dtype())
        throw dtype_error(msg("rlflow::DataProto::concat: tensor '", k, "' is ", dtype_name(t.dtype()), " in part ", p,
                              " but ", dtype_name(t0.dtype()), " in part 0"));
      if (!(t.shape().tail() == t0.shape().tail()) || t.rank() != t0.rank())
        throw shape_error(msg("rlflow::DataProto::concat: tensor '", k, "' has shape ", t.shape().str(), " in part ", p,
                              " but ", t0.shape().str(), " in part 0; only the first dimension may differ"));
      ts[p] = t;
    }
    out.batch_.emplace_back(k, Tensor::concat_rows(ts));
  }
  for (auto const& [k, c0] : first.non_tensor_) {
    std::size_t total = 0;
    for (auto const& p : parts) total += find_in(p.non_tensor_, k)->size();
    NonTensorColumn col;
    col.reserve(total);
    for (auto const& p : parts) {
      auto const& c = *find_in(p.non_tensor_, k);
      col.insert(col.end(), c.begin(), c.end());
    }
    out.non_tensor_.emplace_back(k, std::move(col));
  }
  out.meta_ = merge_meta(parts);
  out.check_consistency("concat");
  return out;
}

inline DataProto DataProto::repeat(std::int64_t times, bool interleave) const {
  if (times < 0) throw value_error(msg("rlflow::DataProto::repeat: repeat_times = ", times, " must be >= 0"));
  std::int64_t const n = size();
  std::vector<std::int64_t> idx;
  idx.reserve(static_cast<std::size_t>(n * times));
  if (interleave) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t r = 0; r < times; ++r) idx.push_back(i);
  } else {
    for (std::int64_t r = 0; r < times; ++r)
      for (std::int64_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return gather(idx);
}

inline DataProto DataProto::sample_level_repeat(std::span<std::int64_t const> counts) const {
  std::int64_t const n = size();
  if (static_cast<std::int64_t>(counts.size()) != n)
    throw shape_error(msg("rlflow::DataProto::sample_level_repeat: ", counts.size(), " repeat counts for ", n,
                          " rows; give one count per row"));
  std::vector<std::int64_t> idx;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t const c = counts[static_cast<std::size_t>(i)];
    if (c < 0)
      throw value_error(msg("rlflow::DataProto::sample_level_repeat: count ", c, " for row ", i, " must be >= 0"));
    for (std::int64_t r = 0; r < c; ++r) idx.push_back(i);
  }
  return gather(idx);
}

inline DataProto DataProto::sample_level_repeat(Tensor const& counts) const {
  if (!counts.defined() || counts.rank() != 1)
    throw shape_error("rlflow::DataProto::sample_level_repeat: repeat counts must be a 1-d tensor");
  if (counts.dtype() == DType::int64) return sample_level_repeat(counts.span<std::int64_t>());
  if (counts.dtype() == DType::int32) {
    auto s = counts.span<std::int32_t>();
    std::vector<std::int64_t> v(s.begin(), s.end());
    return sample_level_repeat(std::span<std::int64_t const>(v));
  }
  throw dtype_error(msg("rlflow::DataProto::sample_level_repeat: repeat counts must be int32 or int64, got ",
                        dtype_name(counts.dtype())));
}

inline DataProto DataProto::fold_batch_dim(std::int64_t g) const {
  std::int64_t const n = size();
  if (g <= 0 || n % g != 0)
    throw value_error(msg("rlflow::DataProto::fold_batch_dim: ", n, " rows cannot be folded into ", g,
                          " groups; new_batch_size must be > 0 and divide the batch size"));
  std::int64_t const m = n / g;
  DataProto d;
  d.has_batch_ = has_batch_;
  d.batch_size_ = has_batch_ ? g : 0;
  for (auto const& [k, t] : batch_) {
    if (t.rank() + 1 > Shape::max_rank)
      throw shape_error(msg("rlflow::DataProto::fold_batch_dim: tensor '", k, "' of shape ", t.shape().str(),
                            " would exceed the maximum rank ", Shape::max_rank));
    std::vector<std::int64_t> dims{g, m};
    for (int i = 1; i < t.rank(); ++i) dims.push_back(t.shape()[i]);
    d.batch_.emplace_back(k, t.reshape(Shape(std::span<std::int64_t const>(dims))));
  }
  for (auto const& [k, c] : non_tensor_) {
    NonTensorColumn col;
    col.reserve(static_cast<std::size_t>(g));
    for (std::int64_t i = 0; i < g; ++i)
      col.emplace_back(Value::List(c.begin() + i * m, c.begin() + (i + 1) * m));
    d.non_tensor_.emplace_back(k, std::move(col));
  }
  d.meta_ = meta_;
  return d;
}

inline DataProto DataProto::unfold_batch_dim() const {
  std::int64_t const n = size();
  std::optional<std::int64_t> m;
  for (auto const& [k, t] : batch_) {
    if (t.rank() < 2)
      throw shape_error(msg("rlflow::DataProto::unfold_batch_dim: tensor '", k, "' has shape ", t.shape().str(),
                            "; unfolding needs a second (group) dimension — was it made by fold_batch_dim?"));
    if (m && *m != t.shape()[1])
      throw shape_error(msg("rlflow::DataProto::unfold_batch_dim: tensor '", k, "' has group size ", t.shape()[1],
                            " but another tensor has ", *m));
    m = t.shape()[1];
  }
  for (auto const& [k, c] : non_tensor_)
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (!c[i].is_list())
        throw value_error(msg("rlflow::DataProto::unfold_batch_dim: non-tensor '", k, "' row ", i, " is a ",
                              value_kind_name(c[i].kind()), ", not a list of group members"));
      auto const len = static_cast<std::int64_t>(c[i].as_list().size());
      if (m && *m != len)
        throw shape_error(msg("rlflow::DataProto::unfold_batch_dim: non-tensor '", k, "' row ", i, " holds ", len,
                              " values but the group size is ", *m));
      m = len;
    }
  std::int64_t const gm = m.value_or(0);
  DataProto d;
  d.has_batch_ = has_batch_;
  d.batch_size_ = has_batch_ ? n * gm : 0;
  for (auto const& [k, t] : batch_) {
    std::vector<std::int64_t> dims{n * gm};
    for (int i = 2; i < t.rank(); ++i) dims.push_back(t.shape()[i]);
    d.batch_.emplace_back(k, t.reshape(Shape(std::span<std::int64_t const>(dims))));
  }
  for (auto const& [k, c] : non_tensor_) {
    NonTensorColumn col;
    col.reserve(static_cast<std::size_t>(n * gm));
    for (auto const& v : c) col.insert(col.end(), v.as_list().begin(), v.as_list().end());
    d.non_tensor_.emplace_back(k, std::move(col));
  }
  d.meta_ = meta_;
  return d;
}

inline DataProto DataProto::unfold_column_chunks(std::int64_t n_split, std::vector<std::string> const& split_keys) const {
  if (n_split <= 0) throw value_error(msg("rlflow::DataProto::unfold_column_chunks: n_split = ", n_split, " must be > 0"));
  for (auto const& k : split_keys)
    if (!has_tensor(k) && !has_non_tensor(k))
      throw key_error(msg("rlflow::DataProto::unfold_column_chunks: split key '", k, "' is not a key; tensor keys: ",
                          key_list(batch_), "; non-tensor keys: ", key_list(non_tensor_)));
  auto const is_split = [&](std::string const& k) { return std::find(split_keys.begin(), split_keys.end(), k) != split_keys.end(); };
  std::int64_t const n = size();
  std::vector<std::int64_t> rep;
  rep.reserve(static_cast<std::size_t>(n * n_split));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t r = 0; r < n_split; ++r) rep.push_back(i);
  DataProto d;
  d.has_batch_ = has_batch_;
  d.batch_size_ = has_batch_ ? n * n_split : 0;
  for (auto const& [k, t] : batch_) {
    if (!is_split(k)) {
      d.batch_.emplace_back(k, t.index_rows(rep));
      continue;
    }
    if (t.rank() < 2 || t.shape()[1] % n_split != 0)
      throw shape_error(msg("rlflow::DataProto::unfold_column_chunks: tensor '", k, "' of shape ", t.shape().str(),
                            " cannot be split into ", n_split, " column chunks; dimension 1 must be divisible by n_split"));
    Shape s = t.shape();
    s[0] = n * n_split;
    s[1] = t.shape()[1] / n_split;
    d.batch_.emplace_back(k, t.reshape(s));
  }
  for (auto const& [k, c] : non_tensor_) {
    NonTensorColumn col;
    col.reserve(static_cast<std::size_t>(n * n_split));
    if (!is_split(k)) {
      for (auto i : rep) col.push_back(c[static_cast<std::size_t>(i)]);
    } else {
      for (std::size_t i = 0; i < c.size(); ++i) {
        if (!c[i].is_list() || static_cast<std::int64_t>(c[i].as_list().size()) % n_split != 0)
          throw shape_error(msg("rlflow::DataProto::unfold_column_chunks: non-tensor '", k, "' row ", i, " is ",
                                c[i].repr(), "; split keys need list rows whose length is divisible by ", n_split));
        auto const& l = c[i].as_list();
        std::size_t const w = l.size() / static_cast<std::size_t>(n_split);
        for (std::int64_t r = 0; r < n_split; ++r)
          col.emplace_back(Value::List(l.begin() + static_cast<std::ptrdiff_t>(r * w), l.begin() + static_cast<std::ptrdiff_t>((r + 1) * w)));
      }
    }
    d.non_tensor_.emplace_back(k, std::move(col));
  }
  d.meta_ = meta_;
  return d;
}

inline DataProto DataProto::padded(std::int64_t pad_size, PadPolicy policy) const {
  if (pad_size < 0) throw value_error(msg("rlflow::DataProto::padded: pad_size ", pad_size, " must be >= 0"));
  if (pad_size == 0) return *this;
  std::int64_t const n = size();
  if (n == 0)
    throw value_error(msg("rlflow::DataProto::padded: cannot pad an empty DataProto by ", pad_size,
                          " rows: there is no row to copy; skip padding when size() == 0"));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n + pad_size));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  for (std::int64_t j = 0; j < pad_size; ++j)
    idx[static_cast<std::size_t>(n + j)] = policy == PadPolicy::cycle_from_first ? j % n : n - 1;
  return gather(idx);
}

inline std::string DataProto::describe() const {
  std::string s = msg("DataProto(size=", size(), has_batch_ ? ", batch" : ", no batch", ")\n");
  for (auto const& [k, t] : batch_) s += msg("  tensor ", k, ": ", t.describe(), "\n");
  for (auto const& [k, c] : non_tensor_) s += msg("  non-tensor ", k, ": ", c.size(), " values\n");
  for (auto const& [k, v] : meta_) s += msg("  meta ", k, ": ", v.repr(), "\n");
  return s;
}

inline bool operator==(DataProto const& a, DataProto const& b) {
  if (a.has_batch_ != b.has_batch_ || a.size() != b.size()) return false;
  if (a.batch_.size() != b.batch_.size() || a.non_tensor_.size() != b.non_tensor_.size()) return false;
  for (auto const& [k, t] : a.batch_) {
    Tensor const* o = b.find_tensor(k);
    if (!o || !bit_equal(t, *o)) return false;
  }
  for (auto const& [k, c] : a.non_tensor_) {
    auto const* o = b.find_non_tensor(k);
    if (!o || !(c == *o)) return false;
  }
  return a.meta_ == b.meta_;
}

// ---- serialization --------------------------------------------------------------------------
//
// Format version 1 (all integers little-endian):
//   header  : magic "RLFDPROT" (8) | u32 version | u32 flags (0) | u64 body_bytes
//   body    : u8 has_batch | i64 batch_size | u32 n_tensors
//             n_tensors x { u32 key_len, key | u8 dtype | u8 rank | rank x i64 dim | raw bytes }
//             u32 n_non_tensor x { u32 key_len, key | u64 rows | rows x value }
//             meta: u64 n x { u32 key_len, key | value }
//   value   : u8 kind (0 none, 1 bool, 2 int, 3 float, 4 string, 5 list, 6 dict) then
//             bool u8 0/1 | int i64 | float f64 bits | string u64 len + bytes |
//             list u64 n + n values | dict u64 n + n x (u32 key_len, key, value)
//   trailer : u32 CRC-32C of every preceding byte

namespace detail {
inline constexpr std::size_t dp_header_bytes = 24;
inline constexpr std::size_t dp_trailer_bytes = 4;

inline std::size_t value_bytes(Value const& v, int depth) {
  if (depth > DataProto::max_value_depth)
    throw value_error(msg("rlflow::DataProto::serialize: a Value is nested deeper than ", DataProto::max_value_depth,
                          " levels; flatten it"));
  std::size_t n = 1;
  switch (v.kind()) {
    case ValueKind::none: break;
    case ValueKind::boolean: n += 1; break;
    case ValueKind::integer: case ValueKind::floating: n += 8; break;
    case ValueKind::string: n += 8 + v.as_string().size(); break;
    case ValueKind::list:
      n += 8;
      for (auto const& e : v.as_list()) n += value_bytes(e, depth + 1);
      break;
    case ValueKind::dict:
      n += 8;
      for (auto const& [k, e] : v.as_dict()) n += 4 + k.size() + value_bytes(e, depth + 1);
      break;
  }
  return n;
}

inline void write_value(ByteWriter& w, Value const& v) {
  w.u8(static_cast<std::uint8_t>(v.kind()));
  switch (v.kind()) {
    case ValueKind::none: break;
    case ValueKind::boolean: w.u8(v.as_bool() ? 1 : 0); break;
    case ValueKind::integer: w.i64(v.as_int()); break;
    case ValueKind::floating: w.u64(std::bit_cast<std::uint64_t>(v.as_double())); break;
    case ValueKind::string: w.str(v.as_string()); break;
    case ValueKind::list:
      w.u64(v.as_list().size());
      for (auto const& e : v.as_list()) write_value(w, e);
      break;
    case ValueKind::dict:
      w.u64(v.as_dict().size());
      for (auto const& [k, e] : v.as_dict()) {
        w.key(k);
        write_value(w, e);
      }
      break;
  }
}

inline std::size_t key_bytes(std::string const& k) {
  if (k.size() > UINT32_MAX) throw value_error(msg("rlflow::DataProto::serialize: a key of ", k.size(), " bytes is too long"));
  return 4 + k.size();
}

[[noreturn]] inline void corrupt(std::string const& what, ByteReader const& r) {
  throw format_error(msg("rlflow::DataProto::deserialize: corrupt input at offset ", r.offset(), ": ", what,
                         "; the bytes were damaged or not written by DataProto::serialize"));
}

//! Reads a Dict body (u64 count + entries whose values sit at child_depth); used for dict
//! Values and for meta_info (child_depth 0).
inline Dict read_dict(ByteReader& r, int child_depth);

inline Value read_value(ByteReader& r, int depth) {
  if (depth > DataProto::max_value_depth) corrupt(msg("Values nested deeper than ", DataProto::max_value_depth), r);
  std::uint8_t const tag = r.u8("value kind");
  switch (tag) {
    case 0: return Value();
    case 1: {
      std::uint8_t const b = r.u8("bool value");
      if (b > 1) corrupt(msg("bool value byte ", int(b), " is not 0 or 1"), r);
      return Value(b == 1);
    }
    case 2: return Value(r.i64("int value"));
    case 3: return Value(std::bit_cast<double>(r.u64("float value")));
    case 4: return Value(r.str("string value"));
    case 5: {
      std::uint64_t const n = r.u64("list length");
      if (n > r.remaining()) corrupt(msg("list length ", n, " exceeds the ", r.remaining(), " bytes left"), r);
      Value::List l;
      l.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(n, 1024)));  // grows with data actually read
      for (std::uint64_t i = 0; i < n; ++i) l.push_back(read_value(r, depth + 1));
      return Value(std::move(l));
    }
    case 6: return Value(read_dict(r, depth + 1));
    default: corrupt(msg("unknown value kind tag ", int(tag), " (known: 0..6)"), r);
  }
}

inline Dict read_dict(ByteReader& r, int child_depth) {
  std::uint64_t const n = r.u64("dict size");
  if (n > r.remaining()) corrupt(msg("dict size ", n, " exceeds the ", r.remaining(), " bytes left"), r);
  Dict d;
  std::unordered_set<std::string> seen;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string k = r.key("dict key");
    if (!seen.insert(k).second) corrupt(msg("dict key '", k, "' appears twice"), r);
    Value v = read_value(r, child_depth);
    d.append_new_unchecked(std::move(k), std::move(v));
  }
  return d;
}
}  // namespace detail

inline std::size_t DataProto::serialized_size() const {
  std::size_t n = detail::dp_header_bytes + detail::dp_trailer_bytes;
  n += 1 + 8 + 4;
  for (auto const& [k, t] : batch_) {
    if (t.device() != Device::cpu)
      throw value_error(msg("rlflow::DataProto::serialize: tensor '", k, "' (", t.describe(),
                            ") lives on the device; copy it to the host first"));
    n += detail::key_bytes(k) + 1 + 1 + 8 * static_cast<std::size_t>(t.rank()) + t.nbytes();
  }
  n += 4;
  for (auto const& [k, c] : non_tensor_) {
    n += detail::key_bytes(k) + 8;
    for (auto const& v : c) n += detail::value_bytes(v, 0);
  }
  n += 8;
  for (auto const& [k, v] : meta_) n += detail::key_bytes(k) + detail::value_bytes(v, 0);
  return n;
}

inline void DataProto::serialize_into(std::vector<std::byte>& out) const {
  std::size_t const total = serialized_size();
  if (out.size() != total) out.resize(total);
  detail::ByteWriter w(out.data());
  w.bytes(format_magic, sizeof format_magic);
  w.u32(format_version);
  w.u32(0);
  w.u64(total - detail::dp_header_bytes - detail::dp_trailer_bytes);
  w.u8(has_batch_ ? 1 : 0);
  w.i64(has_batch_ ? batch_size_ : 0);
  w.u32(static_cast<std::uint32_t>(batch_.size()));
  for (auto const& [k, t] : batch_) {
    w.key(k);
    w.u8(static_cast<std::uint8_t>(t.dtype()));
    w.u8(static_cast<std::uint8_t>(t.rank()));
    for (auto d : t.shape().dims()) w.i64(d);
    w.bytes(t.raw_data(), t.nbytes());
  }
  w.u32(static_cast<std::uint32_t>(non_tensor_.size()));
  for (auto const& [k, c] : non_tensor_) {
    w.key(k);
    w.u64(c.size());
    for (auto const& v : c) detail::write_value(w, v);
  }
  w.u64(meta_.size());
  for (auto const& [k, v] : meta_) {
    w.key(k);
    detail::write_value(w, v);
  }
  std::uint32_t const crc = w.crc();  // folded in while writing (one pass over the tensor bytes)
  w.u32(crc);
  if (w.pos() != out.data() + total)
    throw error(msg("rlflow::DataProto::serialize: internal error: wrote ", w.pos() - out.data(), " of ", total, " bytes"));
}

inline DataProto DataProto::deserialize(std::span<std::byte const> bytes) {
  using detail::corrupt;
  std::size_t const min_bytes = detail::dp_header_bytes + detail::dp_trailer_bytes;
  if (bytes.size() < min_bytes)
    throw format_error(msg("rlflow::DataProto::deserialize: input has ", bytes.size(), " bytes but a serialized DataProto ",
                           "has at least ", min_bytes, "; it was truncated"));
  if (std::memcmp(bytes.data(), format_magic, sizeof format_magic) != 0)
    throw format_error("rlflow::DataProto::deserialize: the input does not start with the magic 'RLFDPROT'; it is not a "
                       "serialized DataProto (or its first bytes were damaged)");
  detail::ByteReader h(bytes.first(detail::dp_header_bytes));
  h.take(sizeof format_magic, "magic");
  std::uint32_t const version = h.u32("version");
  if (version != format_version)
    throw format_error(msg("rlflow::DataProto::deserialize: format version ", version, " is not supported (this build ",
                           "reads version ", format_version, "); re-serialize with a matching rlflow"));
  std::uint32_t const flags = h.u32("flags");
  if (flags != 0) throw format_error(msg("rlflow::DataProto::deserialize: unknown header flags ", detail::hex32(flags)));
  std::uint64_t const body = h.u64("body size");
  if (body != bytes.size() - min_bytes)
    throw format_error(msg("rlflow::DataProto::deserialize: the header announces a ", body, "-byte body but the input ",
                           "holds ", bytes.size() - min_bytes, " body bytes; it was truncated or has trailing bytes"));
  std::uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - detail::dp_trailer_bytes, 4);
  auto const check_crc = [&](std::uint32_t computed) {
    if (stored != computed)
      throw format_error(msg("rlflow::DataProto::deserialize: checksum mismatch (stored ", detail::hex32(stored),
                             ", computed ", detail::hex32(computed), "); the bytes were corrupted in transit or on disk"));
  };
  // The body is parsed defensively while the CRC runs alongside the tensor copies (one pass);
  // if parsing fails, the checksum decides which error to report.
  detail::ByteReader r(bytes.subspan(detail::dp_header_bytes, static_cast<std::size_t>(body)), detail::dp_header_bytes);
  r.set_crc_seed(detail::crc32c_update(~0u, bytes.data(), detail::dp_header_bytes));
  DataProto d;
  try {
    d = parse_body(r);
  } catch (format_error const&) {
    check_crc(detail::crc32c(bytes.data(), bytes.size() - detail::dp_trailer_bytes));
    throw;
  }
  check_crc(~r.crc_state());
  return d;
}

inline DataProto DataProto::parse_body(detail::ByteReader& r) {
  using detail::corrupt;
  DataProto d;
  std::unordered_set<std::string> keys;
  std::uint8_t const hb = r.u8("batch flag");
  if (hb > 1) corrupt(msg("batch flag ", int(hb), " is not 0 or 1"), r);
  d.has_batch_ = hb == 1;
  std::int64_t const bs = r.i64("batch size");
  if (bs < 0 || (!d.has_batch_ && bs != 0)) corrupt(msg("batch size ", bs, " is invalid"), r);
  d.batch_size_ = bs;
  std::uint32_t const nt = r.u32("tensor count");
  if (!d.has_batch_ && nt != 0) corrupt(msg(nt, " tensors without a batch"), r);
  if (nt > r.remaining()) corrupt(msg("tensor count ", nt, " exceeds the ", r.remaining(), " bytes left"), r);
  for (std::uint32_t i = 0; i < nt; ++i) {
    std::string k = r.key("tensor key");
    if (!keys.insert(k).second) corrupt(msg("key '", k, "' appears twice"), r);
    std::uint8_t const code = r.u8("tensor dtype");
    if (!dtype_valid(code)) corrupt(msg("tensor '", k, "' has unknown dtype tag ", int(code), " (known: 0..", dtype_count - 1, ")"), r);
    auto const dt = static_cast<DType>(code);
    std::uint8_t const rank = r.u8("tensor rank");
    if (rank < 1 || rank > Shape::max_rank) corrupt(msg("tensor '", k, "' has rank ", int(rank), " (valid: 1..", Shape::max_rank, ")"), r);
    std::array<std::int64_t, Shape::max_rank> dims{};
    bool zero = false;
    for (int j = 0; j < rank; ++j) {
      dims[static_cast<std::size_t>(j)] = r.i64("tensor dimension");
      if (dims[static_cast<std::size_t>(j)] < 0) corrupt(msg("tensor '", k, "' has negative dimension ", dims[static_cast<std::size_t>(j)]), r);
      zero = zero || dims[static_cast<std::size_t>(j)] == 0;
    }
    if (dims[0] != bs) corrupt(msg("tensor '", k, "' has ", dims[0], " rows but the batch size is ", bs), r);
    // The product of the non-zero dims must fit in int64 (Shape::numel multiplies left to right,
    // so even a zero-element shape like (3, 2^62, 0) would overflow), and a non-empty tensor's
    // bytes must fit in what remains.
    std::uint64_t const cap = r.remaining() / dtype_size(dt);
    std::uint64_t nonzero = 1;
    for (int j = 0; j < rank; ++j) {
      auto const dj = static_cast<std::uint64_t>(dims[static_cast<std::size_t>(j)]);
      if (dj == 0) continue;
      if (dj > static_cast<std::uint64_t>(INT64_MAX) / nonzero)
        corrupt(msg("tensor '", k, "' has a shape whose element count overflows int64"), r);
      nonzero *= dj;
    }
    std::uint64_t const numel = zero ? 0 : nonzero;
    if (numel > cap) corrupt(msg("tensor '", k, "' shape needs more than the ", r.remaining(), " bytes left"), r);
    Shape const shape(std::span<std::int64_t const>(dims.data(), rank));
    std::size_t const nbytes = static_cast<std::size_t>(numel) * dtype_size(dt);
    Tensor t = Tensor::empty(dt, shape);
    r.copy_to(t.raw_data(), nbytes, "tensor data");
    if (dt == DType::bool_) {
      auto const* p = static_cast<unsigned char const*>(t.raw_data());
      for (std::size_t b = 0; b < nbytes; ++b)
        if (p[b] > 1) corrupt(msg("bool tensor '", k, "' holds byte ", int(p[b]), " (not 0 or 1)"), r);
    }
    d.batch_.emplace_back(std::move(k), std::move(t));
  }
  std::uint32_t const nn = r.u32("non-tensor count");
  if (nn > r.remaining()) corrupt(msg("non-tensor count ", nn, " exceeds the ", r.remaining(), " bytes left"), r);
  for (std::uint32_t i = 0; i < nn; ++i) {
    std::string k = r.key("non-tensor key");
    if (!keys.insert(k).second) corrupt(msg("key '", k, "' appears twice"), r);
    std::uint64_t const rows = r.u64("non-tensor length");
    if (rows > r.remaining()) corrupt(msg("non-tensor '", k, "' length ", rows, " exceeds the bytes left"), r);
    std::uint64_t const want = d.has_batch_ ? static_cast<std::uint64_t>(bs)
                               : d.non_tensor_.empty() ? rows
                                                       : d.non_tensor_.front().second.size();
    if (rows != want) corrupt(msg("non-tensor '", k, "' has ", rows, " rows, expected ", want), r);
    NonTensorColumn c;
    c.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(rows, 1 << 16)));  // grows with data actually read
    for (std::uint64_t j = 0; j < rows; ++j) c.push_back(detail::read_value(r, 0));
    d.non_tensor_.emplace_back(std::move(k), std::move(c));
  }
  d.meta_ = detail::read_dict(r, 0);
  if (!r.done()) corrupt(msg(r.remaining(), " unread bytes at the end of the body"), r);
  return d;
}

inline void DataProto::save(std::filesystem::path const& path) const {
  std::vector<std::byte> const bytes = serialize();
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw io_error(msg("rlflow::DataProto::save: cannot open '", tmp.string(), "' for writing; check the directory exists and is writable"));
    f.write(reinterpret_cast<char const*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) throw io_error(msg("rlflow::DataProto::save: writing ", bytes.size(), " bytes to '", tmp.string(), "' failed (disk full?)"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw io_error(msg("rlflow::DataProto::save: cannot rename '", tmp.string(), "' to '", path.string(), "'"));
  }
}

inline DataProto DataProto::load(std::filesystem::path const& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw io_error(msg("rlflow::DataProto::load: cannot open '", path.string(), "'; check the path"));
  std::streamoff const n = f.tellg();
  if (n < 0) throw io_error(msg("rlflow::DataProto::load: cannot size '", path.string(), "'"));
  std::vector<std::byte> bytes(static_cast<std::size_t>(n));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(bytes.data()), n);
  if (!f) throw io_error(msg("rlflow::DataProto::load: reading ", n, " bytes from '", path.string(), "' failed"));
  try {
    return deserialize(bytes);
  } catch (format_error const& e) {
    throw format_error(msg("rlflow::DataProto::load('", path.string(), "'): ", e.what()));
  }
}

}  // namespace rlflow
