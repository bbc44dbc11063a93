// rlflow/tasks/reward_score.hpp: the score registry behind the default reward role (verl:
// verl/utils/reward_score/__init__.py default_compute_score). A row's 'data_source' names the
// scorer; the project's own tasks ("reverse", "sort": tasks::StringTask; "addition",
// "addition_reversed": tasks::AdditionTask) are built in, and a
// user adds a scorer for another data source at run time with register_score. An unknown data
// source is a key_error naming it and the registered ones. No role here (roles/reward.hpp).
#pragma once
#include <algorithm>  // std::sort
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include <rlflow/core/error.hpp>                // key_error, value_error
#include <rlflow/rewards/gsm8k.hpp>        // gsm8k_compute_score (openai/gsm8k)
#include <rlflow/rewards/math.hpp>         // math_compute_score (lighteval/MATH)
#include <rlflow/tasks/addition.hpp>       // AdditionTask::score
#include <rlflow/tasks/string_tasks.hpp>   // StringTask::score

namespace rlflow::tasks {

//! A scorer: score(response, ground_truth) -> a finite number (verl: compute_score(solution_str,
//! ground_truth)). The response is decoded up to, not including, EOS.
using ScoreFn = std::function<double(std::string_view response, std::string_view ground_truth)>;

//! Data source -> scorer, shared by every trainer of the process; safe to read from worker
//! threads while another thread registers. verl: the if/elif chain of default_compute_score.
class ScoreRegistry {
 public:
  //! The process-wide registry, holding the built-in scorers on first use.
  static ScoreRegistry& global() {
    static ScoreRegistry r;
    return r;
  }

  //! Adds (or, with replace, overrides) the scorer of 'data_source'. Registering a data source
  //! twice without replace is a value_error (two tasks claiming one name is a bug, not a choice).
  void add(std::string data_source, ScoreFn fn, bool replace = false) {
    if (data_source.empty()) throw value_error("rlflow::tasks::register_score: the data source name is empty");
    if (!fn) throw value_error(msg("rlflow::tasks::register_score: empty scorer for data source '", data_source, "'"));
    std::unique_lock lock(mu_);
    auto [it, fresh] = map_.try_emplace(data_source, fn);
    if (!fresh) {
      if (!replace)
        throw value_error(msg("rlflow::tasks::register_score: data source '", data_source,
                              "' already has a scorer; pass replace = true to override it"));
      it->second = std::move(fn);
    }
  }
  //! Removes a scorer (built-ins included); returns whether one was there.
  bool remove(std::string_view data_source) {
    std::unique_lock lock(mu_);
    auto it = map_.find(std::string(data_source));
    if (it == map_.end()) return false;
    map_.erase(it);
    return true;
  }
  bool contains(std::string_view data_source) const {
    std::shared_lock lock(mu_);
    return map_.count(std::string(data_source)) != 0;
  }
  //! The registered data sources, sorted.
  std::vector<std::string> names() const {
    std::shared_lock lock(mu_);
    std::vector<std::string> out;
    for (auto const& kv : map_) out.push_back(kv.first);
    return out;
  }
  //! The scorer of 'data_source' (a copy, so the caller may run it without the lock); key_error
  //! naming the data source and the registered ones when there is none.
  ScoreFn find(std::string_view data_source) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(std::string(data_source));
    if (it != map_.end()) return it->second;
    std::string known;
    for (auto const& kv : map_) known += (known.empty() ? "" : ", ") + kv.first;
    throw key_error(msg("rlflow::tasks::default_compute_score: no scorer for data_source '", data_source,
                        "'; registered data sources: ", known.empty() ? std::string("(none)") : known,
                        "; add one with rlflow::tasks::register_score(\"", data_source,
                        "\", fn) or pass a reward role (rlflow::roles::RuleReward<Score>) to the Trainer"));
  }

 private:
  ScoreRegistry() {
    map_.emplace("reverse", &StringTask::score);
    map_.emplace("sort", &StringTask::score);
    map_.emplace("addition", &AdditionTask::score);
    map_.emplace("addition_reversed", &AdditionTask::score_reversed);
    // verl's default_compute_score: gsm8k.compute_score (strict) and math.compute_score
    map_.emplace("openai/gsm8k", [](std::string_view r, std::string_view g) { return rewards::gsm8k_compute_score(r, g); });
    map_.emplace("lighteval/MATH", [](std::string_view r, std::string_view g) { return rewards::math_compute_score(r, g); });
    map_.emplace("DigitalLearningGmbH/MATH-lighteval",
                 [](std::string_view r, std::string_view g) { return rewards::math_compute_score(r, g); });
  }
  mutable std::shared_mutex mu_;
  std::map<std::string, ScoreFn, std::less<>> map_;
};

//! Registers a scorer for 'data_source' in the global registry (see ScoreRegistry::add).
inline void register_score(std::string data_source, ScoreFn fn, bool replace = false) {
  ScoreRegistry::global().add(std::move(data_source), std::move(fn), replace);
}

//! verl: default_compute_score(data_source, solution_str, ground_truth). Scores one response
//! with the scorer registered for its data source; key_error for an unknown data source.
inline double default_compute_score(std::string_view data_source, std::string_view response, std::string_view ground_truth) {
  return ScoreRegistry::global().find(data_source)(response, ground_truth);
}

}  // namespace rlflow::tasks
