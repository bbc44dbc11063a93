// Tests for tasks::AdditionTask (rlflow/tasks/addition.hpp): the generated prompts and answers
// against integer arithmetic, and the per-digit reward against a plain reference (right-aligned
// digit matches over the longer length) on random responses, plus its edge cases and its
// registration as data source "addition" of the default reward; the example's token-level reward
// role (examples/common/addition_task.hpp) against a plain reference.
#include <catch2/catch.hpp>

#include <rlflow/tasks/addition.hpp>
#include <rlflow/tasks/reward_score.hpp>
#include <rlflow/roles/concepts.hpp>  // reward_role

#include "common/addition_task.hpp"  // examples::DigitTokenReward

#include <algorithm>
#include <cmath>
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
      task.fixed_width = pad;
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
        if (pad) {
          REQUIRE(static_cast<int>(it.ground_truth.size()) == digits + 1);
          REQUIRE(static_cast<int>(it.prompt.size()) == 2 * digits + 2);
          REQUIRE(static_cast<long>(plus) == digits);
        } else {
          REQUIRE(it.prompt == std::to_string(a) + "+" + std::to_string(b) + "=");
          REQUIRE(it.ground_truth == std::to_string(a + b));
        }
        REQUIRE(static_cast<int>(it.prompt.size()) <= task.max_prompt_length());
        REQUIRE(static_cast<int>(it.ground_truth.size()) <= task.max_answer_length());
        REQUIRE(it.data_source == "addition");
        for (char c : it.prompt + it.ground_truth) REQUIRE(task.charset().find(c) != std::string::npos);
      }
    }
  }
}

TEST_CASE("AdditionTask single_digit_fraction mixes in tagged prompts with operands below 10", "[tasks]") {
  tasks::AdditionTask plain;
  plain.fixed_width = true;
  SECTION("0 keeps the dataset of the task without the option") {
    tasks::AdditionTask t = plain;
    t.single_digit_fraction = 0.0;
    auto a = t.make_dataset(300, 11, false);
    // an independent regeneration of the uniform stream: two draws per prompt from [0, 100)
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<std::int64_t> d(0, 99);
    for (std::int64_t i = 0; i < a.size(); ++i) {
      std::int64_t const x = d(rng), y = d(rng);
      REQUIRE(a[i].prompt == plain.prompt(x, y));
      REQUIRE(a[i].extra_info.empty());
    }
  }
  for (double f : {0.25, 0.5, 1.0}) {
    tasks::AdditionTask t = plain;
    t.single_digit_fraction = f;
    std::int64_t const n = 4000;
    auto ds = t.make_dataset(n, 5, false);
    std::int64_t tagged = 0;
    for (std::int64_t i = 0; i < ds.size(); ++i) {
      auto const& it = ds[i];
      long const a = std::stol(it.prompt.substr(0, 2)), b = std::stol(it.prompt.substr(3, 2));
      REQUIRE(it.prompt == plain.prompt(a, b));
      REQUIRE(std::stol(it.ground_truth) == a + b);
      REQUIRE(it.ground_truth.size() == 3u);
      REQUIRE(it.data_source == "addition");
      if (!it.extra_info.empty()) {
        REQUIRE(it.extra_info == tasks::AdditionTask::kCurriculumTag);
        REQUIRE((a < 10 && b < 10));
        ++tagged;
      }
    }
    // binomial(n, f): within 5 standard deviations
    double const sd = std::sqrt(static_cast<double>(n) * f * (1 - f));
    CAPTURE(f, tagged);
    REQUIRE(std::abs(static_cast<double>(tagged) - f * static_cast<double>(n)) <= 5 * sd + 1e-9);
  }
  tasks::AdditionTask bad = plain;
  for (double f : {-0.1, 1.5, std::nan("")}) {
    bad.single_digit_fraction = f;
    REQUIRE_THROWS_WITH(bad.make_dataset(10, 1), Catch::Contains("single_digit_fraction") && Catch::Contains("use 0"));
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

TEST_CASE("AdditionTask reversed_answer writes the sum least significant digit first", "[tasks]") {
  for (int digits : {1, 2, 3}) {
    for (bool pad : {false, true}) {
      tasks::AdditionTask plain, rev;
      plain.digits = rev.digits = digits;
      plain.fixed_width = rev.fixed_width = pad;
      rev.reversed_answer = true;
      auto const p = plain.make_dataset(300, 9, /*shuffle=*/false), r = rev.make_dataset(300, 9, /*shuffle=*/false);
      REQUIRE(r.size() == 300);
      for (std::int64_t i = 0; i < r.size(); ++i) {
        REQUIRE(r[i].prompt == p[i].prompt);  // same operands, same prompt
        REQUIRE(r[i].data_source == "addition_reversed");
        // reference: the decimal digits of the sum, read from the units up
        auto const plus = r[i].prompt.find('+');
        long sum = std::stol(r[i].prompt.substr(0, plus)) + std::stol(r[i].prompt.substr(plus + 1));
        std::string want;
        do {
          want += static_cast<char>('0' + sum % 10);
          sum /= 10;
        } while (sum > 0);
        if (pad) want.resize(static_cast<std::size_t>(digits + 1), '0');
        REQUIRE(r[i].ground_truth == want);
      }
    }
  }
}

TEST_CASE("AdditionTask::score_reversed matches the plain reference on reversed strings", "[tasks]") {
  // a reversed answer compared from the left is the plain answer compared from the right
  std::mt19937_64 rng(13);
  std::string const chars = "0123456789+=";
  for (int trial = 0; trial < 20000; ++trial) {
    std::string r, t = std::to_string(rng() % 199);
    int const len = static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) r += chars[rng() % (trial % 2 ? 10 : chars.size())];
    if (trial % 7 == 0) r = t;
    std::string const rr(r.rbegin(), r.rend()), tr(t.rbegin(), t.rend());
    INFO("reversed response '" << rr << "' reversed truth '" << tr << "'");
    REQUIRE(tasks::AdditionTask::score_reversed(rr, tr) == reference_score(r, t));
  }
  CHECK(tasks::AdditionTask::score_reversed("64", "64") == 1.0);
  CHECK(tasks::AdditionTask::score_reversed("65", "64") == 0.5);  // units right, tens wrong
  CHECK(tasks::AdditionTask::score_reversed("6", "64") == 0.5);   // stops after the units
  CHECK(tasks::AdditionTask::score_reversed("", "") == 1.0);
  CHECK(tasks::default_compute_score("addition_reversed", "65", "64") == 0.5);
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

TEST_CASE("DigitTokenReward credits each answer digit and the EOS after it on its own token", "[tasks]") {
  tasks::AdditionTask task;
  task.fixed_width = true;
  roles::RoleSetup setup;
  setup.alphabet = task.charset();
  model::CharTokenizer tok(task.charset());
  STATIC_REQUIRE(roles::reward_role<examples::DigitTokenReward>);
  examples::DigitTokenReward role(setup);
  std::mt19937_64 rng(5);
  int const B = 200, R = 4;
  for (int trial = 0; trial < 5; ++trial) {
    Tensor resp = Tensor::full(Shape{B, R}, tok.pad_id());
    Tensor mask = Tensor::zeros(DType::int32, Shape{B, R});
    NonTensorColumn rm;
    std::vector<std::string> truths, texts;
    std::vector<int> stops;
    for (int i = 0; i < B; ++i) {
      std::string const truth = task.answer(static_cast<std::int64_t>(rng() % 100), static_cast<std::int64_t>(rng() % 100));
      std::string text = truth;  // mutate some digits, and stop early, on time or never
      for (auto& c : text)
        if (rng() % 3 == 0) c = static_cast<char>('0' + rng() % 10);
      int const len = static_cast<int>(rng() % 4);  // characters before EOS (3: the right length)
      text = text.substr(0, static_cast<std::size_t>(len));
      auto ids = tok.encode(text);
      bool const eos = rng() % 4 != 0;
      if (eos) ids.push_back(tok.eos_id());
      for (std::size_t t = 0; t < ids.size() && t < std::size_t(R); ++t) {
        resp.at<std::int32_t>(i, std::int64_t(t)) = ids[t];
        mask.at<std::int32_t>(i, std::int64_t(t)) = 1;
      }
      rm.emplace_back(Dict{{"ground_truth", truth}});
      truths.push_back(truth);
      texts.push_back(text);
      stops.push_back(eos ? len : -1);
    }
    DataProto out = role.compute_rm_score(
        DataProto::from_dict({{"responses", resp}, {"response_mask", mask}}, {{"reward_model", rm}}));
    Tensor const& s = out.tensor("token_level_scores");
    REQUIRE(s.dim(0) == B);
    REQUIRE(s.dim(1) == R);
    for (int i = 0; i < B; ++i) {
      // plain reference: position t earns 1/4 when it holds the t-th answer digit, or EOS at t = 3
      for (int t = 0; t < R; ++t) {
        double want = 0;
        if (t < static_cast<int>(texts[i].size()) && texts[i][t] == truths[i][t]) want = 0.25;
        if (t == 3 && stops[i] == 3) want = 0.25;
        INFO("row " << i << " '" << texts[i] << "' truth '" << truths[i] << "' t " << t);
        REQUIRE(s.at<float>(i, t) == Approx(want));
      }
    }
  }
}

TEST_CASE("DigitTokenRLOOReward is DigitTokenReward less the leave-one-out mean of its prompt group", "[tasks]") {
  tasks::AdditionTask task;
  task.fixed_width = true;
  task.reversed_answer = true;
  roles::RoleSetup setup;
  setup.alphabet = task.charset();
  model::CharTokenizer tok(task.charset());
  STATIC_REQUIRE(roles::reward_role<examples::DigitTokenRLOOReward>);
  examples::DigitTokenReward plain(setup);
  examples::DigitTokenRLOOReward rloo(setup);
  std::mt19937_64 rng(17);
  int const R = 4;
  for (int n : {1, 2, 5}) {
    int const prompts = 12, B = prompts * n;
    Tensor resp = Tensor::full(Shape{B, R}, tok.pad_id());
    Tensor mask = Tensor::zeros(DType::int32, Shape{B, R});
    NonTensorColumn rm, uid;
    std::vector<int> group(static_cast<std::size_t>(B));
    // rows of one prompt interleaved as the trainer repeats them, plus a shuffled order: the
    // groups come from 'uid', not from the row order
    std::vector<int> order(static_cast<std::size_t>(B));
    for (int i = 0; i < B; ++i) order[static_cast<std::size_t>(i)] = i;
    if (n == 5) std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::string> truth_of(prompts);
    for (int p = 0; p < prompts; ++p)
      truth_of[static_cast<std::size_t>(p)] = task.answer(static_cast<std::int64_t>(rng() % 100), static_cast<std::int64_t>(rng() % 100));
    for (int i = 0; i < B; ++i) {
      int const p = order[static_cast<std::size_t>(i)] / n;
      group[static_cast<std::size_t>(i)] = p;
      std::string text = truth_of[static_cast<std::size_t>(p)];
      for (auto& c : text)
        if (rng() % 2 == 0) c = static_cast<char>('0' + rng() % 10);
      text = text.substr(0, rng() % 4);
      auto ids = tok.encode(text);
      if (rng() % 4 != 0) ids.push_back(tok.eos_id());
      for (std::size_t t = 0; t < ids.size() && t < std::size_t(R); ++t) {
        resp.at<std::int32_t>(i, std::int64_t(t)) = ids[t];
        mask.at<std::int32_t>(i, std::int64_t(t)) = 1;
      }
      rm.emplace_back(Dict{{"ground_truth", truth_of[static_cast<std::size_t>(p)]}});
      uid.emplace_back(std::string("prompt-") + std::to_string(p));
    }
    DataProto const in =
        DataProto::from_dict({{"responses", resp}, {"response_mask", mask}}, {{"reward_model", rm}, {"uid", uid}});
    Tensor const raw = plain.compute_rm_score(in).tensor("token_level_scores");
    Tensor const s = rloo.compute_rm_score(in).tensor("token_level_scores");
    for (int i = 0; i < B; ++i)
      for (int t = 0; t < R; ++t) {
        // plain reference in double: own credit less the mean of the other rows of the group
        double others = 0;
        int k = 0;
        for (int j = 0; j < B; ++j)
          if (j != i && group[static_cast<std::size_t>(j)] == group[static_cast<std::size_t>(i)]) {
            others += raw.at<float>(j, t);
            ++k;
          }
        double const want = k == 0 ? raw.at<float>(i, t) : raw.at<float>(i, t) - others / k;
        INFO("n " << n << " row " << i << " t " << t);
        REQUIRE(s.at<float>(i, t) == Approx(want).margin(1e-6));
      }
    // without 'uid' (validation batches) the raw credit comes back
    Tensor const v = rloo.compute_rm_score(DataProto::from_dict({{"responses", resp}, {"response_mask", mask}}, {{"reward_model", rm}}))
                         .tensor("token_level_scores");
    for (int i = 0; i < B; ++i)
      for (int t = 0; t < R; ++t) REQUIRE(v.at<float>(i, t) == raw.at<float>(i, t));
  }
}
