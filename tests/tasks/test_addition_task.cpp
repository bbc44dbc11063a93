// Tests for tasks::AdditionTask (rlflow/tasks/addition.hpp): the generated prompts and answers
// against integer arithmetic, and the per-digit reward against a plain reference (right-aligned
// digit matches over the longer length) on random responses, plus its edge cases and its
// registration as data source "addition" of the default reward.
#include <catch2/catch.hpp>

#include <rlflow/tasks/addition.hpp>
#include <rlflow/tasks/reward_score.hpp>

#include <random>
#include <string>

using namespace rlflow;

namespace {
//! Independent reference: pad both strings on the left to the same width with distinct fillers,
//! count equal positions that are not filler, divide by the width.
double reference_score(std::string const& r, std::string const& t) {
  std::size_t const w = std::max(r.size(), t.size());
  if (w == 0) return 1.0;
  std::string const rp = std::string(w - r.size(), '\x01') + r;
  std::string const tp = std::string(w - t.size(), '\x02') + t;
  int hits = 0;
  for (std::size_t i = 0; i < w; ++i) hits += rp[i] == tp[i];
  return static_cast<double>(hits) / static_cast<double>(w);
}
}  // namespace

TEST_CASE("AdditionTask prompts are 'a+b=' and answers their decimal sum", "[tasks]") {
  for (int digits : {1, 2, 3}) {
    for (bool pad : {false, true}) {
      tasks::AdditionTask task;
      task.digits = digits;
      task.pad_answer = pad;
      auto ds = task.make_dataset(500, 7, /*shuffle=*/false);
      REQUIRE(ds.size() == 500);
      for (std::int64_t i = 0; i < ds.size(); ++i) {
        auto const& it = ds[i];
        auto const plus = it.prompt.find('+');
        REQUIRE(plus != std::string::npos);
        REQUIRE(it.prompt.back() == '=');
        long const a = std::stol(it.prompt.substr(0, plus));
        long const b = std::stol(it.prompt.substr(plus + 1, it.prompt.size() - plus - 2));
        long hi = 1;
        for (int k = 0; k < digits; ++k) hi *= 10;
        REQUIRE((a >= 0 && a < hi && b >= 0 && b < hi));
        REQUIRE(std::stol(it.ground_truth) == a + b);
        if (pad) REQUIRE(static_cast<int>(it.ground_truth.size()) == digits + 1);
        else REQUIRE(it.ground_truth == std::to_string(a + b));
        REQUIRE(static_cast<int>(it.prompt.size()) <= task.max_prompt_length());
        REQUIRE(static_cast<int>(it.ground_truth.size()) <= task.max_answer_length());
        REQUIRE(it.data_source == "addition");
        for (char c : it.prompt + it.ground_truth) REQUIRE(task.charset().find(c) != std::string::npos);
      }
    }
  }
}

TEST_CASE("AdditionTask::score matches a plain per-digit reference on random responses", "[tasks]") {
  std::mt19937_64 rng(11);
  std::string const chars = "0123456789+=";
  for (int trial = 0; trial < 20000; ++trial) {
    std::string r, t = std::to_string(rng() % 199);
    int const len = static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) r += chars[rng() % (trial % 2 ? 10 : chars.size())];
    if (trial % 7 == 0) r = t;  // exact answers too
    INFO("response '" << r << "' truth '" << t << "'");
    REQUIRE(tasks::AdditionTask::score(r, t) == reference_score(r, t));
  }
}

TEST_CASE("AdditionTask::score edge cases", "[tasks]") {
  using tasks::AdditionTask;
  CHECK(AdditionTask::score("46", "46") == 1.0);
  CHECK(AdditionTask::score("", "46") == 0.0);
  CHECK(AdditionTask::score("", "") == 1.0);
  CHECK(AdditionTask::score("56", "46") == 0.5);    // units right, tens wrong
  CHECK(AdditionTask::score("146", "46") == Approx(2.0 / 3));  // an extra digit costs one
  CHECK(AdditionTask::score("6", "46") == 0.5);     // a missing digit costs one
  CHECK(AdditionTask::score("4612", "46") == 0.0);  // no EOS: the units are misaligned
  // the default reward scores data source "addition" with it
  CHECK(tasks::default_compute_score("addition", "56", "46") == 0.5);
  tasks::AdditionTask bad;
  bad.digits = 0;
  CHECK_THROWS_AS(bad.make_dataset(1, 1), config_error);
}
