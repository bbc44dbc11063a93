// rlflow/mpi/mpi_communicator.hpp: comm::MpiCommunicator, the communicator interface over
// an MPI communicator (one per process). Deterministic like comm::LocalCommunicator: the
// all-reduce is a reduce-scatter by hand (MPI_Ialltoallv: rank r receives every rank's copy of
// segment r and sums it in rank order, in the element type) followed by MPI_Iallgatherv, so
// every rank gets the bits the in-process communicator gives; never MPI_SUM, whose order is
// the library's. Every collective is non-blocking underneath and waited for by polling, so a
// worker of a group can be woken when another rank of the same call failed (abort channel) and
// never hangs on a peer that will not come. verl: torch.distributed (gloo / nccl process group).
#pragma once
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <rlflow/comm/communicator.hpp>  // comm::Communicator
#include <rlflow/mpi/mpi_runtime.hpp>   // Backoff, tag_abort
#include <rlflow/core/error.hpp>

namespace rlflow::comm {

//! Collectives over an MPI communicator. The communicator is duplicated (and freed on
//! destruction); every rank of it must call the same collectives in the same order.
class MpiCommunicator final : public Communicator {
 public:
  //! Over 'comm' (duplicated). 'abort_comm': where failures of peers are announced (a worker
  //! group passes its own communicator); MPI_COMM_NULL: no abort channel.
  explicit MpiCommunicator(MPI_Comm comm, MPI_Comm abort_comm = MPI_COMM_NULL)
      : abort_comm_(abort_comm), state_(std::make_shared<State>()) {
    mpi::detail::check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  MpiCommunicator(MpiCommunicator const&) = delete;
  MpiCommunicator& operator=(MpiCommunicator const&) = delete;
  ~MpiCommunicator() override {
    if (comm_ != MPI_COMM_NULL && !dirty_) MPI_Comm_free(&comm_);
    if (base_ != MPI_COMM_NULL) MPI_Comm_free(&base_);
  }

  //! Collective: the ranks passing the same color (>= 0) form a new MpiCommunicator, ranked by
  //! (key, rank), as LocalCommunicator::split and MPI_Comm_split do. The colors and keys are
  //! agreed first with a non-blocking all-gather (abortable, so a failed peer cannot hang it).
  //! The sub-communicator shares this one's abort channel and call: a rank failing in a call
  //! wakes the ranks waiting in any sub-group with a worker_error, and after the group's reset
  //! every sub-communicator renews itself at its next collective (its ranks all do, in step).
  std::unique_ptr<Communicator> split(int color, int key) override {
    refresh();
    check_usable("split");
    int const mine[2] = {color, key};
    std::vector<int> all(2 * static_cast<std::size_t>(size_));
    MPI_Request q;
    mpi::detail::check(MPI_Iallgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm_, &q), "MPI_Iallgather");
    wait(q, "split");
    for (int r = 0; r < size_; ++r)
      if (all[2 * static_cast<std::size_t>(r)] < 0)
        throw value_error(msg("rlflow::comm::MpiCommunicator::split: rank ", r, " passed color ", all[2 * static_cast<std::size_t>(r)],
                              "; colors must be >= 0 (every rank joins one sub-group)"));
    MPI_Comm sub;  // every rank has arrived (the all-gather completed), so this returns promptly
    mpi::detail::check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::unique_ptr<Communicator>(new MpiCommunicator(sub, abort_comm_, state_));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm native() const { return comm_; }

  void barrier() override {
    MPI_Request q;
    refresh();
    check_usable("barrier");
    mpi::detail::check(MPI_Ibarrier(comm_, &q), "MPI_Ibarrier");
    wait(q, "barrier");
  }
  void allreduce_sum(std::span<float> data) override { allreduce_impl(data, MPI_FLOAT); }
  void allreduce_sum(std::span<double> data) override { allreduce_impl(data, MPI_DOUBLE); }

  void broadcast(std::span<float> data, int root) override {
    refresh();
    if (root < 0 || root >= size_)
      throw value_error(msg("rlflow::comm::MpiCommunicator::broadcast: root ", root, " is outside [0, ", size_, ")"));
    check_usable("broadcast");
    check_same_count("broadcast", data.size());
    MPI_Request q;
    auto& buf = fb_.gath;  // MPI works on owned buffers: an aborted collective may still touch them
    buf.assign(data.begin(), data.end());
    mpi::detail::check(MPI_Ibcast(buf.data(), count(buf.size()), MPI_FLOAT, root, comm_, &q), "MPI_Ibcast");
    wait(q, "broadcast");
    std::copy(buf.begin(), buf.end(), data.begin());
  }

  void allgather(std::span<float const> in, std::span<float> out) override {
    refresh();
    if (out.size() != in.size() * static_cast<std::size_t>(size_))
      throw value_error(msg("rlflow::comm::MpiCommunicator::allgather: out has ", out.size(), " elements, expected ", size_,
                            " ranks * ", in.size(), " = ", in.size() * static_cast<std::size_t>(size_)));
    check_usable("allgather");
    check_same_count("allgather", in.size());
    MPI_Request q;
    fb_.send.assign(in.begin(), in.end());
    fb_.gath.resize(out.size());
    mpi::detail::check(MPI_Iallgather(fb_.send.data(), count(in.size()), MPI_FLOAT, fb_.gath.data(), count(in.size()), MPI_FLOAT,
                                      comm_, &q),
                       "MPI_Iallgather");
    wait(q, "allgather");
    std::copy(fb_.gath.begin(), fb_.gath.end(), out.begin());
  }

  void gather(std::span<float const> in, std::span<float> out, int root) override {
    refresh();
    if (root < 0 || root >= size_)
      throw value_error(msg("rlflow::comm::MpiCommunicator::gather: root ", root, " is outside [0, ", size_, ")"));
    if (rank_ == root && out.size() != in.size() * static_cast<std::size_t>(size_))
      throw value_error(msg("rlflow::comm::MpiCommunicator::gather: the root's out has ", out.size(), " elements, expected ",
                            size_, " ranks * ", in.size(), " = ", in.size() * static_cast<std::size_t>(size_)));
    check_usable("gather");
    check_same_count("gather", in.size());
    MPI_Request q;
    fb_.send.assign(in.begin(), in.end());
    if (rank_ == root) fb_.gath.resize(out.size());  // only the root receives
    mpi::detail::check(MPI_Igather(fb_.send.data(), count(in.size()), MPI_FLOAT, rank_ == root ? fb_.gath.data() : nullptr,
                                   count(in.size()), MPI_FLOAT, root, comm_, &q),
                       "MPI_Igather");
    wait(q, "gather");
    if (rank_ == root) std::copy(fb_.gath.begin(), fb_.gath.begin() + std::ptrdiff_t(out.size()), out.begin());
  }

  // ---- used by the MPI worker group ---------------------------------------------------------
  //! The call whose aborts this communicator (and its sub-communicators) honour (aborts of
  //! older calls are dropped).
  void set_call(std::uint64_t c) { state_->call = c; }
  //! Tells every other rank that this rank failed in call 'c' (they leave their collectives).
  void announce_failure(std::uint64_t c) {
    if (abort_comm_ == MPI_COMM_NULL) return;
    std::uint64_t const msg_[2] = {c, static_cast<std::uint64_t>(rank_)};
    for (int r = 0; r < size_; ++r)
      if (r != rank_) MPI_Send(msg_, 2, MPI_UINT64_T, r, mpi::tag_abort, abort_comm_);
  }
  //! True when a collective of this call, on this communicator or a sub-communicator, was left
  //! unfinished because a peer failed.
  bool poisoned() const { return state_->poisoned; }
  //! A fresh communicator after an aborted call (collective over the ranks; the abandoned one is
  //! leaked: MPI cannot cancel a collective). Sub-communicators follow at their next use.
  void renew() {
    MPI_Comm fresh;
    mpi::detail::check(MPI_Comm_dup(abort_comm_ != MPI_COMM_NULL ? abort_comm_ : comm_, &fresh), "MPI_Comm_dup");
    if (!dirty_) MPI_Comm_free(&comm_);
    comm_ = fresh;
    dirty_ = false;
    state_->poisoned = false;
    state_->aborted_by = -1;
    ++state_->epoch;
    epoch_ = state_->epoch;
  }

 private:
  static int count(std::size_t n) {
    if (n > static_cast<std::size_t>(INT32_MAX))
      throw value_error(msg("rlflow::comm::MpiCommunicator: ", n, " elements exceed MPI's int count; split the buffer"));
    return static_cast<int>(n);
  }
  //! Shared by a group's communicator and its sub-communicators (one process, one thread at a
  //! time: the serve loop runs one call at a time).
  struct State {
    std::uint64_t call = 0;
    bool poisoned = false;
    int aborted_by = -1;
    std::uint64_t epoch = 0;  //!< renewals of the group's communicator
  };
  //! A sub-communicator over 'sub' (the result of MPI_Comm_split, kept as the clean base that
  //! renewals duplicate).
  MpiCommunicator(MPI_Comm sub, MPI_Comm abort_comm, std::shared_ptr<State> st)
      : abort_comm_(abort_comm), base_(sub), state_(std::move(st)), epoch_(state_->epoch) {
    mpi::detail::check(MPI_Comm_dup(base_, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  //! A sub-communicator whose group was renewed after an aborted call renews itself (every rank
  //! of it sees the same renewals, so all do it at the same collective).
  void refresh() {
    if (base_ == MPI_COMM_NULL || epoch_ == state_->epoch) return;
    MPI_Comm fresh;
    mpi::detail::check(MPI_Comm_dup(base_, &fresh), "MPI_Comm_dup");
    if (!dirty_) MPI_Comm_free(&comm_);
    comm_ = fresh;
    dirty_ = false;
    epoch_ = state_->epoch;
  }
  void check_usable(const char* what) const {
    if (state_->poisoned)
      throw worker_error(msg("rlflow::comm::MpiCommunicator::", what, ": rank ", rank_,
                             ": an earlier collective of this call was aborted (group rank ", state_->aborted_by,
                             " failed); the group renews its communicator after the call"));
  }
  //! Lengths must agree (as the in-process communicator checks): one small all-gather.
  void check_same_count(const char* what, std::size_t n) {
    counts_.resize(static_cast<std::size_t>(size_) + 1);
    counts_.back() = n;  // this rank's count, sent from an owned buffer
    MPI_Request q;
    mpi::detail::check(MPI_Iallgather(&counts_.back(), 1, MPI_UINT64_T, counts_.data(), 1, MPI_UINT64_T, comm_, &q),
                       "MPI_Iallgather");
    wait(q, what);
    for (int r = 0; r < size_; ++r)
      if (counts_[static_cast<std::size_t>(r)] != n)
        throw value_error(msg("rlflow::comm::MpiCommunicator::", what, ": rank ", rank_, " passed ", n,
                              " elements but rank ", r, " passed ", counts_[static_cast<std::size_t>(r)],
                              "; every rank must pass the same length"));
  }
  //! Waits for q, leaving (worker_error) when a peer announces a failure of the current call.
  void wait(MPI_Request& q, const char* what) {
    mpi::detail::Backoff bo;
    for (unsigned k = 0;; ++k) {
      int done = 0;
      mpi::detail::check(MPI_Test(&q, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      if (abort_comm_ != MPI_COMM_NULL && k % 8 == 0) {
        int by = peer_failure();
        if (by >= 0) {
          dirty_ = true;
          abandon_buffers();
          state_->poisoned = true;
          state_->aborted_by = by;
          throw worker_error(msg("rlflow::comm::MpiCommunicator: ", what, " on rank ", rank_, " aborted because ",
                                 base_ != MPI_COMM_NULL ? "group rank " : "rank ", by, " failed in the same call"));
        }
      }
      bo.pause();
    }
  }
  //! The rank that announced a failure of the current call, or -1 (older announcements dropped).
  int peer_failure() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, mpi::tag_abort, abort_comm_, &flag, &st);
      if (!flag) return -1;
      std::uint64_t m[2];
      MPI_Recv(m, 2, MPI_UINT64_T, st.MPI_SOURCE, mpi::tag_abort, abort_comm_, MPI_STATUS_IGNORE);
      if (m[0] == state_->call) return static_cast<int>(m[1]);
    }
  }

  template <class T>
  void allreduce_impl(std::span<T> data, MPI_Datatype type) {
    refresh();
    check_usable("allreduce_sum");
    check_same_count("allreduce_sum", data.size());
    std::size_t const n = data.size();
    auto const ws = static_cast<std::size_t>(size_);
    auto const seg = [&](std::size_t r) { return n * r / ws; };
    sc_.resize(ws);
    sd_.resize(ws);
    rc_.resize(ws);
    rd_.resize(ws);
    std::size_t const mb = seg(static_cast<std::size_t>(rank_)), me = seg(static_cast<std::size_t>(rank_) + 1);
    std::size_t const mine = me - mb;
    for (std::size_t r = 0; r < ws; ++r) {
      sc_[r] = count(seg(r + 1) - seg(r));
      sd_[r] = count(seg(r));
      rc_[r] = count(mine);
      rd_[r] = count(r * mine);
    }
    auto& b = buffers<T>();  // owned: an aborted collective may still read or write them
    b.send.assign(data.begin(), data.end());
    std::vector<T>& recv = b.recv;
    recv.resize(ws * mine);
    MPI_Request q;
    mpi::detail::check(MPI_Ialltoallv(b.send.data(), sc_.data(), sd_.data(), type, recv.data(), rc_.data(), rd_.data(), type,
                                      comm_, &q),
                       "MPI_Ialltoallv");
    wait(q, "allreduce_sum");
    // this rank's segment, summed over ranks in rank order, in T (as LocalCommunicator does)
    std::vector<T>& part = b.part;
    part.resize(mine);
    for (std::size_t i = 0; i < mine; ++i) {
      T acc = recv[i];
      for (std::size_t r = 1; r < ws; ++r) acc += recv[r * mine + i];
      part[i] = acc;
    }
    for (std::size_t r = 0; r < ws; ++r) {
      rc_[r] = count(seg(r + 1) - seg(r));
      rd_[r] = count(seg(r));
    }
    b.gath.resize(n);
    mpi::detail::check(MPI_Iallgatherv(part.data(), count(mine), type, b.gath.data(), rc_.data(), rd_.data(), type, comm_, &q),
                       "MPI_Iallgatherv");
    wait(q, "allreduce_sum");
    std::copy(b.gath.begin(), b.gath.end(), data.begin());
  }
  //! The buffers MPI reads and writes (never the caller's: a collective left by an abort stays
  //! pending in MPI and may complete later).
  template <class T>
  struct Buffers {
    std::vector<T> send, recv, part, gath;
  };
  template <class T>
  Buffers<T>& buffers() {
    if constexpr (std::is_same_v<T, float>) return fb_;
    else return db_;
  }
  //! After an abort: the pending collective keeps pointing into these, so they are handed to a
  //! never-freed holder (as the abandoned communicator is leaked) and fresh ones are used.
  void abandon_buffers() {
    struct Holder {
      Buffers<float> f;
      Buffers<double> d;
      std::vector<int> sc, sd, rc, rd;
      std::vector<std::uint64_t> counts;
    };
    new Holder{std::move(fb_), std::move(db_), std::move(sc_), std::move(sd_), std::move(rc_), std::move(rd_), std::move(counts_)};
    fb_ = {};
    db_ = {};
    sc_ = sd_ = rc_ = rd_ = {};
    counts_ = {};
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm abort_comm_ = MPI_COMM_NULL;
  MPI_Comm base_ = MPI_COMM_NULL;  // sub-communicators: MPI_Comm_split's result (renewals dup it)
  std::shared_ptr<State> state_;
  std::uint64_t epoch_ = 0;
  bool dirty_ = false;  // a collective on comm_ was left unfinished: never free it
  int rank_ = 0, size_ = 1;
  std::vector<int> sc_, sd_, rc_, rd_;
  std::vector<std::uint64_t> counts_;
  Buffers<float> fb_;
  Buffers<double> db_;
};

}  // namespace rlflow::comm
