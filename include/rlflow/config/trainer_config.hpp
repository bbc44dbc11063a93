// rlflow/config/trainer_config.hpp: the runtime configuration of a Trainer, with verl's key names and
// defaults (data.*, actor_rollout_ref.*, critic.*, reward.*, algorithm.*, trainer.*, seed, ...).
// Defines TrainerConfig (a structural literal type: usable as a constexpr value and as a template
// argument), the key table that drives set/get, YAML/JSON loading, JSON dumping, --help and the
// reference doc, the start-up validation (validate/check, verl's start-up asserts) and the
// compile-time check checked_config<cfg>. Does not compute the resource plan (see planner.hpp).
//
// This umbrella includes the parts, one concept per header (include this one):
//   trainer_config/values.hpp    fixed_string, nullable, string_list (constexpr value types)
//   trainer_config/schema.hpp    the config structs and TrainerConfig, with verl's defaults
//   trainer_config/keys.hpp      the key table (RLFLOW_TRAINER_CONFIG_KEYS) and choice checks
//   trainer_config/parse.hpp     set/get, overrides, YAML/JSON, the command line, --help
//   trainer_config/validate.hpp  start-up checks, explain, validate/check, checked_config<cfg>
#pragma once
#include <rlflow/trainer_config/values.hpp>
#include <rlflow/trainer_config/schema.hpp>
#include <rlflow/trainer_config/keys.hpp>
#include <rlflow/trainer_config/parse.hpp>
#include <rlflow/trainer_config/validate.hpp>
