// tests/hf/test_data_files.cpp <-> include/rlflow/data/data_files.hpp: verl-schema JSON-lines files
// (chat lists and strings, data_source, reward_model.ground_truth, extra_info), file lists,
// data.prompt_key, the chat template, the overlong-prompt filter, and the errors (Parquet with
// the conversion hint, malformed lines, missing keys, unknown roles).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <rlflow/data/data_files.hpp>
#include <rlflow/tasks/string_tasks.hpp>

#include "fixtures.hpp"

namespace test_data_files {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
using fixtures::TempDir;
void write_lines(fs::path const& p, std::vector<std::string> const& lines) {
  std::ofstream out(p);
  for (auto const& l : lines) out << l << "\n";
}
json gsm8k_row(int i) {
  return {{"data_source", "openai/gsm8k"},
          {"prompt", {{{"role", "user"}, {"content", "What is " + std::to_string(i) + " + 1?"}}}},
          {"ability", "math"},
          {"reward_model", {{"style", "rule"}, {"ground_truth", std::to_string(i + 1)}}},
          {"extra_info", {{"split", "train"}, {"index", i}}}};
}
}  // namespace

TEST_CASE("file lists: one path, commas, or a bracketed list", "[data]") {
  using V = std::vector<std::string>;
  CHECK(rlflow::parse_file_list("a.jsonl") == V{"a.jsonl"});
  CHECK(rlflow::parse_file_list("a.jsonl, b.jsonl") == V{"a.jsonl", "b.jsonl"});
  CHECK(rlflow::parse_file_list("[a.jsonl, 'b.jsonl', \"c.json\"]") == V{"a.jsonl", "b.jsonl", "c.json"});
  CHECK(rlflow::parse_file_list("") == V{});
  CHECK_THROWS_AS(rlflow::parse_file_list("[a.jsonl"), rlflow::config_error);
}

TEST_CASE("verl's rows load: chat lists through the template, strings as they are", "[data]") {
  TempDir d;
  std::vector<std::string> lines;
  for (int i = 0; i < 5; ++i) lines.push_back(gsm8k_row(i).dump());
  lines.push_back("");  // blank lines are skipped
  lines.push_back(json{{"data_source", "plain"}, {"prompt", "2+2="}, {"reward_model", {{"ground_truth", 4}}}}.dump());
  write_lines(d.p / "a.jsonl", lines);
  write_lines(d.p / "b.json", {json::array({gsm8k_row(10)}).dump()});
  rlflow::DataFileOptions o;
  auto r = rlflow::load_prompt_files({(d.p / "a.jsonl").string(), (d.p / "b.json").string()}, o);
  REQUIRE(r.items.size() == 7);
  CHECK(r.rows_read == 7);
  CHECK(r.items[0].prompt == "User: What is 0 + 1?\nAssistant:");
  CHECK(r.items[0].data_source == "openai/gsm8k");
  CHECK(r.items[0].ground_truth == "1");
  CHECK(json::parse(r.items[3].extra_info)["index"] == 3);
  CHECK(r.items[5].prompt == "2+2=");
  CHECK(r.items[5].ground_truth == "4");  // a number ground truth as its JSON text
  CHECK(r.items[5].extra_info.empty());
  CHECK(r.items[6].ground_truth == "11");

  // a configured template: per-role prefix / suffix and the generation prompt
  rlflow::DataFileOptions o2;
  o2.chat_template.roles["system"] = {"<sys>", "</sys>"};
  o2.chat_template.roles["user"] = {"Q: ", " "};
  o2.chat_template.generation_prompt = "A:";
  json chat = {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hi"}}};
  CHECK(o2.chat_template.render(chat) == "<sys>be brief</sys>Q: hi A:");
  // data.prompt_key
  write_lines(d.p / "c.jsonl", {json{{"question", "why?"}, {"data_source", "x"}}.dump()});
  o2.prompt_key = "question";
  CHECK(rlflow::load_prompt_files({(d.p / "c.jsonl").string()}, o2).items[0].prompt == "why?");
}

TEST_CASE("filter_overlong_prompts drops and counts rows over max_prompt_length", "[data]") {
  TempDir d;
  std::vector<std::string> lines;
  for (int n : {3, 10, 5, 30, 8}) lines.push_back(json{{"prompt", std::string(std::size_t(n), 'x')}, {"data_source", "s"}}.dump());
  write_lines(d.p / "a.jsonl", lines);
  rlflow::DataFileOptions o;
  o.max_prompt_length = 9;
  o.filter_overlong_prompts = true;
  o.prompt_tokens = [](std::string const& s) { return std::int64_t(s.size()) + 1; };  // + BOS
  auto r = rlflow::load_prompt_files({(d.p / "a.jsonl").string()}, o);
  CHECK(r.rows_read == 5);
  CHECK(r.filtered_overlong == 2);  // 10 + 1 and 30 + 1 > 9; 8 + 1 == 9 stays
  REQUIRE(r.items.size() == 3);
  CHECK(r.items[2].prompt == "xxxxxxxx");
  o.max_prompt_length = 2;
  CHECK_THROWS_WITH(rlflow::load_prompt_files({(d.p / "a.jsonl").string()}, o), Catch::Contains("no usable rows"));
}

TEST_CASE("bad data files are errors naming the file, the row and the fix", "[data]") {
  TempDir d;
  rlflow::DataFileOptions o;
  auto err = [&](std::vector<std::string> const& lines) {
    write_lines(d.p / "bad.jsonl", lines);
    try {
      rlflow::load_prompt_files({(d.p / "bad.jsonl").string()}, o);
    } catch (std::exception const& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  CHECK_THROWS_WITH(rlflow::read_rows("train.parquet"),
                    Catch::Contains("pd.read_parquet('train.parquet').to_json('train.jsonl', orient='records', lines=True"));
  CHECK(err({gsm8k_row(0).dump(), "{\"prompt\": \"x\""}).find("bad.jsonl line 2 is not valid JSON") != std::string::npos);
  CHECK(err({json{{"question", "x"}}.dump()}).find("has no field 'prompt' (data.prompt_key); its fields are question") !=
        std::string::npos);
  CHECK(err({json{{"prompt", 3}}.dump()}).find("field 'prompt' is number") != std::string::npos);
  CHECK(err({json{{"prompt", {{{"role", "tool"}, {"content", "x"}}}}}.dump()}).find("role 'tool'") != std::string::npos);
  CHECK(err({json{{"prompt", {{{"role", "user"}}}}}.dump()}).find("bad.jsonl row 1: message 0") != std::string::npos);
  CHECK(err({json{{"prompt", "x"}, {"reward_model", "7"}}.dump()}).find("reward_model must be an object") != std::string::npos);
  CHECK_THROWS_AS(rlflow::load_prompt_files({(d.p / "missing.jsonl").string()}, o), rlflow::io_error);
}

TEST_CASE("the string tasks still build their datasets", "[data]") {
  rlflow::tasks::StringTask t;
  auto ds = t.make_dataset(4, 1);
  CHECK(ds.size() == 4);
  CHECK(ds[0].extra_info.empty());
}

TEST_CASE("next_batch rejects a negative position index and keeps the drop_last order", "[data]") {
  rlflow::PromptDataset const ds({{"a", "1"}, {"b", "2"}, {"c", "3"}}, /*shuffle=*/false);
  rlflow::DataPosition bad{0, -1};
  REQUIRE_THROWS_AS(ds.next_batch(bad, 2), rlflow::value_error);
  REQUIRE_THROWS_WITH(ds.next_batch(bad, 2), Catch::Contains("index -1"));
  REQUIRE(bad == rlflow::DataPosition{0, -1});  // untouched
  // a past-the-end index starts the next epoch, as one that leaves fewer than batch_size prompts
  rlflow::DataPosition far{0, std::numeric_limits<std::int64_t>::max()};
  auto const b = ds.next_batch(far, 2);
  REQUIRE(far == rlflow::DataPosition{1, 2});
  REQUIRE(b.at(0).prompt == "a");
  rlflow::DataPosition pos{0, 2};
  REQUIRE(ds.next_batch(pos, 2).at(1).prompt == "b");
  REQUIRE(pos == rlflow::DataPosition{1, 2});
}

}  // namespace test_data_files
