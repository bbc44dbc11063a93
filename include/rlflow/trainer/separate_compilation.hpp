// rlflow/trainer/separate_compilation.hpp: with RLFLOW_SEPARATE_COMPILATION defined, declares the
// common instantiations as extern templates (explicit instantiation declarations), so that a
// program's translation units do not compile them again: the CPU roles at rollout TP 1 and 2, the
// async modes' rollout workers (in-process), and nlohmann::json's value, serializer and parser
// types. Their definitions are compiled once, in the compiled part: rlflow/impl/src.hpp, built by
// the CMake target rlflow::rlflow_compiled (or by one .cpp of the program that includes
// <rlflow/impl/src.hpp>; docs/development.md, "Compile time"). Without the macro (the default)
// this header declares nothing and rlflow stays header-only.
#pragma once
#include <nlohmann/json.hpp>

#include <rlflow/core/backend.hpp>
#include <rlflow/dispatch/in_process.hpp>
#include <rlflow/roles/actor_rollout_ref.hpp>
#include <rlflow/trainer/trainer_async.hpp>
#include <rlflow/dispatch/worker_group.hpp>

// RLFLOW_EXTERN_TEMPLATE: 'extern template' in a program's translation units, empty (an explicit
// instantiation definition) in the compiled part.
#if defined(RLFLOW_SEPARATE_COMPILATION) && !defined(RLFLOW_COMPILED_PART)
#define RLFLOW_EXTERN_TEMPLATE extern template
#elif defined(RLFLOW_COMPILED_PART)
#define RLFLOW_EXTERN_TEMPLATE template
#endif

#if defined(RLFLOW_EXTERN_TEMPLATE)
namespace rlflow::detail::sc {
using json_string_input = nlohmann::detail::iterator_input_adapter<std::string::const_iterator>;
using json_vector_input = nlohmann::detail::iterator_input_adapter<std::vector<char>::iterator>;
using json_cstr_input = nlohmann::detail::iterator_input_adapter<char const*>;
}  // namespace rlflow::detail::sc

RLFLOW_EXTERN_TEMPLATE class nlohmann::basic_json<>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::basic_json<nlohmann::ordered_map>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::detail::serializer<nlohmann::json>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::detail::serializer<nlohmann::ordered_json>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::detail::lexer<nlohmann::json, rlflow::detail::sc::json_string_input>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::detail::lexer<nlohmann::json, rlflow::detail::sc::json_vector_input>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::detail::lexer<nlohmann::json, rlflow::detail::sc::json_cstr_input>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::detail::parser<nlohmann::json, rlflow::detail::sc::json_string_input>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::detail::parser<nlohmann::json, rlflow::detail::sc::json_vector_input>;
RLFLOW_EXTERN_TEMPLATE class nlohmann::detail::parser<nlohmann::json, rlflow::detail::sc::json_cstr_input>;

RLFLOW_EXTERN_TEMPLATE class rlflow::roles::BasicActorRolloutRef<rlflow::cpu::tag, 1>;
RLFLOW_EXTERN_TEMPLATE class rlflow::roles::BasicActorRolloutRef<rlflow::cpu::tag, 2>;
RLFLOW_EXTERN_TEMPLATE class rlflow::roles::StandaloneRollout<rlflow::cpu::tag, 1>;
RLFLOW_EXTERN_TEMPLATE class rlflow::roles::StandaloneRollout<rlflow::cpu::tag, 2>;
RLFLOW_EXTERN_TEMPLATE class rlflow::WorkerGroup<rlflow::roles::StandaloneRollout<rlflow::cpu::tag, 1>, rlflow::dispatch::InProcess>;
RLFLOW_EXTERN_TEMPLATE class rlflow::WorkerGroup<rlflow::roles::StandaloneRollout<rlflow::cpu::tag, 2>, rlflow::dispatch::InProcess>;
RLFLOW_EXTERN_TEMPLATE class rlflow::AsyncRollout<rlflow::cpu::tag, 1, rlflow::dispatch::InProcess>;
RLFLOW_EXTERN_TEMPLATE class rlflow::AsyncRollout<rlflow::cpu::tag, 2, rlflow::dispatch::InProcess>;
#undef RLFLOW_EXTERN_TEMPLATE
#endif
