// rlflow/kernels/kernels.hpp: umbrella of the RL kernels (advantage estimators, policy / value
// losses, KL, loss aggregation, entropy, masked reductions) on cpu::par and cuda::par.
// The CUDA implementations are included only when this translation unit is compiled by nvcc.
#pragma once
#include <rlflow/kernels/options.hpp>
#include <rlflow/kernels/masked.hpp>
#include <rlflow/kernels/agg_loss.hpp>
#include <rlflow/kernels/advantage.hpp>
#include <rlflow/kernels/rollout_corr.hpp>
#include <rlflow/kernels/policy_loss.hpp>
#include <rlflow/kernels/value_loss.hpp>
#include <rlflow/kernels/kl.hpp>
#include <rlflow/kernels/entropy.hpp>
