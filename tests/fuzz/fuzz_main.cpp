// tests/fuzz/fuzz_main.cpp: main() of fuzz_all, every fuzz target in one program (the standalone
// build, RLFLOW_FUZZ_STANDALONE; fuzz_driver.hpp): fuzz_all --target NAME [--runs N] [--seed S]
// [--corpus DIR]... [--write-seeds DIR] runs the target NAME's seeds, the files of the corpus
// folders, then N seeded mutations of them, and exits 1 if any input was silently accepted.
#include "fuzz/fuzz_driver.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace rlflow::fuzz;
  std::uint64_t runs = 10000, seed = 1;
  std::vector<std::string> corpus_dirs;
  std::string write_seeds, target;
  for (int i = 1; i < argc; ++i) {
    std::string_view const a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--target") target = next();
    else if (a == "--runs") runs = std::stoull(next());
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--corpus") corpus_dirs.push_back(next());
    else if (a == "--write-seeds") write_seeds = next();
    else {
      std::fprintf(stderr, "usage: %s --target NAME [--runs N] [--seed S] [--corpus DIR]... [--write-seeds DIR]\n",
                   argv[0]);
      return 2;
    }
  }
  for (auto const& t : registry())
    if (target == t.name) current() = t;
  if (current().one == nullptr) {
    std::string names;
    for (auto const& t : registry()) names += std::string(names.empty() ? "" : ", ") + t.name;
    std::fprintf(stderr, "%s: --target '%s' is not one of this program's targets; pass one of: %s\n", argv[0],
                 target.c_str(), names.c_str());
    return 2;
  }
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(save_last_input);
  std::vector<std::string> pool = current().seeds();
  if (!write_seeds.empty()) {
    fs::create_directories(write_seeds);
    for (std::size_t i = 0; i < pool.size(); ++i)
      std::ofstream(fs::path(write_seeds) / ("seed-" + std::to_string(i)), std::ios::binary) << pool[i];
    std::fprintf(stderr, "fuzz %s: wrote %zu seeds to %s\n", current().name, pool.size(), write_seeds.c_str());
    return 0;
  }
  for (auto const& d : corpus_dirs) {
    if (!fs::is_directory(d)) continue;
    std::vector<fs::path> files;
    for (auto const& e : fs::directory_iterator(d))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (auto const& f : files) {
      std::ifstream in(f, std::ios::binary);
      pool.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  for (auto const& x : pool) run_one(x);
  std::mt19937_64 rng(seed);
  for (std::uint64_t r = 0; r < runs && !pool.empty(); ++r) {
    std::string x = pool[rng() % pool.size()];
    mutate(x, pool[rng() % pool.size()], rng);
    run_one(x);
  }
  print_stats();
  return stats().silent_accepts == 0 ? 0 : 1;
}
