// rlflow/config/config_limits.hpp: upper bounds on every size a Trainer derives from its configuration,
// checked before anything is allocated. Config integers are int64 but the built-in GPT's shape
// is int (a 2^32 + k layer count would silently train k layers); products such as epochs x
// batches, batch x samples x length, or the scheduler's update count can overflow int64; and a
// model or batch larger than the machine's memory would end in std::bad_alloc naming nothing.
// check_size_limits throws config_error naming the key(s), the value(s), the estimated bytes and
// the fix. Does not check the start-up constraints of validate() (see trainer_config.hpp).
#pragma once
#include <algorithm>  // std::max
#include <cstdint>
#include <cstdio>     // snprintf
#include <limits>
#include <string>

#include <unistd.h>  // sysconf

#include <rlflow/core/config.hpp>          // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>           // config_error, msg
#include <rlflow/config/trainer_config.hpp>  // TrainerConfig

namespace rlflow {

//! Physical memory of this machine in bytes (0 when unknown: the memory bounds are skipped).
RLFLOW_DECL std::uint64_t physical_memory_bytes();

namespace detail {
RLFLOW_DECL std::string gib(long double bytes);
RLFLOW_DECL std::string bytes_text(long double bytes);
}  // namespace detail

//! The sizes a Trainer derives from 'cfg' (with the task's vocabulary 'vocab', a dataset of
//! 'prompts', a critic or not): every int-narrowed value fits an int, no product overflows int64,
//! and no single allocation class (model state, batch, logits, activations) nor their sum exceeds
//! 'memory_bytes' (0: no memory bound). Throws config_error: key, value, estimate in bytes, fix.
//! 'model_on_device': the actor, rollout and reference engines live on a GPU (Backend<cuda::tag>),
//! whose own check (check_device_memory) bounds them and the logits and activations; then host
//! memory holds the batch and, with a critic, the critic's state (its engine runs on the CPU).
RLFLOW_DECL void check_size_limits(TrainerConfig const& cfg, std::int64_t vocab, std::int64_t prompts, bool critic,
                              std::uint64_t memory_bytes = physical_memory_bytes(), bool model_on_device = false);

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/config/impl/config_limits.ipp>
#endif
