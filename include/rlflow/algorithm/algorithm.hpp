// rlflow/algorithm/algorithm.hpp: the algorithm options of Trainer<...>, one per entry of the estimator
// table (rlflow/config/estimators.hpp): each fixes verl's advantage estimator (algorithm.adv_estimator)
// and says whether it needs a critic; FromConfig reads the estimator from the configuration, as
// verl does. The math lives in kernels/; the step order lives in trainer.hpp.
#pragma once
#include <cstddef>
#include <string_view>

#include <rlflow/config/estimators.hpp>  // estimator_table, RLFLOW_ADV_ESTIMATORS
#include <rlflow/config/policy.hpp>      // algorithm_kind

namespace rlflow {

namespace detail {
//! A string literal as a template argument: Estimator<"grpo">.
template <std::size_t N>
struct estimator_name {
  char chars[N]{};
  constexpr estimator_name(char const (&s)[N]) {  // NOLINT: implicit by design
    for (std::size_t i = 0; i < N; ++i) chars[i] = s[i];
  }
  constexpr std::string_view view() const { return std::string_view(chars, N - 1); }
};
}  // namespace detail

//! The algorithm option of the estimator table's entry called Name (rlflow/config/estimators.hpp):
//! algorithm.adv_estimator fixed at compile time. The named options below derive from it.
template <detail::estimator_name Name>
struct Estimator {
  static_assert(has_estimator(Name.view()),
                "rlflow::Estimator<name>: no advantage estimator has this name; use a name of the table in "
                "rlflow/config/estimators.hpp (RLFLOW_ADV_ESTIMATORS)");
  using option_kind = algorithm_kind;
  static constexpr estimator_info info = estimator_of(Name.view());
  static constexpr const char* name = info.type_name.data();         //!< the rlflow:: type name, e.g. "GRPO"
  static constexpr const char* adv_estimator = info.name.data();     //!< algorithm.adv_estimator, e.g. "grpo"
  static constexpr bool needs_critic = info.needs_critic;
};

//! One named option per table entry, its Type in X(name, Type, ...): rlflow::GRPO (grpo),
//! rlflow::PPO (gae), rlflow::RLOO (rloo), ... Each is a struct, so diagnostics name it
//! (rlflow::GRPO, not Estimator<...>); the entry's doc says what it computes.
#define RLFLOW_DETAIL_ESTIMATOR_TYPE(n, Type, ...) \
  struct Type : Estimator<#n> {};
RLFLOW_ADV_ESTIMATORS(RLFLOW_DETAIL_ESTIMATOR_TYPE)
#undef RLFLOW_DETAIL_ESTIMATOR_TYPE

//! The estimator is the configuration's algorithm.adv_estimator, as in verl: any name of the
//! estimator table (needs_critic ones only with a critic role; needs_greedy_baseline adds the
//! greedy rollout). The type-named options are the same algorithms fixed at compile time.
struct FromConfig {
  using option_kind = algorithm_kind;
  static constexpr const char* name = "FromConfig";
  static constexpr const char* adv_estimator = nullptr;  //!< read from algorithm.adv_estimator
  static constexpr bool needs_critic = false;             //!< needs_critic estimators need one: checked at start-up
};

}  // namespace rlflow
