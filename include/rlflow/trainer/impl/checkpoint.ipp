// rlflow/trainer/impl/checkpoint.ipp: the bodies of rlflow/trainer/checkpoint.hpp's non-template functions (config.hpp, RLFLOW_DECL).
#pragma once

namespace rlflow::detail {

RLFLOW_DECL void fsync_path(std::filesystem::path const& p, bool directory) {
  int fd = ::open(p.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw io_error(msg("rlflow checkpoint: cannot open '", p.string(), "' to fsync it"));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw io_error(msg("rlflow checkpoint: fsync of '", p.string(), "' failed"));
}

RLFLOW_DECL std::vector<char> read_all(std::filesystem::path const& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw io_error(msg("rlflow: cannot open '", p.string(), "' for reading"));
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

RLFLOW_DECL void write_all(std::filesystem::path const& p, void const* data, std::size_t n) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  if (!out) throw io_error(msg("rlflow: cannot open '", p.string(), "' for writing"));
  out.write(static_cast<char const*>(data), static_cast<std::streamsize>(n));
  out.close();
  if (!out) throw io_error(msg("rlflow: writing '", p.string(), "' failed (disk full?)"));
}

RLFLOW_DECL void write_file_atomic(std::filesystem::path const& p, std::string const& content) {
  auto tmp = p;
  tmp += ".tmp." + std::to_string(::getpid());
  write_all(tmp, content.data(), content.size());
  fsync_path(tmp, false);
  std::filesystem::rename(tmp, p);
  fsync_path(p.has_parent_path() ? p.parent_path() : std::filesystem::path("."), true);
}

}  // namespace rlflow::detail

namespace rlflow {

RLFLOW_DECL CheckpointWriter::CheckpointWriter(std::filesystem::path root, std::int64_t step) : root_(std::move(root)), step_(step) {
  std::filesystem::create_directories(root_);
  tmp_ = root_ / (".tmp_global_step_" + std::to_string(step_) + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp_);
  std::filesystem::create_directories(tmp_);
}

RLFLOW_DECL CheckpointWriter::~CheckpointWriter() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }
}

RLFLOW_DECL std::filesystem::path CheckpointWriter::commit() {
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

RLFLOW_DECL std::optional<std::int64_t> latest_checkpoint_step(std::filesystem::path const& root) {
  auto tracker = root / checkpoint_tracker_file;
  if (!std::filesystem::exists(tracker)) return std::nullopt;
  if (!std::filesystem::is_regular_file(tracker))
    throw format_error(msg("rlflow checkpoint: '", tracker.string(), "' is not a regular file; remove it"));
  auto bytes = detail::read_all(tracker);
  std::string s(bytes.begin(), bytes.end());
  auto const fail = [&] {
    std::string shown = s.size() > 64 ? s.substr(0, 64) + "..." : s;
    throw format_error(msg("rlflow checkpoint: '", tracker.string(), "' does not hold a step number (content '", shown,
                           "'); delete it or point trainer.default_local_dir elsewhere"));
  };
  auto const b = s.find_first_not_of(" \t\r\n");
  auto const e = s.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) fail();
  std::string const digits = s.substr(b, e - b + 1);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) fail();
  return std::stoll(digits);
}

}  // namespace rlflow

namespace rlflow::detail {

RLFLOW_DECL nlohmann::json const& json_field(nlohmann::json const& j, std::string const& name, std::string const& file) {
  if (!j.is_object())
    throw format_error(msg("rlflow checkpoint: '", file, "': expected a JSON object holding '", name, "', got ", j.type_name()));
  auto it = j.find(name);
  if (it == j.end()) throw format_error(msg("rlflow checkpoint: '", file, "' lacks the field '", name, "'"));
  return *it;
}

RLFLOW_DECL std::int64_t json_int(nlohmann::json const& j, std::string const& name, std::string const& file, std::int64_t lo,
                                  std::int64_t hi) {
  auto const& v = json_field(j, name, file);
  if (!v.is_number_integer())
    throw format_error(msg("rlflow checkpoint: '", file, "': field '", name, "' must be an integer, got ", v.type_name(), " ",
                           json_preview(v)));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    throw format_error(msg("rlflow checkpoint: '", file, "': field '", name, "' = ", json_preview(v), " is out of range [", lo, ", ", hi, "]"));
  std::int64_t const x = v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>()) : v.get<std::int64_t>();
  if (x < lo || x > hi)
    throw format_error(msg("rlflow checkpoint: '", file, "': field '", name, "' = ", x, " is out of range [", lo, ", ", hi, "]"));
  return x;
}

RLFLOW_DECL double json_number(nlohmann::json const& j, std::string const& name, std::string const& file) {
  auto const& v = json_field(j, name, file);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw format_error(msg("rlflow checkpoint: '", file, "': field '", name, "' must be a finite number, got ", json_preview(v)));
  return v.get<double>();
}

RLFLOW_DECL nlohmann::json read_json_file(std::filesystem::path const& p) {
  if (!std::filesystem::is_regular_file(p))
    throw format_error(msg("rlflow checkpoint: '", p.string(), "' is missing or not a regular file"));
  auto bytes = read_all(p);
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (std::exception const& e) {
    throw format_error(msg("rlflow checkpoint: '", p.string(), "' is not valid JSON (", e.what(), ")"));
  }
}

RLFLOW_DECL bool plain_file_name(std::string const& n) {
  return !n.empty() && n != "." && n != ".." && n != "MANIFEST.json" && n.find('/') == std::string::npos &&
         n.find('\0') == std::string::npos && n.size() <= 255;
}

}  // namespace rlflow::detail

namespace rlflow {

RLFLOW_DECL CheckpointManifest read_checkpoint_manifest(std::filesystem::path const& dir) {
  auto mpath = dir / "MANIFEST.json";
  if (!std::filesystem::exists(mpath))
    throw format_error(msg("rlflow checkpoint: '", dir.string(), "' has no MANIFEST.json (partial or foreign checkpoint); "
                           "it cannot be loaded"));
  std::string const file = mpath.string();
  nlohmann::json const m = detail::read_json_file(mpath);
  auto const& fmt = detail::json_field(m, "format", file);
  if (!fmt.is_string() || fmt.get<std::string>() != "rlflow-checkpoint")
    throw format_error(msg("rlflow checkpoint: '", file, "': field 'format' is ", detail::json_preview(fmt), ", not \"rlflow-checkpoint\""));
  std::int64_t const version = detail::json_int(m, "version", file, 0, 1 << 30);
  if (version != 1)
    throw format_error(msg("rlflow checkpoint: '", file, "': field 'version' = ", version,
                           " but this rlflow reads version 1; use the rlflow that wrote it"));
  CheckpointManifest out;
  out.step = detail::json_int(m, "step", file, 0, std::numeric_limits<std::int64_t>::max());
  std::string const base = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  if (base.rfind("global_step_", 0) == 0 && base != "global_step_" + std::to_string(out.step))
    throw format_error(msg("rlflow checkpoint: '", file, "': field 'step' = ", out.step, " but the directory is '", base,
                           "' (moved or mixed-up checkpoint)"));
  auto const& files = detail::json_field(m, "files", file);
  if (!files.is_object() || files.empty())
    throw format_error(msg("rlflow checkpoint: '", file, "': field 'files' must be a non-empty object (name -> size, crc32); "
                           "a manifest listing no files verifies nothing"));
  for (auto it = files.begin(); it != files.end(); ++it) {
    if (!detail::plain_file_name(it.key()))
      throw format_error(msg("rlflow checkpoint: '", file, "': listed file name '", it.key(),
                             "' is not a plain file name inside the checkpoint"));
    std::string const field = "files." + it.key();
    auto const size = detail::json_int(it.value(), "size", file + "' field '" + field, 0, std::numeric_limits<std::int64_t>::max());
    auto const crc = detail::json_int(it.value(), "crc32", file + "' field '" + field, 0, 0xFFFFFFFFll);
    out.files[it.key()] = {static_cast<std::uint64_t>(size), static_cast<std::uint32_t>(crc)};
  }
  return out;
}

RLFLOW_DECL std::filesystem::path verify_checkpoint(std::filesystem::path const& dir, std::vector<std::string> const& required) {
  auto const man = read_checkpoint_manifest(dir);
  auto const mpath = (dir / "MANIFEST.json").string();
  for (auto const& r : required)
    if (!man.files.count(r))
      throw format_error(msg("rlflow checkpoint: '", mpath, "' does not list '", r, "', which this checkpoint needs"));
  for (auto const& [name, info] : man.files) {
    auto p = dir / name;
    if (!std::filesystem::is_regular_file(p))
      throw format_error(msg("rlflow checkpoint: file '", name, "' listed in ", mpath, " is missing"));
    auto const on_disk = std::filesystem::file_size(p);
    if (on_disk != info.first)
      throw format_error(msg("rlflow checkpoint: '", p.string(), "' has ", on_disk, " bytes, the manifest says ", info.first,
                             " (truncated or overwritten)"));
    auto bytes = detail::read_all(p);
    if (bytes.size() != info.first)
      throw format_error(msg("rlflow checkpoint: '", p.string(), "' has ", bytes.size(), " bytes, the manifest says ",
                             info.first, " (truncated or overwritten)"));
    if (detail::crc32(bytes.data(), bytes.size()) != info.second)
      throw format_error(msg("rlflow checkpoint: '", p.string(), "' fails its CRC-32 check (corrupt)"));
  }
  return dir;
}

RLFLOW_DECL TrainerStateFields read_trainer_state(std::filesystem::path const& dir, std::int64_t manifest_step, std::int64_t prompts) {
  auto const file = (dir / "trainer_state.json").string();
  nlohmann::json const st = detail::read_json_file(dir / "trainer_state.json");
  TrainerStateFields out;
  out.global_step = detail::json_int(st, "global_step", file, 0, std::numeric_limits<std::int64_t>::max());
  if (out.global_step != manifest_step)
    throw format_error(msg("rlflow checkpoint: '", file, "': field 'global_step' = ", out.global_step,
                           " but MANIFEST.json records step ", manifest_step, "; the checkpoint is inconsistent, resume from another one"));
  auto const& dp = detail::json_field(st, "data_position", file);
  out.epoch = detail::json_int(dp, "epoch", file + "' field 'data_position", 0, std::numeric_limits<std::int32_t>::max());
  out.index = detail::json_int(dp, "index", file + "' field 'data_position", 0, prompts);
  out.kl_coef = detail::json_number(st, "kl_coef", file);
  if (st.contains("truncated_prompts")) (void)detail::json_int(st, "truncated_prompts", file, 0, prompts);
  if (st.contains("config")) {
    out.config = st["config"];
    if (!out.config.is_object())
      throw format_error(msg("rlflow checkpoint: '", file, "': field 'config' must be an object, got ", out.config.type_name()));
  }
  return out;
}

RLFLOW_DECL std::int64_t remove_stale_checkpoint_temps(std::filesystem::path const& root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return 0;
  auto const pid_of = [](std::string const& name, std::string::size_type from) -> long {
    std::string const digits = name.substr(from);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stol(digits);
  };
  std::vector<std::filesystem::path> stale;
  for (auto const& e : std::filesystem::directory_iterator(root, ec)) {
    std::string const name = e.path().filename().string();
    long pid = -1;
    if (name.rfind(".tmp_global_step_", 0) == 0) pid = pid_of(name, name.rfind('_') + 1);
    else if (auto t = name.rfind(".tmp."); t != std::string::npos && t > 0) pid = pid_of(name, t + 5);
    if (pid <= 0) continue;
    bool const alive = pid != static_cast<long>(::getpid()) && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
    if (!alive) stale.push_back(e.path());
  }
  for (auto const& p : stale) std::filesystem::remove_all(p, ec);
  return static_cast<std::int64_t>(stale.size());
}

RLFLOW_DECL std::vector<std::int64_t> checkpoint_steps(std::filesystem::path const& root) {
  std::vector<std::int64_t> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return out;
  for (auto const& e : std::filesystem::directory_iterator(root, ec)) {
    std::string const name = e.path().filename().string();
    if (name.rfind("global_step_", 0) != 0 || !e.is_directory()) continue;
    std::string const digits = name.substr(12);
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.push_back(std::stoll(digits));
  }
  std::sort(out.begin(), out.end());
  return out;
}

RLFLOW_DECL void prune_checkpoints(std::filesystem::path const& root, std::int64_t keep) {
  if (keep < 1) return;
  auto steps = checkpoint_steps(root);
  auto const latest = latest_checkpoint_step(root);
  std::int64_t const n = static_cast<std::int64_t>(steps.size());
  for (std::int64_t i = 0; i + keep < n; ++i) {
    if (latest && steps[static_cast<std::size_t>(i)] == *latest) continue;
    std::filesystem::remove_all(root / ("global_step_" + std::to_string(steps[static_cast<std::size_t>(i)])));
  }
}

}  // namespace rlflow
