// rlflow/config/policy.hpp: the compile-time options of a Trainer that are not algorithms or roles:
// placement (Colocate<N>, SeparateAsync), parallel layout (TP<N>) and backend (Backend<Tag>).
// Each option opts into its kind through a nested 'option_kind'; Trainer<...> sorts them.
// Does not run anything; see trainer.hpp.
#pragma once
#include <rlflow/core/backend.hpp>  // cpu::tag, cuda::tag

namespace rlflow {

struct placement_kind {};  //!< Colocate<N>, SeparateAsync
struct parallel_kind {};   //!< TP<N>
struct backend_kind {};    //!< Backend<Tag>
struct algorithm_kind {};  //!< GRPO, PPO, RLOO, ..., FromConfig (algorithm.hpp)

//! Colocated placement: every role shares one pool; each device hosts up to N role workers
//! (each asks for 1/N of a device) fused into one worker per device. verl: a single
//! 'global_pool' with ResourcePoolManager(max_colocate_count=N) and create_colocated_worker_cls.
template <int N>
struct Colocate {
  static_assert(N >= 1, "rlflow::Colocate<N>: N (role workers per device, verl max_colocate_count) must be at least 1");
  using option_kind = placement_kind;
  static constexpr int max_colocate_count = N;
  static constexpr bool is_async = false;
  static constexpr const char* name = "Colocate";
};

//! Separate placement with asynchronous rollout: the actor (+ reference, + critic, + reward) fused
//! on the trainer pool (trainer.nnodes x n_gpus_per_node devices, up to 3 roles per device), the
//! rollout replicas on a standalone pool (actor_rollout_ref.rollout.nnodes x n_gpus_per_node),
//! weights synced across pools after every step, samples at most K versions behind
//! (trainer_async.hpp). verl: trainer.v1.trainer_mode=separate_async.
struct SeparateAsync {
  using option_kind = placement_kind;
  static constexpr int max_colocate_count = 3;  //!< of the trainer pool
  static constexpr bool is_async = true;
  static constexpr const char* name = "SeparateAsync";
};

//! Tensor-parallel degree of rollout and training. verl: rollout.tensor_model_parallel_size.
template <int N>
struct TP {
  static_assert(N >= 1 && N <= 8 && (N & (N - 1)) == 0, "rlflow::TP<N>: N must be a power of two between 1 and 8");
  using option_kind = parallel_kind;
  static constexpr int size = N;
};

//! Chooses the execution system of the trainer's kernels and engines (cpu::tag or cuda::tag).
template <class Tag>
struct Backend {
  using option_kind = backend_kind;
  using system = Tag;
};

}  // namespace rlflow
