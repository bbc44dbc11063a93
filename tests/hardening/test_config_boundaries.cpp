// Config text crossing into rlflow (class 3): JSON numbers beyond a double, deeply
// nested documents, nested lists, --config on a folder, integers beyond int64: each a clean
// rlflow error naming the source, never a library exception, a crash or a silent empty config.
#include <catch2/catch.hpp>

#include <rlflow/config/trainer_config.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace test_config_boundaries {

using namespace rlflow;
namespace fs = std::filesystem;

TEST_CASE("JSON numbers out of range are format_errors naming the source", "[hardening][config]") {
  TrainerConfig c;
  REQUIRE_THROWS_AS(c.apply_text(R"({"algorithm": {"gamma": 1e999}})", "json", "cfg.json"), format_error);
  REQUIRE_THROWS_WITH(c.apply_text(R"({"algorithm": {"gamma": -1e400}})", "json", "cfg.json"), Catch::Contains("cfg.json"));
  // integers beyond int64 and floats where integers belong are config errors naming the key
  REQUIRE_THROWS_WITH(c.apply_text(R"({"data": {"train_batch_size": 18446744073709551616}})", "json", "cfg.json"),
                      Catch::Contains("data.train_batch_size"));
  REQUIRE_THROWS_WITH(c.apply_text(R"({"data": {"train_batch_size": 9223372036854775808}})", "json", "cfg.json"),
                      Catch::Contains("data.train_batch_size"));
  REQUIRE_THROWS_WITH(c.apply_text(R"({"data": {"train_batch_size": 1e30}})", "json", "cfg.json"),
                      Catch::Contains("expects an integer"));
  REQUIRE_THROWS_WITH(c.apply_text("data:\n  train_batch_size: 99999999999999999999\n", "yaml", "cfg.yaml"),
                      Catch::Contains("cfg.yaml:2") && Catch::Contains("expects an integer"));
  REQUIRE_THROWS_WITH(c.apply_text("algorithm:\n  gamma: 1e999\n", "yaml", "cfg.yaml"), Catch::Contains("finite number"));
}

TEST_CASE("deeply nested config documents are format_errors, not stack overflows", "[hardening][config]") {
  TrainerConfig c;
  std::string deep;
  for (int i = 0; i < 200000; ++i) deep += "{\"a\":";
  deep += "1";
  for (int i = 0; i < 200000; ++i) deep += "}";
  REQUIRE_THROWS_AS(c.apply_text(deep, "json", "deep.json"), format_error);
  std::string deep_list = "{\"trainer\": {\"logger\": ";
  for (int i = 0; i < 200000; ++i) deep_list += "[";
  for (int i = 0; i < 200000; ++i) deep_list += "]";
  deep_list += "}}";
  REQUIRE_THROWS_WITH(c.apply_text(deep_list, "json", "deep.json"), Catch::Contains("trainer.logger") && Catch::Contains("nested"));
  std::string yaml;
  for (int i = 0; i < 2000; ++i) yaml += std::string(static_cast<std::size_t>(i), ' ') + "k" + std::to_string(i) + ":\n";
  REQUIRE_THROWS_AS(c.apply_text(yaml, "yaml", "deep.yaml"), error);
}

TEST_CASE("a huge unknown key or value is rejected without an edit distance over it", "[hardening][config]") {
  TrainerConfig c;
  std::string const key(1 << 20, 'k');
  REQUIRE_THROWS_WITH(c.set(key, "1"), Catch::Contains("1048576 characters") && !Catch::Contains("did you mean"));
  REQUIRE_THROWS_WITH(c.set("data.truncation", std::string(1 << 20, 'x')),
                      Catch::Contains("is not one of") && !Catch::Contains("did you mean"));
  REQUIRE_THROWS_WITH(c.set("data.train_bach_size", "1"), Catch::Contains("did you mean 'data.train_batch_size'"));
}

TEST_CASE("a config file argument that is a folder is an io_error, not an empty config", "[hardening][config]") {
  auto dir = fs::temp_directory_path() / ("rlflow_hardening_cfgdir_" + std::to_string(::getpid()) + ".yaml");
  fs::create_directories(dir);
  std::string const path = dir.string();
  char const* argv[] = {"prog", "--config", path.c_str()};
  REQUIRE_THROWS_AS(parse_command_line(3, argv), io_error);
  REQUIRE_THROWS_WITH(parse_command_line(3, argv), Catch::Contains("is a directory"));
  fs::remove_all(dir);
  REQUIRE_THROWS_AS(parse_command_line(3, argv), io_error);  // missing
}

}  // namespace test_config_boundaries
