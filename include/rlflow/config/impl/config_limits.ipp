// rlflow/config/impl/config_limits.ipp: the bodies of the non-template functions declared in rlflow/config/config_limits.hpp (see RLFLOW_DECL in rlflow/core/config.hpp).
#pragma once

namespace rlflow {

RLFLOW_DECL std::uint64_t physical_memory_bytes() {
  long const pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

namespace detail {

RLFLOW_DECL std::string gib(long double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3Lg GiB", bytes / (1024.0L * 1024.0L * 1024.0L));
  return buf;
}

RLFLOW_DECL std::string bytes_text(long double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4Lg", bytes);
  return std::string(buf) + " bytes (" + gib(bytes) + ")";
}

}  // namespace detail


RLFLOW_DECL void check_size_limits(TrainerConfig const& cfg, std::int64_t vocab, std::int64_t prompts, bool critic,
                              std::uint64_t memory_bytes, bool model_on_device) {
  constexpr std::int64_t int_max = std::numeric_limits<int>::max();
  auto const& m = cfg.actor_rollout_ref.model;
  auto const& a = cfg.actor_rollout_ref.actor;
  auto const& d = cfg.data;
  auto const fits_int = [&](const char* key, std::int64_t v) {
    if (v > int_max)
      throw config_error(msg("rlflow::Trainer: ", key, "=", v, " exceeds ", int_max,
                             ", the largest size the built-in GPT holds (an int); use a value below ", int_max,
                             " (and one that fits in memory)"));
  };
  fits_int("actor_rollout_ref.model.n_layer", m.n_layer);
  fits_int("actor_rollout_ref.model.n_head", m.n_head);
  fits_int("actor_rollout_ref.model.n_embd", m.n_embd);
  fits_int("actor_rollout_ref.model.vocab_size", m.vocab_size);
  fits_int("data.max_prompt_length", d.max_prompt_length);
  fits_int("data.max_response_length", d.max_response_length);
  fits_int("data.max_prompt_length + data.max_response_length", d.max_prompt_length + d.max_response_length);
  fits_int("trainer.n_gpus_per_node", cfg.trainer.n_gpus_per_node);
  fits_int("trainer.nnodes", cfg.trainer.nnodes);

  auto const mul = [](std::int64_t x, std::int64_t y, std::int64_t& out) { return !__builtin_mul_overflow(x, y, &out); };
  std::int64_t world = 0, rows = 0, steps = 0, updates = 0, tmp = 0;
  if (!mul(cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node, world) || world > int_max)
    throw config_error(msg("rlflow::Trainer: trainer.nnodes=", cfg.trainer.nnodes, " x trainer.n_gpus_per_node=",
                           cfg.trainer.n_gpus_per_node, " workers overflow; use fewer devices"));
  if (!mul(d.train_batch_size, cfg.actor_rollout_ref.rollout.n, rows) || !mul(rows, d.max_prompt_length + d.max_response_length, tmp))
    throw config_error(msg("rlflow::Trainer: data.train_batch_size=", d.train_batch_size, " x actor_rollout_ref.rollout.n=",
                           cfg.actor_rollout_ref.rollout.n, " x (data.max_prompt_length + data.max_response_length)=",
                           d.max_prompt_length + d.max_response_length,
                           " tokens per step overflow int64; lower data.train_batch_size or rollout.n"));
  std::int64_t const per_epoch = d.train_batch_size > 0 ? prompts / d.train_batch_size : 0;
  if (!cfg.trainer.total_training_steps.has_value && !mul(per_epoch, cfg.trainer.total_epochs, steps))
    throw config_error(msg("rlflow::Trainer: trainer.total_epochs=", cfg.trainer.total_epochs, " x ", per_epoch,
                           " batches per epoch overflow int64; set trainer.total_training_steps or fewer epochs"));
  if (cfg.trainer.total_training_steps.has_value) steps = cfg.trainer.total_training_steps.stored;
  std::int64_t const per_step = a.ppo_mini_batch_size > 0 ? d.train_batch_size / a.ppo_mini_batch_size : 0;
  if (!mul(per_step, a.ppo_epochs, tmp) || !mul(tmp, steps, updates))
    throw config_error(msg("rlflow::Trainer: the optimizer steps of the run (", steps, " steps x ", per_step,
                           " mini-batches x actor_rollout_ref.actor.ppo_epochs=", a.ppo_epochs,
                           ") overflow int64; lower trainer.total_training_steps, trainer.total_epochs or ppo_epochs"));
  if (critic) {
    std::int64_t const cm = cfg.critic_ppo_mini_batch_size();
    std::int64_t const cper = cm > 0 ? d.train_batch_size / cm : 0;
    if (!mul(cper, cfg.critic_ppo_epochs(), tmp) || !mul(tmp, steps, updates))
      throw config_error(msg("rlflow::Trainer: the critic's optimizer steps (", steps, " steps x ", cper,
                             " mini-batches x critic.ppo_epochs=", cfg.critic_ppo_epochs(),
                             ") overflow int64; lower trainer.total_training_steps or critic.ppo_epochs"));
  }
  if (memory_bytes == 0) return;

  // Memory, estimated from below in long double (no overflow): what the run holds at once.
  long double const V = static_cast<long double>(vocab), C = static_cast<long double>(m.n_embd),
                    L = static_cast<long double>(m.n_layer),
                    T = static_cast<long double>(d.max_prompt_length + d.max_response_length),
                    W = static_cast<long double>(world), mem = static_cast<long double>(memory_bytes);
  long double const params = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
  // per worker: actor (weights, gradients, two AdamW moments), rollout/reference copies, critic (4 more)
  long double const model_bytes = 4.0L * params * W * ((model_on_device ? 0 : 4 + 2) + (critic ? 4 : 0));
  long double const batch_bytes = 4.0L * static_cast<long double>(rows) * T * 16;  // ~16 (rows, T) columns
  std::int64_t micro = a.ppo_micro_batch_size_per_gpu.value_or(1);
  micro = std::max(micro, cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu.value_or(1));
  long double micro_tokens = static_cast<long double>(micro) * T;
  if (a.use_dynamic_bsz) micro_tokens = static_cast<long double>(a.ppo_max_token_len_per_gpu);
  // logits (logits, softmax, gradient) and saved activations: on the device with model_on_device
  long double const logits_bytes = model_on_device ? 0.0L : 4.0L * micro_tokens * V * 3 * W;
  // (about 24 C floats per token and layer; with activation checkpointing each layer's input, C,
  // plus one layer's)
  bool const ckpt = cfg.actor_rollout_ref.model.enable_gradient_checkpointing;
  long double const act_bytes = model_on_device ? 0.0L : 4.0L * micro_tokens * C * (ckpt ? L + 24 : L * 24) * W;
  struct Item {
    long double bytes;
    std::string what, fix;
  };
  Item const items[] = {
      {model_bytes,
       msg("the model state (actor_rollout_ref.model.n_layer=", m.n_layer, ", n_embd=", m.n_embd, ", vocabulary ", vocab,
           ", data.max_prompt_length + data.max_response_length=", d.max_prompt_length + d.max_response_length,
           " positions: about ", static_cast<double>(params),
           " parameters, x", (model_on_device ? 0 : 6) + (critic ? 4 : 0), " copies on each of ", world, " workers)"),
       "lower actor_rollout_ref.model.n_layer / n_embd, the sequence lengths or the worker count"},
      {batch_bytes,
       msg("the step's batch (data.train_batch_size=", d.train_batch_size, " x actor_rollout_ref.rollout.n=",
           cfg.actor_rollout_ref.rollout.n, " rows x data.max_prompt_length + data.max_response_length=",
           d.max_prompt_length + d.max_response_length, " tokens)"),
       "lower data.train_batch_size, rollout.n or the lengths"},
      {logits_bytes,
       msg("the logits of one micro-batch (", a.use_dynamic_bsz ? "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=" : "micro-batch rows=",
           a.use_dynamic_bsz ? a.ppo_max_token_len_per_gpu : micro, " x vocabulary ", vocab, " on each of ", world, " workers)"),
       "lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu / rollout.log_prob_micro_batch_size_per_gpu"},
      {act_bytes,
       msg("the activations of one micro-batch (", static_cast<double>(micro_tokens),
           " tokens: micro-batch rows x (data.max_prompt_length + data.max_response_length); x n_embd=", m.n_embd,
           " x n_layer=", m.n_layer, ckpt ? " (checkpointed: each layer's input plus one layer)" : "", " on each of ", world,
           " workers)"),
       ckpt ? "lower the micro-batch sizes or the model size"
            : "lower the micro-batch sizes or the model size, or set actor_rollout_ref.model.enable_gradient_checkpointing=true"},
  };
  long double total = 0;
  for (auto const& it : items) {
    if (it.bytes > mem)
      throw config_error(msg("rlflow::Trainer: ", it.what, " needs about ", detail::bytes_text(it.bytes),
                             ", more than this machine's ", detail::bytes_text(mem), " of memory; ", it.fix));
    total += it.bytes;
  }
  if (total > mem) {
    std::string parts;
    for (auto const& it : items) parts += msg("\n  - ", detail::bytes_text(it.bytes), ": ", it.what);
    throw config_error(msg("rlflow::Trainer: the run needs about ", detail::bytes_text(total), " in all, more than this machine's ",
                           detail::bytes_text(mem), " of memory:", parts, "\nshrink the largest item"));
  }
}

}  // namespace rlflow
