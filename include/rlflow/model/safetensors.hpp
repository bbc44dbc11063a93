// rlflow/model/safetensors.hpp: reading and writing safetensors files (8-byte little-endian
// header length, JSON header, then the raw little-endian tensors), readable by the safetensors,
// PyTorch and numpy tooling. Defines TensorRecord, save (atomic: temp file + fsync + rename) and
// File (the whole file read and validated before any tensor is handed out). Adds one metadata
// entry, "rlflow.fnv1a64", a checksum of the data section, so corrupt bytes are caught too, and
// "rlflow.index_fnv1a64", a checksum of the tensor index (names, dtypes, shapes, offsets), so an
// edited header (e.g. two same-shape tensors' offsets swapped) is caught, and the marker
// "rlflow.writer": "rlflow". A file with the marker or any other "rlflow." key must carry the data
// checksum (and, with the marker, the index checksum), so renaming a key cannot switch a check
// off; files of other writers are checked structurally only, with a one-line notice on stderr.
// Does not memory-map; assumes a little-endian host (x86-64, aarch64).
#pragma once
#include <algorithm>    // std::sort
#include <cerrno>       // errno
#include <cstddef>      // std::byte
#include <cstdint>
#include <cstdio>       // std::FILE for reading
#include <cstring>      // std::strerror, std::memcpy
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <fcntl.h>      // open
#include <unistd.h>     // write, fsync, close, getpid

#include <nlohmann/json.hpp>    // the JSON header
#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/detail/json_util.hpp>  // json_preview
#include <rlflow/core/error.hpp>     // format_error, io_error, key_error
#include <rlflow/core/tensor.hpp>    // DType, dtype_size

namespace rlflow::engine::safetensors {

//! safetensors dtype string of an rlflow DType ("F32", "BF16", "F16", "I32", "I64", "U8", "BOOL").
RLFLOW_DECL char const* dtype_code(DType t);
RLFLOW_DECL bool dtype_from_code(std::string const& s, DType& out);

//! FNV-1a, 64 bit, of a byte range (the data-section checksum).
RLFLOW_DECL std::uint64_t fnv1a64(std::span<std::byte const> bytes);

//! One tensor to write: a name, dtype, shape and its bytes (numel * dtype_size).
struct TensorRecord {
  std::string name;
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;
  std::span<std::byte const> bytes;
};

namespace detail {
RLFLOW_DECL std::string errno_text();
RLFLOW_DECL void write_all(int fd, void const* p, std::size_t n, std::filesystem::path const& path);
RLFLOW_DECL std::size_t numel(std::vector<std::int64_t> const& shape);
//! numel * element size, or false when a dimension is negative or the product overflows.
RLFLOW_DECL bool checked_nbytes(std::vector<std::int64_t> const& shape, std::size_t elem, std::size_t& out);
//! FNV-1a over the tensor index (name, dtype, shape, offsets of every tensor, in name order), so
//! a header whose offsets were swapped between two same-shape tensors fails the checksum.
RLFLOW_DECL std::uint64_t index_hash(std::uint64_t h, std::string const& name, char const* dtype, std::vector<std::int64_t> const& shape,
                                     std::size_t begin, std::size_t end);
RLFLOW_DECL std::string hex64(std::uint64_t h);
}  // namespace detail

//! The metadata key rlflow writes into every file it saves (value "rlflow").
inline constexpr char const* writer_key = "rlflow.writer";

//! Writes tensors (in the given order) and string metadata to 'path' atomically: the bytes go to
//! a temporary file in the same directory, which is fsynced and renamed over 'path'; a crash
//! leaves either the old file or the new one. Throws io_error (with the OS reason) or shape_error.
RLFLOW_DECL void save(std::filesystem::path const& path, std::vector<TensorRecord> const& tensors,
                      std::map<std::string, std::string> metadata = {});

//! A safetensors file read whole into memory and validated: header syntax, dtypes, shapes
//! against byte ranges, ranges tiling the data section exactly, the file size, and the rlflow
//! checksum when present. Any violation is a format_error naming the file and the defect.
class File {
 public:
  struct Info {
    DType dtype = DType::float32;
    std::vector<std::int64_t> shape;
    std::size_t begin = 0, end = 0;  //!< byte range in the data section
  };

  static File load(std::filesystem::path const& path) {
    File f;
    f.path_ = path.string();
    std::error_code ec;
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
      throw io_error(msg("rlflow::safetensors::File::load: ", f.path_, " is not a regular file (a directory?); pass the .safetensors file"));
    std::FILE* fp = std::fopen(path.c_str(), "rb");
    if (!fp) throw io_error(msg("rlflow::safetensors::File::load: cannot open ", f.path_, ": ", detail::errno_text()));
    std::fseek(fp, 0, SEEK_END);
    long const size = std::ftell(fp);
    std::fseek(fp, 0, SEEK_SET);
    f.bytes_.resize(size > 0 ? static_cast<std::size_t>(size) : 0);
    std::size_t const got = f.bytes_.empty() ? 0 : std::fread(f.bytes_.data(), 1, f.bytes_.size(), fp);
    std::fclose(fp);
    if (size < 0 || got != f.bytes_.size()) throw io_error(msg("rlflow::safetensors::File::load: reading ", f.path_, " failed"));
    f.parse();
    if (!f.rlflow_written())
      std::fprintf(stderr, "rlflow: note: %s carries no rlflow checksum (written by another tool); its tensors are checked "
                           "structurally only\n", f.path_.c_str());
    return f;
  }

  //! Validates an in-memory image of a safetensors file ('name' is used in messages), exactly as
  //! load() validates a file's bytes.
  static File from_bytes(std::vector<std::byte> bytes, std::string name = "<memory>") {
    File f;
    f.path_ = std::move(name);
    f.bytes_ = std::move(bytes);
    f.parse();
    return f;
  }

  std::map<std::string, std::string> const& metadata() const { return meta_; }
  //! The metadata says rlflow wrote the file (the marker or another "rlflow." key); its checksums were then required.
  bool rlflow_written() const {
    return std::any_of(meta_.begin(), meta_.end(), [](auto const& kv) { return kv.first.rfind("rlflow.", 0) == 0; });
  }
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (auto const& [k, v] : info_) n.push_back(k);
    return n;
  }
  bool contains(std::string const& name) const { return info_.count(name) != 0; }
  Info const& info(std::string const& name) const {
    auto it = info_.find(name);
    if (it == info_.end())
      throw key_error(msg("rlflow::safetensors::File: ", path_, " has no tensor '", name, "' (", info_.size(), " tensors)"));
    return it->second;
  }
  std::span<std::byte const> bytes(std::string const& name) const {
    Info const& i = info(name);
    return {bytes_.data() + data_start_ + i.begin, i.end - i.begin};
  }
  std::string const& path() const { return path_; }

 private:
  [[noreturn]] void fail(std::string const& what) const {
    throw format_error(msg("rlflow::safetensors: ", path_, " is not a valid safetensors file: ", what,
                           "; the file is truncated or corrupt, re-create it from a good copy"));
  }

  void parse() {
    std::size_t const size = bytes_.size();
    if (size < 8) fail(msg("it has ", size, " bytes, fewer than the 8-byte header length"));
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= std::uint64_t(static_cast<unsigned char>(bytes_[std::size_t(i)])) << (8 * i);
    if (n > size - 8) fail(msg("the header claims ", n, " bytes but only ", size - 8, " follow"));
    data_start_ = 8 + static_cast<std::size_t>(n);
    nlohmann::json h;
    try {
      h = nlohmann::json::parse(reinterpret_cast<char const*>(bytes_.data()) + 8,
                                reinterpret_cast<char const*>(bytes_.data()) + data_start_);
    } catch (nlohmann::json::exception const& e) {
      fail(msg("the JSON header does not parse (", e.what(), ")"));
    }
    if (!h.is_object()) fail("the JSON header is not an object");
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (auto it = h.begin(); it != h.end(); ++it) {
      if (it.key() == "__metadata__") {
        if (!it.value().is_object()) fail("__metadata__ is not an object");
        for (auto m = it.value().begin(); m != it.value().end(); ++m) {
          if (!m.value().is_string()) fail(msg("metadata entry '", m.key(), "' is not a string"));
          meta_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      auto const& e = it.value();
      if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
        fail(msg("tensor '", it.key(), "' lacks dtype, shape or data_offsets"));
      Info info;
      if (!e["dtype"].is_string() || !dtype_from_code(e["dtype"].get<std::string>(), info.dtype))
        fail(msg("tensor '", it.key(), "' has an unsupported dtype ", rlflow::detail::json_preview(e["dtype"])));
      if (!e["shape"].is_array()) fail(msg("tensor '", it.key(), "' has a shape that is not an array"));
      for (auto const& d : e["shape"]) {
        if (!d.is_number_unsigned()) fail(msg("tensor '", it.key(), "' has a negative or non-integer dimension"));
        if (d.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          fail(msg("tensor '", it.key(), "' has a dimension ", rlflow::detail::json_preview(d), " beyond the int64 range"));
        info.shape.push_back(d.get<std::int64_t>());
      }
      std::size_t need = 0;
      if (!detail::checked_nbytes(info.shape, dtype_size(info.dtype), need))
        fail(msg("tensor '", it.key(), "' has a shape whose byte size overflows 64 bits"));
      auto const& off = e["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        fail(msg("tensor '", it.key(), "' has malformed data_offsets"));
      info.begin = off[0].get<std::size_t>();
      info.end = off[1].get<std::size_t>();
      if (info.end < info.begin || info.end > size - data_start_)
        fail(msg("tensor '", it.key(), "' spans bytes [", info.begin, ", ", info.end, ") but the data section has ",
                 size - data_start_));
      if (info.end - info.begin != need)
        fail(msg("tensor '", it.key(), "' has ", info.end - info.begin, " bytes but its shape needs ", need));
      ranges.push_back({info.begin, info.end});
      info_[it.key()] = std::move(info);
    }
    std::sort(ranges.begin(), ranges.end());
    std::size_t at = 0;
    for (auto const& [b, e] : ranges) {
      if (b != at) fail(msg("the tensors leave a gap or overlap at data byte ", at));
      at = e;
    }
    if (at != size - data_start_) fail(msg("the tensors cover ", at, " data bytes but the file holds ", size - data_start_));
    // A file that says rlflow wrote it must carry the checksums rlflow writes (a renamed key
    // would otherwise switch the check off); older rlflow files lack only the marker and the index checksum.
    if (rlflow_written()) {
      auto const says = meta_.count(writer_key) ? std::string(writer_key) : meta_.lower_bound("rlflow.")->first;
      auto const need = [&](char const* key) {
        if (!meta_.count(key))
          throw format_error(msg("rlflow::safetensors: ", path_, " says rlflow wrote it (metadata key '", says,
                                 "') but lacks the checksum key '", key, "'; the header was edited or damaged, ",
                                 "re-create the file from a good copy"));
      };
      need("rlflow.fnv1a64");
      if (meta_.count(writer_key)) need("rlflow.index_fnv1a64");
    }
    if (auto it = meta_.find("rlflow.fnv1a64"); it != meta_.end()) {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx",
                    static_cast<unsigned long long>(fnv1a64({bytes_.data() + data_start_, size - data_start_})));
      if (it->second != hex) fail(msg("the data checksum is ", hex, " but the header records ", it->second));
    }
    if (auto it = meta_.find("rlflow.index_fnv1a64"); it != meta_.end()) {
      std::uint64_t ih = 0xcbf29ce484222325ull;
      for (auto const& [name, i] : info_) ih = detail::index_hash(ih, name, dtype_code(i.dtype), i.shape, i.begin, i.end);
      if (it->second != detail::hex64(ih))
        fail(msg("the tensor index checksum is ", detail::hex64(ih), " but the header records ", it->second,
                 " (names, dtypes, shapes or offsets were edited)"));
    }
  }

  std::string path_;
  std::vector<std::byte> bytes_;
  std::size_t data_start_ = 0;
  std::map<std::string, Info> info_;
  std::map<std::string, std::string> meta_;
};

}  // namespace rlflow::engine::safetensors

#if RLFLOW_DEFINE_BODIES
#include <rlflow/model/impl/safetensors.ipp>
#endif
