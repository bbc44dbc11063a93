// rlflow/trainer/files.hpp: the files a Trainer(cfg) reads before its workers start
// (verl's path): the policy from actor_rollout_ref.model.path (a Hugging Face folder of GPT-2 or
// the Llama family), its tokenizer and chat template, the critic's trunk from critic.model.path, and the prompt datasets of
// data.train_files / data.val_files (data_files.hpp). Every error comes before any work.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <rlflow/data/data.hpp>                 // PromptDataset
#include <rlflow/data/chat_template.hpp>        // HfChatTemplate (a folder's Jinja chat_template)
#include <rlflow/data/data_files.hpp>           // load_prompt_files, parse_file_list, ChatTemplate
#include <rlflow/core/error.hpp>                // config_error, msg
#include <rlflow/model/hf_tokenizer.hpp>   // load_tokenizer (tokenizer.json or vocab.json + merges.txt)
#include <rlflow/config/device_memory_estimate.hpp>  // check_host_memory
#include <rlflow/model/hf_folder.hpp>      // read_model_config, load_model_weights
#include <rlflow/model/tokenizer.hpp>      // model::Tokenizer
#include <rlflow/roles/setup.hpp>          // roles::RoleSetup
#include <rlflow/config/trainer_config.hpp>       // TrainerConfig

namespace rlflow::detail {

//! What load_trainer_files read: the roles' models (and initial weights), the tokenizer, the
//! training prompts and the validation prompts (data.val_files, if set).
struct TrainerFiles {
  roles::RoleSetup setup;
  std::shared_ptr<model::Tokenizer const> tok;
  PromptDataset train;
  std::optional<PromptDataset> val;
};

//! Reads model.path, the tokenizer and the data files, checking each against the config; the
//! model folder's shape is written into cfg (actor_rollout_ref.model.n_layer / n_head / n_embd).
//! 'has_critic': the critic's trunk is read too. 'console': counts of dropped prompts on stderr.
//! verl: the model and tokenizer of main_ppo.run_ppo, create_rl_dataset.
inline TrainerFiles load_trainer_files(TrainerConfig& cfg, ChatTemplate const& chat_template, bool console, bool has_critic) {
  TrainerFiles out;
  namespace fs = std::filesystem;
  auto const& mc = cfg.actor_rollout_ref.model;
  if (mc.path.empty())
    throw config_error("rlflow::Trainer(cfg): actor_rollout_ref.model.path is empty; set it to a Hugging Face model "
                       "folder (config.json, model.safetensors, tokenizer.json or vocab.json + merges.txt), or build the character-level "
                       "model with Trainer(cfg, dataset, alphabet)");
  if (cfg.data.train_files.empty())
    throw config_error("rlflow::Trainer(cfg): data.train_files is empty; set it to a JSON-lines file in verl's schema "
                       "(docs/quickstart.md, 'Bring your model and data')");
  fs::path const model_dir(std::string(mc.path.view()));
  {
    std::error_code ec;
    if (!fs::is_directory(model_dir, ec))
      throw config_error(msg("rlflow::Trainer(cfg): actor_rollout_ref.model.path=", model_dir.string(),
                             fs::exists(model_dir, ec) ? " is not a folder" : " does not exist",
                             "; set it to a local Hugging Face model folder (config.json, model.safetensors and the "
                             "tokenizer files); rlflow does not download models, so fetch it first (e.g. huggingface-cli "
                             "download Qwen/Qwen2.5-0.5B-Instruct --local-dir DIR)"));
    if (!fs::exists(model_dir / "config.json", ec))
      throw config_error(msg("rlflow::Trainer(cfg): actor_rollout_ref.model.path=", model_dir.string(),
                             " holds no config.json, so it is not a Hugging Face model folder; point it to the folder "
                             "that holds config.json and model.safetensors"));
  }
  fs::path const tok_dir = mc.tokenizer_path.empty() ? model_dir : fs::path(std::string(mc.tokenizer_path.view()));
  auto tok = model::load_tokenizer(tok_dir);
  out.tok = tok;
  roles::RoleSetup setup;
  setup.policy_model = model::hf::read_model_config(model_dir);
  // the folder decides the shape: the config (size checks, checkpoints' saved config) records it
  cfg.actor_rollout_ref.model.n_layer = setup.policy_model.n_layer;
  cfg.actor_rollout_ref.model.n_head = setup.policy_model.n_head;
  cfg.actor_rollout_ref.model.n_embd = setup.policy_model.n_embd;
  cfg.actor_rollout_ref.model.arch = model::arch_name(setup.policy_model.arch);
  setup.policy_model.seed = static_cast<std::uint64_t>(cfg.seed);
  std::int64_t const PR = cfg.data.max_prompt_length + cfg.data.max_response_length;
  if (PR > setup.policy_model.max_seq_len)
    throw config_error(msg("rlflow::Trainer: data.max_prompt_length + data.max_response_length = ", PR, " exceeds the model's ",
                           setup.policy_model.max_seq_len, " positions (n_positions in ", (model_dir / "config.json").string(),
                           "); lower them"));
  if (tok->vocab_size() > setup.policy_model.vocab_size)
    throw config_error(msg("rlflow::Trainer: the tokenizer in ", tok_dir.string(), " has ", tok->vocab_size(),
                           " tokens but the model's vocab_size is ", setup.policy_model.vocab_size,
                           "; use the tokenizer that belongs to the model"));
  // before reading the weights: the workers' engines must fit in host memory
  check_host_memory(cfg, setup.policy_model, host_memory_available(), (model_dir / "config.json").string());
  setup.policy_init = std::make_shared<std::vector<float> const>(model::hf::load_model_weights(model_dir, setup.policy_model));
  if (has_critic) {
    fs::path const critic_dir = cfg.critic.model.path.empty() ? model_dir : fs::path(std::string(cfg.critic.model.path.view()));
    setup.critic_model = model::hf::read_model_config(critic_dir);
    setup.critic_model.value_head = true;
    setup.critic_model.seed = static_cast<std::uint64_t>(cfg.seed) + 1;
    if (PR > setup.critic_model.max_seq_len || tok->vocab_size() > setup.critic_model.vocab_size)
      throw config_error(msg("rlflow::Trainer: the critic model in ", critic_dir.string(), " (", setup.critic_model.max_seq_len,
                             " positions, ", setup.critic_model.vocab_size, " tokens) does not fit the prompts + responses (",
                             PR, ") or the tokenizer (", tok->vocab_size(), " tokens)"));
    setup.critic_init = std::make_shared<std::vector<float> const>(model::hf::load_model_weights(critic_dir, setup.critic_model));
  } else {
    setup.critic_model = setup.policy_model;
    setup.critic_model.value_head = true;
  }
  DataFileOptions o;
  o.prompt_key = std::string(cfg.data.prompt_key.view());
  o.chat_template = chat_template;
  // a folder whose tokenizer_config.json has a Jinja chat_template renders chat prompts with it,
  // as verl does (apply_chat_template with add_generation_prompt); data.chat_template names a
  // built-in one instead
  {
    auto const* hf = dynamic_cast<model::HFTokenizer const*>(tok.get());
    std::string const which(cfg.data.chat_template.view());
    std::shared_ptr<HfChatTemplate const> t;
    if (which != "model") t = std::make_shared<HfChatTemplate const>(HfChatTemplate::named(which));
    else if (hf && !hf->chat_template().empty()) t = std::make_shared<HfChatTemplate const>(hf->chat_template());
    if (t) {
      std::string const bos = hf ? hf->config().bos_token : std::string(), eos = hf ? hf->config().eos_token : std::string();
      o.render_messages = [t, bos, eos](nlohmann::json const& m) {
        return t->render(m, nlohmann::json(), true, nlohmann::json(), bos, eos);
      };
    }
  }
  o.max_prompt_length = cfg.data.max_prompt_length;
  o.filter_overlong_prompts = cfg.data.filter_overlong_prompts;
  o.prompt_tokens = [tok](std::string const& s) {  // as make_prompt_batch feeds it: BOS first unless none or already there
    auto const ids = tok->encode(s);
    bool const bos = tok->bos_id() >= 0 && (ids.empty() || ids.front() != tok->bos_id());
    return static_cast<std::int64_t>(ids.size()) + (bos ? 1 : 0);
  };
  auto train = load_prompt_files(parse_file_list(cfg.data.train_files.view()), o);
  out.train = PromptDataset(std::move(train.items), cfg.data.shuffle, static_cast<std::uint64_t>(cfg.data.seed));
  if (console && train.filtered_overlong > 0)
    std::fprintf(stderr, "rlflow: %lld of %lld training prompts are longer than data.max_prompt_length=%lld and were dropped\n",
                 static_cast<long long>(train.filtered_overlong), static_cast<long long>(train.rows_read),
                 static_cast<long long>(cfg.data.max_prompt_length));
  if (!cfg.data.val_files.empty()) {
    auto val = load_prompt_files(parse_file_list(cfg.data.val_files.view()), o);
    out.val.emplace(std::move(val.items), /*shuffle=*/false, 0);
    if (cfg.data.truncation.view() == "error")  // as check_prompts does for the training set: never a silent cut
      for (std::int64_t i = 0; i < out.val->size(); ++i)
        if (std::int64_t const len = o.prompt_tokens((*out.val)[i].prompt); len > cfg.data.max_prompt_length)
          throw config_error(msg("rlflow::Trainer: validation prompt ", i, " has ", len, " tokens (BOS included), longer than "
                                 "data.max_prompt_length=", cfg.data.max_prompt_length, "; raise it, set "
                                 "data.filter_overlong_prompts=true, or data.truncation=left or right"));
    if (console && val.filtered_overlong > 0)
      std::fprintf(stderr, "rlflow: %lld of %lld validation prompts are longer than data.max_prompt_length=%lld and were dropped\n",
                   static_cast<long long>(val.filtered_overlong), static_cast<long long>(val.rows_read),
                   static_cast<long long>(cfg.data.max_prompt_length));
  }
  out.setup = std::move(setup);
  return out;
}

}  // namespace rlflow::detail
