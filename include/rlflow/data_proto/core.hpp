// rlflow/data_proto/core.hpp: the DataProto class (verl: verl/protocol.py DataProto), its row type
// DataProtoItem, the meta_info keys and PadPolicy, and the members that hold the columns together
// (consistency checks, set_tensor / set_non_tensor, item, describe, ==). Part of
// rlflow/core/data_proto.hpp: include that header, not this one (the row operations, padding,
// iteration and serialization members are defined in the sibling headers it includes).
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

#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/detail/serialize.hpp>
#include <rlflow/core/error.hpp>
#include <rlflow/core/tensor.hpp>
#include <rlflow/core/value.hpp>

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

//! The two padding policies of verl, named (verl leaves them unnamed).
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
  Tensor const& tensor(std::string_view key) const;
  Value const& non_tensor(std::string_view key) const;
};

class MiniBatchIterator;

//! verl: verl.protocol.DataProto. See docs/tensor_and_dataproto.md for every rule.
class DataProto {
 public:
  DataProto() = default;

  // ---- construction ---------------------------------------------------------------------------

  //! verl: DataProto.from_dict. Tensors must be defined, of rank >= 1 and share dim 0; each
  //! non-tensor column must have that many rows (or, without tensors, all the same count —
  //! verl never checks them); keys are unique across both maps. No tensors -> no batch.
  static DataProto from_dict(TensorColumns tensors, NonTensorColumns non_tensors = {}, Meta meta = {});
  //! A DataProto with a batch of 'rows' rows and no tensor keys yet (verl: an empty TensorDict
  //! with a batch size; regression P-37).
  static DataProto with_batch_size(std::int64_t rows, Meta meta = {});

  //! verl: DataProto.check_consistency (+ batch-less columns checked against each other, which verl skips).
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
  Tensor const& tensor(std::string_view key) const;
  Tensor& tensor(std::string_view key) {
    return const_cast<Tensor&>(static_cast<DataProto const&>(*this).tensor(key));
  }
  //! Adds or replaces a tensor column (rank >= 1, dim 0 == size(); the first column of an empty
  //! DataProto sets the batch size).
  void set_tensor(std::string key, Tensor t);

  NonTensorColumn const& non_tensor(std::string_view key) const;
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
  //! every map (verl ignores missing non-tensor/meta keys). Tensors are shared.
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
  //! (verl crashes); row counts are re-validated before anything changes (verl skips the check).
  DataProto& union_with(DataProto const& other);

  // ---- batch operations -----------------------------------------------------------------------

  //! verl: DataProto.chunk with one rule (verl has two, and may give fewer pieces): always exactly k contiguous pieces,
  //! the first size()%k have ceil(n/k) rows, the rest floor(n/k) (k > n gives empty tail
  //! pieces). Tensors are zero-copy views. k <= 0 is a value_error.
  std::vector<DataProto> chunk(std::int64_t k) const;
  //! chunk(k) that insists on size() % k == 0 (verl's behaviour without auto-padding).
  std::vector<DataProto> chunk_equal(std::int64_t k) const;
  //! verl: DataProto.split. Consecutive pieces of split_size rows (last may be shorter); n == 0 -> {}.
  std::vector<DataProto> split(std::int64_t split_size) const;
  //! verl: DataProto.concat. Parts must agree on batch presence (verl drops every batch if the first part has none), key sets, dtypes and
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
  //! object (verl mutates the input).
  DataProto fold_batch_dim(std::int64_t new_batch_size) const;
  //! verl: unfold_batch_dim(data, 2): the inverse of fold_batch_dim.
  DataProto unfold_batch_dim() const;
  //! verl: DataProto.unfold_column_chunks. Keys in split_keys: (n, d, ...) -> (n*n_split,
  //! d/n_split, ...) (non-tensor rows: lists split in n_split pieces); every other key is
  //! repeated n_split times interleaved. An empty split_keys repeats everything (verl crashes on non-tensors).
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
  //! verl: DataProto.padding (auto-padding policy: repeat the last row), as a copy (verl mutates the caller's object).
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
  //! The most rows a DataProto holds (2^32): loading rejects a larger batch size and every row
  //! operation checks the count it forms against it before allocating (shape_error).
  static constexpr std::int64_t max_rows = std::int64_t{1} << 32;
  //! The largest tensor dimension and product of a tensor's non-zero dimensions (2^48), checked
  //! at load time and by row operations; keeps Shape::numel's left-to-right product in int64
  //! even for zero-element shapes such as (4, 2^62, 0).
  static constexpr std::int64_t max_elements = std::int64_t{1} << 48;

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
  //! shape_error when a result of 'rows' rows would break max_rows, or a tensor's row shape
  //! repeated 'rows' times would break max_elements (overflow-safe); 'where' names the operation.
  void check_rows_formed(const char* where, std::int64_t rows) const;
  static void check_tensor_rows(const char* where, std::string const& key, Tensor const& t, std::int64_t rows);
  //! n * times and a + b as row counts, or shape_error with the numbers (overflow, max_rows).
  static std::int64_t rows_times(const char* where, std::int64_t n, std::int64_t times);
  static std::int64_t rows_plus(const char* where, std::int64_t a, std::int64_t b);
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

namespace detail {
//! v as "0x%08x" (format_error messages).
RLFLOW_DECL std::string hex32(std::uint32_t v);
}  // namespace detail

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/data_proto/impl/core.ipp>
#endif
