// rlflow/trainer_config/parse.hpp: reading and writing a configuration: key lookup with "did you mean", value
// parsing, set/get, overrides, YAML/JSON files, JSON dumping, the command line (from_args,
// --help), interpolation and the generated key reference.
// Part of rlflow/config/trainer_config.hpp (include that one).
#pragma once
#include <rlflow/trainer_config/keys.hpp>
#include <algorithm>     // std::clamp
#include <charconv>      // std::from_chars
#include <cmath>         // std::isfinite
#include <cstdlib>       // std::strtod
#include <filesystem>    // is_directory (--config on a folder)
#include <fstream>       // config files
#include <iomanip>       // std::setw in help text
#include <sstream>       // number formatting, file reading
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>        // JSON loading and dumping

#include <rlflow/detail/yaml.hpp>  // parse_yaml_flat, flat_entry
#include <rlflow/core/config.hpp>       // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>        // config_error, format_error, io_error, msg
#include <rlflow/config/run_main.hpp>     // help_requested (from_args on --help)

namespace rlflow {

namespace detail {

//! Levenshtein distance (insert, delete, substitute = 1).
RLFLOW_DECL std::size_t edit_distance(std::string_view a, std::string_view b);

//! The candidate closest to 'word' (a key that ends with '.word' wins outright).
RLFLOW_DECL std::string closest(std::string_view word, std::vector<std::string_view> const& candidates);

RLFLOW_DECL std::vector<std::string_view> key_names();

RLFLOW_DECL std::vector<std::string_view> split_choices(std::string_view choices);

RLFLOW_DECL key_info const* find_key(std::string_view name);

//! The key or a config_error; it suggests a key only when one is close: a key whose last parts are
//! 'name' (a bare 'train_batch_size'), or a key of the same section within a small edit distance.
RLFLOW_DECL key_info const& require_key(std::string_view name, std::string_view where = "");

//! The suggestion require_key makes for an unknown 'name' among the rlflow and verl keys; empty: none close.
RLFLOW_DECL std::string key_suggestion(std::string_view name);

//! Sets 'name' to a value: a key of the table (store), or a verl key of verl_key_rules (an alias
//! stores into its rlflow key; a no-effect key is remembered for the start-up notice; a rejected
//! key is an error naming why and the rlflow equivalent, unless the value is verl's default).
//! 'where' is the message prefix store takes ("" or "file:line: ").
RLFLOW_DECL void apply_key(TrainerConfig& cfg, std::string_view name, std::string_view text, bool quoted, bool is_null,
                           std::vector<std::string> const* list_items, std::string_view where);

//! A value as verl writes it, for the comparison with verl's default: lower case, unquoted, null /
//! None / ~ as "null", numbers in shortest form, lists as [a, b].
RLFLOW_DECL std::string verl_value_text(std::string_view text, bool quoted, bool is_null, std::vector<std::string> const* items);

//! One line per verl key of 'cfg' that has no effect here: "KEY has no effect here: WHY".
RLFLOW_DECL std::vector<std::string> verl_key_notices(TrainerConfig const& cfg);

//! verl's keys outside the key table as Markdown rows: | `key` | what rlflow does | (docs/configuration.md).
RLFLOW_DECL std::string verl_keys_markdown();

//! Formats a double the way the docs and messages show it (shortest round-trip form).
RLFLOW_DECL std::string format_number(double v);

RLFLOW_DECL std::string lower(std::string_view s);

RLFLOW_DECL bool is_null_text(std::string_view v);

RLFLOW_DECL std::string_view trim(std::string_view s);

RLFLOW_DECL std::int64_t parse_integer(key_info const& k, std::string_view v, std::string_view where);

RLFLOW_DECL double parse_number(key_info const& k, std::string_view v, std::string_view where);

RLFLOW_DECL bool parse_boolean(key_info const& k, std::string_view v, std::string_view where);

//! Splits "[a, 'b', c]" / "a,b" into items (quotes stripped).
RLFLOW_DECL std::vector<std::string> parse_list_text(std::string_view v);

RLFLOW_DECL void check_choice(key_info const& k, std::string_view v, std::string_view where);

//! Stores a scalar (or list) value into the key's field, parsing by the key's kind.
RLFLOW_DECL void store(TrainerConfig& cfg, key_info const& k, std::string_view text, bool quoted, bool is_null,
                  std::vector<std::string> const* list_items, std::string_view where);

//! The key's value as text: numbers in shortest form, null as "null", lists as [a, b].
RLFLOW_DECL std::string value_text(TrainerConfig const& cfg, key_info const& k);

//! The key's value as JSON.
RLFLOW_DECL nlohmann::json value_json(TrainerConfig const& cfg, key_info const& k);

//! Flattens a JSON object into dotted entries.
RLFLOW_DECL void flatten_json(nlohmann::json const& j, std::string const& prefix, std::vector<flat_entry>& out,
                         std::string_view source, int depth = 0);

RLFLOW_DECL void apply_entries(TrainerConfig& cfg, std::vector<flat_entry> const& entries, std::string_view source);

RLFLOW_DECL std::string read_text_file(std::string const& path);

}  // namespace detail

// ---- TrainerConfig members: defined in impl/parse.ipp -------------------------------------------

//! What a command line asked for: the config plus the flags rlflow programs understand.
struct CommandLine {
  TrainerConfig config{};
  bool help = false;                      //!< --help / -h: print config_help() and stop
  bool json = false;                      //!< --json: machine-readable output (planner)
  std::vector<std::string> config_files;  //!< --config FILE, in order
  std::vector<std::string> overrides;     //!< key=value, in order
};

//! Parses '--config FILE' / '--config=FILE' (applied first, in order), 'key=value' overrides
//! (then, in order), '--help', '--json'. Anything else throws config_error with the fix.
//! 'defaults' is the configuration the files and overrides are applied to.
RLFLOW_DECL CommandLine parse_command_line(int argc, char const* const* argv, TrainerConfig const& defaults = TrainerConfig{});

//! Replaces '${dotted.key}' in 'text' by that key's value (verl's interpolation, e.g. in
//! trainer.default_local_dir). An unknown key throws config_error naming the closest key.
RLFLOW_DECL std::string interpolate(TrainerConfig const& cfg, std::string_view text);

//! The key reference as Markdown table rows: | `key` | `default` | type | choices | help |
//! (docs/configuration.md embeds it; a test keeps the two in sync).
RLFLOW_DECL std::string config_reference_markdown();

namespace detail {
//! Keys the colocated Trainer accepts (for verl compatibility) but does not act on, with what
//! rlflow does instead. --help marks them; Trainer rejects a non-default value of most (or
//! warns where ignoring it is harmless). Remove a row when the key becomes real.
struct unhonoured_key {
  std::string_view key;
  std::string_view instead;
};
inline constexpr unhonoured_key trainer_unhonoured_keys[] = {
    {"actor_rollout_ref.model.vocab_size", "the built-in GPT's vocabulary is the tokenizer's"},
    {"trainer.device", "the Trainer's Backend option decides the device"},
};
RLFLOW_DECL std::string_view unhonoured_note(std::string_view key);
}  // namespace detail

//! Every key with its type, default (taken from 'defaults'), choices and help: the text of --help.
RLFLOW_DECL std::string config_help(TrainerConfig const& defaults);

//! config_help of verl's defaults.
inline std::string config_help() { return config_help(TrainerConfig{}); }

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/trainer_config/impl/parse.ipp>
#endif
