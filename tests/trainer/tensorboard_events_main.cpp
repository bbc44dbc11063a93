// tests/trainer/tensorboard_events_main.cpp <-> rlflow::TensorBoardWriter (rlflow/core/tensorboard.hpp):
// writes random scalars over a few steps into OUT_DIR and the same values to OUT_DIR/expected.json;
// tensorboard_events_check.py then reads the event file back on its own (framing, both masked
// CRC32Cs, a hand-written protobuf decode) and compares.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include <nlohmann/json.hpp>
#include <rlflow/core/tensorboard.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR SEED\n", argv[0]);
    return 2;
  }
  std::filesystem::path const dir = argv[1];
  std::filesystem::remove_all(dir);
  std::mt19937_64 rng(std::stoull(argv[2]));
  std::uniform_real_distribution<double> value(-1e3, 1e3);
  std::uniform_int_distribution<int> count(1, 40), letter(0, 25), len(1, 30);
  rlflow::TensorBoardWriter w(dir);
  nlohmann::json expected = nlohmann::json::array();
  for (std::int64_t step = 1; step <= 6; ++step) {
    rlflow::Metrics m;
    int const n = count(rng);
    for (int i = 0; i < n; ++i) {
      std::string tag = "group" + std::to_string(i % 3) + "/";
      for (int c = len(rng); c > 0; --c) tag += static_cast<char>('a' + letter(rng));
      m[tag] = value(rng);
    }
    m["skipped/nan"] = std::numeric_limits<double>::quiet_NaN();  // non-finite values are not written
    w.add_scalars(step * 7, m);
    nlohmann::json row;
    row["step"] = step * 7;
    for (auto const& [k, v] : m)
      if (std::isfinite(v)) row["values"][k] = static_cast<double>(static_cast<float>(v));
    expected.push_back(row);
  }
  std::ofstream(dir / "expected.json") << expected.dump();
  std::printf("wrote %s\n", w.path().string().c_str());
  return 0;
}
