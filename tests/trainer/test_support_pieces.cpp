// Tests for the trainer's support pieces: checkpoint directories, PromptDataset, StringTask,
// MetricsLogger.
#include <catch2/catch.hpp>

#include <rlflow/trainer/checkpoint.hpp>
#include <rlflow/data/data.hpp>
#include <rlflow/core/metrics.hpp>
#include <rlflow/tasks/string_tasks.hpp>

#include "trainer/trainer_fixtures.hpp"

#include <fstream>
#include <random>
#include <set>

namespace test_support_pieces {

using namespace rlflow;
namespace fs = std::filesystem;

using rlflow::testing::fresh_dir;

TEST_CASE("CheckpointWriter commits atomically and verify_checkpoint detects corruption", "[trainer][checkpoint]") {
  auto root = fresh_dir("ckpt");
  REQUIRE_FALSE(latest_checkpoint_step(root).has_value());
  {
    CheckpointWriter w(root, 3);
    w.write("a.bin", std::string(1000, 'x'));
    w.write("b.json", "{\"k\": 1}");
    auto dir = w.commit();
    REQUIRE(dir == root / "global_step_3");
  }
  REQUIRE(latest_checkpoint_step(root) == 3);
  REQUIRE_NOTHROW(verify_checkpoint(root / "global_step_3"));
  {
    // An uncommitted writer leaves no trace and does not move the tracker.
    CheckpointWriter w(root, 6);
    w.write("a.bin", "partial");
  }
  REQUIRE(latest_checkpoint_step(root) == 3);
  REQUIRE_FALSE(fs::exists(root / "global_step_6"));
  for (auto const& e : fs::directory_iterator(root)) REQUIRE(e.path().filename().string().rfind(".tmp", 0) != 0);

  // Flip one byte anywhere in a file: the CRC check names it.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 10; ++trial) {
    auto p = root / "global_step_3" / "a.bin";
    auto bytes = detail::read_all(p);
    std::size_t at = rng() % bytes.size();
    bytes[at] = static_cast<char>(bytes[at] ^ (1 + rng() % 255));
    detail::write_all(p, bytes.data(), bytes.size());
    REQUIRE_THROWS_WITH(verify_checkpoint(root / "global_step_3"), Catch::Contains("a.bin"));
    bytes[at] = 'x';
    detail::write_all(p, bytes.data(), bytes.size());
    REQUIRE_NOTHROW(verify_checkpoint(root / "global_step_3"));
  }
  // Truncation and missing files.
  {
    auto p = root / "global_step_3" / "a.bin";
    detail::write_all(p, std::string(999, 'x').data(), 999);
    REQUIRE_THROWS_AS(verify_checkpoint(root / "global_step_3"), format_error);
    fs::remove(p);
    REQUIRE_THROWS_WITH(verify_checkpoint(root / "global_step_3"), Catch::Contains("missing"));
    fs::remove(root / "global_step_3" / "MANIFEST.json");
    REQUIRE_THROWS_WITH(verify_checkpoint(root / "global_step_3"), Catch::Contains("MANIFEST"));
  }
  detail::write_file_atomic(root / checkpoint_tracker_file, "garbage");
  REQUIRE_THROWS_AS(latest_checkpoint_step(root), format_error);
  fs::remove_all(root);
}

TEST_CASE("crc32 matches the standard check value and chains", "[trainer][checkpoint]") {
  std::string s = "123456789";
  REQUIRE(detail::crc32(s.data(), s.size()) == 0xCBF43926u);
  auto part = detail::crc32(s.data(), 4);
  REQUIRE(detail::crc32(s.data() + 4, 5, part) == 0xCBF43926u);
}

TEST_CASE("PromptDataset iterates batches with drop_last, per-epoch shuffle and resumable positions", "[trainer][data]") {
  tasks::StringTask task;
  auto ds = task.make_dataset(10, 42);
  REQUIRE(ds.size() == 10);
  REQUIRE(ds.batches_per_epoch(3) == 3);
  DataPosition pos;
  std::multiset<std::string> epoch0;
  for (int b = 0; b < 3; ++b)
    for (auto& it : ds.next_batch(pos, 3)) epoch0.insert(it.prompt);
  REQUIRE(pos == DataPosition{0, 9});
  auto b = ds.next_batch(pos, 3);  // only one prompt left: drop_last moves to epoch 1
  REQUIRE(pos == DataPosition{1, 3});
  // Resuming from a saved position yields the same batches.
  DataPosition saved = pos;
  auto x1 = ds.next_batch(pos, 3);
  auto x2 = ds.next_batch(saved, 3);
  for (std::size_t i = 0; i < x1.size(); ++i) REQUIRE(x1[i].prompt == x2[i].prompt);
  // Epoch 0 visited 9 distinct dataset rows (a permutation prefix).
  std::multiset<std::string> all;
  for (std::int64_t i = 0; i < ds.size(); ++i) all.insert(ds[i].prompt);
  for (auto const& p : epoch0) REQUIRE(all.count(p) >= epoch0.count(p));
  REQUIRE_THROWS_AS(ds.next_batch(pos, 11), config_error);
}

TEST_CASE("StringTask answers and partial-credit scores", "[trainer][task]") {
  tasks::StringTask rev;
  REQUIRE(rev.answer("abc") == "cba");
  tasks::StringTask srt{tasks::StringOp::sort};
  REQUIRE(srt.answer("cab") == "abc");
  REQUIRE(tasks::StringTask::score("cba", "cba") == 1.0);
  REQUIRE(tasks::StringTask::score("cbx", "cba") == Approx(2.0 / 3));
  REQUIRE(tasks::StringTask::score("cbaa", "cba") == Approx(3.0 / 4));
  REQUIRE(tasks::StringTask::score("", "cba") == 0.0);
  std::mt19937 rng(9);
  auto ds = rev.make_dataset(50, 7);
  for (std::int64_t i = 0; i < ds.size(); ++i) {
    auto const& it = ds[i];
    REQUIRE(it.prompt.back() == '=');
    std::string s = it.prompt.substr(0, it.prompt.size() - 1);
    REQUIRE(s.size() >= 2);
    REQUIRE(s.size() <= 3);
    REQUIRE(it.ground_truth == std::string(s.rbegin(), s.rend()));
    // score is in [0, 1] and 1 only for the exact answer
    std::string r = it.ground_truth;
    if (rng() % 2) r[rng() % r.size()] = 'z';
    double sc = tasks::StringTask::score(r, it.ground_truth);
    REQUIRE(sc >= 0.0);
    REQUIRE(sc <= 1.0);
    REQUIRE((sc == 1.0) == (r == it.ground_truth));
  }
  tasks::StringTask bad;
  bad.min_len = 0;
  REQUIRE_THROWS_AS(bad.make_dataset(1, 1), config_error);
}

TEST_CASE("MetricsLogger writes one JSON object per step and reduce_metrics averages", "[trainer][metrics]") {
  auto dir = fresh_dir("metrics");
  {
    MetricsLogger log(dir / "m.jsonl", 2, /*console=*/false);
    log.log(1, {{"critic/score/mean", 0.5}, {"actor/pg_loss", std::nan("")}});
    log.log(2, {{"critic/score/mean", 0.75}});
  }
  std::ifstream in(dir / "m.jsonl");
  std::string l1, l2, l3;
  std::getline(in, l1);
  std::getline(in, l2);
  REQUIRE_FALSE(std::getline(in, l3));
  auto j1 = nlohmann::json::parse(l1);
  REQUIRE(j1["step"] == 1);
  REQUIRE(j1["critic/score/mean"] == 0.5);
  REQUIRE(j1["actor/pg_loss"].is_null());
  REQUIRE(nlohmann::json::parse(l2)["critic/score/mean"] == 0.75);
  auto r = reduce_metrics({{"a", {1, 2, 3}}, {"b", {}}});
  REQUIRE(r.at("a") == 2.0);
  REQUIRE(r.count("b") == 0);
  MetricsLogger quiet;
  REQUIRE(quiet.progress_line(3, {{"critic/score/mean", 0.25}}).find("score 0.25") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("MetricsLogger prints every log_freq steps, the first and the last, with elapsed time and ETA",
          "[trainer][metrics]") {
  for (std::int64_t freq : {1, 3, 7, 10, 50}) {
    MetricsLogger log({}, /*total_steps=*/10, /*console=*/true, /*append=*/false, ConsoleOptions{freq, 0});
    std::vector<std::int64_t> printed;
    for (std::int64_t s = 1; s <= 10; ++s) {
      log.log(s, {{"critic/score/mean", 0.5}});
      if (log.prints(s)) printed.push_back(s);
    }
    std::vector<std::int64_t> expect;
    for (std::int64_t s = 1; s <= 10; ++s)
      if (s == 1 || s == 10 || s % freq == 0) expect.push_back(s);
    REQUIRE(printed == expect);
  }
  // a resumed run (first step 6) counts its pace from its own first step
  MetricsLogger resumed({}, 10, /*console=*/true, false, ConsoleOptions{5, 0});
  resumed.log(6, {});
  REQUIRE(resumed.prints(6));
  REQUIRE_FALSE(resumed.prints(7));
  REQUIRE(resumed.timing_text(8, /*elapsed=*/3.0) == "elapsed 3.0s | eta 2.0s");  // 3 steps in 3 s, 2 left
  REQUIRE(resumed.timing_text(10, 4.0) == "elapsed 4.0s | eta 0.0s");
  REQUIRE(MetricsLogger::duration_text(125) == "2m05s");
  REQUIRE(MetricsLogger::duration_text(3725) == "1h02m");
  auto const bar = resumed.progress_bar(5, {{"critic/score/mean", 0.25}}, 1.0);
  REQUIRE(bar.rfind("[############............] 5/10  50% | score 0.25 | elapsed 1.0s | eta", 0) == 0);
  REQUIRE_THROWS_WITH(MetricsLogger({}, 10, true, false, ConsoleOptions{0, 0}), Catch::Contains("trainer.log_freq=0"));
}

}  // namespace test_support_pieces
