// rlflow/comm/communicator.hpp: comm::Communicator, the interface a worker method uses for
// collectives across the ranks of its group (barrier, all-reduce, broadcast, all-gather,
// gather to one rank), and
// comm::LocalCommunicator, its in-process implementation over shared memory and C++20 atomic
// wait/notify. An MPI or NCCL communicator implements the same interface.
// split(color, key) makes sub-communicators; split_mesh gives a rank its TP and DP groups.
// Collectives are deterministic: sums are taken in rank order, so every rank gets identical bits.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include <rlflow/core/error.hpp>  // worker_error, value_error

namespace rlflow::comm {

//! The collectives a worker method may call; every rank of the group must call them in the same
//! order with the same sizes. verl: torch.distributed on the worker's default process group.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  //! Returns when every rank has called barrier().
  virtual void barrier() = 0;
  //! data := sum over ranks of data (in rank order); same length on every rank.
  virtual void allreduce_sum(std::span<float> data) = 0;
  virtual void allreduce_sum(std::span<double> data) = 0;
  //! data := root's data on every rank.
  virtual void broadcast(std::span<float> data, int root) = 0;
  //! out (size() * in.size()) := concatenation of every rank's 'in', in rank order.
  virtual void allgather(std::span<float const> in, std::span<float> out) = 0;
  //! Gather to one rank: on 'root', out (size() * in.size()) := concatenation of every rank's
  //! 'in', in rank order; on the other ranks 'out' is not touched (pass an empty span), so only
  //! the root needs the receive buffer. A collective, as allgather. verl / torch:
  //! torch.distributed.gather; MPI_Gather. The default throws: implement it (the in-process and
  //! MPI communicators do).
  virtual void gather(std::span<float const> in, std::span<float> out, int root) {
    (void)in;
    (void)out;
    (void)root;
    throw error("rlflow::comm::Communicator::gather: this communicator does not implement gather to one rank; "
                "implement gather(in, out, root) (MPI: MPI_Gather) or use allgather");
  }
  //! A sub-communicator of the ranks that pass the same 'color', ranked by (key, rank); every
  //! rank of this communicator must call it (a collective). verl / torch: new_group, MPI_Comm_split.
  //! The default throws: a communicator without sub-groups cannot host a TP or DP sub-group.
  //! Collective: every rank gets root's object, when the ranks share one address space (the
  //! in-process communicator); null otherwise (MPI), so callers fall back to private copies.
  //! Used to share one buffer of replicated weights between a TP replica's ranks.
  virtual std::shared_ptr<void> share(std::shared_ptr<void> obj, int root) {
    (void)obj;
    (void)root;
    return nullptr;
  }
  virtual std::unique_ptr<Communicator> split(int color, int key) {
    (void)color;
    (void)key;
    throw error("rlflow::comm::Communicator::split: this communicator does not support sub-communicators; "
                "implement split(color, key) (MPI: MPI_Comm_split)");
  }
};

//! The TP and DP sub-communicators of one rank of a DP x TP x PP mesh laid out as
//! rank = (pp_rank * dp + dp_rank) * tp + tp_rank (GroupShape's order): 'tp' holds the tp ranks
//! that share (pp_rank, dp_rank), ranked by tp_rank; 'dp' holds the dp ranks that share
//! (pp_rank, tp_rank), ranked by dp_rank. verl: Megatron's tensor / data parallel groups.
struct MeshCommunicators {
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> dp;
};

//! Splits 'world' into this rank's TP and DP groups (two collective splits, in that order).
//! Throws value_error when tp * pp does not divide the world size.
inline MeshCommunicators split_mesh(Communicator& world, int tp, int pp = 1) {
  int const ws = world.size(), r = world.rank();
  if (tp < 1 || pp < 1 || ws % (tp * pp) != 0)
    throw value_error(msg("rlflow::comm::split_mesh: ", ws, " ranks do not form a mesh of tp = ", tp, " x pp = ", pp,
                          "; choose tp and pp whose product divides ", ws));
  int const dp = ws / (tp * pp);
  int const tp_rank = r % tp, dp_rank = (r / tp) % dp, pp_rank = r / (tp * dp);
  MeshCommunicators m;
  m.tp = world.split(/*color=*/pp_rank * dp + dp_rank, /*key=*/tp_rank);
  m.dp = world.split(/*color=*/pp_rank * tp + tp_rank, /*key=*/dp_rank);
  return m;
}

namespace detail {
//! State shared by the LocalCommunicators of one group.
struct LocalCommState {
  explicit LocalCommState(int n) : size(n), slots(static_cast<std::size_t>(n)) {}
  int const size;
  std::atomic<int> arrived{0};
  std::atomic<std::uint32_t> generation{0};
  std::atomic<std::uint32_t> aborted{0};
  std::atomic<int> aborted_by{-1};
  std::vector<void const*> slots;  // per-rank published pointers
  std::vector<std::size_t> counts;
  std::vector<double> scratch;     // reduce buffer
  std::mutex children_mu;          // sub-communicators made by split(): aborted / reset with this one
  std::vector<std::weak_ptr<LocalCommState>> children;

  void check_aborted(int rank) const {
    if (aborted.load(std::memory_order_acquire))
      throw worker_error(msg("rlflow::comm::LocalCommunicator: collective on rank ", rank,
                             " aborted because rank ", aborted_by.load(), " failed in the same call"));
  }
  //! Sense-reversing barrier; wakes (and throws on) abort.
  void barrier(int rank) {
    check_aborted(rank);
    std::uint32_t const gen = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) == size - 1) {
      arrived.store(0, std::memory_order_relaxed);
      generation.store(gen + 1, std::memory_order_release);
      generation.notify_all();
      return;
    }
    for (std::uint32_t g = generation.load(std::memory_order_acquire); g == gen;
         g = generation.load(std::memory_order_acquire)) {
      check_aborted(rank);
      generation.wait(g, std::memory_order_acquire);
    }
    check_aborted(rank);
  }
  void abort(int by) {
    int expected = -1;
    aborted_by.compare_exchange_strong(expected, by);
    aborted.store(1, std::memory_order_release);
    generation.fetch_add(1, std::memory_order_acq_rel);  // wake waiters; they see 'aborted'
    generation.notify_all();
    std::lock_guard lock(children_mu);  // ranks blocked in a sub-group wake too
    for (auto const& w : children)
      if (auto c = w.lock()) c->abort(by);
  }
  //! Re-arms after an aborted call once no rank is inside a collective.
  void reset() {
    arrived.store(0, std::memory_order_relaxed);
    aborted_by.store(-1, std::memory_order_relaxed);
    aborted.store(0, std::memory_order_release);
    std::lock_guard lock(children_mu);
    std::erase_if(children, [](auto const& w) { return w.expired(); });
    for (auto const& w : children)
      if (auto c = w.lock()) c->reset();
  }
};
}  // namespace detail

//! In-process communicator: one per rank, all sharing one state. Obtain it inside a worker
//! method with rlflow::this_worker().comm().
class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<detail::LocalCommState> st, int rank) : st_(std::move(st)), rank_(rank) {}
  //! Builds the n per-rank communicators of one group.
  static std::vector<std::unique_ptr<LocalCommunicator>> make_group(int n) {
    auto st = std::make_shared<detail::LocalCommState>(n);
    std::vector<std::unique_ptr<LocalCommunicator>> out;
    for (int r = 0; r < n; ++r) out.push_back(std::make_unique<LocalCommunicator>(st, r));
    return out;
  }

  int rank() const override { return rank_; }
  int size() const override { return st_->size; }
  void barrier() override { st_->barrier(rank_); }
  void allreduce_sum(std::span<float> data) override { allreduce_impl(data); }
  void allreduce_sum(std::span<double> data) override { allreduce_impl(data); }

  std::shared_ptr<void> share(std::shared_ptr<void> obj, int root) override {
    if (root < 0 || root >= st_->size)
      throw value_error(msg("rlflow::comm::LocalCommunicator::share: root ", root, " is outside [0, ", st_->size, ")"));
    publish(&obj, 1);
    check_counts("share", 1);
    std::shared_ptr<void> out = rank_ == root ? obj : *static_cast<std::shared_ptr<void> const*>(st_->slots[std::size_t(root)]);
    st_->barrier(rank_);  // root's object is copied everywhere before root returns
    return out;
  }

  void broadcast(std::span<float> data, int root) override {
    if (root < 0 || root >= st_->size)
      throw value_error(msg("rlflow::comm::LocalCommunicator::broadcast: root ", root, " is outside [0, ", st_->size, ")"));
    publish(data.data(), data.size());
    check_counts("broadcast", data.size());
    if (rank_ != root && !data.empty())
      std::memcpy(data.data(), st_->slots[static_cast<std::size_t>(root)], data.size_bytes());
    st_->barrier(rank_);
  }

  void allgather(std::span<float const> in, std::span<float> out) override {
    if (out.size() != in.size() * static_cast<std::size_t>(st_->size))
      throw value_error(msg("rlflow::comm::LocalCommunicator::allgather: out has ", out.size(), " elements, expected ",
                            st_->size, " ranks * ", in.size(), " = ", in.size() * static_cast<std::size_t>(st_->size)));
    publish(in.data(), in.size());
    check_counts("allgather", in.size());
    for (int r = 0; r < st_->size; ++r)
      if (!in.empty())
        std::memcpy(out.data() + static_cast<std::size_t>(r) * in.size(), st_->slots[static_cast<std::size_t>(r)],
                    in.size_bytes());
    st_->barrier(rank_);
  }

  void gather(std::span<float const> in, std::span<float> out, int root) override {
    if (root < 0 || root >= st_->size)
      throw value_error(msg("rlflow::comm::LocalCommunicator::gather: root ", root, " is outside [0, ", st_->size, ")"));
    if (rank_ == root && out.size() != in.size() * static_cast<std::size_t>(st_->size))
      throw value_error(msg("rlflow::comm::LocalCommunicator::gather: the root's out has ", out.size(), " elements, expected ",
                            st_->size, " ranks * ", in.size(), " = ", in.size() * static_cast<std::size_t>(st_->size)));
    publish(in.data(), in.size());
    check_counts("gather", in.size());
    if (rank_ == root)
      for (int r = 0; r < st_->size; ++r)
        if (!in.empty())
          std::memcpy(out.data() + static_cast<std::size_t>(r) * in.size(), st_->slots[static_cast<std::size_t>(r)],
                      in.size_bytes());
    st_->barrier(rank_);  // the root has read every rank's 'in'
  }

  //! Collective: the ranks passing the same color form a new LocalCommunicator, ranked by
  //! (key, rank). Its collectives are as deterministic as this one's (rank-order sums); an
  //! abort() of this communicator also wakes ranks blocked in it.
  std::unique_ptr<Communicator> split(int color, int key) override {
    struct Info {
      int color, key;
      std::shared_ptr<detail::LocalCommState>* made;
    };
    std::shared_ptr<detail::LocalCommState> made;
    Info const me{color, key, &made};
    publish(&me, 1);
    std::vector<int> members;  // ranks of my color, in (key, rank) order
    for (int r = 0; r < st_->size; ++r)
      if (static_cast<Info const*>(st_->slots[static_cast<std::size_t>(r)])->color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return static_cast<Info const*>(st_->slots[static_cast<std::size_t>(a)])->key <
             static_cast<Info const*>(st_->slots[static_cast<std::size_t>(b)])->key;
    });
    int const leader = members.front();
    if (rank_ == leader) {
      made = std::make_shared<detail::LocalCommState>(static_cast<int>(members.size()));
      std::lock_guard lock(st_->children_mu);
      st_->children.push_back(made);
    }
    st_->barrier(rank_);  // every leader has made its group's state
    auto sub = *static_cast<Info const*>(st_->slots[static_cast<std::size_t>(leader)])->made;
    st_->barrier(rank_);  // every rank holds its copy: the leaders' 'made' may go
    int const sub_rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    return std::make_unique<LocalCommunicator>(std::move(sub), sub_rank);
  }

  //! Wakes every rank blocked in a collective with a worker_error (used when a rank fails).
  void abort() { st_->abort(rank_); }
  bool aborted() const { return st_->aborted.load(std::memory_order_acquire) != 0; }
  int aborted_by() const { return aborted() ? st_->aborted_by.load(std::memory_order_acquire) : -1; }
  void reset() { st_->reset(); }

 private:
  void publish(void const* p, std::size_t n) {
    if (rank_ == 0) {
      st_->counts.assign(static_cast<std::size_t>(st_->size), 0);
    }
    st_->barrier(rank_);  // counts ready, previous use of slots finished
    st_->slots[static_cast<std::size_t>(rank_)] = p;
    st_->counts[static_cast<std::size_t>(rank_)] = n;
    st_->barrier(rank_);  // every pointer published
  }
  void check_counts(const char* what, std::size_t n) const {
    for (int r = 0; r < st_->size; ++r)
      if (st_->counts[static_cast<std::size_t>(r)] != n)
        throw value_error(msg("rlflow::comm::LocalCommunicator::", what, ": rank ", rank_, " passed ", n,
                              " elements but rank ", r, " passed ", st_->counts[static_cast<std::size_t>(r)],
                              "; every rank must pass the same length"));
  }
  template <class T>
  void allreduce_impl(std::span<T> data) {
    std::size_t const n = data.size();
    if (rank_ == 0 && st_->scratch.size() < n) st_->scratch.resize(n);
    publish(data.data(), n);
    check_counts("allreduce_sum", n);
    // reduce-scatter: rank r sums its segment over ranks in rank order (deterministic)
    int const ws = st_->size;
    std::size_t const b = n * static_cast<std::size_t>(rank_) / static_cast<std::size_t>(ws);
    std::size_t const e = n * static_cast<std::size_t>(rank_ + 1) / static_cast<std::size_t>(ws);
    for (std::size_t i = b; i < e; ++i) {
      T acc = static_cast<T const*>(st_->slots[0])[i];
      for (int r = 1; r < ws; ++r) acc += static_cast<T const*>(st_->slots[static_cast<std::size_t>(r)])[i];
      st_->scratch[i] = static_cast<double>(acc);
    }
    st_->barrier(rank_);  // every segment reduced
    for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<T>(st_->scratch[i]);
    st_->barrier(rank_);  // everyone has read scratch
  }

  std::shared_ptr<detail::LocalCommState> st_;
  int rank_;
};

}  // namespace rlflow::comm
