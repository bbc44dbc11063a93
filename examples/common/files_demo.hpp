// examples/common/files_demo.hpp: demo files for the "bring your model and data" path, written
// locally because real weights cannot be downloaded here: a GSM8K-style JSON-lines dataset in
// verl's schema (arithmetic word problems whose answers end in "#### n", data_source
// openai/gsm8k) and a small GPT-2-shaped Hugging Face folder (config.json, model.safetensors with
// GPT-2's seeded initialisation, or a Llama-family one, and a byte-level BPE vocab.json /
// merges.txt trained on the problems). Used by examples/05_grpo_from_files.cpp and tests/hf/test_from_files.cpp.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <rlflow/core/error.hpp>
#include <rlflow/model/bpe_tokenizer.hpp>  // gpt2_pretokenize, bpe_detail
#include <rlflow/model/gpt.hpp>            // GPTConfig, init_params
#include <rlflow/model/hf_folder.hpp>      // export_model

namespace rlflow::examples {

//! One GSM8K-style problem: question text and its integer answer.
struct WordProblem {
  std::string question;
  std::int64_t answer;
};

//! Seeded arithmetic word problems (sums, differences, products of small numbers).
inline std::vector<WordProblem> make_word_problems(std::int64_t count, std::uint64_t seed) {
  static char const* const names[] = {"Natalia", "James", "Mia", "Omar", "Lena", "Kai", "Sofia", "Ravi"};
  static char const* const things[] = {"apples", "clips", "books", "marbles", "stickers", "coins"};
  std::mt19937_64 g(seed);
  std::vector<WordProblem> out;
  for (std::int64_t i = 0; i < count; ++i) {
    std::string const who = names[g() % 8], what = things[g() % 6];
    std::int64_t const a = 2 + std::int64_t(g() % 40), b = 1 + std::int64_t(g() % 20);
    switch (g() % 3) {
      case 0:
        out.push_back({who + " has " + std::to_string(a) + " " + what + " and gets " + std::to_string(b) + " more. How many " +
                           what + " does " + who + " have now?",
                       a + b});
        break;
      case 1:
        out.push_back({who + " had " + std::to_string(a + b) + " " + what + " and gave away " + std::to_string(b) +
                           ". How many " + what + " are left?",
                       a});
        break;
      default:
        out.push_back({who + " buys " + std::to_string(b % 9 + 1) + " boxes with " + std::to_string(a % 12 + 1) + " " + what +
                           " in each box. How many " + what + " is that?",
                       (b % 9 + 1) * (a % 12 + 1)});
    }
  }
  return out;
}

//! The instruction verl's GSM8K preprocessing appends (examples/data_preprocess/gsm8k.py).
inline constexpr std::string_view gsm8k_instruction = "Let's think step by step and output the final answer after \"####\".";

//! Writes 'count' problems as verl's GSM8K rows: prompt = [{role: user, content: question +
//! instruction}], data_source = openai/gsm8k, reward_model = {style: rule, ground_truth: "n"},
//! extra_info = {split, index, answer: "... #### n"}.
inline void write_gsm8k_jsonl(std::filesystem::path const& path, std::int64_t count, std::uint64_t seed,
                              std::string const& split) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw io_error(msg("rlflow::examples::write_gsm8k_jsonl: cannot write ", path.string()));
  auto const problems = make_word_problems(count, seed);
  for (std::size_t i = 0; i < problems.size(); ++i) {
    auto const& p = problems[i];
    nlohmann::json row = {
        {"data_source", "openai/gsm8k"},
        {"prompt", {{{"role", "user"}, {"content", p.question + " " + std::string(gsm8k_instruction)}}}},
        {"ability", "math"},
        {"reward_model", {{"style", "rule"}, {"ground_truth", std::to_string(p.answer)}}},
        {"extra_info", {{"split", split}, {"index", i}, {"answer", "The answer is " + std::to_string(p.answer) + ".\n#### " + std::to_string(p.answer)}}}};
    out << row.dump() << "\n";
  }
}

//! A byte-level BPE vocabulary trained on 'corpus': the 256 byte tokens, 'n_merges' merges
//! (most frequent adjacent pair first), then <|endoftext|> (GPT-2's layout).
inline void write_bpe_files(std::filesystem::path const& dir, std::vector<std::string> const& corpus, int n_merges) {
  using model::bpe_detail::append_utf8;
  using model::bpe_detail::bytes_to_unicode;
  std::map<std::string, std::int64_t> counts;
  for (auto const& t : corpus) model::gpt2_pretokenize(t, [&](std::string_view p) { ++counts[std::string(p)]; });
  std::vector<std::pair<std::vector<std::string>, std::int64_t>> words;
  for (auto const& [w, c] : counts) {
    std::vector<std::string> sym;
    for (unsigned char ch : w) {
      std::string u;
      append_utf8(u, bytes_to_unicode()[ch]);
      sym.push_back(u);
    }
    words.push_back({sym, c});
  }
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    std::string u;
    append_utf8(u, bytes_to_unicode()[std::size_t(b)]);
    vocab[u] = next++;
  }
  std::ofstream merges(dir / "merges.txt", std::ios::trunc);
  merges << "#version: 0.2\n";
  for (int m = 0; m < n_merges; ++m) {
    std::map<std::pair<std::string, std::string>, std::int64_t> pc;
    for (auto const& [w, c] : words)
      for (std::size_t i = 0; i + 1 < w.size(); ++i) pc[{w[i], w[i + 1]}] += c;
    if (pc.empty()) break;
    auto best = pc.begin();
    for (auto it = pc.begin(); it != pc.end(); ++it)
      if (it->second > best->second) best = it;
    auto const [a, b] = best->first;
    merges << a << ' ' << b << '\n';
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    for (auto& [w, c] : words) {
      std::vector<std::string> nw;
      for (std::size_t i = 0; i < w.size();) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) nw.push_back(a + b), i += 2;
        else nw.push_back(w[i++]);
      }
      w = std::move(nw);
    }
  }
  vocab["<|endoftext|>"] = next++;
  std::ofstream(dir / "vocab.json", std::ios::trunc) << vocab.dump();
}

//! Where write_demo_files put things.
struct DemoFiles {
  std::filesystem::path model_dir, train_file, val_file;
};

//! A complete "bring your model and data" setup under 'root': model/ (a GPT-2-shaped folder of
//! n_layer x n_embd with a BPE vocabulary of 256 + n_merges + 1 tokens), data/train.jsonl and
//! data/val.jsonl (GSM8K-style rows).
//! arch: the model family of the folder (GPT-2, or a Llama-family model of the same width with
//! one key/value head per two query heads and an MLP of 3 n_embd, as transformers writes it).
inline DemoFiles write_demo_files(std::filesystem::path const& root, std::uint64_t seed = 1, std::int64_t train_rows = 256,
                                  std::int64_t val_rows = 8, int n_layer = 2, int n_head = 2, int n_embd = 32,
                                  int n_positions = 160, int n_merges = 160, model::Arch arch = model::Arch::gpt2) {
  namespace fs = std::filesystem;
  DemoFiles f{root / "model", root / "data" / "train.jsonl", root / "data" / "val.jsonl"};
  fs::create_directories(f.model_dir);
  fs::create_directories(root / "data");
  write_gsm8k_jsonl(f.train_file, train_rows, seed, "train");
  write_gsm8k_jsonl(f.val_file, val_rows, seed + 1000, "test");
  std::vector<std::string> corpus;
  for (auto const& p : make_word_problems(400, seed + 7))
    corpus.push_back("User: " + p.question + " " + std::string(gsm8k_instruction) + "\nAssistant: The answer is " +
                     std::to_string(p.answer) + ".\n#### " + std::to_string(p.answer));
  write_bpe_files(f.model_dir, corpus, n_merges);
  auto const tok = model::BPETokenizer::from_folder(f.model_dir);
  model::GPTConfig c{
      .vocab_size = tok.vocab_size(), .max_seq_len = n_positions, .n_layer = n_layer, .n_head = n_head, .n_embd = n_embd, .seed = seed};
  if (arch != model::Arch::gpt2) {
    c.arch = arch;
    c.n_kv_head = n_head % 2 == 0 ? n_head / 2 : n_head;
    c.intermediate_size = 3 * n_embd;
    c.qkv_bias = arch == model::Arch::qwen2;
    c.qk_norm = arch == model::Arch::qwen3;
    c.tie_word_embeddings = arch != model::Arch::llama;
  }
  std::vector<float> w(model::param_count(c));
  model::init_params(c, w);
  model::hf::export_model(f.model_dir, c, w, DType::float32, tok.bos_id(), tok.eos_id());
  return f;
}

}  // namespace rlflow::examples
