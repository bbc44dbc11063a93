// rlflow/trainer_config/values.hpp: value types usable in a constexpr config and as a template argument: fixed_string
// (config_string), null, nullable<T>, string_list.
// Part of rlflow/config/trainer_config.hpp (include that one).
#pragma once
#include <algorithm>     // std::min
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>   // config_error, msg

namespace rlflow {

// ---- value types usable in a constexpr config and as a template argument ----------------------

//! A string of at most N characters stored inline, so a TrainerConfig can be constexpr and a
//! class-type template argument. Compares equal to string literals: cfg.algorithm.adv_estimator == "grpo".
template <std::size_t N>
struct fixed_string {
  char chars[N + 1]{};    // public: structural type
  std::size_t length = 0;

  constexpr fixed_string() = default;
  constexpr fixed_string(char const* s) { assign(std::string_view(s)); }            // NOLINT: implicit by design
  constexpr fixed_string(std::string_view s) { assign(s); }                         // NOLINT
  fixed_string(std::string const& s) { assign(std::string_view(s)); }               // NOLINT

  constexpr void assign(std::string_view s) {
    if (s.size() > N)
      throw config_error(msg("rlflow::fixed_string<", N, ">: '", std::string(s), "' has ", s.size(),
                             " characters; at most ", N, " fit; use a shorter value"));
    for (std::size_t i = 0; i <= N; ++i) chars[i] = i < s.size() ? s[i] : '\0';
    length = s.size();
  }
  constexpr std::string_view view() const { return std::string_view(chars, length); }
  std::string str() const { return std::string(view()); }
  constexpr bool empty() const { return length == 0; }
  constexpr std::size_t size() const { return length; }
  friend constexpr bool operator==(fixed_string const& a, std::string_view b) { return a.view() == b; }
  template <std::size_t M>
  friend constexpr bool operator==(fixed_string const& a, fixed_string<M> const& b) { return a.view() == b.view(); }
  friend std::ostream& operator<<(std::ostream& os, fixed_string const& s) { return os << s.view(); }
};

//! The string type of config values (names, paths): up to 255 characters.
using config_string = fixed_string<255>;

//! Tag for an unset nullable value (verl's null / None).
struct null_t {
  constexpr explicit null_t(int) {}
};
inline constexpr null_t null{0};

//! A value that may be null, as verl's Optional config fields. Structural (public members).
template <class T>
struct nullable {
  T stored{};
  bool has_value = false;

  constexpr nullable() = default;
  constexpr nullable(null_t) {}                                    // NOLINT: implicit by design
  constexpr nullable(T v) : stored(v), has_value(true) {}          // NOLINT
  constexpr explicit operator bool() const { return has_value; }
  constexpr T value() const {
    if (!has_value) throw config_error("rlflow::nullable::value(): the value is null; set it or use value_or()");
    return stored;
  }
  constexpr T value_or(T fallback) const { return has_value ? stored : fallback; }
  constexpr T operator*() const { return value(); }
};

//! A list of strings stored comma-joined inline (trainer.logger = [console, jsonl]).
struct string_list {
  config_string joined{};
  constexpr string_list() = default;
  constexpr string_list(char const* s) : joined(s) {}  // NOLINT: "console,jsonl"
  std::vector<std::string> items() const;
  constexpr bool contains(std::string_view item) const {
    std::string_view v = joined.view();
    while (true) {
      auto const comma = v.find(',');
      if (v.substr(0, comma) == item) return true;
      if (comma == std::string_view::npos) return false;
      v.remove_prefix(comma + 1);
    }
  }
};

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/trainer_config/impl/values.ipp>
#endif
