// rlflow/trainer/replay_buffer.hpp: the generated batches of the async roads, each stamped with the
// policy version that produced it (RolloutBatch), the bounded FIFO between the producer and the
// trainer (ReplayBuffer), and their place in a checkpoint (save_replay_buffer, load_replay_buffer).
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <rlflow/trainer/checkpoint.hpp>  // CheckpointWriter, checkpoint field readers
#include <rlflow/data/data.hpp>        // DataPosition
#include <rlflow/core/data_proto.hpp>  // DataProto
#include <rlflow/core/error.hpp>       // error, config_error, format_error

namespace rlflow {

//! One generated batch in the replay buffer. verl: the trajectories of one step's prompt groups
//! in TransferQueue, tagged with global_steps (the version that produced them).
struct RolloutBatch {
  std::int64_t step = 0;     //!< the training step it is for (its prompts and seeds are that step's)
  std::int64_t version = 0;  //!< the policy version that generated it (the first, with partial rollout)
  std::int64_t max_version = 0;  //!< the newest version that generated some of its tokens (partial rollout)
  std::int64_t resumes = 0;      //!< times its generation was aborted by a weight sync and resumed
  DataProto batch;           //!< generate_sequences' output
  DataPosition pos_after;    //!< the data position after this batch's prompts
  std::int64_t epoch = 0;    //!< the epoch its prompts came from
  double generate_s = 0;     //!< seconds the rollout workers spent generating it
  //! ReMax: the greedy rollout of the batch's prompts (one row per prompt), generated with the
  //! weights that finished the batch; empty otherwise.
  DataProto greedy;
};

//! Writes the buffered batches into the checkpoint being built, one file each
//! ('replay_buffer_step_<s>.dataproto', DataProto::save), and returns the trainer_state.json
//! field 'replay_buffer' that lists them (step, policy_version, epoch, data_position_after,
//! generate_s, file; ReMax: greedy_file, 'replay_buffer_step_<s>_greedy.dataproto'). rlflow's
//! own (verl does not checkpoint its async buffers).
inline nlohmann::ordered_json save_replay_buffer(CheckpointWriter& w, std::vector<RolloutBatch> const& batches) {
  auto out = nlohmann::ordered_json::array();
  for (auto const& b : batches) {
    std::string const file = "replay_buffer_step_" + std::to_string(b.step) + ".dataproto";
    b.batch.save(w.path(file));
    out.push_back({{"step", b.step},
                   {"policy_version", b.version},
                   {"max_policy_version", b.max_version},
                   {"partial_rollout_resumes", b.resumes},
                   {"epoch", b.epoch},
                   {"data_position_after", {{"epoch", b.pos_after.epoch}, {"index", b.pos_after.index}}},
                   {"generate_s", b.generate_s},
                   {"file", file}});
    if (b.greedy.size() > 0) {  // ReMax's greedy rollout of the batch's prompts
      std::string const gfile = "replay_buffer_step_" + std::to_string(b.step) + "_greedy.dataproto";
      b.greedy.save(w.path(gfile));
      out.back()["greedy_file"] = gfile;
    }
  }
  return out;
}

//! Reads the batches save_replay_buffer wrote into checkpoint 'dir' of step 'global_step' (none
//! when trainer_state.json has no 'replay_buffer'). Every field is checked before a batch is
//! loaded: steps consecutive from global_step + 1, versions in [0, global_step], positions in
//! range, files listed in the (already verified) manifest; a format_error names the file and field.
inline std::vector<RolloutBatch> load_replay_buffer(std::filesystem::path const& dir, std::int64_t global_step, std::int64_t prompts) {
  std::string const file = (dir / "trainer_state.json").string();
  nlohmann::json const st = detail::read_json_file(dir / "trainer_state.json");
  std::vector<RolloutBatch> out;
  if (!st.contains("replay_buffer")) return out;
  auto const& rb = st["replay_buffer"];
  if (!rb.is_array())
    throw format_error(msg("rlflow checkpoint: '", file, "': field 'replay_buffer' must be an array, got ", rb.type_name()));
  auto const manifest = read_checkpoint_manifest(dir);
  constexpr auto big = std::numeric_limits<std::int32_t>::max();
  for (std::size_t i = 0; i < rb.size(); ++i) {
    std::string const where = msg(file, "' field 'replay_buffer[", i, "]");
    auto const& e = rb[i];
    RolloutBatch b;
    b.step = detail::json_int(e, "step", where, global_step + 1 + static_cast<std::int64_t>(i),
                              global_step + 1 + static_cast<std::int64_t>(i));
    b.version = detail::json_int(e, "policy_version", where, 0, global_step);
    b.max_version = e.contains("max_policy_version") ? detail::json_int(e, "max_policy_version", where, b.version, global_step) : b.version;
    b.resumes = e.contains("partial_rollout_resumes") ? detail::json_int(e, "partial_rollout_resumes", where, 0, big) : 0;
    b.epoch = detail::json_int(e, "epoch", where, 0, big);
    auto const& pa = detail::json_field(e, "data_position_after", where);
    b.pos_after.epoch = detail::json_int(pa, "epoch", where + ".data_position_after", 0, big);
    b.pos_after.index = detail::json_int(pa, "index", where + ".data_position_after", 0, prompts);
    b.generate_s = detail::json_number(e, "generate_s", where);
    auto const& f = detail::json_field(e, "file", where);
    if (!f.is_string() || !manifest.files.count(f.get<std::string>()))
      throw format_error(msg("rlflow checkpoint: '", where, ".file' = ", f.dump(), " is not a file listed in ",
                             (dir / "MANIFEST.json").string(), "; the checkpoint is inconsistent, resume from another one"));
    b.batch = DataProto::load(dir / f.get<std::string>());
    if (e.contains("greedy_file")) {  // ReMax's greedy rollout
      auto const& g = e["greedy_file"];
      if (!g.is_string() || !manifest.files.count(g.get<std::string>()))
        throw format_error(msg("rlflow checkpoint: '", where, ".greedy_file' = ", g.dump(), " is not a file listed in ",
                               (dir / "MANIFEST.json").string(), "; the checkpoint is inconsistent, resume from another one"));
      b.greedy = DataProto::load(dir / g.get<std::string>());
    }
    out.push_back(std::move(b));
  }
  return out;
}

//! A bounded FIFO of generated batches between one producer and one consumer. push blocks while
//! full, pop while empty; close() wakes both (push then drops, pop throws); fail(e) makes every
//! later pop rethrow e. verl: ReplayBuffer (v1), strategy 'wait' (nothing is ever dropped).
class ReplayBuffer {
 public:
  explicit ReplayBuffer(std::size_t capacity) : cap_(capacity) {
    if (cap_ < 1) throw config_error("rlflow::ReplayBuffer: capacity must be at least 1");
  }
  //! false when the buffer was closed (the batch is dropped: the trainer is going away).
  bool push(RolloutBatch b) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return closed_ || q_.size() < cap_; });
    if (closed_) return false;
    q_.push_back(std::move(b));
    max_depth_ = std::max(max_depth_, q_.size());
    cv_.notify_all();
    return true;
  }
  //! The oldest batch; 'depth' receives the entries held when it was taken (itself included).
  RolloutBatch pop(std::size_t& depth) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return closed_ || error_ || !q_.empty(); });
    if (!q_.empty()) {  // batches made before a failure are still served
      depth = q_.size();
      RolloutBatch b = std::move(q_.front());
      q_.pop_front();
      cv_.notify_all();
      return b;
    }
    if (error_) std::rethrow_exception(error_);
    throw error("rlflow::ReplayBuffer: closed while the trainer waited for a batch");
  }
  void fail(std::exception_ptr e) {
    std::lock_guard lk(mu_);
    error_ = e;
    cv_.notify_all();
  }
  void close() {
    std::lock_guard lk(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  std::size_t capacity() const { return cap_; }
  std::size_t size() const {
    std::lock_guard lk(mu_);
    return q_.size();
  }
  //! Copies of the batches held, oldest first (for a checkpoint; the buffer is unchanged).
  std::vector<RolloutBatch> snapshot() const {
    std::lock_guard lk(mu_);
    return {q_.begin(), q_.end()};
  }
  std::size_t max_depth() const {
    std::lock_guard lk(mu_);
    return max_depth_;
  }

 private:
  std::size_t const cap_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RolloutBatch> q_;
  std::exception_ptr error_;
  bool closed_ = false;
  std::size_t max_depth_ = 0;
};

}  // namespace rlflow
