// rlflow/checkpoint.hpp: atomic checkpoint directories. A checkpoint is written into a hidden
// temporary directory, every file fsync'd, a MANIFEST.json (size + CRC-32 of every file) added
// last, then the directory is renamed to 'global_step_N' and 'latest_checkpointed_iteration.txt'
// (verl's tracker file) is replaced atomically. Loading verifies the manifest before any byte
// is used, so a partial or corrupt checkpoint is reported, never loaded.
#pragma once
#include <algorithm>  // std::sort
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>   // open
#include <unistd.h>  // fsync, close, getpid

#include <nlohmann/json.hpp>

#include <rlflow/detail/crc32.hpp>
#include <rlflow/error.hpp>

namespace rlflow {

namespace detail {
inline void fsync_path(std::filesystem::path const& p, bool directory) {
  int fd = ::open(p.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw io_error(msg("rlflow checkpoint: cannot open '", p.string(), "' to fsync it"));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw io_error(msg("rlflow checkpoint: fsync of '", p.string(), "' failed"));
}

inline std::vector<char> read_all(std::filesystem::path const& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw io_error(msg("rlflow: cannot open '", p.string(), "' for reading"));
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

inline void write_all(std::filesystem::path const& p, void const* data, std::size_t n) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  if (!out) throw io_error(msg("rlflow: cannot open '", p.string(), "' for writing"));
  out.write(static_cast<char const*>(data), static_cast<std::streamsize>(n));
  out.close();
  if (!out) throw io_error(msg("rlflow: writing '", p.string(), "' failed (disk full?)"));
}

//! Writes a file atomically: temp file in the same directory, fsync, rename, fsync directory.
inline void write_file_atomic(std::filesystem::path const& p, std::string const& content) {
  auto tmp = p;
  tmp += ".tmp." + std::to_string(::getpid());
  write_all(tmp, content.data(), content.size());
  fsync_path(tmp, false);
  std::filesystem::rename(tmp, p);
  fsync_path(p.has_parent_path() ? p.parent_path() : std::filesystem::path("."), true);
}
}  // namespace detail

inline constexpr const char* checkpoint_tracker_file = "latest_checkpointed_iteration.txt";  // verl's name

//! Builds one checkpoint directory. Write files with path(name) (any writer), then commit().
//! If the writer is destroyed without commit(), the temporary directory is removed and the
//! previous checkpoint stays the latest.
class CheckpointWriter {
 public:
  CheckpointWriter(std::filesystem::path root, std::int64_t step) : root_(std::move(root)), step_(step) {
    std::filesystem::create_directories(root_);
    tmp_ = root_ / (".tmp_global_step_" + std::to_string(step_) + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(tmp_);
    std::filesystem::create_directories(tmp_);
  }
  CheckpointWriter(CheckpointWriter const&) = delete;
  CheckpointWriter& operator=(CheckpointWriter const&) = delete;
  ~CheckpointWriter() {
    if (!committed_) {
      std::error_code ec;
      std::filesystem::remove_all(tmp_, ec);
    }
  }

  //! Where to write file 'name' (a plain file name inside the checkpoint).
  std::filesystem::path path(std::string const& name) const { return tmp_ / name; }
  void write(std::string const& name, std::string const& content) { detail::write_all(path(name), content.data(), content.size()); }

  //! Seals the checkpoint: manifest, fsync, rename, tracker update. Returns the final directory.
  std::filesystem::path commit() {
    nlohmann::ordered_json manifest;
    manifest["format"] = "rlflow-checkpoint";
    manifest["version"] = 1;
    manifest["step"] = step_;
    nlohmann::ordered_json files = nlohmann::ordered_json::object();
    std::vector<std::filesystem::path> names;
    for (auto const& e : std::filesystem::directory_iterator(tmp_)) names.push_back(e.path());
    std::sort(names.begin(), names.end());
    for (auto const& p : names) {
      auto bytes = detail::read_all(p);
      files[p.filename().string()] = {{"size", bytes.size()}, {"crc32", detail::crc32(bytes.data(), bytes.size())}};
      detail::fsync_path(p, false);
    }
    manifest["files"] = files;
    detail::write_all(tmp_ / "MANIFEST.json", manifest.dump(2).data(), manifest.dump(2).size());
    detail::fsync_path(tmp_ / "MANIFEST.json", false);
    detail::fsync_path(tmp_, true);
    auto final_dir = root_ / ("global_step_" + std::to_string(step_));
    std::filesystem::remove_all(final_dir);
    std::filesystem::rename(tmp_, final_dir);
    detail::fsync_path(root_, true);
    detail::write_file_atomic(root_ / checkpoint_tracker_file, std::to_string(step_) + "\n");
    committed_ = true;
    return final_dir;
  }

 private:
  std::filesystem::path root_, tmp_;
  std::int64_t step_;
  bool committed_ = false;
};

//! The step recorded in 'root/latest_checkpointed_iteration.txt', if any.
inline std::optional<std::int64_t> latest_checkpoint_step(std::filesystem::path const& root) {
  auto tracker = root / checkpoint_tracker_file;
  if (!std::filesystem::exists(tracker)) return std::nullopt;
  auto bytes = detail::read_all(tracker);
  std::string s(bytes.begin(), bytes.end());
  try {
    std::size_t used = 0;
    long long v = std::stoll(s, &used);
    if (v < 0) throw std::invalid_argument("negative");
    return v;
  } catch (std::exception const&) {
    throw format_error(msg("rlflow checkpoint: '", tracker.string(), "' does not hold a step number (content '", s,
                           "'); delete it or point trainer.default_local_dir elsewhere"));
  }
}

//! Verifies a checkpoint directory against its manifest (every file present, sizes and CRCs
//! equal, no manifest -> error) and returns it. Throws format_error naming the bad file.
inline std::filesystem::path verify_checkpoint(std::filesystem::path const& dir) {
  auto mpath = dir / "MANIFEST.json";
  if (!std::filesystem::exists(mpath))
    throw format_error(msg("rlflow checkpoint: '", dir.string(), "' has no MANIFEST.json (partial or foreign checkpoint); "
                           "it cannot be loaded"));
  nlohmann::json manifest;
  try {
    auto bytes = detail::read_all(mpath);
    manifest = nlohmann::json::parse(bytes.begin(), bytes.end());
    if (manifest.at("format") != "rlflow-checkpoint") throw std::runtime_error("format");
  } catch (std::exception const& e) {
    throw format_error(msg("rlflow checkpoint: '", mpath.string(), "' is not a valid manifest (", e.what(), ")"));
  }
  for (auto const& [name, info] : manifest.at("files").items()) {
    auto p = dir / name;
    if (!std::filesystem::exists(p))
      throw format_error(msg("rlflow checkpoint: file '", name, "' listed in ", mpath.string(), " is missing"));
    auto bytes = detail::read_all(p);
    if (bytes.size() != info.at("size").get<std::size_t>())
      throw format_error(msg("rlflow checkpoint: '", p.string(), "' has ", bytes.size(), " bytes, the manifest says ",
                             info.at("size").get<std::size_t>(), " (truncated or overwritten)"));
    if (detail::crc32(bytes.data(), bytes.size()) != info.at("crc32").get<std::uint32_t>())
      throw format_error(msg("rlflow checkpoint: '", p.string(), "' fails its CRC-32 check (corrupt)"));
  }
  return dir;
}

}  // namespace rlflow
