// rlflow/model/tensor_parallel.hpp: the tensor-parallel (Megatron-style) shard of the built-in
// GPT held by one TP rank. Defines TPRank (rank, size), check_tensor_parallel (the errors before
// work: TP not dividing the heads, or more TP ranks than heads) and ShardLayout: where a rank's
// slice of each parameter sits in its own flat buffer, and the copy plan from the full
// ParamLayout buffer (one memcpy per contiguous run), so a weight sync reshards in place.
// The split (ParamLayout stores every sharded matrix with the sharded axis first):
//   attn.c_attn  (3C, C) column-parallel by heads: rows [3 hs h0, 3 hs (h0 + nh)), bias likewise
//   attn.c_proj  (C, C) stored (in, out), row-parallel: rows [hs h0, hs (h0 + nh)); bias replicated
//   mlp.c_fc     (4C, C) column-parallel: rows [F r, F (r + 1)), F = 4C / tp; bias likewise
//   mlp.c_proj   (4C, C) stored (in, out), row-parallel: rows [F r, F (r + 1)); bias replicated
//   wte (the tied LM head and the embedding): replicated, or with split_vocab (the
//                vocabulary-parallel head) row-parallel: rows [V r / tp, V (r + 1) / tp), the
//                block padded with zero rows to ceil(V / tp) rows so every rank's buffer has
//                the same size (Megatron's VocabParallelEmbedding; Megatron pads the vocabulary)
//   wpe, the layer norms (and a value head): replicated.
// Letters: C width, NH heads, hs = C / NH, nh = NH / tp heads per rank, h0 = rank * nh, V vocabulary.
#pragma once
#include <algorithm>  // std::sort, std::upper_bound, std::min
#include <cstddef>
#include <cstdint>
#include <cstring>  // std::memcpy
#include <iterator>  // std::prev
#include <span>
#include <vector>

#include <rlflow/core/error.hpp>      // config_error, shape_error
#include <rlflow/core/tensor.hpp>     // Tensor (recut_for_head)
#include <rlflow/model/param_layout.hpp>  // GPTConfig, ParamLayout, init_params

namespace rlflow::model {

//! How a tensor-parallel model computes the LM head (tied to wte).
//! verl / Megatron: the output layer of a TP model is vocabulary-parallel (VocabParallelEmbedding's
//! rows + vocab_parallel_cross_entropy / vocab_parallel_entropy). Used by the rollout
//! (engine::RolloutEngine::set_lm_head) and by training TP (model::GPT::set_lm_head).
enum class LMHead {
  replicated,      //!< every rank computes all V logits
  vocab_parallel,  //!< rank r holds wte's rows [V r / N, V (r + 1) / N) only (ShardLayout with
                   //!< split_vocab) and computes their logits; softmax statistics, log-prob,
                   //!< entropy (and sampling) via all-reduces; the embedding lookup is summed
                   //!< over the group (each token's row comes from its owner, zeros elsewhere)
};

//! Rank r's vocabulary rows [vocab_slice_begin(V, r, N), vocab_slice_begin(V, r + 1, N)) under
//! the vocabulary-parallel head (uneven slices allowed; needs V >= N).
inline int vocab_slice_begin(int V, int r, int N) { return int(std::int64_t(V) * r / N); }

//! One rank of a tensor-parallel group: its index and the group's size.
struct TPRank {
  int rank = 0;
  int size = 1;
  friend bool operator==(TPRank const&, TPRank const&) = default;
};

//! Throws config_error unless 'tp' ranks can split the model by heads: tp >= 1, tp <= n_head and
//! tp divides n_head. 'who' names the caller (e.g. "rlflow::Trainer<..., TP<2>>").
inline void check_tensor_parallel(GPTConfig const& cfg, int tp, char const* who) {
  if (tp < 1) throw config_error(msg(who, ": tensor-parallel size ", tp, " must be >= 1"));
  if (cfg.llama_family()) {
    int const nkv = cfg.kv_heads(), ff = cfg.ff_dim();
    if (cfg.n_head % tp != 0)
      throw config_error(msg(who, ": tensor-parallel size ", tp, " does not divide num_attention_heads = ", cfg.n_head,
                             " (attention is split by heads); use a TP that divides ", cfg.n_head));
    if (tp <= nkv ? nkv % tp != 0 : tp % nkv != 0)
      throw config_error(msg(who, ": tensor-parallel size ", tp, " and num_key_value_heads = ", nkv,
                             ": one must divide the other (each rank holds num_key_value_heads / TP key/value heads, or one "
                             "replicated head when TP is larger); use a TP that divides or is a multiple of ", nkv));
    if (ff % tp != 0)
      throw config_error(msg(who, ": tensor-parallel size ", tp, " does not divide intermediate_size = ", ff,
                             " (the MLP is split by columns); use a TP that divides ", ff));
    return;
  }
  if (tp > cfg.n_head)
    throw config_error(msg(who, ": tensor-parallel size ", tp, " is more ranks than the model's n_head = ", cfg.n_head,
                           " heads (attention is split by heads); use TP <= ", cfg.n_head, " or raise n_head to a multiple of ",
                           tp));
  if (cfg.n_head % tp != 0)
    throw config_error(msg(who, ": tensor-parallel size ", tp, " does not divide n_head = ", cfg.n_head,
                           " (attention is split by heads); use a TP that divides ", cfg.n_head,
                           " or set n_head to a multiple of ", tp));
}

//! The parameters held by one TP rank, in ParamLayout's order with each sharded tensor cut to
//! the rank's block. With tp = 1 it equals ParamLayout (same offsets, one segment).
//! split_vocab (used with LMHead::vocab_parallel at tp > 1): wte is cut to the rank's vocabulary
//! rows and padded to vocab_rows() = ceil(V / tp) rows; the padding is in no segment, load()
//! writes it zero, and zero weights with zero gradients stay zero under AdamW.
class ShardLayout {
 public:
  using Layer = ParamLayout::Layer;
  //! A contiguous run copied from the full buffer: full[src, src + count) -> shard[dst, ...).
  struct Segment {
    std::size_t src = 0, dst = 0, count = 0;
  };

  ShardLayout(GPTConfig const& cfg, TPRank r, bool split_vocab = false) : shard_(r), split_vocab_(split_vocab && r.size > 1) {
    check_tensor_parallel(cfg, r.size, "rlflow::model::ShardLayout");
    if (r.rank < 0 || r.rank >= r.size)
      throw config_error(msg("rlflow::model::ShardLayout: rank ", r.rank, " is outside [0, ", r.size, ")"));
    if (split_vocab_ && cfg.vocab_size < r.size)
      throw config_error(msg("rlflow::model::ShardLayout: splitting wte by vocabulary rows needs vocab_size (", cfg.vocab_size,
                             ") >= the TP size (", r.size, "); use the replicated LM head"));
    ParamLayout const full(cfg);
    full_size_ = full.size();
    if (cfg.llama_family()) {
      build_llama(cfg, full, r);
      return;
    }
    std::size_t const C = std::size_t(cfg.n_embd), hs = std::size_t(cfg.head_dim());
    c_ = C;
    nh_ = cfg.n_head / r.size;
    nkv_ = nh_;
    kv0_ = r.rank * nh_;
    cl_ = std::size_t(nh_) * hs;
    fl_ = 4 * C / std::size_t(r.size);
    std::size_t const q = std::size_t(r.rank);
    auto whole = [&](std::size_t src, std::size_t n) { return take(src, n, true); };
    v0_ = split_vocab_ ? vocab_slice_begin(cfg.vocab_size, r.rank, r.size) : 0;
    v1_ = split_vocab_ ? vocab_slice_begin(cfg.vocab_size, r.rank + 1, r.size) : cfg.vocab_size;
    vrows_ = split_vocab_ ? (cfg.vocab_size + r.size - 1) / r.size : cfg.vocab_size;
    if (split_vocab_) {
      wte = take(full.wte + std::size_t(v0_) * C, std::size_t(v1_ - v0_) * C);
      size_ += std::size_t(vrows_ - (v1_ - v0_)) * C;  // zero rows up to ceil(V / tp): equal-sized shards
    } else {
      wte = whole(full.wte, std::size_t(cfg.vocab_size) * C);
    }
    wpe = whole(full.wpe, std::size_t(cfg.max_seq_len) * C);
    for (auto const& F : full.layers) {
      Layer L{};
      L.ln1_w = whole(F.ln1_w, C);
      L.ln1_b = whole(F.ln1_b, C);
      L.qkv_w = take(F.qkv_w + q * 3 * cl_ * C, 3 * cl_ * C);
      L.qkv_b = take(F.qkv_b + q * 3 * cl_, 3 * cl_);
      L.proj_w = take(F.proj_w + q * cl_ * C, cl_ * C);
      L.proj_b = whole(F.proj_b, C);
      L.ln2_w = whole(F.ln2_w, C);
      L.ln2_b = whole(F.ln2_b, C);
      L.fc_w = take(F.fc_w + q * fl_ * C, fl_ * C);
      L.fc_b = take(F.fc_b + q * fl_, fl_);
      L.fcproj_w = take(F.fcproj_w + q * fl_ * C, fl_ * C);
      L.fcproj_b = whole(F.fcproj_b, C);
      layers.push_back(L);
    }
    lnf_w = whole(full.lnf_w, C);
    lnf_b = whole(full.lnf_b, C);
    if (cfg.value_head) {
      value_w = whole(full.value_w, C);
      value_b = whole(full.value_b, 1);
    }
    lm_head = wte;
  }

  TPRank shard() const { return shard_; }
  //! The rank's key/value heads (NKV / tp, or one replicated head when tp > NKV; GPT-2: its heads)
  //! and the first of them.
  int local_kv_heads() const { return nkv_; }
  int kv_head_begin() const { return kv0_; }
  //! Whether the embedding rows are cut with the LM head's (split_vocab of a tied model); an
  //! untied model keeps its embedding whole and splits lm_head only.
  bool split_embedding() const { return split_vocab_ && wte == lm_head; }
  //! Whether wte is split by vocabulary rows (see the class comment).
  bool split_vocab() const { return split_vocab_; }
  //! The vocabulary rows [vocab_begin(), vocab_end()) of wte this rank holds (all unless split_vocab).
  int vocab_begin() const { return v0_; }
  int vocab_end() const { return v1_; }
  //! Rows of wte in the rank's buffer: vocab_end() - vocab_begin() plus the zero padding.
  int vocab_rows() const { return vrows_; }
  //! Floats of the rank's buffer (the same on every rank of the group).
  std::size_t size() const { return size_; }
  //! Floats of the full model (ParamLayout::size()).
  std::size_t full_size() const { return full_size_; }
  int local_heads() const { return nh_; }
  //! nh * hs: the rank's slice of the attention width.
  int local_embd() const { return int(cl_); }
  //! 4C / tp: the rank's slice of the MLP width.
  int local_ff() const { return int(fl_); }
  std::span<Segment const> segments() const { return segs_; }
  //! The replicated tensors' runs only (wpe, layer norms, row-parallel biases, value head, and wte
  //! unless split_vocab)
  //! and the split tensors' runs only; together they cover segments().
  std::span<Segment const> replicated_segments() const { return rep_; }
  std::span<Segment const> split_segments() const { return split_; }
  //! Floats of the replicated tensors (the same on every rank of the group).
  std::size_t replicated_size() const {
    std::size_t n = 0;
    for (auto const& s : rep_) n += s.count;
    return n;
  }

  //! shard := this rank's slice of 'full' (a ParamLayout buffer): one memcpy per segment; the
  //! split wte's padding rows (split_vocab) are set to zero.
  void load(std::span<float const> full, std::span<float> shard) const {
    if (full.size() != full_size_ || shard.size() != size_)
      throw shape_error(msg("rlflow::model::ShardLayout::load: ", full.size(), " -> ", shard.size(), " floats, expected ",
                            full_size_, " -> ", size_, "; the trainer and the rollout must share one GPTConfig"));
    for (auto const& s : segs_) std::memcpy(shard.data() + s.dst, full.data() + s.src, sizeof(float) * s.count);
    zero_padding(shard);
  }

  //! to (this layout) := the floats 'from' (another cut of the same model on the same rank, e.g.
  //! wte whole) holds in its buffer, copied run by run; the split wte's padding rows are set to
  //! zero. Throws shape_error if this layout needs a float 'from' does not hold (wte rows of other
  //! ranks: load the full weights instead).
  void load_from(ShardLayout const& from, std::span<float const> from_buf, std::span<float> to) const {
    if (from.full_size_ != full_size_ || from_buf.size() != from.size_ || to.size() != size_)
      throw shape_error(msg("rlflow::model::ShardLayout::load_from: ", from_buf.size(), " -> ", to.size(), " floats, expected ",
                            from.size_, " -> ", size_, " of one model (", full_size_, " parameters)"));
    std::vector<Segment> fs(from.segs_.begin(), from.segs_.end());
    std::sort(fs.begin(), fs.end(), [](Segment const& a, Segment const& b) { return a.src < b.src; });
    for (auto const& s : segs_)
      for (std::size_t src = s.src, dst = s.dst, left = s.count; left > 0;) {
        // the last run of 'from' starting at or before src must contain it
        auto it = std::upper_bound(fs.begin(), fs.end(), src, [](std::size_t v, Segment const& g) { return v < g.src; });
        if (it == fs.begin() || std::prev(it)->src + std::prev(it)->count <= src)
          throw shape_error(msg("rlflow::model::ShardLayout::load_from: TP rank ", shard_.rank, " of ", shard_.size,
                                " needs parameter float ", src, " of the full model, which the other cut does not hold; load the "
                                "full weights (load) instead"));
        Segment const& g = *std::prev(it);
        std::size_t const n = std::min(left, g.src + g.count - src);
        std::memcpy(to.data() + dst, from_buf.data() + g.dst + (src - g.src), sizeof(float) * n);
        src += n;
        dst += n;
        left -= n;
      }
    zero_padding(to);
  }

  std::size_t wte = 0, wpe = 0, lnf_w = 0, lnf_b = 0, value_w = 0, value_b = 0;
  std::size_t lm_head = 0;  //!< the LM head's rows: wte when tied (GPT-2 always)
  std::vector<Layer> layers;

 private:
  void zero_padding(std::span<float> shard) const {
    if (vrows_ > v1_ - v0_)
      std::memset(shard.data() + lm_head + std::size_t(v1_ - v0_) * c_, 0, sizeof(float) * std::size_t(vrows_ - (v1_ - v0_)) * c_);
  }
  static void append(std::vector<Segment>& v, std::size_t src, std::size_t dst, std::size_t n) {
    if (!v.empty() && v.back().src + v.back().count == src && v.back().dst + v.back().count == dst)
      v.back().count += n;  // contiguous in both buffers: one copy
    else
      v.push_back(Segment{src, dst, n});
  }
  std::size_t take(std::size_t src, std::size_t n, bool replicated = false) {
    std::size_t const dst = size_;
    append(segs_, src, dst, n);
    append(replicated ? rep_ : split_, src, dst, n);
    size_ += n;
    return dst;
  }

  //! The Llama family's cut: q heads [nh r, nh (r + 1)) and their key/value heads, one fused
  //! [q | k | v] block per layer; gate and up columns [F r, F (r + 1)) as one [gate | up] block;
  //! o_proj and down_proj rows likewise; norms (q/k norms included), o/down biases, the
  //! embedding of an untied model and the value head replicated; the LM head by vocabulary rows
  //! under split_vocab (with the embedding when tied).
  void build_llama(GPTConfig const& cfg, ParamLayout const& full, TPRank r) {
    std::size_t const C = std::size_t(cfg.n_embd), hd = std::size_t(cfg.head_dim()), NH = std::size_t(cfg.n_head),
                      NKV = std::size_t(cfg.kv_heads()), F = std::size_t(cfg.ff_dim()), N = std::size_t(r.size), q = std::size_t(r.rank);
    c_ = C;
    nh_ = int(NH / N);
    nkv_ = N <= NKV ? int(NKV / N) : 1;
    kv0_ = N <= NKV ? int(q) * nkv_ : int(q / (N / NKV));
    cl_ = std::size_t(nh_) * hd;
    fl_ = F / N;
    std::size_t const Q = NH * hd, KV = NKV * hd, kl = std::size_t(nkv_) * hd, k0 = std::size_t(kv0_) * hd;
    auto whole = [&](std::size_t src, std::size_t n) { return take(src, n, true); };
    v0_ = split_vocab_ ? vocab_slice_begin(cfg.vocab_size, r.rank, r.size) : 0;
    v1_ = split_vocab_ ? vocab_slice_begin(cfg.vocab_size, r.rank + 1, r.size) : cfg.vocab_size;
    vrows_ = split_vocab_ ? (cfg.vocab_size + r.size - 1) / r.size : cfg.vocab_size;
    auto head_rows = [&](std::size_t src) {  // the LM head's rows: my vocabulary slice, padded, or all
      if (!split_vocab_) return whole(src, std::size_t(cfg.vocab_size) * C);
      std::size_t const at = take(src + std::size_t(v0_) * C, std::size_t(v1_ - v0_) * C);
      size_ += std::size_t(vrows_ - (v1_ - v0_)) * C;
      return at;
    };
    bool const tied = cfg.tie_word_embeddings;
    wte = tied ? head_rows(full.wte) : whole(full.wte, std::size_t(cfg.vocab_size) * C);
    wpe = ParamLayout::none;
    for (auto const& L : full.layers) {
      Layer S{};
      S.ln1_w = whole(L.ln1_w, C);
      S.ln1_b = S.ln2_b = ParamLayout::none;
      auto qkv_cut = [&](std::size_t src, std::size_t width) {  // rows of the fused [q | k | v] (width floats a row)
        std::size_t const at = take(src + q * cl_ * width, cl_ * width);
        take(src + (Q + k0) * width, kl * width);
        take(src + (Q + KV + k0) * width, kl * width);
        return at;
      };
      S.qkv_w = qkv_cut(L.qkv_w, C);
      S.qkv_b = L.qkv_b == ParamLayout::none ? ParamLayout::none : qkv_cut(L.qkv_b, 1);
      S.q_norm = L.q_norm == ParamLayout::none ? ParamLayout::none : whole(L.q_norm, hd);
      S.k_norm = L.k_norm == ParamLayout::none ? ParamLayout::none : whole(L.k_norm, hd);
      S.proj_w = take(L.proj_w + q * cl_ * C, cl_ * C);
      S.proj_b = L.proj_b == ParamLayout::none ? ParamLayout::none : whole(L.proj_b, C);
      S.ln2_w = whole(L.ln2_w, C);
      auto gate_up = [&](std::size_t src, std::size_t width) {
        std::size_t const at = take(src + q * fl_ * width, fl_ * width);
        take(src + (F + q * fl_) * width, fl_ * width);
        return at;
      };
      S.fc_w = gate_up(L.fc_w, C);
      S.fc_b = L.fc_b == ParamLayout::none ? ParamLayout::none : gate_up(L.fc_b, 1);
      S.fcproj_w = take(L.fcproj_w + q * fl_ * C, fl_ * C);
      S.fcproj_b = L.fcproj_b == ParamLayout::none ? ParamLayout::none : whole(L.fcproj_b, C);
      layers.push_back(S);
    }
    lnf_w = whole(full.lnf_w, C);
    lnf_b = ParamLayout::none;
    lm_head = tied ? wte : head_rows(full.lm_head);
    if (cfg.value_head) {
      value_w = whole(full.value_w, C);
      value_b = whole(full.value_b, 1);
    }
  }

  TPRank shard_;
  bool split_vocab_ = false;
  int v0_ = 0, v1_ = 0, vrows_ = 0;
  int nh_ = 0, nkv_ = 0, kv0_ = 0;
  std::size_t c_ = 0, cl_ = 0, fl_ = 0, size_ = 0, full_size_ = 0;
  std::vector<Segment> segs_, rep_, split_;
};

//! The re-cut an LM-head change makes on one rank (model::GPT::set_lm_head,
//! engine::RolloutEngine::set_lm_head): 'sl' becomes the layout with wte split by vocabulary rows
//! (split) or whole, and the returned buffer holds the rank's weights in it. Whole -> split keeps
//! the rank's rows of 'buf'; split -> whole cannot (the other ranks' rows are elsewhere), so it
//! cuts the seeded initial weights again: the caller allows that only while 'buf' still holds them.
inline Tensor recut_for_head(GPTConfig const& cfg, ShardLayout& sl, Tensor const& buf, bool split) {
  ShardLayout next(cfg, sl.shard(), split);
  Tensor out = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(next.size())});
  if (split) {
    next.load_from(sl, buf.span<float const>(), out.span<float>());
  } else {
    Tensor full = Tensor::empty(DType::float32, Shape{static_cast<std::int64_t>(next.full_size())});
    init_params(cfg, full.span<float>());
    next.load(full.span<float const>(), out.span<float>());
  }
  sl = std::move(next);
  return out;
}

//! full (ParamLayout order) := the TP group's shards put back in place. 'gathered' holds the N
//! ranks' buffers in rank order (an all-gather of ShardLayout(cfg, {r, N}, split_vocab) buffers,
//! all of one size); the replicated tensors are written once per rank, alike.
inline void unshard(GPTConfig const& cfg, int N, bool split_vocab, std::span<float const> gathered, std::span<float> full) {
  ShardLayout const first(cfg, TPRank{0, N}, split_vocab);
  std::size_t const n = first.size();
  if (gathered.size() != n * std::size_t(N) || full.size() != first.full_size())
    throw shape_error(msg("rlflow::model::unshard: ", gathered.size(), " gathered floats -> ", full.size(), ", expected ", N, " x ",
                          n, " -> ", first.full_size()));
  for (int r = 0; r < N; ++r) {
    ShardLayout const sl(cfg, TPRank{r, N}, split_vocab);
    for (auto const& sg : sl.segments())
      std::memcpy(full.data() + sg.src, gathered.data() + std::size_t(r) * n + sg.dst, sizeof(float) * sg.count);
  }
}

}  // namespace rlflow::model
