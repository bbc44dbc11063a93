// rlflow/trainer/impl/driver.ipp: the bodies of rlflow/trainer/driver.hpp (config.hpp, RLFLOW_DECL).
#pragma once

namespace rlflow::detail {

RLFLOW_DECL Stat stat_of(std::vector<double> const& v) {
  Stat s;
  if (v.empty()) return s;
  s.max = -std::numeric_limits<double>::infinity();
  s.min = std::numeric_limits<double>::infinity();
  for (double x : v) {
    s.mean += x;
    s.max = std::max(s.max, x);
    s.min = std::min(s.min, x);
  }
  s.mean /= static_cast<double>(v.size());
  return s;
}

RLFLOW_DECL void put_stat(Metrics& m, std::string const& name, std::vector<double> const& v) {
  auto s = stat_of(v);
  m[name + "/mean"] = s.mean;
  m[name + "/max"] = s.max;
  m[name + "/min"] = s.min;
}

RLFLOW_DECL std::vector<double> valid_values(Tensor const& x, Tensor const& mask) {
  std::vector<double> v;
  auto xs = x.span<float>();
  auto ms = mask.span<std::int32_t>();
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (ms[i]) v.push_back(xs[i]);
  return v;
}

RLFLOW_DECL std::vector<double> row_sums(Tensor const& x) {
  std::int64_t const B = x.dim(0), R = x.dim(1);
  std::vector<double> v(static_cast<std::size_t>(B), 0.0);
  auto xs = x.span<float>();
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t t = 0; t < R; ++t) v[static_cast<std::size_t>(i)] += xs[static_cast<std::size_t>(i * R + t)];
  return v;
}

RLFLOW_DECL DataProto make_prompt_batch(std::vector<PromptItem> const& items, std::int64_t step_no, TrainerConfig const& cfg,
                                        model::Tokenizer const& tok) {
  std::int64_t const B = static_cast<std::int64_t>(items.size()), P = cfg.data.max_prompt_length;
  Tensor ids = Tensor::full(Shape{B, P}, tok.pad_id());
  Tensor am = Tensor::zeros(DType::int32, Shape{B, P});
  NonTensorColumn uid, rm, src, raw, extra;
  bool const cut_left = cfg.data.truncation.view() == "left";
  for (std::int64_t i = 0; i < B; ++i) {
    auto const& it = items[static_cast<std::size_t>(i)];
    std::vector<std::int32_t> t = tok.encode(it.prompt);
    // a BOS unless the tokenizer names none (Qwen) or the chat template wrote it (Llama-3)
    if (tok.bos_id() >= 0 && (t.empty() || t.front() != tok.bos_id())) t.insert(t.begin(), tok.bos_id());
    if (static_cast<std::int64_t>(t.size()) > P) {
      if (cut_left) t.erase(t.begin(), t.end() - P);
      else t.resize(static_cast<std::size_t>(P));
    }
    std::int64_t const off = P - static_cast<std::int64_t>(t.size());
    for (std::size_t k = 0; k < t.size(); ++k) {
      ids.at<std::int32_t>(i, off + static_cast<std::int64_t>(k)) = t[k];
      am.at<std::int32_t>(i, off + static_cast<std::int64_t>(k)) = 1;
    }
    // verl draws uuid4 per prompt; a deterministic id keeps runs and resumes reproducible.
    uid.emplace_back(msg("step", step_no, "-prompt", i));
    rm.emplace_back(Dict{{"ground_truth", it.ground_truth}});
    src.emplace_back(it.data_source);
    raw.emplace_back(it.prompt);
    extra.emplace_back(it.extra_info);
  }
  DataProto d = DataProto::from_dict({{"input_ids", ids}, {"attention_mask", am}},
                                     {{"uid", uid}, {"reward_model", rm}, {"data_source", src}, {"raw_prompt", raw}, {"extra_info", extra}});
  return d;
}

RLFLOW_DECL void add_rollout_seeds(DataProto& d, std::int64_t seed, std::int64_t step_no, std::uint64_t salt) {
  std::int64_t const rows = d.size();
  std::vector<std::int64_t> s(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i)
    s[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(
        detail::mix64(detail::mix64(static_cast<std::uint64_t>(seed) ^ (salt << 62)) + static_cast<std::uint64_t>(step_no) * 1000003ull +
                      static_cast<std::uint64_t>(i)) >> 1);
  d.set_tensor("rollout_seed", Tensor::from(s));
}

RLFLOW_DECL void check_reward_scores(DataProto const& s, std::int64_t rows, std::int64_t R) {
  if (!s.has_tensor("token_level_scores"))
    throw shape_error(msg("rlflow::Trainer: the reward role's compute_rm_score returned no 'token_level_scores' tensor (",
                          s.size(), " rows); return float32 scores of shape (", rows, ", ", R, ")"));
  Tensor const& t = s.tensor("token_level_scores");
  if (t.dtype() != DType::float32 || t.rank() != 2 || t.dim(0) != rows || t.dim(1) != R)
    throw shape_error(msg("rlflow::Trainer: the reward role's compute_rm_score returned 'token_level_scores' ", t.describe(),
                          " for a batch of ", rows, " rows x ", R, " response tokens; return float32 scores of shape (",
                          rows, ", ", R, ")"));
}

RLFLOW_DECL void merge_metric_lists(Metrics& m, std::vector<std::map<std::string, std::vector<double>>> const& per_rank) {
  std::map<std::string, std::vector<double>> all;
  for (auto const& lists : per_rank)
    for (auto const& [k, v] : lists) all[k].insert(all[k].end(), v.begin(), v.end());
  for (auto const& [k, v] : reduce_metrics(all)) m[k] = v;
}

RLFLOW_DECL void data_metrics(DataProto const& batch, Metrics& m, bool has_critic) {
  Tensor const& rmask = batch.tensor("response_mask");
  detail::put_stat(m, "critic/score", detail::row_sums(batch.tensor("token_level_scores")));
  detail::put_stat(m, "critic/rewards", detail::row_sums(batch.tensor("token_level_rewards")));
  detail::put_stat(m, "critic/advantages", detail::valid_values(batch.tensor("advantages"), rmask));
  detail::put_stat(m, "critic/returns", detail::valid_values(batch.tensor("returns"), rmask));
  if (has_critic) {
    auto values = detail::valid_values(batch.tensor("values"), rmask);
    detail::put_stat(m, "critic/values", values);
    auto returns = detail::valid_values(batch.tensor("returns"), rmask);
    // verl: vf_explained_var = 1 - var(returns - values) / (var(returns) + 1e-5)
    double mr = 0, md = 0;
    for (std::size_t i = 0; i < returns.size(); ++i) mr += returns[i], md += returns[i] - values[i];
    double const N = std::max<double>(1.0, static_cast<double>(returns.size()));
    mr /= N;
    md /= N;
    double vr = 0, vd = 0;
    for (std::size_t i = 0; i < returns.size(); ++i) {
      vr += (returns[i] - mr) * (returns[i] - mr);
      vd += (returns[i] - values[i] - md) * (returns[i] - values[i] - md);
    }
    m["critic/vf_explained_var"] = 1.0 - (vd / N) / (vr / N + 1e-5);
  }
  std::int64_t const rows = rmask.dim(0), R = rmask.dim(1);
  std::vector<double> lens(static_cast<std::size_t>(rows)), plens(static_cast<std::size_t>(rows));
  double clipped = 0;
  Tensor const& attn = batch.tensor("attention_mask");
  std::int64_t const P = attn.dim(1) - R;
  for (std::int64_t i = 0; i < rows; ++i) {
    double l = 0, p = 0;
    for (std::int64_t t = 0; t < R; ++t) l += attn.at<std::int32_t>(i, P + t) != 0;  // tool tokens too (verl)
    for (std::int64_t t = 0; t < P; ++t) p += attn.at<std::int32_t>(i, t) != 0;
    lens[static_cast<std::size_t>(i)] = l;
    plens[static_cast<std::size_t>(i)] = p;
    clipped += l == static_cast<double>(R);
  }
  detail::put_stat(m, "response_length", lens);
  m["response_length/clip_ratio"] = clipped / static_cast<double>(std::max<std::int64_t>(rows, 1));
  detail::put_stat(m, "prompt_length", plens);
  if (batch.has_tensor("num_turns")) {  // agent rollouts (rlflow/roles/agent_rollout.hpp)
    std::vector<double> turns, calls, errors;
    for (auto v : batch.tensor("num_turns").span<std::int32_t>()) turns.push_back(v);
    if (batch.has_tensor("agent_tool_calls"))
      for (auto v : batch.tensor("agent_tool_calls").span<float>()) calls.push_back(v);
    if (batch.has_tensor("agent_tool_errors"))
      for (auto v : batch.tensor("agent_tool_errors").span<float>()) errors.push_back(v);
    double in_context = 0, not_trained = 0;  // response tokens attended to, and those with mask 0 (tool / user)
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t t = 0; t < R; ++t)
        if (attn.at<std::int32_t>(i, P + t)) {
          in_context += 1;
          not_trained += rmask.at<std::int32_t>(i, t) == 0;
        }
    detail::put_stat(m, "num_turns", turns);
    if (!calls.empty()) m["agent/tool_calls/mean"] = detail::stat_of(calls).mean;
    if (!errors.empty()) m["agent/tool_errors/mean"] = detail::stat_of(errors).mean;
    m["agent/masked_fraction/mean"] = in_context > 0 ? not_trained / in_context : 0.0;
  }
}

RLFLOW_DECL void print_samples(DataProto const& batch, std::int64_t log_train_generations, model::Tokenizer const& tok) {
  Tensor const& p = batch.tensor("prompts");
  Tensor const& r = batch.tensor("responses");
  auto const scores = detail::row_sums(batch.tensor("token_level_scores"));
  std::int64_t const rows = batch.size(), k = std::min<std::int64_t>(log_train_generations, rows);
  auto const P = p.dim(1), R = r.dim(1);
  for (std::int64_t i = 0; i < k; ++i) {
    std::int64_t const row = i * rows / k;
    auto const pr = p.span<std::int32_t>().subspan(static_cast<std::size_t>(row * P), static_cast<std::size_t>(P));
    auto const re = r.span<std::int32_t>().subspan(static_cast<std::size_t>(row * R), static_cast<std::size_t>(R));
    std::printf("  sample %lld/%lld: %s -> %s (score %.4g)\n", static_cast<long long>(i + 1), static_cast<long long>(k),
                quoted(tok.decode(pr)).c_str(), quoted(tok.decode(re)).c_str(), scores[static_cast<std::size_t>(row)]);
  }
  std::fflush(stdout);
}

RLFLOW_DECL void dump_generations(DataProto const& batch, model::Tokenizer const& tok, std::int64_t step,
                                  std::filesystem::path const& dir) {
  Tensor const& p = batch.tensor("prompts");
  Tensor const& r = batch.tensor("responses");
  auto const scores = detail::row_sums(batch.tensor("token_level_scores"));
  auto const P = p.dim(1), R = r.dim(1);
  std::string text;
  for (std::int64_t row = 0; row < batch.size(); ++row) {
    auto const pr = p.span<std::int32_t>().subspan(static_cast<std::size_t>(row * P), static_cast<std::size_t>(P));
    auto const re = r.span<std::int32_t>().subspan(static_cast<std::size_t>(row * R), static_cast<std::size_t>(R));
    nlohmann::json j;
    j["input"] = tok.decode(pr);
    j["output"] = tok.decode(re);
    j["score"] = scores[static_cast<std::size_t>(row)];
    j["step"] = step;
    text += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw io_error(msg("rlflow::Trainer: trainer.rollout_data_dir=", dir.string(), " cannot be created (", ec.message(),
                       "); give a writable folder or clear the key"));
  rlflow::detail::write_file_atomic(dir / (std::to_string(step) + ".jsonl"), text);
}

RLFLOW_DECL std::string quoted(std::string const& s) {
  std::string out = "'";
  for (char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out + "'";
}

RLFLOW_DECL std::int64_t check_prompts(PromptDataset const& train, model::Tokenizer const& tok, TrainerConfig const& cfg,
                                       bool console) {
  std::int64_t const P = cfg.data.max_prompt_length;
  std::int64_t over = 0, longest = 0;
  for (std::int64_t i = 0; i < train.size(); ++i) {
    auto const len = static_cast<std::int64_t>(tok.encode(train[i].prompt).size()) + 1;  // + BOS
    if (len > P) ++over;
    longest = std::max(longest, len);
  }
  if (over == 0) return 0;
  std::string_view const mode = cfg.data.truncation.view();
  if (mode == "error")
    throw config_error(msg("rlflow::Trainer: ", over, " of ", train.size(), " prompts are longer than data.max_prompt_length=",
                           P, " tokens (longest: ", longest, ", BOS included); raise data.max_prompt_length to ", longest,
                           " or set data.truncation=left or right"));
  if (mode != "left" && mode != "right")
    throw config_error(msg("rlflow::Trainer: data.truncation=", mode, " is not supported by the built-in tokenizer path; "
                           "use error, left or right"));
  if (console)
    std::fprintf(stderr, "rlflow: %lld of %lld prompts exceed data.max_prompt_length=%lld and are truncated (%s)\n",
                 static_cast<long long>(over), static_cast<long long>(train.size()), static_cast<long long>(P),
                 std::string(mode).c_str());
  return over;
}

RLFLOW_DECL std::string check_resume_config(nlohmann::json const& saved, std::string const& state_file, TrainerConfig const& cfg) {
  if (saved.is_null()) return {};  // written before configs were saved: nothing to compare
  static constexpr std::string_view must_match[] = {
      "actor_rollout_ref.model.n_layer", "actor_rollout_ref.model.n_head", "actor_rollout_ref.model.n_embd", "actor_rollout_ref.model.arch",
      "actor_rollout_ref.model.vocab_size", "data.max_prompt_length", "data.max_response_length",
      "algorithm.adv_estimator", "critic.enable"};
  static constexpr std::string_view may_differ[] = {
      "trainer.total_epochs", "trainer.total_training_steps", "trainer.resume_mode", "trainer.resume_from_path",
      "trainer.default_local_dir", "trainer.save_freq", "trainer.project_name", "trainer.experiment_name",
      "trainer.logger", "trainer.max_actor_ckpt_to_keep", "trainer.max_critic_ckpt_to_keep", "trainer.test_freq",
      "trainer.val_before_train", "trainer.log_val_generations", "trainer.rollout_data_dir", "trainer.val_only"};
  auto const in = [](std::string_view k, auto const& list) {
    for (auto x : list)
      if (x == k) return true;
    return false;
  };
  std::string errors, diffs;
  for (auto const& k : rlflow::detail::config_keys) {
    nlohmann::json const* node = &saved;
    std::string_view name = k.name;
    bool found = true;
    while (found) {
      auto const dot = name.find('.');
      auto const part = std::string(name.substr(0, dot));
      if (!node->is_object() || !node->contains(part)) found = false;
      else node = &(*node)[part];
      if (dot == std::string_view::npos) break;
      name.remove_prefix(dot + 1);
    }
    if (!found) continue;  // a key this checkpoint predates
    auto const now = rlflow::detail::value_json(cfg, k);
    if (*node == now || in(k.name, may_differ)) continue;
    std::string const line =
        msg("\n  - ", k.name, ": checkpoint ", rlflow::detail::json_preview(*node), ", now ", rlflow::detail::json_preview(now));
    (in(k.name, must_match) ? errors : diffs) += line;
  }
  if (!errors.empty())
    throw config_error(msg("rlflow::Trainer: cannot resume from '", state_file,
                           "': these keys differ from the checkpoint's and decide the shape of its state:", errors,
                           "\nset them to the checkpoint's values, or start a fresh run (trainer.resume_mode=disable or "
                           "another trainer.default_local_dir)"));
  if (!diffs.empty())
    return msg("resuming from '", state_file, "' with a config that differs from the checkpoint's (the new values apply "
             "from the next step):", diffs);
  return {};
}

RLFLOW_DECL void add_val_seeds(DataProto& gen, std::int64_t seed, std::int64_t global_step, std::int64_t b0, std::int64_t n) {
  std::vector<std::int64_t> seeds(static_cast<std::size_t>(gen.size()));
  for (std::size_t k = 0; k < seeds.size(); ++k)
    seeds[k] = static_cast<std::int64_t>(detail::mix64(detail::mix64(static_cast<std::uint64_t>(seed) ^ 0x76616cull) +
                                                       static_cast<std::uint64_t>(global_step) * 1000003ull +
                                                       static_cast<std::uint64_t>(b0 * n) + k) >> 1);
  gen.set_tensor("rollout_seed", Tensor::from(seeds));
}

RLFLOW_DECL void collect_val_scores(std::vector<PromptItem> const& items, std::int64_t n, DataProto const& out,
                                    DataProto const& sc, std::int64_t max_samples, model::Tokenizer const& tok,
                                    std::map<std::string, std::vector<std::vector<double>>>& scores,
                                    std::vector<ValGeneration>& samples) {
  auto const row_score = detail::row_sums(sc.tensor("token_level_scores"));
  Tensor const& resp = out.tensor("responses");
  Tensor const& rmask = out.tensor("response_mask");
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(items.size()); ++i) {
    auto& lists = scores[items[static_cast<std::size_t>(i)].data_source];
    lists.emplace_back();
    for (std::int64_t j = 0; j < n; ++j) {
      std::int64_t const r = i * n + j;
      double const s = row_score[static_cast<std::size_t>(r)];
      lists.back().push_back(s);
      if (static_cast<std::int64_t>(samples.size()) < max_samples) {
        std::vector<std::int32_t> ids;
        for (std::int64_t t = 0; t < resp.dim(1); ++t)
          if (rmask.at<std::int32_t>(r, t)) ids.push_back(resp.at<std::int32_t>(r, t));
        auto const& it = items[static_cast<std::size_t>(i)];
        samples.push_back({it.data_source, it.prompt, tok.decode(ids), it.ground_truth, s});
      }
    }
  }
}

RLFLOW_DECL Metrics val_metrics(std::map<std::string, std::vector<std::vector<double>>> const& scores, std::int64_t n) {
  Metrics m;
  for (auto const& [ds, lists] : scores) {
    double mean = 0, stdv = 0, best = 0, worst = 0;
    for (auto const& l : lists) {
      double mu = 0, hi = -std::numeric_limits<double>::infinity(), lo = std::numeric_limits<double>::infinity();
      for (double x : l) mu += x, hi = std::max(hi, x), lo = std::min(lo, x);
      mu /= static_cast<double>(l.size());
      double var = 0;
      for (double x : l) var += (x - mu) * (x - mu);
      mean += mu;
      stdv += std::sqrt(var / static_cast<double>(l.size()));
      best += hi;
      worst += lo;
    }
    double const P = static_cast<double>(lists.size());
    std::string const base = ds + "/reward/";
    std::string const at = msg("@", n);  // (not "@" + to_string: g++ 12 -Wrestrict false positive)
    m["val-core/" + base + "mean" + at] = mean / P;
    if (n > 1) {
      m["val-aux/" + base + "std" + at] = stdv / P;
      m["val-core/" + base + "best" + at + "/mean"] = best / P;
      m["val-aux/" + base + "worst" + at + "/mean"] = worst / P;
    }
  }
  return m;
}

RLFLOW_DECL void print_val_generations(std::vector<ValGeneration> const& gens) {
  for (auto const& g : gens)
    std::fprintf(stderr, "rlflow: val generation [%s] score=%g\n  prompt: %s\n  response: %s\n", g.data_source.c_str(),
                 g.score, g.prompt.c_str(), g.response.c_str());
}

RLFLOW_DECL void trim_metrics_file(std::filesystem::path const& path, std::int64_t global_step) {
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    try {
      // an integer step only: get<int64_t>() of a float such as 1e300 would be undefined behaviour
      auto const j = nlohmann::json::parse(line);
      auto const it = j.is_object() ? j.find("step") : j.end();
      bool keep = false;
      if (it != j.end() && it->is_number_unsigned()) keep = it->get<std::uint64_t>() <= std::uint64_t(global_step);
      else if (it != j.end() && it->is_number_integer()) keep = it->get<std::int64_t>() <= global_step;
      if (keep) kept += line + "\n";
    } catch (std::exception const&) {
      // a torn last line from a killed run: dropped
    }
  }
  in.close();
  rlflow::detail::write_file_atomic(path, kept);
}

RLFLOW_DECL std::optional<std::filesystem::path> resume_checkpoint_dir(TrainerConfig const& cfg, std::filesystem::path const& root) {
  remove_stale_checkpoint_temps(root);  // what a killed writer left behind
  std::string_view const mode = cfg.trainer.resume_mode.view();
  if (mode == "disable") return std::nullopt;
  std::filesystem::path dir;
  if (mode == "resume_path") {
    dir = std::string(cfg.trainer.resume_from_path.view());
    if (dir.empty())
      throw config_error("rlflow::Trainer: trainer.resume_mode=resume_path needs trainer.resume_from_path=<dir>/global_step_N");
  } else {
    auto step = latest_checkpoint_step(root);
    if (!step) return std::nullopt;
    dir = root / ("global_step_" + std::to_string(*step));
  }
  return dir;
}

}  // namespace rlflow::detail
