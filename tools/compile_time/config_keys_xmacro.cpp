// tools/compile_time/config_keys_xmacro.cpp: the configuration key table as rlflow builds it (the
// RLFLOW_TRAINER_CONFIG_KEYS X-macro list: path, choices, help and a getter per key); compare with
// config_keys_hana.cpp (the same paths by Boost.Hana reflection). Prints every dotted key path,
// sorted, so the two outputs diff.
#include <rlflow/trainer_config/keys.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  std::vector<std::string> paths;
  for (auto const& k : rlflow::detail::config_keys) paths.emplace_back(k.name);
  std::sort(paths.begin(), paths.end());
  for (auto const& p : paths) std::printf("%s\n", p.c_str());
}
