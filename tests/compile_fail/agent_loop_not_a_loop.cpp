// build error: AgentLoopRegistry::add: the loop type needs a default constructor and 'AgentLoopOutput run\(AgentContext const&, AgentRow const&, engine::SamplingParams const&\)'
// error count: 1
#include <rlflow/agent/agent_loop.hpp>
struct NotALoop {  // run() takes the sampling parameters by value and returns a string
  std::string run(rlflow::agent::AgentContext const&, rlflow::agent::AgentRow const&, rlflow::engine::SamplingParams) { return {}; }
};
int main() {
  auto r = rlflow::agent::AgentLoopRegistry::builtin();
  r.add<NotALoop>("mine");
}
