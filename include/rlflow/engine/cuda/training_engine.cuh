// rlflow/engine/cuda/training_engine.cuh: the training engine of the built-in GPT (policy) on one
// GPU (nvcc only), the device twin of engine/training_engine.hpp: forward keeping activations,
// log-probs and entropy of the response columns, backward from d loss / d log_prob and
// d loss / d entropy through the fused head, the final norm, every block and the embeddings into
// a device gradient buffer (+=), clip + AdamW on the device; packed sequences (set_remove_padding)
// as the CPU engine. Both families: GPT-2 (LayerNorm,
// GELU MLP, learned positions) and the Llama family (RMSNorm, grouped-query attention with RoPE
// and optional q/k norm and biases, SwiGLU MLP, tied or untied LM head), one layer loop each, as
// the CPU GPT. Host Tensors in and out; params() / grads() are host copies (device_params() /
// device_grads() give the device buffers). Does not do the critic head (the CPU engine does).
// Letters: B sequences, T positions, R response width, C, NH, NKV, hs, F, V, L; N the trunk's
// tokens (B T padded, the real tokens packed), H the head rows (the scored positions; B R padded).
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/engine/cuda/training_engine.cuh needs nvcc; build this translation unit as a .cu file"
#endif
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>  // std::copy, std::count_if, std::max, std::max_element
#include <cmath>      // std::sqrt, std::pow, std::isfinite
#include <cstdint>
#include <span>
#include <vector>

#include <rlflow/core/error.hpp>
#include <rlflow/core/tensor.hpp>
#include <rlflow/model/gpt.hpp>                   // GPTConfig, ParamLayout, init_params, positions_from_mask
#include <rlflow/engine/optimizer.hpp>            // OptimizerConfig, lr_at
#include <rlflow/engine/training_engine.hpp>      // LogProbResult, detail::check_batch / check_grad / PackedBatch
#include <rlflow/model/cuda/gpt_layers.cuh>    // forward kernels, gemm wrappers, device_buffer
#include <rlflow/model/cuda/gpt_backward.cuh>  // training kernels

namespace rlflow::engine::cuda {

//! Policy training engine for the built-in GPT on the current CUDA device: same contracts as
//! engine::TrainingEngine's forward / backward / forward_backward / compute_log_prob /
//! optimizer_step / zero_grad / params / grads / load_weights. verl: DataParallelPPOActor.
class TrainingEngine {
 public:
  explicit TrainingEngine(model::GPTConfig const& cfg, OptimizerConfig const& opt = {}) : cfg_(cfg), lay_(cfg), opt_(opt) {
    opt_.validate();
    RLFLOW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    RLFLOW_CUDA_CHECK(cublasCreate(&blas_));
    RLFLOW_CUDA_CHECK(cublasSetStream(blas_, stream_));
    std::size_t const n = lay_.size();
    params_.ensure<float>(n);
    grads_.ensure<float>(n);
    m_.ensure<float>(n);
    v_.ensure<float>(n);
    std::vector<std::uint8_t> dm(n, 0);
    for (auto const& t : lay_.tensors())
      if (t.decay) std::fill(dm.begin() + std::ptrdiff_t(t.offset), dm.begin() + std::ptrdiff_t(t.offset + t.numel), 1);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(decay_.ensure<std::uint8_t>(n), dm.data(), n, cudaMemcpyHostToDevice, stream_));
    RLFLOW_CUDA_CHECK(cudaMemsetAsync(m_.get<float>(), 0, n * sizeof(float), stream_));
    RLFLOW_CUDA_CHECK(cudaMemsetAsync(v_.get<float>(), 0, n * sizeof(float), stream_));
    RLFLOW_CUDA_CHECK(cudaMemsetAsync(grads_.get<float>(), 0, n * sizeof(float), stream_));
    std::vector<float> init(n);
    model::init_params(cfg_, init);
    load_weights(init);  // synchronises
  }
  TrainingEngine(TrainingEngine const&) = delete;
  TrainingEngine& operator=(TrainingEngine const&) = delete;
  ~TrainingEngine() {
    if (stream_) cudaStreamSynchronize(stream_);
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  model::GPTConfig const& config() const { return cfg_; }
  model::ParamLayout const& layout() const { return lay_; }
  cudaStream_t stream() const { return stream_; }
  float* device_params() { return params_.get<float>(); }
  float* device_grads() { return grads_.get<float>(); }

  //! Host copies of the flat parameters / gradients (ParamLayout order).
  std::vector<float> params() const { return download(params_.get<float>()); }
  std::vector<float> grads() const { return download(grads_.get<float>()); }
  //! Copies host floats into the parameters / the gradients (e.g. after a DP all-reduce on the host).
  void load_weights(std::span<float const> flat) { upload(params_.get<float>(), flat, "load_weights"); }
  void set_grads(std::span<float const> flat) { upload(grads_.get<float>(), flat, "set_grads"); }

  LogProbResult compute_log_prob(Tensor const& input_ids, Tensor const& attention_mask, int response_length,
                                 float temperature = 1.0f, bool calculate_entropy = true) {
    return forward(input_ids, attention_mask, response_length, temperature, calculate_entropy);
  }

  //! Packed sequences (verl: actor_rollout_ref.model.use_remove_padding), as the CPU engine's
  //! set_remove_padding: the trunk runs over the rows' real tokens only, end to end, attention
  //! bounded per row and positions restarting per row. Inputs and outputs keep their padded
  //! (B, T) / (B, R) shapes; an output column whose token or predecessor is padding is 0 (its
  //! gradient input is ignored). Takes effect from the next forward (a pending one is dropped).
  void set_remove_padding(bool on) {
    packed_ = on;
    pending_ = false;
  }
  bool remove_padding() const { return packed_; }

  //! log_probs[b, j] = log softmax(logits[b, T-R-1+j] / temperature)[ids[b, T-R+j]] and the
  //! entropy, (B, R) host tensors; keeps the activations for backward().
  LogProbResult forward(Tensor const& input_ids, Tensor const& attention_mask, int response_length,
                        float temperature = 1.0f, bool calculate_entropy = true) {
    namespace K = kernels::cuda::model::layers;
    namespace TK = kernels::cuda::model::train;
    engine::detail::check_batch("forward", input_ids, attention_mask, response_length);
    if (!(temperature > 0.0f))
      throw value_error(msg("rlflow::engine::cuda::TrainingEngine::forward: temperature = ", temperature, " must be > 0"));
    int const B = int(input_ids.dim(0)), T = int(input_ids.dim(1)), R = response_length;
    int const C = cfg_.n_embd, V = cfg_.vocab_size;
    auto const* ids = input_ids.data<std::int32_t>();
    auto const* mask = attention_mask.data<std::int32_t>();
    // what the trunk sees: every (b, t) of the padded rows; packed, only the real tokens, at
    // positions restarting per row (so the longest row bounds them), as the CPU engine
    int span = T;
    if (packed_) {
      span = 0;
      for (int b = 0; b < B; ++b)
        span = std::max(span, int(std::count_if(mask + std::size_t(b) * T, mask + std::size_t(b + 1) * T, [](std::int32_t m) { return m != 0; })));
    }
    if (span > cfg_.max_seq_len)
      throw shape_error(msg("rlflow::engine::cuda::TrainingEngine::forward: ", span, " positions exceed max_seq_len = ",
                            cfg_.max_seq_len, "; shorten the batch"));
    if (span > kernels::cuda::model::layers::max_attention_keys)
      throw config_error(msg("rlflow::engine::cuda::TrainingEngine::forward: ", span, " positions exceed the attention kernels' ",
                             kernels::cuda::model::layers::max_attention_keys, " (48 KiB of shared scores); shorten the batch"));
    for (std::size_t i = 0; i < std::size_t(B) * T; ++i)
      if ((!packed_ || mask[i] != 0) && (ids[i] < 0 || ids[i] >= V))
        throw value_error(msg("rlflow::engine::cuda::TrainingEngine::forward: token ", ids[i], " at flat index ", i,
                              " is outside the vocabulary [0, ", V, ")"));
    pending_ = false;  // until this forward has run
    B_ = B; T_ = T; R_ = R;
    inv_t_ = 1.0f / temperature;
    stage_rows(ids, mask);
    std::size_t const BR = std::size_t(B) * R, H = std::size_t(H_);
    cudaStream_t const st = stream_;
    LogProbResult out;
    out.log_probs = Tensor::zeros(DType::float32, Shape{B, R});
    if (calculate_entropy) out.entropy = Tensor::zeros(DType::float32, Shape{B, R});
    if (H == 0) {  // packed, and no scored position has a real predecessor: every column is 0
      RLFLOW_CUDA_CHECK(cudaMemsetAsync(packed_out_.ensure<float>(3 * BR), 0, 3 * BR * sizeof(float), st));
      RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
      pending_ = true;
      return out;
    }
    std::size_t const N = std::size_t(N_);
    float* a = acts_.ensure<float>(al_.size());
    float* hin = head_in_.ensure<float>(H * C);
    float* lnf = lnf_.ensure<float>(H * C);
    float* lnf_stats = lnf_stats_.ensure<float>(2 * H);
    float* lg = logits_.ensure<float>(H * V);
    float* head_out = head_out_.ensure<float>(4 * H);  // logp, entropy, lse, sum_pi_squared
    float const* P = params_.get<float>();
    std::int32_t const* d_i = ints_.get<std::int32_t>();
    if (cfg_.llama_family()) llama_forward();
    else gpt2_forward();
    // head rows: final norm, LM head (tied: wte), fused log-softmax
    K::gather_rows_kernel<<<unsigned(H), 128, 0, st>>>(hin, a + al_.layer(cfg_.n_layer - 1).res3, d_i + 2 * N + H, C);
    if (cfg_.llama_family())
      K::rmsnorm_kernel<<<unsigned(H), K::block, 0, st>>>(lnf, lnf_stats, hin, P + lay_.lnf_w, K::RowSet{std::int64_t(H), C, 1, std::size_t(C)},
                                                          cfg_.rms_norm_eps);
    else
      K::layernorm_kernel<<<unsigned(H), K::block, 0, st>>>(lnf, lnf_stats, lnf_stats + H, hin, P + lay_.lnf_w, P + lay_.lnf_b, C);
    K::gemm_nt(blas_, lg, lnf, P + lay_.lm_head, int(H), C, V, 0.0f);
    TK::logprob_head_kernel<<<unsigned(H), K::block, 0, st>>>(head_out, head_out + H, head_out + 2 * H, lg, d_i + 2 * N, V, inv_t_);
    float const* cols = head_out;  // (B, R) columns: the head's own rows when every position is scored
    if (staged_packed_) {  // the scored positions' values into zeroed (B, R) columns
      float* po = packed_out_.ensure<float>(3 * BR);
      RLFLOW_CUDA_CHECK(cudaMemsetAsync(po, 0, 3 * BR * sizeof(float), st));
      std::int32_t const* slot = d_i + 2 * N + 2 * H;
      unsigned const grid = K::grid_for(std::int64_t(H));
      TK::scatter_values_kernel<<<grid, 256, 0, st>>>(po, head_out, slot, int(H));
      TK::scatter_values_kernel<<<grid, 256, 0, st>>>(po + BR, head_out + H, slot, int(H));
      cols = po;
    }
    RLFLOW_CUDA_CHECK(cudaGetLastError());
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(out.log_probs.data<float>(), cols, BR * sizeof(float), cudaMemcpyDeviceToHost, st));
    if (calculate_entropy)
      RLFLOW_CUDA_CHECK(cudaMemcpyAsync(out.entropy.data<float>(), cols + BR, BR * sizeof(float), cudaMemcpyDeviceToHost, st));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
    pending_ = true;
    return out;
  }

  //! Sum of squared probabilities (B, R) at the last forward()'s temperature, as the CPU engine's
  //! sum_pi_squared() (0 at unscored packed columns); call it before the next forward or backward.
  //! verl: calculate_sum_pi_squared.
  Tensor sum_pi_squared() {
    namespace K = kernels::cuda::model::layers;
    namespace TK = kernels::cuda::model::train;
    if (!pending_)
      throw value_error("rlflow::engine::cuda::TrainingEngine::sum_pi_squared: no scored batch; call compute_log_prob() or forward() first");
    std::size_t const BR = std::size_t(B_) * R_, H = std::size_t(H_);
    Tensor out = Tensor::zeros(DType::float32, Shape{std::int64_t(B_), std::int64_t(R_)});
    if (H == 0) return out;
    float* head_out = head_out_.get<float>();
    TK::sum_pi_squared_kernel<<<unsigned(H), TK::block, 0, stream_>>>(head_out + 3 * H, logits_.get<float>(), head_out + 2 * H,
                                                                     cfg_.vocab_size, inv_t_);
    float const* col = head_out + 3 * H;
    if (staged_packed_) {
      float* po = packed_out_.get<float>() + 2 * BR;
      RLFLOW_CUDA_CHECK(cudaMemsetAsync(po, 0, BR * sizeof(float), stream_));
      TK::scatter_values_kernel<<<K::grid_for(std::int64_t(H)), 256, 0, stream_>>>(po, col, slots(), int(H));
      col = po;
    }
    RLFLOW_CUDA_CHECK(cudaGetLastError());
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(out.data<float>(), col, BR * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return out;
  }

  //! grads += gradient of sum(dlogp * log_probs + dentropy * entropy) for the last forward();
  //! dlogp, dentropy (B, R) float32 host tensors, dentropy may be undefined.
  void backward(Tensor const& dlogp, Tensor const& dentropy = {}) {
    if (!pending_)
      throw value_error("rlflow::engine::cuda::TrainingEngine::backward: no pending forward(); call forward() first");
    engine::detail::check_grad("backward", "dlogp", dlogp, B_, R_);
    if (dentropy.defined()) engine::detail::check_grad("backward", "dentropy", dentropy, B_, R_);
    std::size_t const BR = std::size_t(B_) * R_;
    cudaStream_t const st = stream_;
    float* dl = dcols_.ensure<float>(2 * BR);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(dl, dlogp.data<float>(), BR * sizeof(float), cudaMemcpyHostToDevice, st));
    if (dentropy.defined())
      RLFLOW_CUDA_CHECK(cudaMemcpyAsync(dl + BR, dentropy.data<float>(), BR * sizeof(float), cudaMemcpyHostToDevice, st));
    backward_from_columns(dl, dentropy.defined() ? dl + BR : nullptr);
  }

  //! As backward() with the loss gradients already on the device: dlogp and (when not null)
  //! dentropy point to (B, R) device floats written on any stream that is idle now (the RL loss
  //! kernels on cuda::par.on(stream()) are). No host round trip.
  void backward_device(float const* dlogp, float const* dentropy = nullptr) {
    if (!pending_)
      throw value_error("rlflow::engine::cuda::TrainingEngine::backward_device: no pending forward(); call forward() first");
    backward_from_columns(dlogp, dentropy);
  }
  //! The last forward's (B, R) log-probs and entropy on the device (valid until the next forward;
  //! packed: 0 at the unscored columns).
  float const* device_log_probs() const { return staged_packed_ ? packed_out_.get<float>() : head_out_.get<float>(); }
  float const* device_entropy() const { return device_log_probs() + std::size_t(B_) * R_; }
  //! The last forward's head-row logits (one row per scored position: B R padded, in (b, j)
  //! order), before the temperature, on the device.
  float const* device_logits() const { return logits_.get<float>(); }

 private:
  //! The device's copy of the rows the trunk runs over (ints_: ids N | positions N | targets H |
  //! head rows H | slots H | cu nseq + 1 | seq N; off_: nseq + 1 probability offsets; valid_: N):
  //! padded, B sequences of T tokens; packed, the real tokens of each row (engine::detail::
  //! PackedBatch). Sets N_, H_, maxlen_ and the activation layout.
  void stage_rows(std::int32_t const* ids, std::int32_t const* mask) {
    int const B = B_, T = T_, R = R_, NH = cfg_.n_head;
    staged_packed_ = packed_;
    if (packed_) {
      pk_.pack(ids, mask, B, T, R);
      N_ = int(pk_.ids.size());
      H_ = int(pk_.head.size());
    } else {
      N_ = B * T;
      H_ = B * R;
    }
    std::size_t const N = std::size_t(N_), H = std::size_t(H_);
    if (H == 0) return;
    host_i_.assign(3 * N + 3 * H + std::size_t(B) + 1, 0);
    std::int32_t* hid = host_i_.data();
    std::int32_t* pos = hid + N;
    std::int32_t* tgt = pos + N;
    std::int32_t* hrow = tgt + H;
    std::int32_t* slot = hrow + H;
    std::int32_t* cu = slot + H;
    std::int32_t* seq = cu + B + 1;
    host_off_.assign(std::size_t(B) + 1, 0);
    host_valid_.assign(N, 1);
    maxlen_ = 0;
    if (packed_) {
      std::copy(pk_.ids.begin(), pk_.ids.end(), hid);
      std::copy(pk_.targets.begin(), pk_.targets.end(), tgt);
      std::copy(pk_.head.begin(), pk_.head.end(), hrow);
      std::copy(pk_.slot.begin(), pk_.slot.end(), slot);
      std::copy(pk_.cu.begin(), pk_.cu.end(), cu);
    } else {
      std::copy(ids, ids + N, hid);
      model::detail::positions_from_mask(pos, host_valid_.data(), mask, B, T);
      for (int b = 0; b <= B; ++b) cu[b] = b * T;
      int const h0 = T - R - 1;
      for (int b = 0; b < B; ++b)
        for (int j = 0; j < R; ++j) {
          std::size_t const k = std::size_t(b) * R + j;
          tgt[k] = ids[std::size_t(b) * T + (T - R + j)];
          hrow[k] = b * T + h0 + j;
          slot[k] = std::int32_t(k);
        }
    }
    for (int b = 0; b < B; ++b) {
      int const n = cu[b + 1] - cu[b];
      maxlen_ = std::max(maxlen_, n);
      host_off_[std::size_t(b) + 1] = host_off_[std::size_t(b)] + std::uint64_t(NH) * std::uint64_t(n) * std::uint64_t(n);
      for (int i = cu[b]; i < cu[b + 1]; ++i) {
        seq[i] = b;
        if (packed_) pos[i] = i - cu[b];  // positions restart per row
      }
    }
    al_ = packed_ ? model::ActivationLayout(cfg_, std::uint64_t(N), host_off_.back()) : model::ActivationLayout(cfg_, B, T);
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(ints_.ensure<std::int32_t>(host_i_.size()), host_i_.data(), host_i_.size() * 4,
                                      cudaMemcpyHostToDevice, stream_));
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(off_.ensure<std::uint64_t>(host_off_.size()), host_off_.data(), host_off_.size() * 8,
                                      cudaMemcpyHostToDevice, stream_));
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(valid_.ensure<std::uint8_t>(N), host_valid_.data(), N, cudaMemcpyHostToDevice, stream_));
    if (cfg_.llama_family()) rope_.ensure(cfg_, *std::max_element(pos, pos + N) + 1, stream_);  // synchronises
  }
  //! The device rows' pieces (stage_rows' layout).
  std::int32_t const* slots() const { return ints_.get<std::int32_t>() + 2 * std::size_t(N_) + 2 * std::size_t(H_); }
  kernels::cuda::model::train::Segments segments() const {
    std::int32_t const* cu = ints_.get<std::int32_t>() + 2 * std::size_t(N_) + 3 * std::size_t(H_);
    return {cu, cu + B_ + 1, off_.get<std::uint64_t>(), valid_.get<std::uint8_t>()};
  }
  //! Dynamic shared memory of the attention kernels: the longest sequence's scores.
  std::size_t attention_smem() const { return std::size_t(maxlen_) * sizeof(float); }

  //! backward from (B, R) device columns of d loss / d log_prob (and d loss / d entropy when not
  //! null): their scored positions into dhead_, then backward_from_head.
  void backward_from_columns(float const* dlogp, float const* dentropy) {
    namespace K = kernels::cuda::model::layers;
    namespace TK = kernels::cuda::model::train;
    std::size_t const H = std::size_t(H_);
    if (H == 0) {  // nothing was scored
      pending_ = false;
      return;
    }
    float* dl = dhead_.ensure<float>(2 * H);
    if (staged_packed_) {
      unsigned const grid = K::grid_for(std::int64_t(H));
      TK::gather_values_kernel<<<grid, 256, 0, stream_>>>(dl, dlogp, slots(), int(H));
      if (dentropy) TK::gather_values_kernel<<<grid, 256, 0, stream_>>>(dl + H, dentropy, slots(), int(H));
    } else {
      RLFLOW_CUDA_CHECK(cudaMemcpyAsync(dl, dlogp, H * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      if (dentropy) RLFLOW_CUDA_CHECK(cudaMemcpyAsync(dl + H, dentropy, H * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    }
    backward_from_head(dentropy != nullptr);
  }
  //! GPT-2's trunk over the staged rows (stage_rows).
  void gpt2_forward() {
    namespace K = kernels::cuda::model::layers;
    namespace TK = kernels::cuda::model::train;
    int const C = cfg_.n_embd, NH = cfg_.n_head;
    std::size_t const N = std::size_t(N_);
    std::int32_t const* d_i = ints_.get<std::int32_t>();
    float* a = acts_.get<float>();
    float const* P = params_.get<float>();
    cudaStream_t const st = stream_;
    K::QKVLayout const L = K::QKVLayout::gpt2(C, NH);
    K::encoder_kernel<<<unsigned(N), 128, 0, st>>>(a + al_.res0(), d_i, d_i + N, P + lay_.wte, P + lay_.wpe, C);
    for (int l = 0; l < cfg_.n_layer; ++l) {
      auto const& W = lay_.layers[std::size_t(l)];
      model::ActivationLayout::Layer const A = al_.layer(l);
      float const* res = a + al_.residual_in(l);
      K::layernorm_kernel<<<unsigned(N), K::block, 0, st>>>(a + A.ln1, a + A.ln1_mean, a + A.ln1_rstd, res, P + W.ln1_w, P + W.ln1_b, C);
      K::bias_rows_kernel<<<K::grid_for(std::int64_t(N) * 3 * C), 256, 0, st>>>(a + A.qkv, P + W.qkv_b, std::int64_t(N) * 3 * C, 3 * C, false);
      K::gemm_nt(blas_, a + A.qkv, a + A.ln1, P + W.qkv_w, int(N), C, 3 * C, 1.0f);
      TK::attention_probs_kernel<<<unsigned(N * NH), K::block, attention_smem(), st>>>(a + A.atty, a + A.att, a + A.qkv, segments(), L);
      RLFLOW_CUDA_CHECK(cudaMemcpyAsync(a + A.res2, res, N * C * sizeof(float), cudaMemcpyDeviceToDevice, st));
      K::bias_rows_kernel<<<K::grid_for(std::int64_t(N) * C), 256, 0, st>>>(a + A.res2, P + W.proj_b, std::int64_t(N) * C, C, true);
      K::gemm_nn(blas_, a + A.res2, a + A.atty, P + W.proj_w, int(N), C, C, 1.0f);
      K::layernorm_kernel<<<unsigned(N), K::block, 0, st>>>(a + A.ln2, a + A.ln2_mean, a + A.ln2_rstd, a + A.res2, P + W.ln2_w, P + W.ln2_b, C);
      K::bias_rows_kernel<<<K::grid_for(std::int64_t(N) * 4 * C), 256, 0, st>>>(a + A.fch, P + W.fc_b, std::int64_t(N) * 4 * C, 4 * C, false);
      K::gemm_nt(blas_, a + A.fch, a + A.ln2, P + W.fc_w, int(N), C, 4 * C, 1.0f);
      K::gelu_kernel<<<K::grid_for(std::int64_t(N) * 4 * C), 256, 0, st>>>(a + A.fch_gelu, a + A.fch, std::int64_t(N) * 4 * C);
      RLFLOW_CUDA_CHECK(cudaMemcpyAsync(a + A.res3, a + A.res2, N * C * sizeof(float), cudaMemcpyDeviceToDevice, st));
      K::bias_rows_kernel<<<K::grid_for(std::int64_t(N) * C), 256, 0, st>>>(a + A.res3, P + W.fcproj_b, std::int64_t(N) * C, C, true);
      K::gemm_nn(blas_, a + A.res3, a + A.fch_gelu, P + W.fcproj_w, int(N), 4 * C, C, 1.0f);
    }
  }

  //! The Llama family's trunk over the (B_, T_) rows (the twin of the CPU GPT's llama_layers):
  //! x += o_proj(attn(rope(qk_norm(qkv(rms1(x)))))); x += down(silu(gate(rms2(x))) * up(rms2(x))).
  //! Over the staged rows (stage_rows); the RoPE tables cover every position.
  void llama_forward() {
    namespace K = kernels::cuda::model::layers;
    namespace TK = kernels::cuda::model::train;
    int const C = cfg_.n_embd, NH = cfg_.n_head, NKV = cfg_.kv_heads(), hd = cfg_.head_dim(), F = cfg_.ff_dim();
    int const QKV = cfg_.qkv_dim(), Q = cfg_.attn_dim();
    std::size_t const N = std::size_t(N_);
    std::int32_t const* d_i = ints_.get<std::int32_t>();
    float* a = acts_.get<float>();
    float const* P = params_.get<float>();
    cudaStream_t const st = stream_;
    float const eps = cfg_.rms_norm_eps;
    K::QKVLayout const L = K::QKVLayout::grouped(NH, NKV, hd);
    K::RowSet const rows{std::int64_t(N), C, 1, std::size_t(C)};
    K::RowSet const qrows{std::int64_t(N) * NH, hd, NH, std::size_t(QKV)}, krows{std::int64_t(N) * NKV, hd, NKV, std::size_t(QKV)};
    std::int32_t const* d_pos = d_i + N;
    auto opt = [&](std::size_t off) -> float const* { return off == model::ParamLayout::none ? nullptr : P + off; };
    // out (N, n) = [b +] inp (N, k) W^T ('nt')
    auto linear_nt = [&](float* out, float const* inp, std::size_t w, std::size_t b, int k, int n) {
      float const* bias = opt(b);
      if (bias) K::bias_rows_kernel<<<K::grid_for(std::int64_t(N) * n), 256, 0, st>>>(out, bias, std::int64_t(N) * n, n, false);
      K::gemm_nt(blas_, out, inp, P + w, int(N), k, n, bias ? 1.0f : 0.0f);
    };
    // out (N, C) = res + [b +] inp (N, k) W ('nn': o_proj, down_proj, stored (in, out))
    auto residual_nn = [&](float* out, float const* res, float const* inp, std::size_t w, std::size_t b, int k) {
      RLFLOW_CUDA_CHECK(cudaMemcpyAsync(out, res, N * C * sizeof(float), cudaMemcpyDeviceToDevice, st));
      if (float const* bias = opt(b)) K::bias_rows_kernel<<<K::grid_for(std::int64_t(N) * C), 256, 0, st>>>(out, bias, std::int64_t(N) * C, C, true);
      K::gemm_nn(blas_, out, inp, P + w, int(N), k, C, 1.0f);
    };
    K::encoder_kernel<<<unsigned(N), 128, 0, st>>>(a + al_.res0(), d_i, d_pos, P + lay_.wte, nullptr, C);
    for (int l = 0; l < cfg_.n_layer; ++l) {
      auto const& W = lay_.layers[std::size_t(l)];
      model::ActivationLayout::Layer const A = al_.layer(l);
      float const* res = a + al_.residual_in(l);
      float* qkv = a + A.qkv;
      K::rmsnorm_kernel<<<unsigned(N), K::block, 0, st>>>(a + A.ln1, a + A.ln1_rstd, res, P + W.ln1_w, rows, eps);
      linear_nt(qkv, a + A.ln1, W.qkv_w, W.qkv_b, C, QKV);
      if (cfg_.qk_norm) {
        RLFLOW_CUDA_CHECK(cudaMemcpyAsync(a + A.qkv_raw, qkv, N * QKV * sizeof(float), cudaMemcpyDeviceToDevice, st));
        K::rmsnorm_kernel<<<unsigned(N * NH), K::block, 0, st>>>(qkv, a + A.qk_rstd, qkv, P + W.q_norm, qrows, eps);
        K::rmsnorm_kernel<<<unsigned(N * NKV), K::block, 0, st>>>(qkv + Q, a + A.qk_rstd + N * NH, qkv + Q, P + W.k_norm, krows, eps);
      }
      K::rope_kernel<<<K::grid_for(std::int64_t(N) * NH * (hd / 2)), 256, 0, st>>>(qkv, d_pos, std::int64_t(N), NH, hd, std::size_t(QKV),
                                                                                  rope_.cos(), rope_.sin(), false);
      K::rope_kernel<<<K::grid_for(std::int64_t(N) * NKV * (hd / 2)), 256, 0, st>>>(qkv + Q, d_pos, std::int64_t(N), NKV, hd,
                                                                                   std::size_t(QKV), rope_.cos(), rope_.sin(), false);
      TK::attention_probs_kernel<<<unsigned(N * NH), K::block, attention_smem(), st>>>(a + A.atty, a + A.att, qkv, segments(), L);
      residual_nn(a + A.res2, res, a + A.atty, W.proj_w, W.proj_b, Q);
      K::rmsnorm_kernel<<<unsigned(N), K::block, 0, st>>>(a + A.ln2, a + A.ln2_rstd, a + A.res2, P + W.ln2_w, rows, eps);
      linear_nt(a + A.fch, a + A.ln2, W.fc_w, W.fc_b, C, 2 * F);
      K::swiglu_kernel<<<K::grid_for(std::int64_t(N) * F), 256, 0, st>>>(a + A.fch_gelu, a + A.fch, std::int64_t(N), F);
      residual_nn(a + A.res3, a + A.res2, a + A.fch_gelu, W.fcproj_w, W.fcproj_b, F);
    }
  }

  // the backward once dhead_ holds d loss / d log_prob of the H_ head rows (and d loss / d entropy
  // when has_dent)
  void backward_from_head(bool has_dent) {
    namespace K = kernels::cuda::model::layers;
    namespace TK = kernels::cuda::model::train;
    bool const llama = cfg_.llama_family();
    int const C = cfg_.n_embd, V = cfg_.vocab_size;
    std::size_t const N = std::size_t(N_), BR = std::size_t(H_), att = std::size_t(host_off_.back());
    // row widths of the scratch: q|k|v, attention output, fc (gate|up), the MLP activation
    std::size_t const wq = std::size_t(llama ? cfg_.qkv_dim() : 3 * C), wa = std::size_t(cfg_.attn_dim());
    std::size_t const wf = std::size_t(llama ? 2 * cfg_.ff_dim() : 4 * C), wh = llama ? std::size_t(cfg_.ff_dim()) : 0;
    cudaStream_t const st = stream_;
    float* head_out = head_out_.get<float>();
    float* dl = dhead_.get<float>();
    float const* P = params_.get<float>();
    float* G = grads_.get<float>();
    std::int32_t const* d_i = ints_.get<std::int32_t>();
    // scratch: dlogits (BR, V) | g (N, C) | dln (N, C) | dqkv (N, wq) | datty (N, wa) | dfch (N, wf) | dh (N, wh)
    //          | dsc (the attention probabilities' layout) | dlnf (BR, C); BR: the head rows
    float* ws = grad_ws_.ensure<float>(BR * V + N * (2 * std::size_t(C) + wq + wa + wf + wh) + att + BR * C);
    Scratch S{};
    S.dlg = ws;
    S.g = S.dlg + BR * V;
    S.dln = S.g + N * C;
    S.dqkv = S.dln + N * C;
    S.datty = S.dqkv + N * wq;
    S.dfch = S.datty + N * wa;
    S.dh = S.dfch + N * wf;
    S.dsc = S.dh + N * wh;
    float* dlnf = S.dsc + att;
    TK::logprob_head_backward_kernel<<<unsigned(BR), 256, 0, st>>>(S.dlg, logits_.get<float>(), d_i + 2 * N, head_out + 2 * BR,
                                                                   head_out + BR, dl, has_dent ? dl + BR : nullptr, V, inv_t_);
    TK::linear_nt_backward(blas_, dlnf, G + lay_.lm_head, S.dlg, lnf_.get<float>(), P + lay_.lm_head, int(BR), C, V);
    // the final norm on the head rows, scattered into the residual gradient g (zero elsewhere)
    float const* stats = lnf_stats_.get<float>();
    float const* hin = head_in_.get<float>();
    float* dhin = S.dln;  // (BR, C) fits in (N, C)
    RLFLOW_CUDA_CHECK(cudaMemsetAsync(S.g, 0, N * C * sizeof(float), st));
    if (llama) {
      K::RowSet const hr{std::int64_t(BR), C, 1, std::size_t(C)};
      TK::rmsnorm_param_backward_kernel<<<unsigned((C + 127) / 128), 128, 0, st>>>(G + lay_.lnf_w, dlnf, hin, stats, hr);
      TK::rmsnorm_backward_kernel<<<unsigned(BR), K::block, 0, st>>>(dhin, dlnf, hin, P + lay_.lnf_w, stats, hr, false);
    } else {
      RLFLOW_CUDA_CHECK(cudaMemsetAsync(dhin, 0, BR * C * sizeof(float), st));
      TK::layernorm_backward_kernel<<<unsigned(BR), K::block, 0, st>>>(dhin, dlnf, hin, P + lay_.lnf_w, stats, stats + BR, C);
      TK::layernorm_param_backward_kernel<<<unsigned((C + 127) / 128), 128, 0, st>>>(G + lay_.lnf_w, G + lay_.lnf_b, dlnf, hin, stats,
                                                                                   stats + BR, int(BR), C);
    }
    TK::scatter_rows_kernel<<<unsigned(BR), 128, 0, st>>>(S.g, dhin, d_i + 2 * N + BR, C);
    if (llama) llama_backward(S);
    else gpt2_backward(S);
    RLFLOW_CUDA_CHECK(cudaGetLastError());
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(st));
    pending_ = false;
  }

  //! The backward's device scratch (backward_from_head lays it out).
  struct Scratch {
    float *dlg, *g, *dln, *dqkv, *datty, *dfch, *dh, *dsc;
  };

  //! GPT-2's layers and embeddings backward from S.g = d loss / d (last layer's output).
  void gpt2_backward(Scratch const& S) {
    namespace K = kernels::cuda::model::layers;
    namespace TK = kernels::cuda::model::train;
    int const C = cfg_.n_embd, NH = cfg_.n_head;
    std::size_t const N = std::size_t(N_);
    cudaStream_t const st = stream_;
    float const* P = params_.get<float>();
    float* G = grads_.get<float>();
    float* a = acts_.get<float>();
    std::int32_t const* d_i = ints_.get<std::int32_t>();
    float *g = S.g, *dln = S.dln, *dqkv = S.dqkv, *datty = S.datty, *dfch = S.dfch, *dsc = S.dsc;
    K::QKVLayout const L = K::QKVLayout::gpt2(C, NH);
    auto colsum = [&](float* db, float const* d, int M, int Nc) {
      TK::column_sums_kernel<<<unsigned((Nc + 127) / 128), 128, 0, st>>>(db, d, M, Nc);
    };
    auto ln_back = [&](float* dinp, float* dw, float* db, float const* dout, float const* inp, float const* w, float const* mean,
                       float const* rstd) {
      TK::layernorm_backward_kernel<<<unsigned(N), K::block, 0, st>>>(dinp, dout, inp, w, mean, rstd, C);
      TK::layernorm_param_backward_kernel<<<unsigned((C + 127) / 128), 128, 0, st>>>(dw, db, dout, inp, mean, rstd, int(N), C);
    };
    for (int l = cfg_.n_layer - 1; l >= 0; --l) {
      auto const& W = lay_.layers[std::size_t(l)];
      model::ActivationLayout::Layer const A = al_.layer(l);
      float const* res = a + al_.residual_in(l);
      // res3 = res2 + gelu(fc(ln2(res2))) Wp + bp ; g is d res3
      TK::linear_nn_backward(blas_, dfch, G + W.fcproj_w, g, a + A.fch_gelu, P + W.fcproj_w, int(N), 4 * C, C);
      colsum(G + W.fcproj_b, g, int(N), C);
      TK::gelu_backward_kernel<<<K::grid_for(std::int64_t(N) * 4 * C), 256, 0, st>>>(dfch, a + A.fch, dfch, std::int64_t(N) * 4 * C);
      TK::linear_nt_backward(blas_, dln, G + W.fc_w, dfch, a + A.ln2, P + W.fc_w, int(N), C, 4 * C);
      colsum(G + W.fc_b, dfch, int(N), 4 * C);
      ln_back(g, G + W.ln2_w, G + W.ln2_b, dln, a + A.res2, P + W.ln2_w, a + A.ln2_mean, a + A.ln2_rstd);  // g: d res2
      TK::linear_nn_backward(blas_, datty, G + W.proj_w, g, a + A.atty, P + W.proj_w, int(N), C, C);
      colsum(G + W.proj_b, g, int(N), C);
      TK::attention_backward_q_kernel<<<unsigned(N * NH), K::block, attention_smem(), st>>>(dqkv, dsc, datty, a + A.qkv, a + A.att, segments(), L);
      TK::attention_backward_kv_kernel<<<unsigned(N * NH), 64, 0, st>>>(dqkv, dsc, datty, a + A.qkv, a + A.att, segments(), L);
      TK::linear_nt_backward(blas_, dln, G + W.qkv_w, dqkv, a + A.ln1, P + W.qkv_w, int(N), C, 3 * C);
      colsum(G + W.qkv_b, dqkv, int(N), 3 * C);
      ln_back(g, G + W.ln1_w, G + W.ln1_b, dln, res, P + W.ln1_w, a + A.ln1_mean, a + A.ln1_rstd);  // g: d res
    }
    TK::encoder_backward_kernel<<<unsigned(N), 128, 0, st>>>(G + lay_.wte, G + lay_.wpe, g, d_i, d_i + N, C);
  }

  //! The Llama family's layers and embedding backward from S.g (the twin of the CPU GPT's
  //! backward_llama): down / SwiGLU / gate|up, RMSNorm 2, o_proj, attention, inverse RoPE, q/k
  //! norms, q|k|v, RMSNorm 1; absent biases get no gradient.
  void llama_backward(Scratch const& S) {
    namespace K = kernels::cuda::model::layers;
    namespace TK = kernels::cuda::model::train;
    int const C = cfg_.n_embd, NH = cfg_.n_head, NKV = cfg_.kv_heads(), hd = cfg_.head_dim(), F = cfg_.ff_dim();
    int const QKV = cfg_.qkv_dim(), Q = cfg_.attn_dim();
    std::size_t const N = std::size_t(N_);
    cudaStream_t const st = stream_;
    float const* P = params_.get<float>();
    float* G = grads_.get<float>();
    float* a = acts_.get<float>();
    std::int32_t const* d_i = ints_.get<std::int32_t>();
    std::int32_t const* d_pos = d_i + N;
    float *g = S.g, *dln = S.dln, *dqkv = S.dqkv, *datty = S.datty, *dfch = S.dfch, *dh = S.dh, *dsc = S.dsc;
    K::QKVLayout const L = K::QKVLayout::grouped(NH, NKV, hd);
    K::RowSet const rows{std::int64_t(N), C, 1, std::size_t(C)};
    K::RowSet const qrows{std::int64_t(N) * NH, hd, NH, std::size_t(QKV)}, krows{std::int64_t(N) * NKV, hd, NKV, std::size_t(QKV)};
    auto colsum = [&](std::size_t b, float const* d, int Nc) {  // a bias the model lacks gets nothing
      if (b != model::ParamLayout::none)
        TK::column_sums_kernel<<<unsigned((Nc + 127) / 128), 128, 0, st>>>(G + b, d, int(N), Nc);
    };
    // RMSNorm backward: the weight's gradient first (dout may be overwritten), then the input's
    auto rms_back = [&](float* dinp, std::size_t w, float const* dout, float const* inp, float const* rstd, K::RowSet rs, bool acc) {
      TK::rmsnorm_param_backward_kernel<<<unsigned((rs.n + 127) / 128), 128, 0, st>>>(G + w, dout, inp, rstd, rs);
      TK::rmsnorm_backward_kernel<<<unsigned(rs.rows), K::block, 0, st>>>(dinp, dout, inp, P + w, rstd, rs, acc);
    };
    for (int l = cfg_.n_layer - 1; l >= 0; --l) {
      auto const& W = lay_.layers[std::size_t(l)];
      model::ActivationLayout::Layer const A = al_.layer(l);
      float const* res = a + al_.residual_in(l);
      // res3 = res2 + (silu(gate) * up) Wd + bd ; g is d res3
      TK::linear_nn_backward(blas_, dh, G + W.fcproj_w, g, a + A.fch_gelu, P + W.fcproj_w, int(N), F, C);
      colsum(W.fcproj_b, g, C);
      TK::swiglu_backward_kernel<<<K::grid_for(std::int64_t(N) * F), 256, 0, st>>>(dfch, a + A.fch, dh, std::int64_t(N), F);
      TK::linear_nt_backward(blas_, dln, G + W.fc_w, dfch, a + A.ln2, P + W.fc_w, int(N), C, 2 * F);
      colsum(W.fc_b, dfch, 2 * F);
      rms_back(g, W.ln2_w, dln, a + A.res2, a + A.ln2_rstd, rows, true);  // g: d res2
      TK::linear_nn_backward(blas_, datty, G + W.proj_w, g, a + A.atty, P + W.proj_w, int(N), Q, C);
      colsum(W.proj_b, g, C);
      TK::attention_backward_q_kernel<<<unsigned(N * NH), K::block, attention_smem(), st>>>(dqkv, dsc, datty, a + A.qkv, a + A.att, segments(), L);
      TK::attention_backward_kv_kernel<<<unsigned(N * NKV), 64, 0, st>>>(dqkv, dsc, datty, a + A.qkv, a + A.att, segments(), L);
      K::rope_kernel<<<K::grid_for(std::int64_t(N) * NH * (hd / 2)), 256, 0, st>>>(dqkv, d_pos, std::int64_t(N), NH, hd, std::size_t(QKV),
                                                                                  rope_.cos(), rope_.sin(), true);
      K::rope_kernel<<<K::grid_for(std::int64_t(N) * NKV * (hd / 2)), 256, 0, st>>>(dqkv + Q, d_pos, std::int64_t(N), NKV, hd,
                                                                                   std::size_t(QKV), rope_.cos(), rope_.sin(), true);
      if (cfg_.qk_norm) {  // in place: d(normed q, k) -> d(projected q, k)
        rms_back(dqkv, W.q_norm, dqkv, a + A.qkv_raw, a + A.qk_rstd, qrows, false);
        rms_back(dqkv + Q, W.k_norm, dqkv + Q, a + A.qkv_raw + Q, a + A.qk_rstd + N * NH, krows, false);
      }
      TK::linear_nt_backward(blas_, dln, G + W.qkv_w, dqkv, a + A.ln1, P + W.qkv_w, int(N), C, QKV);
      colsum(W.qkv_b, dqkv, QKV);
      rms_back(g, W.ln1_w, dln, res, a + A.ln1_rstd, rows, true);  // g: d res
    }
    TK::encoder_backward_kernel<<<unsigned(N), 128, 0, st>>>(G + lay_.wte, nullptr, g, d_i, d_pos, C);
  }

 public:
  LogProbResult forward_backward(Tensor const& input_ids, Tensor const& attention_mask, int response_length,
                                 Tensor const& dlogp, Tensor const& dentropy = {}, float temperature = 1.0f) {
    LogProbResult r = forward(input_ids, attention_mask, response_length, temperature, dentropy.defined());
    backward(dlogp, dentropy);
    return r;
  }

  //! Global-norm clip + AdamW at lr() (engine::AdamW's math); returns the pre-clip norm; a
  //! non-finite norm skips the update but advances the step. Does not zero the gradients.
  float optimizer_step() {
    namespace TK = kernels::cuda::model::train;
    std::int64_t const n = std::int64_t(lay_.size());
    constexpr int parts = 256;
    double* d_part = norm_.ensure<double>(parts);
    TK::sumsq_kernel<<<parts, TK::block, 0, stream_>>>(d_part, grads_.get<float>(), n);
    RLFLOW_CUDA_CHECK(cudaGetLastError());
    double host_part[parts];
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(host_part, d_part, sizeof(host_part), cudaMemcpyDeviceToHost, stream_));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream_));
    double s = 0.0;
    for (double x : host_part) s += x;
    double const norm = std::sqrt(s);
    float const lr = lr_at(opt_, step_);
    ++step_;
    if (!std::isfinite(norm)) return float(norm);
    float clip = 1.0f;
    if (opt_.max_grad_norm > 0.0f && norm > opt_.max_grad_norm) clip = float(opt_.max_grad_norm / (norm + 1e-6));
    float const bc1 = 1.0f - float(std::pow(double(opt_.beta1), double(step_)));
    float const bc2 = 1.0f - float(std::pow(double(opt_.beta2), double(step_)));
    TK::adamw_kernel<<<kernels::cuda::model::layers::grid_for(n), 256, 0, stream_>>>(
        params_.get<float>(), m_.get<float>(), v_.get<float>(), grads_.get<float>(), decay_.get<std::uint8_t>(), n, clip, lr,
        opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay, bc1, bc2);
    RLFLOW_CUDA_CHECK(cudaGetLastError());
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return float(norm);
  }
  void zero_grad() {
    RLFLOW_CUDA_CHECK(cudaMemsetAsync(grads_.get<float>(), 0, lay_.size() * sizeof(float), stream_));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  float lr() const { return lr_at(opt_, step_); }
  std::int64_t step() const { return step_; }
  //! Restores AdamW's moments and step counter (checkpoint resume); sizes as params().
  void set_optimizer_state(std::span<float const> exp_avg, std::span<float const> exp_avg_sq, std::int64_t step) {
    upload(m_.get<float>(), exp_avg, "set_optimizer_state");
    upload(v_.get<float>(), exp_avg_sq, "set_optimizer_state");
    step_ = step;
  }
  //! Host copies of AdamW's moments.
  std::vector<float> exp_avg() const { return download(m_.get<float>()); }
  std::vector<float> exp_avg_sq() const { return download(v_.get<float>()); }

 private:
  std::vector<float> download(float const* d) const {
    std::vector<float> out(lay_.size());
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(out.data(), d, out.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return out;
  }
  void upload(float* d, std::span<float const> flat, char const* fn) {
    if (flat.size() != lay_.size())
      throw shape_error(msg("rlflow::engine::cuda::TrainingEngine::", fn, ": ", flat.size(), " floats for a model of ",
                            lay_.size(), " parameters; check the GPTConfig of both sides"));
    RLFLOW_CUDA_CHECK(cudaMemcpyAsync(d, flat.data(), flat.size_bytes(), cudaMemcpyHostToDevice, stream_));
    RLFLOW_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  model::GPTConfig cfg_;
  model::ParamLayout lay_;
  OptimizerConfig opt_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  kernels::cuda::model::layers::device_buffer params_, grads_, m_, v_, decay_, norm_, ints_, valid_, acts_, head_in_, lnf_,
      lnf_stats_, logits_, head_out_, dhead_, grad_ws_;
  kernels::cuda::model::layers::device_buffer off_, packed_out_, dcols_;  //!< probability offsets; packed (B, R) outputs; host dlogp
  kernels::cuda::model::layers::rope_device_tables rope_;  //!< the Llama family's RoPE tables
  std::vector<std::int32_t> host_i_;
  std::vector<std::uint8_t> host_valid_;
  std::vector<std::uint64_t> host_off_{0};
  engine::detail::PackedBatch pk_;  //!< the last packed forward's rows
  int B_ = 0, T_ = 0, R_ = 0;
  int N_ = 0, H_ = 0, maxlen_ = 0;  //!< the trunk's tokens, the head rows (scored positions), the longest sequence
  bool packed_ = false;             //!< set_remove_padding
  bool staged_packed_ = false;      //!< the last forward's rows were packed
  float inv_t_ = 1.0f;
  bool pending_ = false;
  std::int64_t step_ = 0;
  model::ActivationLayout al_;
};

}  // namespace rlflow::engine::cuda
