// rlflow/mpi/mpi_runtime.hpp: the process-wide side of the MPI backend. mpi::launched()
// tells whether the program was started by mpirun with more than one process; mpi::Runtime
// initializes MPI once (MPI_THREAD_MULTIPLE), duplicates the control communicator (rank 0 of
// MPI_COMM_WORLD, or of a communicator given to mpi::init, is the driver), runs a heartbeat
// thread on worker ranks, keeps the worker ranks' registry of served groups (indexed by group
// id, no strings) and runs their serve loop; mpi::drive() is where the SPMD program splits:
// the driver continues, the workers serve until the driver's scope ends. Finalizes at exit
// (MPI_Abort instead when a call found a rank dead, so no process is left running).
//
// Wire protocol on the control communicator (all little-endian):
//   driver -> worker, tag_cmd: Header {op, group, call, tag, bulk} + payload (method arguments)
//   worker -> driver, tag = the call's tag: u32 bulk count, u8 status (0 ok, 1 error, 2 error
//     caused by a peer's failure) + result (ok) or the error text
//   either way, after a message, on the bulk communicator with the call's tag: its 'bulk'
//     segments (large DataProto tensor columns, wire::Bulk), one message each, straight from
//     the sender's tensors into freshly allocated ones (no serialization pass, no copy)
//   worker -> driver, tag_heartbeat: one byte every Options::heartbeat
#pragma once
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <rlflow/mpi/wire.hpp>
#include <rlflow/core/error.hpp>

namespace rlflow::mpi {

//! Settings of the MPI backend; give them to mpi::init before the first MPI group is built.
//! The liveness timeout also comes from the environment: RLFLOW_MPI_TIMEOUT_S (seconds).
struct Options {
  //! Communicator whose rank 0 drives (duplicated; never used directly).
  MPI_Comm comm = MPI_COMM_WORLD;
  //! A worker rank silent (no heartbeat, no reply) this long while the driver waits on it is
  //! declared dead: the call fails with a worker_error naming it.
  std::chrono::milliseconds liveness_timeout{10000};
  //! How often worker ranks send a heartbeat to the driver.
  std::chrono::milliseconds heartbeat{200};
};

inline constexpr int tag_cmd = 1;
inline constexpr int tag_heartbeat = 2;
inline constexpr int tag_ctor = 3;
inline constexpr int tag_abort = 4;  // on a group's communicator: "rank k failed in call c"
inline constexpr int tag_first_call = 16;

//! Control operations (method indices start at 0).
inline constexpr std::uint32_t op_release = 0xffffffffu;  // end of the driver's scope: stop serving
inline constexpr std::uint32_t op_thunk = 0xfffffffeu;    // the payload starts with a function offset
inline constexpr std::uint32_t op_reset = 0xfffffffdu;    // a call failed: renew the group's collectives

struct Header {
  std::uint32_t op = 0;
  std::uint32_t group = 0;
  std::uint64_t call = 0;
  std::int32_t tag = 0;
  std::int32_t group_rank = 0;
  std::uint32_t bulk = 0;  //!< bulk segments that follow on the bulk communicator (wire::Bulk)
  std::uint32_t reserved = 0;
};
//! A reply starts with the count of bulk segments that follow it (u32), then the status byte.
inline constexpr std::size_t reply_prefix_bytes = 4;

//! True when this process was started by an MPI launcher with more than one process (Open MPI,
//! MPICH/Hydra, PMIx, Slurm's PMI). A program started without mpirun runs every WorkerGroup
//! in process, without initializing MPI.
inline bool launched() {
  for (const char* k : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(k)) return std::atoi(v) > 1;
  return false;
}

namespace detail {
inline void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw worker_error(msg("rlflow::mpi: ", what, " failed: ", std::string(text, static_cast<std::size_t>(len))));
  }
}

//! Polls with sched_yield for a short window, then sleeps with growing naps (up to 200 us):
//! cheap when the answer is close, kind to a shared machine when it is not.
class Backoff {
 public:
  void pause() {
    ++n_;
    if (n_ < 256) {
      std::this_thread::yield();
      return;
    }
    nap_ = std::min<std::chrono::microseconds>(nap_ * 2, std::chrono::microseconds(200));
    std::this_thread::sleep_for(nap_);
  }
  void reset() {
    n_ = 0;
    nap_ = std::chrono::microseconds(5);
  }

 private:
  unsigned n_ = 0;
  std::chrono::microseconds nap_{5};
};

inline std::optional<Options>& pending_options() {
  static std::optional<Options> o;
  return o;
}
}  // namespace detail

//! A group served by this worker process (one per WorkerGroup<Host, Mpi> it belongs to).
class ServedGroup {
 public:
  virtual ~ServedGroup() = default;
  //! Runs one command; writes the reply (status byte first) into 'reply'.
  virtual void handle(Header const& h, wire::Reader& in, wire::Buffer& reply) = 0;
  //! Renews the group's collectives after a failed call (collective over the group's ranks).
  virtual void reset_collectives() = 0;
};

class Runtime {
 public:
  //! The process's runtime (initializes MPI on first use). Only when launched().
  static Runtime& get() {
    static Runtime rt(detail::pending_options().value_or(Options{}));
    return rt;
  }

  Runtime(Runtime const&) = delete;
  Runtime& operator=(Runtime const&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_driver() const { return rank_ == 0; }
  MPI_Comm control() const { return ctl_; }
  Options const& options() const { return opts_; }

  //! Group ids are handed out in construction order, identically on every rank (SPMD).
  std::uint32_t next_group_id() { return next_group_++; }
  //! Call ids / reply tags (driver).
  std::uint64_t next_call_id() { return next_call_.fetch_add(1, std::memory_order_relaxed); }  // any driver thread

  //! Placement: the groups of pool 'pool' put group rank r on world rank first + r (default 1,
  //! right after the driver, for every pool: pools then share processes). Set it on every rank,
  //! before the pool's first group (place_pool in mpi.hpp).
  void place(std::string pool, int first) {
    if (first < 1)  // beyond the job: the pool's first group names the mpirun -np it needs
      throw config_error(msg("rlflow::mpi::place_pool('", pool, "', ", first, "): the first world rank must be >= 1 ",
                             "(rank 0 is the driver)"));
    for (auto& [k, v] : placement_)
      if (k == pool) {
        v = first;
        return;
      }
    placement_.emplace_back(std::move(pool), first);
  }
  int first_rank_of(std::string_view pool) const {
    for (auto const& [k, v] : placement_)
      if (k == pool) return v;
    return 1;
  }
  int tag_of(std::uint64_t call) const {
    return tag_first_call + static_cast<int>(call % static_cast<std::uint64_t>(tag_ub_ - tag_first_call));
  }

  void register_group(std::uint32_t id, ServedGroup* g) {
    if (served_.size() <= id) served_.resize(id + 1, nullptr);
    served_[id] = g;
  }
  void unregister_group(std::uint32_t id) {
    if (id < served_.size()) served_[id] = nullptr;
  }

  //! Driver: whether a drive() scope is open (workers are serving; no new groups until it ends).
  bool driving() const { return driving_; }
  void set_driving(bool d) { driving_ = d; }
  //! Driver: a rank was found dead; the job is aborted at exit instead of finalized.
  void mark_broken() { broken_ = true; }
  bool broken() const { return broken_; }

  //! Driver: receives pending heartbeats (any thread; a matched probe takes each once).
  void drain_heartbeats() {
    for (;;) {
      int flag = 0;
      MPI_Message m;
      MPI_Status st;
      MPI_Improbe(MPI_ANY_SOURCE, tag_heartbeat, ctl_, &flag, &m, &st);
      if (!flag) return;
      char b = 0;
      MPI_Mrecv(&b, 1, MPI_CHAR, &m, MPI_STATUS_IGNORE);
      seen(st.MPI_SOURCE);
    }
  }
  //! Driver: rank w was heard from now.
  void seen(int w) { last_seen_[static_cast<std::size_t>(w)].store(now_ms(), std::memory_order_relaxed); }
  //! Driver: milliseconds since rank w was last heard from.
  std::int64_t silent_ms(int w) const { return now_ms() - last_seen_[static_cast<std::size_t>(w)].load(std::memory_order_relaxed); }
  static std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  //! The communicator the bulk segments (large DataProto columns) travel on, tag = the call's.
  MPI_Comm bulk() const { return bulk_; }

  //! Posts one MPI_Isend per segment to rank 'to' (in order; the receiver posts its receives
  //! in the same order). 'peers' gets 'to' once per request.
  void post_bulk_sends(int to, int tag, std::span<wire::BulkSeg const> segs, std::vector<MPI_Request>& q,
                       std::vector<int>& peers) {
    for (auto const& s : segs) {
      if (s.bytes > static_cast<std::size_t>(INT32_MAX))
        throw value_error(msg("rlflow::mpi: a column of ", s.bytes, " bytes exceeds one MPI message (", INT32_MAX,
                              " bytes); split the batch into smaller calls"));
      q.emplace_back();
      peers.push_back(to);
      detail::check(MPI_Isend(s.ptr, static_cast<int>(s.bytes), MPI_BYTE, to, tag, bulk_, &q.back()), "MPI_Isend (bulk)");
    }
  }

  //! Waits for requests to the ranks 'peers' (one per request). Never a hang: on the driver a
  //! peer silent past the liveness timeout fails the wait naming it; on a worker (whose only
  //! peer is the driver) the wait is bounded by the liveness timeout. what() names the call
  //! (called only to build an error).
  template <class What>
  void wait_requests(std::vector<MPI_Request>& q, std::vector<int> const& peers, What const& what) {
    detail::Backoff bo;
    std::int64_t const t0 = now_ms(), limit = opts_.liveness_timeout.count();
    for (unsigned k = 0;; ++k) {
      int done = 0;
      detail::check(MPI_Testall(static_cast<int>(q.size()), q.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (done) return;
      if (k % 64 == 63) {
        int late = -1;
        if (rank_ == 0) {
          drain_heartbeats();
          for (std::size_t i = 0; i < q.size() && late < 0; ++i)
            if (q[i] != MPI_REQUEST_NULL && silent_ms(peers[i]) > limit) late = peers[i];
        } else if (now_ms() - t0 > limit) {
          late = 0;
        }
        if (late >= 0) {
          if (rank_ == 0) mark_broken();
          throw worker_error(msg(what(), ": MPI rank ", late, " took no part in the transfer for ", now_ms() - t0,
                                 " ms (liveness timeout ", limit, " ms): its process died, stopped or stopped serving; ",
                                 "raise rlflow::mpi::Options::liveness_timeout or RLFLOW_MPI_TIMEOUT_S if it was only slow"));
        }
      }
      bo.pause();
    }
  }

  //! Receives the bulk segments of one message from rank 'from' into the slots that decoding it
  //! registered in 'in' ('announced': how many the sender said follow). A count or size that
  //! differs is a format_error naming both numbers; the sender's segments are consumed either
  //! way, so the next message is not confused. Bounded like wait_requests.
  template <class What>
  void recv_bulk(int from, int tag, wire::Bulk& in, std::uint32_t announced, What const& what) {
    if (in.done) return;
    in.done = true;
    if (in.segs.size() != announced) {
      drain_bulk(from, tag, announced, what);
      throw format_error(msg(what(), ": mismatched message from MPI rank ", from, ": it announced ", announced,
                             " bulk segments but its contents name ", in.segs.size(),
                             "; both sides must run the same build of the program"));
    }
    if (announced == 0) return;
    std::vector<MPI_Request> q(in.segs.size());
    std::vector<int> peers(in.segs.size(), from);
    for (std::size_t i = 0; i < in.segs.size(); ++i)
      detail::check(MPI_Irecv(in.segs[i].ptr, static_cast<int>(in.segs[i].bytes), MPI_BYTE, from, tag, bulk_, &q[i]),
                    "MPI_Irecv (bulk)");
    std::vector<MPI_Status> st(q.size());
    try {
      detail::Backoff bo;
      std::int64_t const t0 = now_ms(), limit = opts_.liveness_timeout.count();
      for (unsigned k = 0;; ++k) {
        int done = 0;
        int const rc = MPI_Testall(static_cast<int>(q.size()), q.data(), &done, st.data());
        if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) detail::check(rc, "MPI_Testall (bulk)");
        if (done || rc == MPI_ERR_IN_STATUS) break;
        if (k % 64 == 63) {
          bool late = false;
          if (rank_ == 0) {
            drain_heartbeats();
            late = silent_ms(from) > limit;
          } else {
            late = now_ms() - t0 > limit;
          }
          if (late) {
            if (rank_ == 0) mark_broken();
            throw worker_error(msg(what(), ": MPI rank ", from, " sent ", announced, " bulk segments' header but not their data ",
                                   "within ", now_ms() - t0, " ms (liveness timeout ", limit,
                                   " ms): its process died or stopped; raise RLFLOW_MPI_TIMEOUT_S if it was only slow"));
          }
        }
        bo.pause();
      }
    } catch (...) {
      for (auto& r : q)
        if (r != MPI_REQUEST_NULL) {
          MPI_Cancel(&r);
          MPI_Request_free(&r);
        }
      throw;
    }
    for (std::size_t i = 0; i < q.size(); ++i) {
      int count = -1;
      if (st[i].MPI_ERROR == MPI_SUCCESS) MPI_Get_count(&st[i], MPI_BYTE, &count);
      if (count != static_cast<int>(in.segs[i].bytes))
        throw format_error(msg(what(), ": mismatched message from MPI rank ", from, ": bulk segment ", i, " of ", announced,
                               " should hold ", in.segs[i].bytes, " bytes but ",
                               count < 0 ? std::string("was larger") : msg(count, " bytes arrived"),
                               "; both sides must run the same build of the program"));
    }
  }
  //! Receives and drops 'n' bulk segments from rank 'from' (a message that could not be used).
  template <class What>
  void drain_bulk(int from, int tag, std::uint32_t n, What const& what) {
    std::vector<std::byte> scratch;
    std::int64_t const t0 = now_ms(), limit = opts_.liveness_timeout.count();
    detail::Backoff bo;
    for (std::uint32_t i = 0; i < n;) {
      int flag = 0;
      MPI_Message m;
      MPI_Status st;
      MPI_Improbe(from, tag, bulk_, &flag, &m, &st);
      if (flag) {
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        scratch.resize(static_cast<std::size_t>(count));
        MPI_Mrecv(scratch.data(), count, MPI_BYTE, &m, MPI_STATUS_IGNORE);
        ++i;
        continue;
      }
      if (rank_ == 0) drain_heartbeats();
      if (rank_ == 0 ? silent_ms(from) > limit : now_ms() - t0 > limit)
        throw worker_error(msg(what(), ": MPI rank ", from, " announced ", n, " bulk segments but sent only ", i,
                               " within the liveness timeout (", limit, " ms)"));
      bo.pause();
    }
  }

  //! Worker: serves commands until the driver releases this scope.
  void serve() {
    wire::Buffer in, reply;
    wire::Bulk bin, bout;
    std::vector<MPI_Request> q;
    std::vector<int> peers;
    detail::Backoff bo;
    for (;;) {
      int flag = 0;
      MPI_Message m;
      MPI_Status st;
      MPI_Improbe(0, tag_cmd, ctl_, &flag, &m, &st);
      if (!flag) {
        bo.pause();
        continue;
      }
      bo.reset();
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      in.resize(static_cast<std::size_t>(count));
      MPI_Mrecv(in.data(), count, MPI_BYTE, &m, MPI_STATUS_IGNORE);
      wire::Reader r(std::span<std::byte const>(in.data(), in.size()));
      Header h = r.pod<Header>("a command header");
      if (h.op == op_release) return;
      ServedGroup* g = h.group < served_.size() ? served_[h.group] : nullptr;
      if (h.op == op_reset) {
        if (g) g->reset_collectives();
        continue;
      }
      reply.resize(reply_prefix_bytes);
      bin.clear();
      bout.clear();
      auto const what = [&] { return msg("rlflow::mpi: world rank ", rank_, ", call ", h.call); };
      if (!g) {
        reply.push_back(std::byte{1});
        wire::put(reply, msg("rlflow::mpi: world rank ", rank_, " holds no worker of group ", h.group,
                             "; every rank must construct the same WorkerGroups in the same order before drive()"));
      } else {
        wire::BulkScope scope(&bout, &bin);
        g->handle(h, r, reply);  // receives the command's bulk segments after decoding (recv_bulk)
      }
      try {
        if (!bin.done && h.bulk) drain_bulk(0, h.tag, h.bulk, what);  // unused (the call failed before)
        auto const nb = static_cast<std::uint32_t>(bout.segs.size());
        std::memcpy(reply.data(), &nb, sizeof nb);
        detail::check(MPI_Send(reply.data(), static_cast<int>(reply.size()), MPI_BYTE, 0, h.tag, ctl_), "MPI_Send (reply)");
        q.clear();
        peers.clear();
        post_bulk_sends(0, h.tag, bout.segs, q, peers);
        wait_requests(q, peers, [&] { return what() + " sending its reply's bulk segments"; });
      } catch (std::exception const& e) {
        std::fprintf(stderr, "%s: %s; aborting the job\n", what().c_str(), e.what());
        MPI_Abort(ctl_, 1);
      }
      bout.clear();
      bin.clear();
    }
  }

  //! Driver: sends 'bytes' (a Header + payload) to world rank w.
  void send_command(int w, wire::Buffer const& bytes) {
    detail::check(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, w, tag_cmd, ctl_), "MPI_Send");
  }

  //! Driver: ends the workers' serve loops (drive() scope exit).
  void release_workers() {
    Header h;
    h.op = op_release;
    wire::Buffer b(sizeof h);
    std::memcpy(b.data(), &h, sizeof h);
    for (int w = 1; w < size_; ++w) send_command(w, b);
  }

  ~Runtime() {
    if (hb_thread_.joinable()) {
      hb_stop_.store(true);
      hb_thread_.join();
    }
    if (broken_) MPI_Abort(ctl_, 1);  // a rank is dead or hung: end the whole job, leave nothing running
    // Everyone meets before finalizing. The driver waits at most the liveness timeout (a worker
    // that never arrives is serving a scope the driver never opened, or is gone): then it aborts
    // the job rather than hang. Workers wait for the driver as long as it works.
    MPI_Request q;
    MPI_Ibarrier(ctl_, &q);
    detail::Backoff bo;
    auto const until = std::chrono::steady_clock::now() + opts_.liveness_timeout;
    for (int done = 0; !done;) {
      MPI_Test(&q, &done, MPI_STATUS_IGNORE);
      if (done) break;
      if (rank_ == 0) {
        drain_heartbeats();
        if (std::chrono::steady_clock::now() > until) {
          std::fprintf(stderr, "rlflow::mpi: the worker ranks did not reach the end of the program within %lld ms of the "
                       "driver; aborting the job\n", static_cast<long long>(opts_.liveness_timeout.count()));
          MPI_Abort(ctl_, 1);
        }
      }
      bo.pause();
    }
    if (rank_ == 0) drain_heartbeats();
    MPI_Comm_free(&bulk_);
    MPI_Comm_free(&ctl_);
    if (we_initialized_) MPI_Finalize();
  }

 private:
  explicit Runtime(Options o) : opts_(o) {
    if (char const* t = std::getenv("RLFLOW_MPI_TIMEOUT_S")) {
      double const s = std::atof(t);
      if (!(s > 0))
        throw config_error(msg("rlflow::mpi: RLFLOW_MPI_TIMEOUT_S='", t, "' is not a positive number of seconds; set it to e.g. 10"));
      opts_.liveness_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
    }
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      detail::check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      we_initialized_ = true;
      if (provided < MPI_THREAD_MULTIPLE)
        throw config_error(msg("rlflow::mpi: the MPI library gives thread level ", provided, ", the backend needs ",
                               "MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE, "); use an MPI built with thread support"));
    }
    detail::check(MPI_Comm_dup(opts_.comm, &ctl_), "MPI_Comm_dup");
    detail::check(MPI_Comm_dup(opts_.comm, &bulk_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(bulk_, MPI_ERRORS_RETURN);  // a size mismatch is reported, not fatal
    MPI_Comm_rank(ctl_, &rank_);
    MPI_Comm_size(ctl_, &size_);
    void* ub = nullptr;
    int has = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &has);
    tag_ub_ = has ? std::min(*static_cast<int*>(ub), 1 << 30) : 32767;
    last_seen_ = std::make_unique<std::atomic<std::int64_t>[]>(static_cast<std::size_t>(size_));
    for (int w = 0; w < size_; ++w) seen(w);
    if (rank_ != 0) {
      hb_thread_ = std::thread([this] {
        char b = 1;
        auto const step = std::chrono::milliseconds(10);
        auto next = std::chrono::steady_clock::now();
        while (!hb_stop_.load()) {
          if (std::chrono::steady_clock::now() >= next) {
            MPI_Send(&b, 1, MPI_CHAR, 0, tag_heartbeat, ctl_);
            next = std::chrono::steady_clock::now() + opts_.heartbeat;
          }
          std::this_thread::sleep_for(step);
        }
      });
    }
  }

  Options opts_;
  MPI_Comm ctl_ = MPI_COMM_NULL;
  MPI_Comm bulk_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, tag_ub_ = 32767;
  bool we_initialized_ = false;
  bool driving_ = false;
  bool broken_ = false;
  std::uint32_t next_group_ = 0;
  std::atomic<std::uint64_t> next_call_{0};
  std::vector<std::pair<std::string, int>> placement_;
  std::vector<ServedGroup*> served_;
  std::unique_ptr<std::atomic<std::int64_t>[]> last_seen_;
  std::atomic<bool> hb_stop_{false};
  std::thread hb_thread_;
};

//! Sets the backend's options; call before the first WorkerGroup<..., Mpi> (config_error after).
inline void init(Options o) { detail::pending_options() = o; }

//! True on the driver: rank 0 under mpirun, or any program started without mpirun.
inline bool is_driver() { return !launched() || Runtime::get().is_driver(); }

//! The driver's scope: while it lives the worker ranks serve calls. drive() returns an engaged
//! scope on the driver at once; on a worker rank it serves until the driver's scope ends and
//! then returns a disengaged one. Build every WorkerGroup<..., Mpi> (on every rank, in the same
//! order) before drive():
//!
//!   WorkerGroup<Actor, dispatch::Mpi> actors(pool);   // every rank
//!   auto driver = rlflow::mpi::drive();
//!   if (!driver) return 0;                            // worker ranks: served, done
//!   actors.call<&Actor::fn>(...);                     // driver only
class DriverScope {
 public:
  DriverScope() = default;
  explicit DriverScope(bool engaged) : engaged_(engaged) {}
  DriverScope(DriverScope&& o) noexcept : engaged_(std::exchange(o.engaged_, false)) {}
  DriverScope& operator=(DriverScope&& o) noexcept {
    if (this != &o) {
      end();
      engaged_ = std::exchange(o.engaged_, false);
    }
    return *this;
  }
  ~DriverScope() { end(); }
  explicit operator bool() const { return engaged_; }
  //! Releases the workers now (idempotent).
  void end() {
    if (!engaged_) return;
    engaged_ = false;
    if (launched()) {
      Runtime& rt = Runtime::get();
      rt.set_driving(false);
      if (!rt.broken()) rt.release_workers();
    }
  }

 private:
  bool engaged_ = false;
};

inline DriverScope drive() {
  if (!launched()) return DriverScope(true);
  Runtime& rt = Runtime::get();
  if (rt.is_driver()) {
    if (rt.driving())
      throw config_error("rlflow::mpi::drive(): a driver scope is already open; keep one scope (nest no drive() calls)");
    rt.set_driving(true);
    return DriverScope(true);
  }
  rt.serve();
  return DriverScope(false);
}

}  // namespace rlflow::mpi
