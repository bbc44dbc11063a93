// rlflow/trainer/trainer_async.hpp: the machinery of the asynchronous roads of the Trainer (verl v1's
// trainer_separate_async.py and trainer_colocate_async.py), one concept per header:
//   roles/standalone_rollout.hpp  roles::StandaloneRollout (the rollout worker), AsyncHooks, RolloutControl
//   checkpoint_engine.hpp         CheckpointEngine: the trainer's weights to the rollout workers
//   replay_buffer.hpp             RolloutBatch, ReplayBuffer, save_replay_buffer / load_replay_buffer
//   async_rollout.hpp             AsyncRollout: the producer, within a staleness bound
// trainer.hpp takes its batches through trainer/rollout_source.hpp; docs/trainer.md explains it.
#pragma once
#include <rlflow/roles/standalone_rollout.hpp>
#include <rlflow/trainer/checkpoint_engine.hpp>
#include <rlflow/trainer/replay_buffer.hpp>
#include <rlflow/trainer/async_rollout.hpp>
