// Helpers for the DataProto tests: random DataProtos / Values and a plain row comparison used as
// the independent reference (byte compare of one tensor row, deep compare of one Value).
#pragma once
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <rlflow/core/data_proto.hpp>

namespace dp_test {

using namespace rlflow;

//! "<prefix><i>" without operator+(const char*, std::string&&) (g++ 12 -Wrestrict false positive).
inline std::string key_name(const char* prefix, std::uint64_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

inline Value random_value(std::mt19937_64& rng, int depth = 0) {
  int const kind = static_cast<int>(rng() % (depth < 3 ? 7 : 5));
  switch (kind) {
    case 0: return Value();
    case 1: return Value(rng() % 2 == 0);
    case 2: return Value(static_cast<std::int64_t>(rng()));
    case 3: {
      switch (rng() % 4) {
        case 0: return Value(std::nan(""));
        case 1: return Value(-0.0);
        default: return Value(std::bit_cast<double>(rng()));  // any bit pattern, NaN payloads included
      }
    }
    case 4: {
      std::string s(rng() % 12, ' ');
      for (auto& c : s) c = static_cast<char>(rng() % 256);  // arbitrary bytes, embedded zeros included
      return Value(std::move(s));
    }
    case 5: {
      Value::List l;
      for (std::size_t i = 0, n = rng() % 4; i < n; ++i) l.push_back(random_value(rng, depth + 1));
      return Value(std::move(l));
    }
    default: {
      Dict d;
      for (std::size_t i = 0, n = rng() % 4; i < n; ++i) d.set(key_name("k", rng() % 6), random_value(rng, depth + 1));
      return Value(std::move(d));
    }
  }
}

inline Tensor random_tensor(std::mt19937_64& rng, std::int64_t rows, DType dt) {
  int const rank = 1 + static_cast<int>(rng() % 3);
  std::vector<std::int64_t> dims{rows};
  for (int i = 1; i < rank; ++i) dims.push_back(static_cast<std::int64_t>(rng() % 4));  // 0 allowed
  Tensor t = Tensor::empty(dt, Shape(std::span<std::int64_t const>(dims)));
  auto* p = static_cast<unsigned char*>(t.raw_data());
  for (std::size_t b = 0; b < t.nbytes(); ++b)
    p[b] = dt == DType::bool_ ? static_cast<unsigned char>(rng() % 2) : static_cast<unsigned char>(rng());
  return t;
}

struct RandomOptions {
  bool batch = true;
  std::int64_t rows = -1;  // -1: random 0..24
};

//! A random DataProto: 0-4 tensors of every dtype (random bytes, NaNs included), 0-3 non-tensor
//! columns of nested Values, meta with a few entries. With batch=false there are no tensors.
inline DataProto random_dp(std::mt19937_64& rng, RandomOptions o = {}) {
  std::int64_t const n = o.rows >= 0 ? o.rows : static_cast<std::int64_t>(rng() % 25);
  TensorColumns ts;
  if (o.batch) {
    int const nt = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < nt; ++i)
      ts.emplace_back(key_name("t", static_cast<std::uint64_t>(i)), random_tensor(rng, n, static_cast<DType>(rng() % dtype_count)));
  }
  NonTensorColumns nts;
  int const nn = (o.batch ? 0 : 1) + static_cast<int>(rng() % 3);
  for (int i = 0; i < nn; ++i) {
    NonTensorColumn c;
    for (std::int64_t r = 0; r < n; ++r) c.push_back(random_value(rng));
    nts.emplace_back(key_name("n", static_cast<std::uint64_t>(i)), std::move(c));
  }
  Meta meta;
  for (int i = 0, m = static_cast<int>(rng() % 4); i < m; ++i) meta.set(key_name("m", static_cast<std::uint64_t>(i)), random_value(rng));
  return DataProto::from_dict(std::move(ts), std::move(nts), std::move(meta));
}

//! Independent reference: row i of a equals row j of b (tensor bytes, Values).
inline bool row_equal(DataProto const& a, std::int64_t i, DataProto const& b, std::int64_t j) {
  for (auto const& [k, t] : a.tensors()) {
    Tensor const& u = b.tensor(k);
    if (t.dtype() != u.dtype() || t.row_bytes() != u.row_bytes()) return false;
    auto const* pa = static_cast<unsigned char const*>(t.raw_data()) + static_cast<std::size_t>(i) * t.row_bytes();
    auto const* pb = static_cast<unsigned char const*>(u.raw_data()) + static_cast<std::size_t>(j) * u.row_bytes();
    if (t.row_bytes() && std::memcmp(pa, pb, t.row_bytes()) != 0) return false;
  }
  for (auto const& [k, c] : a.non_tensors())
    if (!(c[static_cast<std::size_t>(i)] == b.non_tensor(k)[static_cast<std::size_t>(j)])) return false;
  return true;
}

//! result has exactly the rows src[ref[0]], src[ref[1]], ... with the same keys, dtypes and
//! trailing shapes.
inline bool rows_match(DataProto const& result, DataProto const& src, std::vector<std::int64_t> const& ref) {
  if (result.size() != static_cast<std::int64_t>(ref.size())) return false;
  if (result.tensor_keys() != src.tensor_keys() || result.non_tensor_keys() != src.non_tensor_keys()) return false;
  for (auto const& [k, t] : src.tensors()) {
    Tensor const& u = result.tensor(k);
    if (!(u.shape().tail() == t.shape().tail()) || u.rank() != t.rank()) return false;
  }
  for (std::size_t r = 0; r < ref.size(); ++r)
    if (!row_equal(result, static_cast<std::int64_t>(r), src, ref[r])) return false;
  return true;
}

inline std::vector<float> floats(Tensor const& t) {
  auto s = t.span<float>();
  return {s.begin(), s.end()};
}
inline std::vector<std::string> strings(NonTensorColumn const& c) {
  std::vector<std::string> out;
  for (auto const& v : c) out.push_back(v.as_string());
  return out;
}

}  // namespace dp_test
