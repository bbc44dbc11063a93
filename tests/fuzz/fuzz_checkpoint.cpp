// Fuzz target: a checkpoint folder as the Trainer reads it before loading any weights: the
// tracker file, MANIFEST.json (read_checkpoint_manifest, verify_checkpoint) and
// trainer_state.json (read_trainer_state). The input holds the files' contents separated by a
// marker line. Silent accept: the checkpoint verifies although a listed file's bytes differ from
// the seed's (corrupt data passing the manifest).
#include "fuzz/fuzz_driver.hpp"

#include <rlflow/trainer/checkpoint.hpp>

#include <unistd.h>

namespace fuzz_checkpoint {

using namespace rlflow;
namespace fs = std::filesystem;

namespace {
constexpr std::string_view sep = "\n--8<--\n";
fs::path root() {
  // in memory where possible: a run writes four small files
  static fs::path const base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  static fs::path const r = base / ("rlflow_fuzz_ckpt_" + std::to_string(::getpid()));
  return r;
}
std::string read(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
std::string const state_seed = R"({"global_step": 7, "data_position": {"epoch": 1, "index": 16}, "kl_coef": 0.001,
 "truncated_prompts": 0, "config": {"seed": 1, "data": {"train_batch_size": 8}}})";
std::string const weights_seed = std::string("weights\0\1\2\3", 11);
}  // namespace

std::vector<std::string> fuzz_seeds() {
  fs::remove_all(root());
  {
    CheckpointWriter w(root(), 7);
    w.write("trainer_state.json", state_seed);
    w.write("actor.safetensors", weights_seed);
    w.commit();
  }
  auto const dir = root() / "global_step_7";
  std::string s = read(root() / checkpoint_tracker_file);
  s += sep;
  s += read(dir / "MANIFEST.json");
  s += sep;
  s += read(dir / "trainer_state.json");
  s += sep;
  s += read(dir / "actor.safetensors");
  fs::remove_all(root());
  return {s};
}

fuzz::outcome fuzz_one(std::string_view in) {
  std::vector<std::string> parts;
  while (true) {
    auto const at = in.find(sep);
    parts.emplace_back(in.substr(0, at));
    if (at == std::string_view::npos) break;
    in.remove_prefix(at + sep.size());
  }
  parts.resize(4);
  auto const dir = root() / "global_step_7";
  struct Scratch {  // one folder per process, files overwritten per run, removed at exit
    explicit Scratch(fs::path const& d) {
      fs::remove_all(root());
      fs::create_directories(d);
    }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(root(), ec);
    }
  };
  static Scratch const scratch(dir);
  auto put = [](fs::path const& p, std::string const& s) { std::ofstream(p, std::ios::binary) << s; };
  put(root() / checkpoint_tracker_file, parts[0]);
  put(dir / "MANIFEST.json", parts[1]);
  put(dir / "trainer_state.json", parts[2]);
  put(dir / "actor.safetensors", parts[3]);
  auto const step = latest_checkpoint_step(root());
  if (!step) throw format_error("no tracker");
  auto const d = root() / ("global_step_" + std::to_string(*step));
  verify_checkpoint(d, {"trainer_state.json", "actor.safetensors"});
  auto const man = read_checkpoint_manifest(d);
  auto const st = read_trainer_state(d, man.step, 64);
  (void)st;
  bool const same = parts[2] == state_seed && parts[3] == weights_seed;
  return same ? fuzz::outcome::accepted : fuzz::outcome::silent_accept;
}

}  // namespace fuzz_checkpoint
RLFLOW_FUZZ_TARGET(checkpoint)
