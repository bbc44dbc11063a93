// tools/plan_page/plan_page_wasm.cpp: the planner page's WebAssembly module (emscripten). Exports
// two C functions taking and returning JSON text; the page (planner.js) calls them through
// Module.ccall. All arithmetic and every check is plan_page.hpp -> planner.hpp, the code of
// 'rlflow_plan'.
#include <string>

#include <emscripten/emscripten.h>

#include "plan_page.hpp"

namespace {
std::string result;  // returned pointers stay valid until the next call (the page copies them at once)

std::vector<std::string> keys_of(char const* keys_json) {
  auto const j = nlohmann::json::parse(keys_json ? keys_json : "[]", nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> out;
  if (j.is_array())
    for (auto const& k : j)
      if (k.is_string()) out.push_back(k.get<std::string>());
  return out;
}
}  // namespace

extern "C" {

//! rlflow_page_plan("key=value\nkey=value...", "[\"key\", ...]", "qwen2.5-0.5b") ->
//! rlflow::plan_page::evaluate as JSON text (the memory estimate for the named published model).
EMSCRIPTEN_KEEPALIVE char const* rlflow_page_plan(char const* args, char const* keys_json, char const* model) {
  result = rlflow::plan_page::evaluate(args ? args : "", keys_of(keys_json), model ? model : "").dump();
  return result.c_str();
}

//! rlflow_page_models() -> rlflow::plan_page::models as JSON text.
EMSCRIPTEN_KEEPALIVE char const* rlflow_page_models() {
  result = rlflow::plan_page::models().dump();
  return result.c_str();
}

//! rlflow_page_keys("[\"key\", ...]") -> rlflow::plan_page::key_info as JSON text, or {"error": ...}.
EMSCRIPTEN_KEEPALIVE char const* rlflow_page_keys(char const* keys_json) {
  try {
    result = rlflow::plan_page::key_info(keys_of(keys_json)).dump();
  } catch (rlflow::error const& e) {
    result = nlohmann::json{{"error", e.what()}}.dump();
  }
  return result.c_str();
}

//! The rlflow version the page was built from.
EMSCRIPTEN_KEEPALIVE char const* rlflow_page_version() { return RLFLOW_PAGE_VERSION; }
}
