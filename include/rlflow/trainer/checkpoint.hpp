// rlflow/trainer/checkpoint.hpp: atomic checkpoint directories. A checkpoint is written into a hidden
// temporary directory, every file fsync'd, a MANIFEST.json (size + CRC-32 of every file) added
// last, then the directory is renamed to 'global_step_N' and 'latest_checkpointed_iteration.txt'
// (verl's tracker file) is replaced atomically. Loading verifies the manifest before any byte
// is used, so a partial or corrupt checkpoint is reported, never loaded.
#pragma once
#include <algorithm>  // std::sort
#include <cerrno>
#include <cmath>      // std::isfinite
#include <csignal>    // kill(pid, 0): is a writer alive
#include <limits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>   // open
#include <signal.h>  // kill
#include <unistd.h>  // fsync, close, getpid

#include <nlohmann/json.hpp>

#include <rlflow/core/config.hpp>  // RLFLOW_DECL
#include <rlflow/detail/crc32.hpp>
#include <rlflow/detail/json_util.hpp>  // json_preview
#include <rlflow/core/error.hpp>

namespace rlflow {

namespace detail {
RLFLOW_DECL void fsync_path(std::filesystem::path const& p, bool directory);

RLFLOW_DECL std::vector<char> read_all(std::filesystem::path const& p);

RLFLOW_DECL void write_all(std::filesystem::path const& p, void const* data, std::size_t n);

//! Writes a file atomically: temp file in the same directory, fsync, rename, fsync directory.
RLFLOW_DECL void write_file_atomic(std::filesystem::path const& p, std::string const& content);
}  // namespace detail

inline constexpr const char* checkpoint_tracker_file = "latest_checkpointed_iteration.txt";  // verl's name

//! Builds one checkpoint directory. Write files with path(name) (any writer), then commit().
//! If the writer is destroyed without commit(), the temporary directory is removed and the
//! previous checkpoint stays the latest.
class CheckpointWriter {
 public:
  CheckpointWriter(std::filesystem::path root, std::int64_t step);
  CheckpointWriter(CheckpointWriter const&) = delete;
  CheckpointWriter& operator=(CheckpointWriter const&) = delete;
  ~CheckpointWriter();

  //! Where to write file 'name' (a plain file name inside the checkpoint).
  std::filesystem::path path(std::string const& name) const { return tmp_ / name; }
  void write(std::string const& name, std::string const& content) { detail::write_all(path(name), content.data(), content.size()); }

  //! Seals the checkpoint: manifest, fsync, rename, tracker update. Returns the final directory.
  std::filesystem::path commit();

 private:
  std::filesystem::path root_, tmp_;
  std::int64_t step_;
  bool committed_ = false;
};

//! The step recorded in 'root/latest_checkpointed_iteration.txt', if any. Anything but one
//! non-negative decimal number (surrounding white space allowed) is a format_error.
RLFLOW_DECL std::optional<std::int64_t> latest_checkpoint_step(std::filesystem::path const& root);

namespace detail {
//! Field 'name' of JSON object 'j' read from 'file': a format_error naming both when it is
//! missing or of the wrong type (never a JSON-library exception, never a float read as an int).
RLFLOW_DECL nlohmann::json const& json_field(nlohmann::json const& j, std::string const& name, std::string const& file);
//! An integer field in [lo, hi]; a float, a string or an out-of-range value is a format_error.
RLFLOW_DECL std::int64_t json_int(nlohmann::json const& j, std::string const& name, std::string const& file, std::int64_t lo,
                                  std::int64_t hi);
//! A finite number field.
RLFLOW_DECL double json_number(nlohmann::json const& j, std::string const& name, std::string const& file);
//! Parses a JSON file; any failure is a format_error naming the file.
RLFLOW_DECL nlohmann::json read_json_file(std::filesystem::path const& p);
//! A file name listed in a manifest: a plain name inside the checkpoint directory.
RLFLOW_DECL bool plain_file_name(std::string const& n);
}  // namespace detail

//! What a checkpoint's MANIFEST.json records (after validation).
struct CheckpointManifest {
  std::int64_t step = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint32_t>> files;  //!< name -> (size, crc32)
};

//! Reads and validates dir/MANIFEST.json: every field's type and range (format, version 1, a
//! step equal to the directory's global_step_N, a non-empty file list of plain names, sizes and
//! CRC-32s as unsigned integers). Throws format_error naming the file and the field.
RLFLOW_DECL CheckpointManifest read_checkpoint_manifest(std::filesystem::path const& dir);

//! Verifies a checkpoint directory against its manifest (every file present, sizes and CRCs
//! equal, no manifest -> error; every name in 'required' listed) and returns it. Throws
//! format_error naming the bad file and field.
RLFLOW_DECL std::filesystem::path verify_checkpoint(std::filesystem::path const& dir, std::vector<std::string> const& required = {});

//! The fields of a Trainer checkpoint's trainer_state.json, validated.
struct TrainerStateFields {
  std::int64_t global_step = 0;
  std::int64_t epoch = 0, index = 0;  //!< data position
  double kl_coef = 0;
  nlohmann::json config;  //!< the saved config (null when absent)
};

//! Reads dir/trainer_state.json and checks every field: global_step an integer equal to the
//! manifest's step, data_position.epoch in [0, 2^31), data_position.index in [0, prompts],
//! kl_coef finite, truncated_prompts (if present) in [0, prompts], config (if present) an object.
//! Throws format_error naming the file and the field. verl: the dataloader / step state.
RLFLOW_DECL TrainerStateFields read_trainer_state(std::filesystem::path const& dir, std::int64_t manifest_step, std::int64_t prompts);

//! Removes what killed writers left in 'root': '.tmp_global_step_<step>_<pid>' directories and
//! '<file>.tmp.<pid>' files whose process no longer runs (or is this process). Returns how many
//! entries were removed. Entries of a live process are left alone.
RLFLOW_DECL std::int64_t remove_stale_checkpoint_temps(std::filesystem::path const& root);

//! The step numbers of the 'global_step_N' directories in 'root', ascending.
RLFLOW_DECL std::vector<std::int64_t> checkpoint_steps(std::filesystem::path const& root);

//! Keeps the newest 'keep' checkpoints of 'root' (and always the one the tracker names); removes
//! the older 'global_step_N' directories. verl: max_actor_ckpt_to_keep / max_critic_ckpt_to_keep.
RLFLOW_DECL void prune_checkpoints(std::filesystem::path const& root, std::int64_t keep);

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/trainer/impl/checkpoint.ipp>
#endif
