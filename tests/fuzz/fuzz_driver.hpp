// tests/fuzz/fuzz_driver.hpp: the shared harness of rlflow's fuzz targets. A target file
// fuzz_<name>.cpp includes this header and defines, in namespace fuzz_<name>,
//   std::vector<std::string> fuzz_seeds();                 // valid inputs built through the API
//   rlflow::fuzz::outcome fuzz_one(std::string_view in);  // may throw rlflow::error
// then names itself with RLFLOW_FUZZ_TARGET(<name>) after that namespace. Every input ends in one
// of: accepted, a clean rlflow::error, a silent accept (accepted although it should not have
// been: the target's own law, e.g. data that changed while its checksum still passed), or a bug:
// a foreign exception (abort) or a sanitizer report (crash). Built two ways:
//  - with clang -fsanitize=fuzzer, one file per program: RLFLOW_FUZZ_TARGET defines libFuzzer's
//    LLVMFuzzerTestOneInput for the file's target ('make fuzz');
//  - with RLFLOW_FUZZ_STANDALONE, every target in one program (fuzz_all = fuzz_main.cpp and the
//    target files): RLFLOW_FUZZ_TARGET registers the target, and main() runs the one named by
//    --target: its seeds, the files of --corpus folders (the checked-in regression corpus of
//    minimised crashers), then --runs seeded mutations of them (bit flips, byte sets, inserts,
//    deletes, splices, interesting integers and tokens, deep nesting); used under ASan + UBSan by
//    CTest. --write-seeds DIR writes the seeds for libFuzzer.
// Both print "fuzz <target>: runs R, accepted A, clean errors E, silent accepts S" at exit.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>  // getpid

#include <rlflow/core/error.hpp>

namespace rlflow::fuzz {

enum class outcome { accepted, silent_accept };

//! A fuzz target: its name, its seeds and its one-input check.
struct Target {
  char const* name = "";
  std::vector<std::string> (*seeds)() = nullptr;
  outcome (*one)(std::string_view) = nullptr;
};
//! The target this process runs (one per process).
inline Target& current() {
  static Target t;
  return t;
}
//! Every target of the program (standalone build), in registration order.
inline std::vector<Target>& registry() {
  static std::vector<Target> r;
  return r;
}
struct Registrar {
  explicit Registrar(Target t) { registry().push_back(t); }
};

struct Stats {
  std::uint64_t runs = 0, accepted = 0, clean_errors = 0, silent_accepts = 0;
};
inline Stats& stats() {
  static Stats s;
  return s;
}
inline std::string& last_input() {
  static std::string s;
  return s;
}
//! This process's scratch folder, rlflow_fuzz_<tag>_<pid> under /dev/shm where there is one (else
//! the temporary folder): created on the first call, removed at exit. One target per process,
//! so the first call's tag names it.
inline std::filesystem::path scratch_dir(std::string_view tag) {
  namespace fs = std::filesystem;
  static fs::path const base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  static fs::path const d = base / ("rlflow_fuzz_" + std::string(tag) + "_" + std::to_string(::getpid()));
  struct Scratch {
    Scratch() { fs::create_directories(d); }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  };
  static Scratch const scratch;
  return d;
}
inline void print_stats() {
  auto const& s = stats();
  std::fprintf(stderr, "fuzz %s: runs %llu, accepted %llu, clean errors %llu, silent accepts %llu\n", current().name,
               static_cast<unsigned long long>(s.runs), static_cast<unsigned long long>(s.accepted),
               static_cast<unsigned long long>(s.clean_errors), static_cast<unsigned long long>(s.silent_accepts));
}
//! Writes the input being processed to ./fuzz-crash-<target>-<hash> (standalone mode; libFuzzer
//! writes its own crash-<sha1> files).
inline void save_last_input() {
#ifdef RLFLOW_FUZZ_STANDALONE
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : last_input()) h = (h ^ c) * 1099511628211ull;
  char name[128];
  std::snprintf(name, sizeof name, "fuzz-crash-%s-%016llx", current().name, static_cast<unsigned long long>(h));
  if (std::FILE* f = std::fopen(name, "wb")) {
    std::fwrite(last_input().data(), 1, last_input().size(), f);
    std::fclose(f);
    std::fprintf(stderr, "fuzz %s: the failing input is in %s\n", current().name, name);
  }
#endif
}

inline void run_one(std::string_view in) {
  ++stats().runs;
#ifdef RLFLOW_FUZZ_STANDALONE
  last_input().assign(in);
#endif
  try {
    if (current().one(in) == outcome::silent_accept) {
      ++stats().silent_accepts;
      std::fprintf(stderr, "fuzz %s: SILENT ACCEPT\n", current().name);
      last_input().assign(in);
      save_last_input();
    } else {
      ++stats().accepted;
    }
  } catch (rlflow::error const&) {
    ++stats().clean_errors;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "fuzz %s: foreign exception (not rlflow::error): %s\n", current().name, e.what());
    last_input().assign(in);
    save_last_input();
    std::abort();
  }
}
}  // namespace rlflow::fuzz

extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

#ifndef RLFLOW_FUZZ_STANDALONE
namespace rlflow::fuzz {
//! libFuzzer's start: RLFLOW_FUZZ_WRITE_SEEDS=DIR writes the target's seeds into DIR and exits
//! (make fuzz).
inline int libfuzzer_initialize(Target t) {
  current() = t;
  if (char const* dir = std::getenv("RLFLOW_FUZZ_WRITE_SEEDS")) {
    auto const seeds = t.seeds();
    std::filesystem::create_directories(dir);
    for (std::size_t i = 0; i < seeds.size(); ++i)
      std::ofstream(std::filesystem::path(dir) / ("seed-" + std::to_string(i)), std::ios::binary) << seeds[i];
    std::fprintf(stderr, "fuzz %s: wrote %zu seeds to %s\n", t.name, seeds.size(), dir);
    std::exit(0);
  }
  std::atexit(print_stats);
  return 0;
}
}  // namespace rlflow::fuzz
#define RLFLOW_FUZZ_TARGET(target)                                                                         \
  extern "C" int LLVMFuzzerInitialize(int*, char***) {                                                    \
    return ::rlflow::fuzz::libfuzzer_initialize({#target, &fuzz_##target::fuzz_seeds, &fuzz_##target::fuzz_one}); \
  }                                                                                                        \
  extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {                      \
    ::rlflow::fuzz::run_one(std::string_view(reinterpret_cast<char const*>(data), size));                  \
    return 0;                                                                                              \
  }
#else
namespace rlflow::fuzz {
//! One random edit of 'x' (libFuzzer's basic mutations), splicing from 'other'.
inline void mutate(std::string& x, std::string const& other, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };
  int const edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 9) {
      case 0:  // flip a bit
        if (!x.empty()) x[pick(x.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // set a byte
        if (!x.empty()) x[pick(x.size())] = static_cast<char>(rng());
        break;
      case 2:  // insert bytes
        x.insert(pick(x.size() + 1), std::string(1 + pick(8), static_cast<char>(rng())));
        break;
      case 3:  // delete a range
        if (!x.empty()) {
          auto const at = pick(x.size());
          x.erase(at, 1 + pick(std::min<std::size_t>(16, x.size() - at)));
        }
        break;
      case 4: {  // splice a piece of another input
        if (other.empty()) break;
        auto const at = pick(other.size());
        x.insert(pick(x.size() + 1), other.substr(at, 1 + pick(std::min<std::size_t>(32, other.size() - at))));
        break;
      }
      case 5: {  // an interesting integer, little-endian, over 1/2/4/8 bytes
        static constexpr std::uint64_t vals[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0xffffffff,
                                                 0x7fffffffffffffffull, 0xffffffffffffffffull, 0x8000000000000000ull};
        std::uint64_t const v = vals[rng() % (sizeof vals / sizeof vals[0])];
        std::size_t const w = std::size_t{1} << (rng() % 4);
        if (x.size() < w) break;
        auto const at = pick(x.size() - w + 1);
        for (std::size_t i = 0; i < w; ++i) x[at + i] = static_cast<char>(v >> (8 * i));
        break;
      }
      case 6: {  // an interesting token (text formats)
        static char const* toks[] = {"-1", "1e999", "9223372036854775808", "null", "[", "{", "}", "]", "\"", ":", ",",
                                     "  ", "\n", "1.5", "true", "\xff", "\\u0000", "99999999999999999999", "0x10", "-"};
        x.insert(pick(x.size() + 1), toks[rng() % (sizeof toks / sizeof toks[0])]);
        break;
      }
      case 7: {  // deep nesting (text formats): k opening brackets at one place, k closing ones later, k up to 2^17
        std::size_t const k = std::size_t{1} << (rng() % 18);
        bool const obj = rng() % 2;
        auto const a = pick(x.size() + 1);
        auto const b = a + pick(x.size() - a + 1);
        x.insert(b, k, obj ? '}' : ']');
        if (obj) {
          std::string o;
          o.reserve(6 * k);
          for (std::size_t i = 0; i < k; ++i) o += "{\"a\":";  // {"a":{"a":...}}
          x.insert(a, o);
        } else {
          x.insert(a, k, '[');
        }
        break;
      }
      default:  // duplicate a range
        if (!x.empty()) {
          auto const at = pick(x.size());
          x.insert(pick(x.size() + 1), x.substr(at, 1 + pick(std::min<std::size_t>(16, x.size() - at))));
        }
    }
  }
  if (x.size() > (1u << 20)) x.resize(1u << 20);
}
}  // namespace rlflow::fuzz
#define RLFLOW_FUZZ_TARGET(target)                                      \
  static ::rlflow::fuzz::Registrar const rlflow_fuzz_registrar_##target{ \
      {#target, &fuzz_##target::fuzz_seeds, &fuzz_##target::fuzz_one}};
#endif
