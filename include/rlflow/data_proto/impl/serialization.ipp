// rlflow/data_proto/impl/serialization.ipp: the bodies of rlflow/data_proto/serialization.hpp's non-template
// functions (included by that header when RLFLOW_DEFINE_BODIES; see rlflow/core/config.hpp).
#pragma once

namespace rlflow {

namespace detail {
RLFLOW_DECL std::size_t value_bytes(Value const& v, int depth) {
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

RLFLOW_DECL void write_value(ByteWriter& w, Value const& v) {
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

RLFLOW_DECL std::size_t key_bytes(std::string const& k) {
  if (k.size() > UINT32_MAX) throw value_error(msg("rlflow::DataProto::serialize: a key of ", k.size(), " bytes is too long"));
  return 4 + k.size();
}

[[noreturn]] RLFLOW_DECL void corrupt(std::string const& what, ByteReader const& r) {
  throw format_error(msg("rlflow::DataProto::deserialize: corrupt input at offset ", r.offset(), ": ", what,
                         "; the bytes were damaged or not written by DataProto::serialize"));
}

//! Reads a Dict body (u64 count + entries whose values sit at child_depth); used for dict
//! Values and for meta_info (child_depth 0).
RLFLOW_DECL Dict read_dict(ByteReader& r, int child_depth);

RLFLOW_DECL Value read_value(ByteReader& r, int depth) {
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

RLFLOW_DECL Dict read_dict(ByteReader& r, int child_depth) {
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

RLFLOW_DECL std::size_t DataProto::serialized_size() const {
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

RLFLOW_DECL void DataProto::serialize_into(std::vector<std::byte>& out) const {
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

RLFLOW_DECL DataProto DataProto::deserialize(std::span<std::byte const> bytes) {
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

RLFLOW_DECL DataProto DataProto::parse_body(detail::ByteReader& r) {
  using detail::corrupt;
  DataProto d;
  std::unordered_set<std::string> keys;
  std::uint8_t const hb = r.u8("batch flag");
  if (hb > 1) corrupt(msg("batch flag ", int(hb), " is not 0 or 1"), r);
  d.has_batch_ = hb == 1;
  std::int64_t const bs = r.i64("batch size");
  if (bs < 0 || (!d.has_batch_ && bs != 0)) corrupt(msg("batch size ", bs, " is invalid"), r);
  if (bs > max_rows) corrupt(msg("batch size ", bs, " is more than DataProto::max_rows = ", max_rows), r);
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
    // Bounding the non-zero product bounds every dimension and what a row operation forms from it.
    if (nonzero > static_cast<std::uint64_t>(max_elements))
      corrupt(msg("tensor '", k, "' of shape ", Shape(std::span<std::int64_t const>(dims.data(), rank)).str(),
                  ": its non-zero dimensions multiply to ", nonzero, ", more than DataProto::max_elements = ", max_elements), r);
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

RLFLOW_DECL void DataProto::save(std::filesystem::path const& path) const {
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

RLFLOW_DECL DataProto DataProto::load(std::filesystem::path const& path) {
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
