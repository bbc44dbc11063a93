// rlflow/config/run_main.hpp: rlflow::run_main, the body of a trainer program's main(): runs a callable
// and turns what escapes it into an exit code and a readable message instead of
// 'terminate called after throwing ...'. Also rlflow::help_requested (thrown by
// TrainerConfig::from_args on --help).
#pragma once
#include <cstdio>     // std::fputs, std::fprintf
#include <exception>  // std::exception
#include <string>
#include <type_traits>

namespace rlflow {

//! Thrown by TrainerConfig::from_args when the command line holds --help / -h: not an error, the
//! program should print text() and stop. rlflow::run_main does exactly that (exit code 0).
struct help_requested : std::exception {
  explicit help_requested(std::string text) : text_(std::move(text)) {}
  const char* what() const noexcept override { return text_.c_str(); }
  std::string const& text() const { return text_; }

 private:
  std::string text_;
};

//! Runs 'body' (a callable taking no arguments, returning void or an int exit code) and returns
//! the program's exit code: body's result (0 for void); 0 after printing the help text to stdout
//! when it threw help_requested; 1 after printing "error: <message>" to stderr when it threw any
//! other exception (every rlflow error names the thing, the numbers and the fix).
//!
//!   int main(int argc, char** argv) {
//!     return rlflow::run_main([&] { ... TrainerConfig::from_args(argc, argv, defaults) ... });
//!   }
template <class F>
int run_main(F&& body) noexcept {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      body();
      return 0;
    } else {
      return static_cast<int>(body());
    }
  } catch (help_requested const& h) {
    std::fputs(h.text().c_str(), stdout);
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "error: an exception that is not a std::exception escaped the program\n");
    return 1;
  }
}

}  // namespace rlflow
