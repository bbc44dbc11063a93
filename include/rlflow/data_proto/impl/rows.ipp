// rlflow/data_proto/impl/rows.ipp: the bodies of rlflow/data_proto/rows.hpp's non-template functions
// (included by that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL std::int64_t DataProto::rows_times(const char* where, std::int64_t n, std::int64_t times) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(n, times, &r) || r > max_rows)
    throw shape_error(msg("rlflow::DataProto::", where, ": ", n, " rows repeated ", times, " times give more than ",
                          "DataProto::max_rows = ", max_rows, " rows; split the batch or repeat fewer times"));
  return r;
}

RLFLOW_DECL std::int64_t DataProto::rows_plus(const char* where, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  bool const over = __builtin_add_overflow(a, b, &r);
  if (over || r > max_rows)
    throw shape_error(msg("rlflow::DataProto::", where, ": ", a, " + ", b, " rows ",
                          over ? std::string("overflow int64") : msg("= ", r), ", more than DataProto::max_rows = ",
                          max_rows, "; split the batch"));
  return r;
}

RLFLOW_DECL void DataProto::check_tensor_rows(const char* where, std::string const& key, Tensor const& t, std::int64_t rows) {
  std::int64_t extent = rows;  // product of the result's non-zero dimensions
  bool over = false;
  for (int i = 1; i < t.rank() && !over; ++i) {
    std::int64_t const di = t.shape()[i];
    if (di != 0) over = __builtin_mul_overflow(extent, di, &extent) || extent > max_elements;
  }
  if (over)
    throw shape_error(msg("rlflow::DataProto::", where, ": tensor '", key, "' would have ", rows, " rows of shape ",
                          t.shape().tail().str(), ", whose non-zero dimensions multiply past DataProto::max_elements = ",
                          max_elements, "; split the batch or shrink the tensor"));
}

RLFLOW_DECL void DataProto::check_rows_formed(const char* where, std::int64_t rows) const {
  if (rows > max_rows)
    throw shape_error(msg("rlflow::DataProto::", where, ": the result would have ", rows, " rows, more than ",
                          "DataProto::max_rows = ", max_rows, "; split the batch"));
  for (auto const& [k, t] : batch_) check_tensor_rows(where, k, t, rows);
}

RLFLOW_DECL DataProto DataProto::view(std::int64_t b, std::int64_t e) const {
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

RLFLOW_DECL DataProto DataProto::gather(std::span<std::int64_t const> idx) const {
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

RLFLOW_DECL std::vector<std::int64_t> DataProto::normalize_indices(std::span<std::int64_t const> idx, const char* where) const {
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

RLFLOW_DECL DataProto DataProto::slice(std::int64_t begin, std::int64_t end, std::int64_t step) const {
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

RLFLOW_DECL DataProto DataProto::index(std::span<std::int64_t const> idx) const {
  check_rows_formed("index", static_cast<std::int64_t>(idx.size()));
  auto const norm = normalize_indices(idx, "index");
  return gather(norm);
}

RLFLOW_DECL DataProto DataProto::mask(std::span<bool const> m) const {
  if (static_cast<std::int64_t>(m.size()) != size())
    throw shape_error(msg("rlflow::DataProto::mask: the mask has ", m.size(), " entries but the DataProto has ", size(),
                          " rows; give one bool per row"));
  std::vector<std::int64_t> idx;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i]) idx.push_back(static_cast<std::int64_t>(i));
  return gather(idx);
}

RLFLOW_DECL DataProto DataProto::mask(std::vector<bool> const& m) const {
  std::unique_ptr<bool[]> tmp(new bool[m.size() ? m.size() : 1]);
  for (std::size_t i = 0; i < m.size(); ++i) tmp[i] = m[i];
  return mask(std::span<bool const>(tmp.get(), m.size()));
}

RLFLOW_DECL DataProto DataProto::index(Tensor const& idx) const {
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

RLFLOW_DECL DataProto DataProto::select(std::optional<std::vector<std::string>> batch_keys,
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

RLFLOW_DECL DataProto DataProto::pop(std::vector<std::string> const& batch_keys, std::vector<std::string> const& non_tensor_keys,
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

RLFLOW_DECL DataProto& DataProto::rename(std::vector<std::string> const& old_keys, std::vector<std::string> const& new_keys) {
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

RLFLOW_DECL DataProto& DataProto::union_with(DataProto const& other) {
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

RLFLOW_DECL std::vector<DataProto> DataProto::chunk(std::int64_t k) const {
  if (k <= 0) throw value_error(msg("rlflow::DataProto::chunk: chunks = ", k, " must be > 0"));
  if (k > max_rows)
    throw value_error(msg("rlflow::DataProto::chunk: chunks = ", k, " is more than DataProto::max_rows = ", max_rows,
                          "; ask for at most one chunk per row"));
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

RLFLOW_DECL std::vector<DataProto> DataProto::chunk_equal(std::int64_t k) const {
  if (k <= 0) throw value_error(msg("rlflow::DataProto::chunk_equal: chunks = ", k, " must be > 0"));
  if (size() % k != 0)
    throw value_error(msg("rlflow::DataProto::chunk_equal: only support equal chunk. Got size of DataProto ", size(),
                          " and chunk ", k, "; pad first (pad_to_divisor, padded_repeat_last) or use chunk(k) for ",
                          "pieces that differ by one row"));
  return chunk(k);
}

RLFLOW_DECL std::vector<DataProto> DataProto::split(std::int64_t split_size) const {
  if (split_size <= 0) throw value_error(msg("rlflow::DataProto::split: split_size = ", split_size, " must be > 0"));
  std::vector<DataProto> out;
  std::int64_t const n = size();
  for (std::int64_t b = 0; b < n; b += split_size) out.push_back(view(b, std::min(n, b + split_size)));
  return out;
}

RLFLOW_DECL Meta DataProto::merge_meta(std::span<DataProto const> parts) {
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

RLFLOW_DECL DataProto DataProto::concat(std::span<DataProto const> parts) {
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
  std::int64_t rows = 0;
  for (auto const& p : parts) rows = rows_plus("concat", rows, p.size());
  for (auto const& [k, t0] : first.batch_) check_tensor_rows("concat", k, t0, rows);
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

RLFLOW_DECL DataProto DataProto::repeat(std::int64_t times, bool interleave) const {
  if (times < 0) throw value_error(msg("rlflow::DataProto::repeat: repeat_times = ", times, " must be >= 0"));
  std::int64_t const n = size();
  check_rows_formed("repeat", rows_times("repeat", n, times));
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

RLFLOW_DECL DataProto DataProto::sample_level_repeat(std::span<std::int64_t const> counts) const {
  std::int64_t const n = size();
  if (static_cast<std::int64_t>(counts.size()) != n)
    throw shape_error(msg("rlflow::DataProto::sample_level_repeat: ", counts.size(), " repeat counts for ", n,
                          " rows; give one count per row"));
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t const c = counts[static_cast<std::size_t>(i)];
    if (c < 0)
      throw value_error(msg("rlflow::DataProto::sample_level_repeat: count ", c, " for row ", i, " must be >= 0"));
    total = rows_plus("sample_level_repeat", total, c);
  }
  check_rows_formed("sample_level_repeat", total);
  std::vector<std::int64_t> idx;
  idx.reserve(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t const c = counts[static_cast<std::size_t>(i)];
    for (std::int64_t r = 0; r < c; ++r) idx.push_back(i);
  }
  return gather(idx);
}

RLFLOW_DECL DataProto DataProto::sample_level_repeat(Tensor const& counts) const {
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

RLFLOW_DECL DataProto DataProto::fold_batch_dim(std::int64_t g) const {
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

RLFLOW_DECL DataProto DataProto::unfold_batch_dim() const {
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

RLFLOW_DECL DataProto DataProto::unfold_column_chunks(std::int64_t n_split, std::vector<std::string> const& split_keys) const {
  if (n_split <= 0) throw value_error(msg("rlflow::DataProto::unfold_column_chunks: n_split = ", n_split, " must be > 0"));
  for (auto const& k : split_keys)
    if (!has_tensor(k) && !has_non_tensor(k))
      throw key_error(msg("rlflow::DataProto::unfold_column_chunks: split key '", k, "' is not a key; tensor keys: ",
                          key_list(batch_), "; non-tensor keys: ", key_list(non_tensor_)));
  auto const is_split = [&](std::string const& k) { return std::find(split_keys.begin(), split_keys.end(), k) != split_keys.end(); };
  std::int64_t const n = size();
  std::int64_t const rows = rows_times("unfold_column_chunks", n, n_split);
  for (auto const& [k, t] : batch_)
    if (!is_split(k)) check_tensor_rows("unfold_column_chunks", k, t, rows);  // split keys keep their element count
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

}  // namespace rlflow
