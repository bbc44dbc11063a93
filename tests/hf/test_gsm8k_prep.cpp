// tests/hf/test_gsm8k_prep.cpp <-> include/rlflow/data/gsm8k.hpp (what tools/rlflow_prepare_gsm8k
// writes): GSM8K rows in verl's RL schema equal what tests/hf/gsm8k_reference.py (verl's gsm8k.py
// preprocessing, run by the test) writes for the same random rows; bad rows are errors naming the row.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/data/data_files.hpp>  // read_rows
#include <rlflow/data/gsm8k.hpp>

#include "fixtures.hpp"

namespace test_gsm8k_prep {

namespace fs = std::filesystem;

namespace {
int run(std::string const& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }
}  // namespace

TEST_CASE("GSM8K rows become verl's RL rows exactly as verl's gsm8k.py writes them", "[hf][gsm8k]") {
  if (run(std::string(RLFLOW_GSM8K_PYTHON) + " -c 'import json, re'") != 0) {
    std::printf("rlflow-skip: %s is not a Python interpreter; the comparison with verl's preprocessing is skipped\n", RLFLOW_GSM8K_PYTHON);
    return;
  }
  fixtures::TempDir d;
  std::mt19937 g(7);
  std::vector<std::string> const words = {"Natalia", "sold", "clips", "to", "48", "of her friends", "\"quoted\"", "naïve café", "数学",
                                          "🙂", "a\\backslash", "tab\there", "line\nbreak", "$3.50", "50%"};
  std::vector<std::string> const finals = {"72", "1,234", "-5", "3.5", "0", "10,000,000", "-0.25", "7."};
  std::ofstream in(d.p / "in.jsonl");
  for (int r = 0; r < 300; ++r) {
    std::string q, a;
    for (int k = 0; k < 3 + int(g() % 8); ++k) q += (k ? " " : "") + words[g() % words.size()];
    for (int k = 0; k < 2 + int(g() % 6); ++k) a += words[g() % words.size()] + " <<" + std::to_string(g() % 100) + ">>\n";
    switch (g() % 4) {
      case 0: a += "#### " + finals[g() % finals.size()]; break;
      case 1: a += "#### no number here\n#### " + finals[g() % finals.size()]; break;  // the first '#### <number>' counts
      case 2: a += "#### " + finals[g() % finals.size()] + " and #### 99"; break;
      default: {  // a negative final answer
        std::string const f = finals[g() % finals.size()];
        a += "#### -" + (f[0] == '-' ? f.substr(1) : f) + "\n";
        break;
      }
    }
    in << nlohmann::json{{"question", q}, {"answer", a}}.dump() << "\n";
    if (r % 50 == 0) in << "\n";  // blank lines are skipped by both
  }
  in.close();
  for (std::string split : {"train", "test"}) {
    {  // the tool's loop: every non-blank line a row, indexed in order
      std::ifstream src(d.p / "in.jsonl");
      std::ofstream dst(d.p / "mine.jsonl", std::ios::trunc);
      std::string line;
      std::int64_t index = 0;
      while (std::getline(src, line))
        if (!line.empty()) dst << rlflow::data::gsm8k_rl_row(nlohmann::json::parse(line), split, index++).dump() << "\n";
    }
    REQUIRE(run(std::string(RLFLOW_GSM8K_PYTHON) + " " + RLFLOW_GSM8K_REFERENCE + " " + (d.p / "in.jsonl").string() + " " +
                (d.p / "ref.jsonl").string() + " " + split) == 0);
    auto const mine = rlflow::read_rows(d.p / "mine.jsonl"), ref = rlflow::read_rows(d.p / "ref.jsonl");
    REQUIRE(mine.size() == 300);
    REQUIRE(mine.size() == ref.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      INFO("row " << i << ": " << ref[i].dump());
      CHECK(mine[i] == ref[i]);
    }
  }
}

TEST_CASE("GSM8K rows without a final answer or fields are errors naming the row", "[hf][gsm8k]") {
  using rlflow::data::gsm8k_rl_row;
  CHECK(rlflow::data::gsm8k_solution("so 3 + 4 = 7\n#### 1,007") == "1007");
  CHECK_THROWS_WITH(gsm8k_rl_row(nlohmann::json{{"question", "q"}, {"answer", "the answer is 7"}}, "train", 0, "f.jsonl:3"),
                    Catch::Contains("f.jsonl:3: answer has no final answer '#### <number>'"));
  CHECK_THROWS_WITH(gsm8k_rl_row(nlohmann::json{{"question", "q"}, {"answer", "####7"}}, "train", 0, "f.jsonl:4"),
                    Catch::Contains("f.jsonl:4"));
  CHECK_THROWS_WITH(gsm8k_rl_row(nlohmann::json{{"question", 3}, {"answer", "#### 7"}}, "train", 0, "f.jsonl:5"),
                    Catch::Contains("f.jsonl:5 has no string field 'question'"));
  CHECK_THROWS_WITH(gsm8k_rl_row(nlohmann::json::array(), "train", 0, "f.jsonl:6"), Catch::Contains("f.jsonl:6 is not a JSON object"));
}

}  // namespace test_gsm8k_prep
