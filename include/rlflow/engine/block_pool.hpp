// rlflow/engine/block_pool.hpp: the paged KV cache's bookkeeping. Defines BlockPool (fixed-size
// blocks of keys and values for every layer: reference counts, a free list, block hashes for
// automatic prefix caching; the engine keeps the storage, host or device) and BlockTable (a
// sequence's blocks, released by its destructor).
// vLLM: vllm/v1/core/block_pool.py (BlockPool, KVCacheBlock, hash_block_tokens); nano-vllm:
// nanovllm/engine/block_manager.py.
#pragma once
#include <algorithm>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rlflow/core/error.hpp>  // config_error, value_error, msg

namespace rlflow::engine {

//! A fixed pool of KV blocks. Block b holds, for every layer l, the keys then the values of
//! block_size consecutive positions of one sequence: (L, 2, NKV, block_size, hd) floats, NKV and
//! hd those of this tensor-parallel rank, at offset(b, l, k, g) of the engine's storage. A block is free (reference count 0) or held by one or
//! more sequences (the n samples of a request share their prompt's blocks). A full block may carry
//! a hash of (parent block's hash, its tokens): while cached, a new sequence with the same prefix
//! takes it instead of recomputing it, even after its last holder freed it (the free list hands
//! out never-cached blocks first, then the least recently freed cached ones).
//! vLLM: BlockPool with enable_caching.
class BlockPool {
 public:
  struct Shape {
    int layers = 1, kv_heads = 1, head_dim = 1, block_size = 16;
    std::size_t floats_per_block() const { return std::size_t(layers) * 2 * kv_heads * std::size_t(block_size) * head_dim; }
    std::size_t bytes_per_block() const { return floats_per_block() * sizeof(float); }
  };

  BlockPool(Shape s, int num_blocks, bool enable_caching) : s_(s), caching_(enable_caching) {
    if (s.layers < 1 || s.kv_heads < 1 || s.head_dim < 1 || s.block_size < 1)
      throw config_error(msg("rlflow::engine::BlockPool: layers ", s.layers, ", kv_heads ", s.kv_heads, ", head_dim ", s.head_dim,
                             ", block_size ", s.block_size, " must all be >= 1"));
    if (num_blocks < 1)
      throw config_error(msg("rlflow::engine::BlockPool: ", num_blocks, " blocks; the KV budget must hold at least one block of ",
                             s.bytes_per_block(), " bytes (raise kv_cache_bytes or lower block_size)"));
    n_ = num_blocks;
    ref_.assign(std::size_t(n_), 0);
    hash_.assign(std::size_t(n_), 0);
    hashed_.assign(std::size_t(n_), 0);
    tokens_.assign(std::size_t(n_) * s.block_size, 0);
    where_.resize(std::size_t(n_));
    for (int b = 0; b < n_; ++b) where_[std::size_t(b)] = free_.insert(free_.end(), b);
  }
  //! Where keys (k = 0) or values (k = 1) of block b, layer l, KV head g start in a storage of
  //! num_blocks() * floats_per_block() floats: (block_size, hd) floats from there.
  std::size_t offset(int b, int l, int k, int g) const {
    return std::size_t(b) * s_.floats_per_block() + ((std::size_t(l) * 2 + k) * s_.kv_heads + g) * std::size_t(s_.block_size) * s_.head_dim;
  }
  //! The number of blocks a byte budget holds.
  static int blocks_for_bytes(Shape s, std::size_t bytes) {
    return int(std::min<std::size_t>(bytes / s.bytes_per_block(), std::size_t(1) << 30));
  }

  Shape const& shape() const { return s_; }
  int block_size() const { return s_.block_size; }
  int num_blocks() const { return n_; }
  int num_free() const { return int(free_.size()); }
  int num_used() const { return n_ - num_free(); }
  bool caching() const { return caching_; }
  int ref_count(int b) const { return ref_[std::size_t(b)]; }
  std::size_t bytes() const { return std::size_t(n_) * s_.bytes_per_block(); }

  //! Forgets every cached hash (new weights make the cached keys and values stale); held blocks
  //! stay held. vLLM: reset_prefix_cache.
  void reset_cache() {
    for (int b = 0; b < n_; ++b) uncache(b);
  }

  //! Takes a free block (reference count 1), dropping its cached hash. The caller checks num_free().
  int allocate() {
    if (free_.empty()) throw value_error("rlflow::engine::BlockPool::allocate: no free block (the scheduler checks num_free first)");
    int const b = free_.front();
    free_.pop_front();
    uncache(b);
    ref_[std::size_t(b)] = 1;
    return b;
  }
  //! One more holder of block b (a cached free block leaves the free list).
  void ref(int b) {
    if (ref_[std::size_t(b)]++ == 0) free_.erase(where_[std::size_t(b)]);
  }
  //! One holder fewer; at 0 the block is free (a cached one stays findable until reused).
  void release(int b) {
    if (ref_[std::size_t(b)] <= 0) throw value_error(msg("rlflow::engine::BlockPool::release: block ", b, " is not held"));
    if (--ref_[std::size_t(b)] == 0) where_[std::size_t(b)] = free_.insert(free_.end(), b);
  }

  //! The hash of a full block: (parent's hash, its tokens). vLLM: hash_block_tokens.
  static std::uint64_t hash_tokens(std::uint64_t parent, std::span<std::int32_t const> tokens) {
    std::uint64_t h = mix(parent ^ 0x70616765645f6b76ull);
    for (std::int32_t t : tokens) h = mix(h ^ std::uint64_t(std::uint32_t(t)));
    return h == 0 ? 1 : h;
  }
  //! The cached block of this hash and tokens, or -1 (tokens are compared, so a hash collision never
  //! hands out another prefix's keys).
  int lookup(std::uint64_t h, std::span<std::int32_t const> tokens) const {
    if (!caching_) return -1;
    auto it = map_.find(h);
    if (it == map_.end()) return -1;
    int const b = it->second;
    if (!std::equal(tokens.begin(), tokens.end(), tokens_.begin() + std::ptrdiff_t(b) * s_.block_size)) return -1;
    return b;
  }
  //! Registers a full, held block under its hash (no-op when caching is off, the block already has
  //! a hash, or another block holds this hash).
  void cache(int b, std::uint64_t h, std::span<std::int32_t const> tokens) {
    if (!caching_ || hashed_[std::size_t(b)] || map_.count(h)) return;
    map_.emplace(h, b);
    hash_[std::size_t(b)] = h;
    hashed_[std::size_t(b)] = 1;
    std::copy(tokens.begin(), tokens.end(), tokens_.begin() + std::ptrdiff_t(b) * s_.block_size);
  }
  bool is_cached(int b) const { return hashed_[std::size_t(b)] != 0; }

 private:
  static std::uint64_t mix(std::uint64_t x) {  // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  void uncache(int b) {
    if (!hashed_[std::size_t(b)]) return;
    auto it = map_.find(hash_[std::size_t(b)]);
    if (it != map_.end() && it->second == b) map_.erase(it);
    hashed_[std::size_t(b)] = 0;
  }

  Shape s_;
  bool caching_ = true;
  int n_ = 0;
  std::vector<int> ref_;
  std::vector<std::uint64_t> hash_;
  std::vector<std::uint8_t> hashed_;
  std::vector<std::int32_t> tokens_;  //!< a cached block's tokens (collision check)
  std::list<int> free_;
  std::vector<std::list<int>::iterator> where_;
  std::unordered_map<std::uint64_t, int> map_;
};

//! A sequence's blocks in position order (position p sits in block (*this)[p / block_size] at
//! slot p % block_size); holds one reference on each and releases them when cleared or destroyed.
class BlockTable {
 public:
  explicit BlockTable(BlockPool* pool = nullptr) : pool_(pool) {}
  BlockTable(BlockTable const&) = delete;
  BlockTable& operator=(BlockTable const&) = delete;
  BlockTable(BlockTable&& o) noexcept : pool_(o.pool_), ids_(std::move(o.ids_)) { o.ids_.clear(); }
  BlockTable& operator=(BlockTable&& o) noexcept {
    if (this != &o) {
      clear();
      pool_ = o.pool_;
      ids_ = std::move(o.ids_);
      o.ids_.clear();
    }
    return *this;
  }
  ~BlockTable() { clear(); }

  //! A second table holding the same blocks (one more reference each): a forked sample.
  BlockTable share() const {
    BlockTable t(pool_);
    for (int b : ids_) pool_->ref(b);
    t.ids_ = ids_;
    return t;
  }
  void push_allocated(int b) { ids_.push_back(b); }  //!< takes over the allocation's reference
  void push_shared(int b) {                            //!< a cached block: one more reference
    pool_->ref(b);
    ids_.push_back(b);
  }
  //! Replaces block i (held by others too) by a fresh private copy of its contents (copy on write):
  //! copy(old, fresh) copies the keys and values wherever the engine keeps them.
  template <class Copy>
  void copy_on_write(int i, Copy&& copy) {
    int const old = ids_[std::size_t(i)];
    int const fresh = pool_->allocate();
    copy(old, fresh);
    ids_[std::size_t(i)] = fresh;
    pool_->release(old);
  }
  void clear() noexcept {
    if (pool_)
      for (int b : ids_) pool_->release(b);
    ids_.clear();
  }
  int size() const { return int(ids_.size()); }
  int operator[](int i) const { return ids_[std::size_t(i)]; }
  std::vector<int> const& ids() const { return ids_; }

 private:
  BlockPool* pool_ = nullptr;
  std::vector<int> ids_;
};

}  // namespace rlflow::engine
