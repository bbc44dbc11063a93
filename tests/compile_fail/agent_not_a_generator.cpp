// build error: generator_ref: the type needs generate\(std::string const& request_id, std::vector<std::int32_t> const& prompt_ids, engine::SamplingParams const&\) returning rlflow::agent::GenerateOutput
// error count: 1
#include <rlflow/agent/agent_loop.hpp>
struct NotAGenerator {  // returns the ids only
  std::vector<std::int32_t> generate(std::string const&, std::vector<std::int32_t> const& p, rlflow::engine::SamplingParams const&) { return p; }
};
int main() {
  NotAGenerator g;
  auto f = rlflow::agent::generator_ref(g);
  return f ? 0 : 1;
}
