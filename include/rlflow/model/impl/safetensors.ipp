// rlflow/model/impl/safetensors.ipp: the bodies of rlflow/model/safetensors.hpp's functions (the
// safetensors writer and its helpers; included by that header when RLFLOW_DEFINE_BODIES; see
// rlflow/core/config.hpp).
#pragma once

namespace rlflow::engine::safetensors {
RLFLOW_DECL char const* dtype_code(DType t) {
  switch (t) {
    case DType::float32: return "F32";
    case DType::bfloat16: return "BF16";
    case DType::float16: return "F16";
    case DType::int32: return "I32";
    case DType::int64: return "I64";
    case DType::uint8: return "U8";
    case DType::bool_: return "BOOL";
  }
  return "?";
}

RLFLOW_DECL bool dtype_from_code(std::string const& s, DType& out) {
  for (int i = 0; i < dtype_count; ++i)
    if (s == dtype_code(static_cast<DType>(i))) { out = static_cast<DType>(i); return true; }
  return false;
}

RLFLOW_DECL std::uint64_t fnv1a64(std::span<std::byte const> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) h = (h ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ull;
  return h;
}

namespace detail {
RLFLOW_DECL std::string errno_text() { return std::strerror(errno); }

RLFLOW_DECL void write_all(int fd, void const* p, std::size_t n, std::filesystem::path const& path) {
  auto const* c = static_cast<char const*>(p);
  while (n > 0) {
    ssize_t const w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw io_error(msg("rlflow::safetensors::save: writing ", path.string(), " failed: ", errno_text()));
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

RLFLOW_DECL std::size_t numel(std::vector<std::int64_t> const& shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

RLFLOW_DECL bool checked_nbytes(std::vector<std::int64_t> const& shape, std::size_t elem, std::size_t& out) {
  std::size_t n = elem;
  for (auto d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<std::size_t>(d), &n)) return false;
  }
  out = n;
  return true;
}

RLFLOW_DECL std::uint64_t index_hash(std::uint64_t h, std::string const& name, char const* dtype, std::vector<std::int64_t> const& shape,
                                     std::size_t begin, std::size_t end) {
  auto const mix = [&h](void const* p, std::size_t n) {
    auto const* c = static_cast<unsigned char const*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ull;
  };
  std::uint64_t const len = name.size();
  mix(&len, 8);
  mix(name.data(), name.size());
  mix(dtype, std::strlen(dtype) + 1);
  std::uint64_t const rank = shape.size();
  mix(&rank, 8);
  for (auto d : shape) mix(&d, 8);
  std::uint64_t const be[2] = {begin, end};
  mix(be, 16);
  return h;
}

RLFLOW_DECL std::string hex64(std::uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace detail
RLFLOW_DECL void save(std::filesystem::path const& path, std::vector<TensorRecord> const& tensors,
                      std::map<std::string, std::string> metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::size_t offset = 0;
  std::uint64_t h = 0xcbf29ce484222325ull;
  std::map<std::string, std::pair<TensorRecord const*, std::size_t>> index;  // name -> (record, offset)
  for (auto const& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      throw key_error(msg("rlflow::safetensors::save: invalid tensor name '", t.name, "'"));
    if (header.contains(t.name)) throw key_error(msg("rlflow::safetensors::save: tensor '", t.name, "' appears twice"));
    std::size_t nbytes = 0;
    if (!detail::checked_nbytes(t.shape, dtype_size(t.dtype), nbytes))
      throw shape_error(msg("rlflow::safetensors::save: tensor '", t.name, "' has a negative dimension or a shape whose size overflows"));
    if (nbytes != t.bytes.size())
      throw shape_error(msg("rlflow::safetensors::save: tensor '", t.name, "' has ", t.bytes.size(), " bytes but its shape and ",
                            dtype_name(t.dtype), " need ", nbytes));
    header[t.name] = {{"dtype", dtype_code(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    index[t.name] = {&t, offset};
    offset += nbytes;
    for (std::byte b : t.bytes) h = (h ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ull;
  }
  metadata[writer_key] = "rlflow";
  metadata["rlflow.fnv1a64"] = detail::hex64(h);
  std::uint64_t ih = 0xcbf29ce484222325ull;
  for (auto const& [name, rec] : index)
    ih = detail::index_hash(ih, name, dtype_code(rec.first->dtype), rec.first->shape, rec.second, rec.second + rec.first->bytes.size());
  metadata["rlflow.index_fnv1a64"] = detail::hex64(ih);
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (auto const& [k, v] : metadata) meta[k] = v;
  nlohmann::ordered_json full = nlohmann::ordered_json::object();
  full["__metadata__"] = meta;
  for (auto it = header.begin(); it != header.end(); ++it) full[it.key()] = it.value();
  std::string text = full.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // data section 8-byte aligned, as the reference writer does
  std::uint64_t const n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  std::filesystem::path const tmp = path.string() + ".tmp." + std::to_string(::getpid());
  int const fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw io_error(msg("rlflow::safetensors::save: cannot create ", tmp.string(), ": ", detail::errno_text(),
                       "; check that the directory exists and is writable"));
  try {
    detail::write_all(fd, len, 8, tmp);
    detail::write_all(fd, text.data(), text.size(), tmp);
    for (auto const& t : tensors) detail::write_all(fd, t.bytes.data(), t.bytes.size(), tmp);
    if (::fsync(fd) != 0) throw io_error(msg("rlflow::safetensors::save: fsync of ", tmp.string(), " failed: ", detail::errno_text()));
  } catch (...) {
    ::close(fd);
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  if (::close(fd) != 0) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw io_error(msg("rlflow::safetensors::save: closing ", tmp.string(), " failed: ", detail::errno_text()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw io_error(msg("rlflow::safetensors::save: renaming ", tmp.string(), " to ", path.string(), " failed: ", ec.message()));
  }
  auto const dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  int const dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // make the rename durable
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace rlflow::engine::safetensors
