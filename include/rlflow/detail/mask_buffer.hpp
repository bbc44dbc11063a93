// rlflow/detail/mask_buffer.hpp: a (B, T) mask as float 0/1 in a buffer taken from a small
// per-thread pool and given back when it goes out of scope, so that converting verl's integer
// masks at the boundary (once per call) allocates nothing in steady state.
#pragma once
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace rlflow::detail {

//! A float buffer from a per-thread pool of at most kMaxPooled vectors; several may be alive at
//! once (each has its own storage). Contiguous range of float: std::span<float const>(buf) works.
class pooled_floats {
 public:
  explicit pooled_floats(std::size_t n) {
    auto& p = pool();
    if (!p.empty()) {
      v_ = std::move(p.back());
      p.pop_back();
    }
    if (v_.size() != n) v_.resize(n);  // keeps the capacity of a reused buffer; elements are overwritten by the caller
  }
  pooled_floats(pooled_floats&& o) noexcept : v_(std::move(o.v_)) {}
  pooled_floats& operator=(pooled_floats&& o) noexcept {
    if (this != &o) {
      give_back();
      v_ = std::move(o.v_);
    }
    return *this;
  }
  pooled_floats(pooled_floats const&) = delete;
  pooled_floats& operator=(pooled_floats const&) = delete;
  ~pooled_floats() { give_back(); }

  float* data() { return v_.data(); }
  float const* data() const { return v_.data(); }
  std::size_t size() const { return v_.size(); }
  float* begin() { return v_.data(); }
  float* end() { return v_.data() + v_.size(); }
  float const* begin() const { return v_.data(); }
  float const* end() const { return v_.data() + v_.size(); }
  float& operator[](std::size_t i) { return v_[i]; }
  float const& operator[](std::size_t i) const { return v_[i]; }

 private:
  static constexpr std::size_t kMaxPooled = 4;
  static std::vector<std::vector<float>>& pool() {
    thread_local std::vector<std::vector<float>> p;
    return p;
  }
  void give_back() noexcept {
    if (v_.capacity() == 0) return;
    auto& p = pool();
    if (p.size() < kMaxPooled) {
      try {
        p.push_back(std::move(v_));
      } catch (...) {  // the pool could not grow: the buffer is simply freed
      }
    }
    v_ = {};
  }
  std::vector<float> v_;
};

}  // namespace rlflow::detail
