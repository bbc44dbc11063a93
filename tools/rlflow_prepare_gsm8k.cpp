// rlflow_prepare_gsm8k: GSM8K rows ({"question", "answer"} JSON lines, e.g. openai/gsm8k's
// train / test split exported from parquet) into verl's RL schema, as verl's
// examples/data_preprocess/gsm8k.py writes them (data/gsm8k.hpp).
//   rlflow_prepare_gsm8k IN.jsonl OUT.jsonl [--split train|test]
// Every row is checked before OUT is written; OUT is written atomically (a temporary file renamed).
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <rlflow/data/gsm8k.hpp>

int main(int argc, char** argv) {
  std::string in, out, split = "train";
  auto usage = [] {
    std::fprintf(stderr, "usage: rlflow_prepare_gsm8k IN.jsonl OUT.jsonl [--split train|test]\n");
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--help" || a == "-h") return usage(), 0;
    if (a == "--split") {
      if (i + 1 >= argc) return usage();
      split = argv[++i];
    } else if (in.empty()) {
      in = a;
    } else if (out.empty()) {
      out = a;
    } else {
      return usage();
    }
  }
  if (in.empty() || out.empty()) return usage();
  try {
    std::ifstream f(in, std::ios::binary);
    if (!f) throw rlflow::io_error(rlflow::msg("cannot open ", in));
    std::vector<std::string> rows;
    std::string line;
    std::int64_t n = 0, index = 0;
    while (std::getline(f, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines carry no row
      std::string const where = rlflow::msg(in, ":", n);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (nlohmann::json::exception const& e) {
        throw rlflow::format_error(rlflow::msg(where, " is not valid JSON (", e.what(), ")"));
      }
      rows.push_back(rlflow::data::gsm8k_rl_row(j, split, index++, where).dump() + "\n");
    }
    if (rows.empty()) throw rlflow::format_error(rlflow::msg(in, " holds no rows"));
    std::string const tmp = out + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
      if (!o) throw rlflow::io_error(rlflow::msg("cannot write ", tmp));
      for (auto const& r : rows) o << r;
      if (!o.flush()) throw rlflow::io_error(rlflow::msg("writing ", tmp, " failed"));
    }
    std::filesystem::rename(tmp, out);
    std::printf("rlflow_prepare_gsm8k: wrote %zu rows to %s\n", rows.size(), out.c_str());
  } catch (std::exception const& e) {
    std::fprintf(stderr, "rlflow_prepare_gsm8k: %s\n", e.what());
    return 1;
  }
  return 0;
}
