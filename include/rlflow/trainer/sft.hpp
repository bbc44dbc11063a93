// rlflow/trainer/sft.hpp: supervised fine-tuning (SFT) of the policy model, the cold start before
// RL. Defines SftConfig (verl's sft_trainer keys, set as key=value), SftFormat (how a row becomes
// text: a Hugging Face chat template, or the raw prompt), the row-to-tokens functions with their
// loss mask (sft_single_turn, sft_multi_turn, sft_row, load_sft_files) and SftTrainer: token-mean
// cross-entropy over the loss-mask tokens, validation loss, checkpoints in the RL Trainer's format
// (actor.safetensors in global_step_N, so GRPO starts from them with TrainerOptions::init_weights)
// and the Hugging Face export. verl: verl/trainer/fsdp_sft_trainer.py (FSDPSFTTrainer),
// verl/utils/dataset/sft_dataset.py (SFTDataset), multiturn_sft_dataset.py (MultiTurnSFTDataset).
//
// The mask law (the agent loop's): 1 exactly on the tokens the model generates in an assistant
// turn, from after the template's generation prompt up to and including the turn's end-of-turn
// text (the eos token, e.g. <|im_end|>); 0 on the system / user / tool text, the generation
// prompts and what the template writes after the end of turn (Qwen's newline).
#pragma once
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <rlflow/core/error.hpp>               // config_error, format_error, msg
#include <rlflow/core/metrics.hpp>             // Metrics, MetricsLogger
#include <rlflow/core/tensor.hpp>              // Tensor
#include <rlflow/data/chat_template.hpp>       // HfChatTemplate
#include <rlflow/data/data_files.hpp>          // parse_file_list, read_rows
#include <rlflow/detail/json_text.hpp>         // json_preview
#include <rlflow/engine/checkpoint.hpp>        // save_checkpoint, load_weights
#include <rlflow/engine/hf_export.hpp>         // export_hf
#include <rlflow/engine/training_engine.hpp>   // TrainingEngine
#include <rlflow/model/hf_folder.hpp>          // read_model_config, load_model_weights
#include <rlflow/model/hf_tokenizer.hpp>       // load_tokenizer, HFTokenizer
#include <rlflow/model/tokenizer.hpp>          // Tokenizer
#include <rlflow/trainer/checkpoint.hpp>       // CheckpointWriter

namespace rlflow {

// ---- the configuration ------------------------------------------------------------------------

//! The SFT trainer's settings, named as verl's sft_trainer.yaml keys (defaults: verl's). Set them
//! with set("data.max_length", "512") or from_args (key=value words). verl: sft_trainer.yaml.
struct SftConfig {
  struct Data {
    std::string train_files, val_files;  //!< data.train_files / data.val_files (parse_file_list)
    std::string prompt_key = "question";  //!< data.prompt_key: a string, or a chat message list
    std::string response_key = "answer";  //!< data.response_key: a string
    bool multiturn_enable = false;         //!< data.multiturn.enable
    std::string messages_key = "messages"; //!< data.multiturn.messages_key
    std::int64_t max_length = 1024;        //!< data.max_length: tokens of a row
    std::string truncation = "error";      //!< data.truncation: error | left | right
    std::int64_t train_batch_size = 256;   //!< data.train_batch_size: rows per optimizer step
    std::int64_t micro_batch_size_per_gpu = 4;  //!< data.micro_batch_size_per_gpu: rows per forward
  } data;
  struct Optim {
    double lr = 1e-5;                  //!< optim.lr
    double beta1 = 0.9, beta2 = 0.95;  //!< optim.betas (as optim.beta1 / optim.beta2)
    double weight_decay = 0.01;        //!< optim.weight_decay
    double warmup_steps_ratio = 0.1;   //!< optim.warmup_steps_ratio: warmup steps / total steps
    double clip_grad = 1.0;            //!< optim.clip_grad: global L2 norm (<= 0: no clipping)
    std::string lr_scheduler = "cosine";  //!< optim.lr_scheduler: cosine | constant
  } optim;
  struct Model {
    std::string partial_pretrain;  //!< model.partial_pretrain: a Hugging Face folder (empty: the caller's model)
  } model;
  struct Trainer {
    std::int64_t total_epochs = 4;                     //!< trainer.total_epochs
    std::optional<std::int64_t> total_training_steps;  //!< trainer.total_training_steps (null: from the epochs)
    std::string default_local_dir = "checkpoints/sft";  //!< trainer.default_local_dir: checkpoints, metrics.jsonl
    std::int64_t save_freq = -1;  //!< trainer.save_freq: a checkpoint every N steps and at the end (<= 0: only at the end)
    std::int64_t test_freq = -1;  //!< trainer.test_freq: validation loss every N steps and at the end (<= 0: only at the end)
    std::string project_name = "rlflow-sft", experiment_name = "sft";  //!< trainer.project_name / experiment_name
    bool console = true;  //!< trainer.console: a progress line per logged step on stdout
  } trainer;
  std::int64_t seed = 1;  //!< seed: the data order

  //! Every key set() knows.
  static std::vector<std::string> keys() {
    return {"data.train_files", "data.val_files", "data.prompt_key", "data.response_key", "data.multiturn.enable",
            "data.multiturn.messages_key", "data.max_length", "data.truncation", "data.train_batch_size",
            "data.micro_batch_size_per_gpu", "optim.lr", "optim.beta1", "optim.beta2", "optim.weight_decay",
            "optim.warmup_steps_ratio", "optim.clip_grad", "optim.lr_scheduler", "model.partial_pretrain",
            "trainer.total_epochs", "trainer.total_training_steps", "trainer.default_local_dir", "trainer.save_freq",
            "trainer.test_freq", "trainer.project_name", "trainer.experiment_name", "trainer.console", "seed"};
  }

  //! Sets one key from its text; an unknown key or a value of the wrong type is a config_error
  //! naming both.
  void set(std::string_view key, std::string_view value) {
    std::string const k(key), v(value);
    auto bad = [&](char const* want) {
      return config_error(msg("rlflow::SftConfig: ", k, "=", v, " is not ", want, "; e.g. ", k, "=", example(k)));
    };
    auto integer = [&]() {
      std::int64_t x = 0;
      auto const r = std::from_chars(v.data(), v.data() + v.size(), x);
      if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size()) throw bad("an integer");
      return x;
    };
    auto real = [&]() {
      char* end = nullptr;
      double const x = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(x)) throw bad("a finite number");
      return x;
    };
    auto boolean = [&]() {
      if (v == "true" || v == "True" || v == "1") return true;
      if (v == "false" || v == "False" || v == "0") return false;
      throw bad("true or false");
    };
    auto text = [&]() {  // YAML's null and quotes
      if (v == "null" || v == "~" || v == "None") return std::string();
      if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) return v.substr(1, v.size() - 2);
      return v;
    };
    if (k == "data.train_files") data.train_files = text();
    else if (k == "data.val_files") data.val_files = text();
    else if (k == "data.prompt_key") data.prompt_key = text();
    else if (k == "data.response_key") data.response_key = text();
    else if (k == "data.multiturn.enable") data.multiturn_enable = boolean();
    else if (k == "data.multiturn.messages_key") data.messages_key = text();
    else if (k == "data.max_length") data.max_length = integer();
    else if (k == "data.truncation") data.truncation = text();
    else if (k == "data.train_batch_size") data.train_batch_size = integer();
    else if (k == "data.micro_batch_size_per_gpu") data.micro_batch_size_per_gpu = integer();
    else if (k == "optim.lr") optim.lr = real();
    else if (k == "optim.beta1") optim.beta1 = real();
    else if (k == "optim.beta2") optim.beta2 = real();
    else if (k == "optim.weight_decay") optim.weight_decay = real();
    else if (k == "optim.warmup_steps_ratio") optim.warmup_steps_ratio = real();
    else if (k == "optim.clip_grad") optim.clip_grad = real();
    else if (k == "optim.lr_scheduler") optim.lr_scheduler = text();
    else if (k == "model.partial_pretrain") model.partial_pretrain = text();
    else if (k == "trainer.total_epochs") trainer.total_epochs = integer();
    else if (k == "trainer.total_training_steps") {
      if (text().empty()) trainer.total_training_steps.reset();
      else trainer.total_training_steps = integer();
    } else if (k == "trainer.default_local_dir") trainer.default_local_dir = text();
    else if (k == "trainer.save_freq") trainer.save_freq = integer();
    else if (k == "trainer.test_freq") trainer.test_freq = integer();
    else if (k == "trainer.project_name") trainer.project_name = text();
    else if (k == "trainer.experiment_name") trainer.experiment_name = text();
    else if (k == "trainer.console") trainer.console = boolean();
    else if (k == "seed") seed = integer();
    else {
      std::string all;
      for (auto const& n : keys()) all += (all.empty() ? "" : ", ") + n;
      throw config_error(msg("rlflow::SftConfig: unknown key '", k, "'; the SFT trainer's keys are ", all));
    }
  }

  //! 'defaults' with the key=value words of argv[1..argc) applied in order (a word without '='
  //! is an error naming it).
  static SftConfig from_args(int argc, char const* const* argv, SftConfig defaults) {
    for (int i = 1; i < argc; ++i) {
      std::string_view const w(argv[i]);
      auto const eq = w.find('=');
      if (eq == std::string_view::npos || eq == 0)
        throw config_error(msg("rlflow::SftConfig: argument '", w, "' is not key=value; e.g. optim.lr=1e-4"));
      defaults.set(w.substr(0, eq), w.substr(eq + 1));
    }
    return defaults;
  }

  //! Checks every value's range and the keys against each other; the message names the key, its
  //! value and the fix.
  void check() const {
    auto bad = [](std::string const& key, auto const& v, std::string const& fix) {
      throw config_error(msg("rlflow::SftConfig: ", key, "=", v, " is invalid; ", fix));
    };
    if (data.truncation != "error" && data.truncation != "left" && data.truncation != "right")
      bad("data.truncation", data.truncation, "use error, left or right");
    if (data.max_length < 2) bad("data.max_length", data.max_length, "use at least 2 (a token and the one it predicts)");
    if (data.train_batch_size < 1) bad("data.train_batch_size", data.train_batch_size, "use at least 1");
    if (data.micro_batch_size_per_gpu < 1) bad("data.micro_batch_size_per_gpu", data.micro_batch_size_per_gpu, "use at least 1");
    if (data.train_batch_size % data.micro_batch_size_per_gpu != 0)
      bad("data.train_batch_size", data.train_batch_size,
          msg("it must be a multiple of data.micro_batch_size_per_gpu=", data.micro_batch_size_per_gpu));
    if (data.multiturn_enable ? data.messages_key.empty() : (data.prompt_key.empty() || data.response_key.empty()))
      bad(data.multiturn_enable ? "data.multiturn.messages_key" : "data.prompt_key / data.response_key", "''",
          "name the row's field");
    if (!(optim.lr >= 0)) bad("optim.lr", optim.lr, "use a learning rate >= 0");
    if (!(optim.beta1 >= 0 && optim.beta1 < 1)) bad("optim.beta1", optim.beta1, "use 0 <= beta1 < 1");
    if (!(optim.beta2 >= 0 && optim.beta2 < 1)) bad("optim.beta2", optim.beta2, "use 0 <= beta2 < 1");
    if (!(optim.weight_decay >= 0)) bad("optim.weight_decay", optim.weight_decay, "use weight_decay >= 0");
    if (!(optim.warmup_steps_ratio >= 0 && optim.warmup_steps_ratio < 1))
      bad("optim.warmup_steps_ratio", optim.warmup_steps_ratio, "use a ratio in [0, 1)");
    if (optim.lr_scheduler != "cosine" && optim.lr_scheduler != "constant")
      bad("optim.lr_scheduler", optim.lr_scheduler, "use cosine or constant");
    if (trainer.total_epochs < 1) bad("trainer.total_epochs", trainer.total_epochs, "use at least 1");
    if (trainer.total_training_steps && *trainer.total_training_steps < 1)
      bad("trainer.total_training_steps", *trainer.total_training_steps, "use at least 1, or null for the epochs' steps");
    if (trainer.default_local_dir.empty()) bad("trainer.default_local_dir", "''", "name a folder for checkpoints and metrics");
  }

  nlohmann::ordered_json to_json() const {
    nlohmann::ordered_json j;
    j["data"] = {{"train_files", data.train_files}, {"val_files", data.val_files}, {"prompt_key", data.prompt_key},
                 {"response_key", data.response_key},
                 {"multiturn", {{"enable", data.multiturn_enable}, {"messages_key", data.messages_key}}},
                 {"max_length", data.max_length}, {"truncation", data.truncation}, {"train_batch_size", data.train_batch_size},
                 {"micro_batch_size_per_gpu", data.micro_batch_size_per_gpu}};
    j["optim"] = {{"lr", optim.lr}, {"betas", {optim.beta1, optim.beta2}}, {"weight_decay", optim.weight_decay},
                  {"warmup_steps_ratio", optim.warmup_steps_ratio}, {"clip_grad", optim.clip_grad},
                  {"lr_scheduler", optim.lr_scheduler}};
    j["model"] = {{"partial_pretrain", model.partial_pretrain}};
    j["trainer"] = {{"total_epochs", trainer.total_epochs},
                    {"total_training_steps", trainer.total_training_steps ? nlohmann::ordered_json(*trainer.total_training_steps)
                                                                           : nlohmann::ordered_json(nullptr)},
                    {"default_local_dir", trainer.default_local_dir}, {"save_freq", trainer.save_freq},
                    {"test_freq", trainer.test_freq}, {"project_name", trainer.project_name},
                    {"experiment_name", trainer.experiment_name}};
    j["seed"] = seed;
    return j;
  }

 private:
  static std::string example(std::string const& k) {
    if (k.starts_with("optim.")) return "1e-4";
    if (k == "data.multiturn.enable" || k == "trainer.console") return "true";
    return "8";
  }
};

//! from_args on the defaults.
inline SftConfig sft_config_from_args(int argc, char const* const* argv) { return SftConfig::from_args(argc, argv, SftConfig{}); }

// ---- rows to tokens ---------------------------------------------------------------------------

//! One training sequence: token ids and, per token, 1 when it is a target of the loss (the token
//! is predicted from the ones before it). loss_mask[0] is 0: the first token has no predecessor.
struct SftExample {
  std::vector<std::int32_t> input_ids;
  std::vector<std::uint8_t> loss_mask;
  std::int64_t loss_tokens() const { return std::accumulate(loss_mask.begin(), loss_mask.end(), std::int64_t{0}); }
};

//! How chat rows become text. With a chat_template, messages are rendered as transformers'
//! apply_chat_template does and an assistant turn's trained text ends at the last end_of_turn in
//! it; without one (the built-in character model), a single-turn prompt is used as it is.
struct SftFormat {
  std::shared_ptr<HfChatTemplate const> chat_template;  //!< null: raw prompt text, no multi-turn
  std::string bos_token, eos_token;                     //!< the template's bos_token / eos_token
  std::string end_of_turn;                              //!< text closing an assistant turn (the eos token)
  nlohmann::json template_kwargs = nlohmann::json::object();  //!< e.g. {"enable_thinking": false}

  std::string render(nlohmann::json const& messages, bool add_generation_prompt) const {
    if (!chat_template)
      throw config_error("rlflow::SftFormat::render: no chat template; chat-message rows need one (SftFormat::for_tokenizer or plain)");
    return chat_template->render(messages, nlohmann::json(nullptr), add_generation_prompt, template_kwargs, bos_token, eos_token);
  }
  //! The raw format: prompt text as it is (rows whose prompt is a string), response then EOS.
  static SftFormat raw() { return {}; }
  //! rlflow's plain-text template (HfChatTemplate::named("plain")): "User: ...\n", "Assistant: ...\n";
  //! an assistant turn ends at its newline.
  static SftFormat plain() {
    SftFormat f;
    f.chat_template = std::make_shared<HfChatTemplate const>(HfChatTemplate::named("plain"));
    f.end_of_turn = "\n";
    return f;
  }
  //! A Hugging Face tokenizer's own chat template (tokenizer_config.json) with its bos / eos
  //! tokens, the eos token closing a turn; 'fallback' (a built-in name) when it has none.
  static SftFormat for_tokenizer(model::Tokenizer const& tok, std::string_view fallback = "chatml") {
    SftFormat f;
    auto const* hf = dynamic_cast<model::HFTokenizer const*>(&tok);
    if (hf && !hf->chat_template().empty()) f.chat_template = std::make_shared<HfChatTemplate const>(hf->chat_template());
    else if (fallback == "plain") return plain();
    else f.chat_template = std::make_shared<HfChatTemplate const>(HfChatTemplate::named(fallback));
    if (hf) {
      f.bos_token = hf->config().bos_token;
      f.eos_token = hf->config().eos_token;
    }
    if (f.eos_token.empty() && fallback == "chatml") f.eos_token = "<|im_end|>";
    if (f.eos_token.empty() && fallback == "llama3") f.eos_token = "<|eot_id|>";
    f.end_of_turn = f.eos_token;
    return f;
  }
};

namespace sft_detail {
inline void append(SftExample& e, std::vector<std::int32_t> const& ids, std::uint8_t m) {
  e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.end());
  e.loss_mask.insert(e.loss_mask.end(), ids.size(), m);
}
//! BOS first when the tokenizer has one and the text did not start with it (as the RL trainer
//! feeds prompts); the first token is never a target.
inline void finish(SftExample& e, model::Tokenizer const& tok) {
  if (tok.bos_id() >= 0 && (e.input_ids.empty() || e.input_ids.front() != tok.bos_id())) {
    e.input_ids.insert(e.input_ids.begin(), tok.bos_id());
    e.loss_mask.insert(e.loss_mask.begin(), std::uint8_t{0});
  }
  if (!e.loss_mask.empty()) e.loss_mask[0] = 0;
}
inline std::string const& content_of(nlohmann::json const& m, std::string const& where, std::size_t i) {
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") || !m["content"].is_string())
    throw format_error(msg("rlflow::sft: ", where, ": message ", i, " is ", rlflow::detail::json_preview(m),
                           "; each message must be an object with string fields \"role\" and \"content\""));
  return m["content"].get_ref<std::string const&>();
}
}  // namespace sft_detail

//! A single-turn row: the prompt (text, or a chat message list) rendered with the generation
//! prompt (a text prompt as one user message; as it is in the raw format), then the response and
//! EOS, the loss on the response and EOS. verl: SFTDataset.
inline SftExample sft_single_turn(nlohmann::json const& prompt, std::string const& response, SftFormat const& f,
                                  model::Tokenizer const& tok, std::string const& where = "row") {
  std::string text;
  if (prompt.is_string()) {
    text = f.chat_template ? f.render(nlohmann::json::array({{{"role", "user"}, {"content", prompt.get<std::string>()}}}), true)
                           : prompt.get<std::string>();
  } else if (prompt.is_array()) {
    for (std::size_t i = 0; i < prompt.size(); ++i) sft_detail::content_of(prompt[i], where, i);
    text = f.render(prompt, true);
  } else {
    throw format_error(msg("rlflow::sft: ", where, ": the prompt is ", rlflow::detail::json_preview(prompt),
                           "; use a string or a list of {\"role\", \"content\"} messages"));
  }
  if (tok.eos_id() < 0)
    throw config_error(msg("rlflow::sft: the tokenizer has no EOS token, so a response cannot end; use a tokenizer with eos_token"));
  SftExample e;
  sft_detail::append(e, tok.encode(text), 0);
  sft_detail::append(e, tok.encode(response), 1);
  sft_detail::append(e, {tok.eos_id()}, 1);
  sft_detail::finish(e, tok);
  return e;
}

//! A multi-turn conversation through the chat template, the loss on every assistant turn (the
//! mask law above). The text is built as the agent loop builds it: the template's text up to each
//! assistant turn's generation prompt (mask 0; when the template re-renders earlier turns, the
//! new messages rendered alone, verl's way), then the turn (mask 1 through its last end_of_turn,
//! 0 after it). Messages after the last assistant turn carry no loss and are left out.
//! verl: MultiTurnSFTDataset.
inline SftExample sft_multi_turn(nlohmann::json const& messages, SftFormat const& f, model::Tokenizer const& tok,
                                 std::string const& where = "row") {
  if (!messages.is_array() || messages.empty())
    throw format_error(msg("rlflow::sft: ", where, ": the messages are ", rlflow::detail::json_preview(messages),
                           "; use a non-empty list of {\"role\", \"content\"} messages"));
  if (!f.chat_template)
    throw config_error(msg("rlflow::sft: ", where, ": multi-turn rows need a chat template; use SftFormat::for_tokenizer or plain"));
  for (std::size_t i = 0; i < messages.size(); ++i) sft_detail::content_of(messages[i], where, i);
  SftExample e;
  std::string stream;    // the text the ids stand for
  std::size_t done = 0;  // messages whose text is in the stream
  int turns = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant") continue;
    nlohmann::json const before(messages.begin(), messages.begin() + std::ptrdiff_t(i));
    std::string const prompt = f.render(before, true);
    std::string delta;
    if (prompt.compare(0, stream.size(), stream) == 0) {
      delta = prompt.substr(stream.size());
    } else {
      nlohmann::json const added(messages.begin() + std::ptrdiff_t(done), messages.begin() + std::ptrdiff_t(i));
      try {
        delta = f.render(added, true);
      } catch (rlflow::error const&) {  // a template that cannot render them alone: after the common prefix
        std::size_t k = 0;
        while (k < stream.size() && k < prompt.size() && stream[k] == prompt[k]) ++k;
        delta = prompt.substr(k);
      }
    }
    nlohmann::json const with(messages.begin(), messages.begin() + std::ptrdiff_t(i) + 1);
    std::string const full = f.render(with, false);
    if (full.size() < prompt.size() || full.compare(0, prompt.size(), prompt) != 0)
      throw format_error(msg("rlflow::sft: ", where, ": the chat template does not render assistant message ", i,
                             " after its generation prompt (the text of messages 0..", i, " does not start with the text of "
                             "0..", i - 1, " plus the generation prompt), so its tokens cannot be told apart; use a template "
                             "whose assistant turns follow its generation prompt"));
    std::string const turn = full.substr(prompt.size());
    std::size_t cut = turn.size();
    if (!f.end_of_turn.empty())
      if (auto const at = turn.rfind(f.end_of_turn); at != std::string::npos) cut = at + f.end_of_turn.size();
    sft_detail::append(e, tok.encode(delta), 0);
    sft_detail::append(e, tok.encode(turn.substr(0, cut)), 1);
    sft_detail::append(e, tok.encode(turn.substr(cut)), 0);
    stream += delta;
    stream += turn;
    done = i + 1;
    ++turns;
  }
  if (turns == 0)
    throw format_error(msg("rlflow::sft: ", where, ": the conversation has no assistant message, so nothing to train on; "
                           "add one or drop the row"));
  sft_detail::finish(e, tok);
  return e;
}

//! A row longer than max_length: an error (truncation=error), or its first (right) or last (left)
//! max_length tokens kept. verl: data.truncation.
inline SftExample sft_truncate(SftExample e, std::int64_t max_length, std::string_view truncation, std::string const& where) {
  auto const n = static_cast<std::int64_t>(e.input_ids.size());
  if (n <= max_length) return e;
  if (truncation == "error")
    throw config_error(msg("rlflow::sft: ", where, " has ", n, " tokens, more than data.max_length=", max_length,
                           "; raise data.max_length, or set data.truncation=left or right"));
  if (truncation == "right") {
    e.input_ids.resize(std::size_t(max_length));
    e.loss_mask.resize(std::size_t(max_length));
  } else {
    e.input_ids.erase(e.input_ids.begin(), e.input_ids.end() - max_length);
    e.loss_mask.erase(e.loss_mask.begin(), e.loss_mask.end() - max_length);
    e.loss_mask[0] = 0;
  }
  return e;
}

//! One data-file row under the config's keys (data.multiturn.enable: messages_key; else
//! prompt_key and response_key), truncated as data.truncation says.
inline SftExample sft_row(nlohmann::json const& row, SftConfig const& c, SftFormat const& f, model::Tokenizer const& tok,
                          std::string const& where) {
  if (!row.is_object())
    throw format_error(msg("rlflow::sft: ", where, " is ", rlflow::detail::json_preview(row), "; each row must be a JSON object"));
  auto field = [&](std::string const& key, char const* which) -> nlohmann::json const& {
    auto it = row.find(key);
    if (it == row.end())
      throw format_error(msg("rlflow::sft: ", where, " has no field '", key, "' (", which, "); set ", which,
                             " to the row's field name"));
    return *it;
  };
  SftExample e;
  if (c.data.multiturn_enable) {
    e = sft_multi_turn(field(c.data.messages_key, "data.multiturn.messages_key"), f, tok, where);
  } else {
    auto const& resp = field(c.data.response_key, "data.response_key");
    if (!resp.is_string())
      throw format_error(msg("rlflow::sft: ", where, ": field '", c.data.response_key, "' (data.response_key) is ",
                             rlflow::detail::json_preview(resp), "; the response must be a string"));
    e = sft_single_turn(field(c.data.prompt_key, "data.prompt_key"), resp.get<std::string>(), f, tok, where);
  }
  return sft_truncate(std::move(e), c.data.max_length, c.data.truncation, where);
}

//! Every row of the files (parse_file_list: JSON lines or a JSON array each, read_rows) as SFT
//! examples; an empty result is an error.
inline std::vector<SftExample> load_sft_files(std::string_view files, SftConfig const& c, SftFormat const& f,
                                              model::Tokenizer const& tok) {
  std::vector<SftExample> out;
  for (auto const& file : parse_file_list(files)) {
    auto const rows = read_rows(file);
    for (std::size_t i = 0; i < rows.size(); ++i) out.push_back(sft_row(rows[i], c, f, tok, msg(file, " row ", i)));
  }
  if (out.empty())
    throw config_error(msg("rlflow::sft: no rows in '", files, "'; point data.train_files / data.val_files at JSON-lines files"));
  return out;
}

// ---- the trainer ------------------------------------------------------------------------------

//! SFT of one model on the CPU training engine: each step takes data.train_batch_size rows (a
//! seeded shuffle per epoch), runs them in micro-batches of data.micro_batch_size_per_gpu and
//! takes one AdamW step on the token-mean cross-entropy over the step's loss-mask tokens (the
//! gradient does not depend on the micro-batch split). verl: FSDPSFTTrainer.
class SftTrainer {
 public:
  //! verl's road: model and tokenizer from model.partial_pretrain (a Hugging Face folder), rows
  //! from data.train_files / data.val_files through the folder's chat template.
  explicit SftTrainer(SftConfig cfg) : cfg_(std::move(cfg)) {
    cfg_.check();
    if (cfg_.model.partial_pretrain.empty())
      throw config_error("rlflow::SftTrainer(cfg): model.partial_pretrain is empty; set it to a Hugging Face model folder, or "
                         "pass the model, tokenizer and rows to SftTrainer(cfg, model, tokenizer, train, val)");
    if (cfg_.data.train_files.empty())
      throw config_error("rlflow::SftTrainer(cfg): data.train_files is empty; set it to a JSON-lines file of SFT rows (docs/sft.md)");
    std::filesystem::path const dir(cfg_.model.partial_pretrain);
    tok_ = model::load_tokenizer(dir);
    format_ = SftFormat::for_tokenizer(*tok_);
    auto const model = model::hf::read_model_config(dir);
    auto train = load_sft_files(cfg_.data.train_files, cfg_, format_, *tok_);
    std::vector<SftExample> val;
    if (!cfg_.data.val_files.empty()) val = load_sft_files(cfg_.data.val_files, cfg_, format_, *tok_);
    init(model, std::move(train), std::move(val), model::hf::load_model_weights(dir, model));
  }

  //! The caller's model (e.g. the built-in GPT of a CharTokenizer) and rows; 'weights' (full
  //! layout) start it, empty: the model's seeded initialisation.
  SftTrainer(SftConfig cfg, model::GPTConfig const& model, std::shared_ptr<model::Tokenizer const> tok,
             std::vector<SftExample> train, std::vector<SftExample> val = {}, std::vector<float> weights = {})
      : cfg_(std::move(cfg)), tok_(std::move(tok)) {
    cfg_.check();
    if (!tok_) throw config_error("rlflow::SftTrainer: no tokenizer; pass the model's tokenizer");
    init(model, std::move(train), std::move(val), std::move(weights));
  }

  SftConfig const& config() const { return cfg_; }
  engine::TrainingEngine& engine() { return *eng_; }
  model::Tokenizer const& tokenizer() const { return *tok_; }
  std::vector<SftExample> const& train_rows() const { return train_; }
  std::vector<SftExample> const& val_rows() const { return val_; }
  std::int64_t global_step() const { return step_; }
  std::int64_t total_steps() const { return total_; }

  //! Token-mean cross-entropy of the model on 'rows' (no gradient): sum over rows and loss-mask
  //! tokens of -log p(token | before) divided by their count (0 when there is none).
  double loss(std::span<SftExample const> rows) {
    double sum = 0;
    std::int64_t n = 0;
    auto const mb = std::size_t(cfg_.data.micro_batch_size_per_gpu);
    for (std::size_t s = 0; s < rows.size(); s += mb) {
      std::vector<SftExample const*> part;
      for (std::size_t i = s; i < std::min(rows.size(), s + mb); ++i) part.push_back(&rows[i]);
      auto [sm, cnt] = micro_batch(part, /*backward=*/false, 0.0);
      sum += sm;
      n += cnt;
    }
    return n > 0 ? sum / double(n) : 0.0;
  }
  //! The validation rows' loss (data.val_files); an error without them.
  double validation_loss() {
    if (val_.empty()) throw config_error("rlflow::SftTrainer::validation_loss: no validation rows; set data.val_files");
    return loss(val_);
  }

  //! One optimizer step on the next data.train_batch_size rows; returns its metrics (train/loss,
  //! train/lr, train/grad_norm, train/tokens).
  Metrics step() {
    auto const bs = std::size_t(cfg_.data.train_batch_size), mb = std::size_t(cfg_.data.micro_batch_size_per_gpu);
    std::vector<SftExample const*> batch;
    while (batch.size() < bs) {
      if (pos_ >= order_.size()) {
        ++epoch_;
        pos_ = 0;
        shuffle();
      }
      batch.push_back(&train_[order_[pos_++]]);
    }
    std::int64_t tokens = 0;
    for (auto const* r : batch) tokens += r->loss_tokens();
    Metrics m;
    m["train/lr"] = eng_->lr();
    eng_->zero_grad();
    double sum = 0;
    if (tokens > 0)
      for (std::size_t s = 0; s < bs; s += mb)
        sum += micro_batch(std::vector<SftExample const*>(batch.begin() + std::ptrdiff_t(s), batch.begin() + std::ptrdiff_t(s + mb)),
                           /*backward=*/true, 1.0 / double(tokens))
                   .first;
    m["train/grad_norm"] = tokens > 0 ? eng_->optimizer_step() : 0.0;
    ++step_;
    m["train/loss"] = tokens > 0 ? sum / double(tokens) : 0.0;
    m["train/tokens"] = double(tokens);
    m["train/epoch"] = double(epoch_);
    return m;
  }

  //! Trains trainer.total_training_steps (or total_epochs' worth of) steps: logs every step to
  //! default_local_dir/metrics.jsonl (and a console line), the validation loss (val/loss) every
  //! test_freq steps and at the end when there are validation rows, a checkpoint every save_freq
  //! steps and at the end. Returns the last step's metrics. verl: FSDPSFTTrainer.fit.
  Metrics fit() {
    std::filesystem::create_directories(root());
    MetricsLogger log(root() / "metrics.jsonl", total_, cfg_.trainer.console);
    Metrics m;
    while (step_ < total_) {
      m = step();
      bool const last = step_ == total_;
      if (!val_.empty() && (last || (cfg_.trainer.test_freq > 0 && step_ % cfg_.trainer.test_freq == 0)))
        m["val/loss"] = validation_loss();
      log.log(step_, m);
      if (last || (cfg_.trainer.save_freq > 0 && step_ % cfg_.trainer.save_freq == 0)) save_checkpoint();
    }
    return m;
  }

  //! default_local_dir/global_step_N in the RL Trainer's format: actor.safetensors (weights, AdamW
  //! moments, step) and trainer_state.json (global_step, data_position; sft_config), sealed by
  //! MANIFEST.json. GRPO starts from it with TrainerOptions::init_weights = that folder.
  std::filesystem::path save_checkpoint() {
    CheckpointWriter w(root(), step_);
    engine::save_checkpoint(w.path("actor.safetensors"), *eng_);
    nlohmann::ordered_json st;
    st["global_step"] = step_;
    st["data_position"] = {{"epoch", epoch_}, {"index", pos_}};
    st["kl_coef"] = 0.0;
    st["sft_config"] = cfg_.to_json();
    w.write("trainer_state.json", st.dump(2));
    last_ckpt_ = w.commit();
    return last_ckpt_;
  }
  //! The last checkpoint written (empty before one).
  std::filesystem::path const& last_checkpoint() const { return last_ckpt_; }

  //! The Hugging Face folder of the last checkpoint (engine::export_hf; the tokenizer files of
  //! model.partial_pretrain copied alongside when set): a model.path for GRPO from files.
  void export_hf(std::filesystem::path const& out_dir, DType dtype = DType::float32) {
    if (last_ckpt_.empty()) save_checkpoint();
    engine::export_hf(last_ckpt_, out_dir, dtype, cfg_.model.partial_pretrain, tok_->bos_id(), tok_->eos_id());
  }

 private:
  std::filesystem::path root() const { return std::filesystem::path(cfg_.trainer.default_local_dir); }

  void init(model::GPTConfig const& model, std::vector<SftExample> train, std::vector<SftExample> val, std::vector<float> weights) {
    if (train.empty()) throw config_error("rlflow::SftTrainer: no training rows; set data.train_files or pass rows");
    auto check_rows = [&](std::vector<SftExample>& rows, char const* which) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        auto& r = rows[i];
        if (r.input_ids.size() != r.loss_mask.size() || r.input_ids.size() < 2)
          throw config_error(msg("rlflow::SftTrainer: ", which, " row ", i, " has ", r.input_ids.size(), " tokens and ",
                                 r.loss_mask.size(), " mask entries; a row needs at least 2 tokens and one mask entry per token"));
        r = sft_truncate(std::move(r), cfg_.data.max_length, cfg_.data.truncation, msg(which, " row ", i));
        if (std::int64_t(r.input_ids.size()) > model.max_seq_len)
          throw config_error(msg("rlflow::SftTrainer: ", which, " row ", i, " has ", r.input_ids.size(), " tokens but the model has ",
                                 model.max_seq_len, " positions; lower data.max_length (with data.truncation=left or right)"));
        for (auto id : r.input_ids)
          if (id < 0 || id >= model.vocab_size)
            throw config_error(msg("rlflow::SftTrainer: ", which, " row ", i, " holds token id ", id, " outside the model's vocabulary [0, ",
                                   model.vocab_size, "); use the model's own tokenizer"));
        r.loss_mask[0] = 0;
      }
    };
    check_rows(train, "training");
    check_rows(val, "validation");
    if (std::int64_t(train.size()) < cfg_.data.train_batch_size && !cfg_.trainer.total_training_steps)
      throw config_error(msg("rlflow::SftTrainer: ", train.size(), " training rows are fewer than data.train_batch_size=",
                             cfg_.data.train_batch_size, ", so an epoch has no step; lower data.train_batch_size or set "
                             "trainer.total_training_steps"));
    train_ = std::move(train);
    val_ = std::move(val);
    total_ = cfg_.trainer.total_training_steps ? *cfg_.trainer.total_training_steps
                                               : cfg_.trainer.total_epochs * (std::int64_t(train_.size()) / cfg_.data.train_batch_size);
    engine::OptimizerConfig o;
    o.lr = float(cfg_.optim.lr);
    o.beta1 = float(cfg_.optim.beta1);
    o.beta2 = float(cfg_.optim.beta2);
    o.weight_decay = float(cfg_.optim.weight_decay);
    o.max_grad_norm = float(cfg_.optim.clip_grad);
    o.warmup_steps = int(cfg_.optim.warmup_steps_ratio * double(total_));
    o.total_steps = int(total_);
    o.schedule = cfg_.optim.lr_scheduler == "cosine" && total_ > o.warmup_steps ? engine::LRSchedule::warmup_cosine
                                                                                 : engine::LRSchedule::constant;
    o.validate();
    model.validate();
    eng_ = std::make_unique<engine::TrainingEngine>(model, o);
    if (!weights.empty()) eng_->load_weights(weights);
    order_.resize(train_.size());
    shuffle();
  }

  void shuffle() {
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    std::mt19937_64 rng(std::uint64_t(cfg_.seed) * 1000003u + std::uint64_t(epoch_));
    std::shuffle(order_.begin(), order_.end(), rng);
  }

  //! One forward (and backward with dlogp = -scale on the loss-mask tokens): rows right-padded to
  //! the longest, every position after the first scored. Returns (summed loss, loss tokens).
  std::pair<double, std::int64_t> micro_batch(std::vector<SftExample const*> const& rows, bool backward, double scale) {
    std::size_t T = 2;
    for (auto const* r : rows) T = std::max(T, r->input_ids.size());
    int const B = int(rows.size()), R = int(T) - 1;
    Tensor ids = Tensor::zeros(DType::int32, Shape{B, std::int64_t(T)});
    Tensor attn = Tensor::zeros(DType::int32, Shape{B, std::int64_t(T)});
    auto* pi = ids.data<std::int32_t>();
    auto* pa = attn.data<std::int32_t>();
    for (int b = 0; b < B; ++b) {
      auto const& r = *rows[std::size_t(b)];
      for (std::size_t t = 0; t < T; ++t) {
        pi[std::size_t(b) * T + t] = t < r.input_ids.size() ? r.input_ids[t] : tok_->pad_id() >= 0 ? tok_->pad_id() : 0;
        pa[std::size_t(b) * T + t] = t < r.input_ids.size() ? 1 : 0;
      }
    }
    auto const out = backward ? eng_->forward(ids, attn, R, 1.0f, false) : eng_->compute_log_prob(ids, attn, R, 1.0f, false);
    auto const* lp = out.log_probs.data<float>();
    Tensor grad = backward ? Tensor::zeros(DType::float32, Shape{B, R}) : Tensor();
    double sum = 0;
    std::int64_t n = 0;
    for (int b = 0; b < B; ++b) {
      auto const& r = *rows[std::size_t(b)];
      for (int j = 0; j < R; ++j) {
        std::size_t const t = std::size_t(j) + 1;  // log_probs[b, j] scores token j + 1
        if (t >= r.loss_mask.size() || !r.loss_mask[t]) continue;
        sum -= double(lp[std::size_t(b) * R + j]);
        ++n;
        if (backward) grad.data<float>()[std::size_t(b) * R + j] = float(-scale);
      }
    }
    if (backward) eng_->backward(grad);
    return {sum, n};
  }

  SftConfig cfg_;
  std::shared_ptr<model::Tokenizer const> tok_;
  SftFormat format_;
  std::vector<SftExample> train_, val_;
  std::unique_ptr<engine::TrainingEngine> eng_;
  std::vector<std::size_t> order_;
  std::size_t pos_ = 0;
  std::int64_t epoch_ = 0, step_ = 0, total_ = 0;
  std::filesystem::path last_ckpt_;
};

}  // namespace rlflow
