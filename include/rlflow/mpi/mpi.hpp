// rlflow/mpi/mpi.hpp: the MPI transport. dispatch::Mpi (the transport policy:
// WorkerGroup<Host, dispatch::Mpi>) and its per-group object MpiTransport<Host>: the driver is
// rank 0 of the control communicator (mpi::Options::comm, MPI_COMM_WORLD by default); group
// rank r lives in the process of world rank 1 + r (the pool's devices in order: nodes x
// processes per node), one process holding one worker of every group built on it (colocated
// roles fused per process, as the threads of the in-process transport are). Construction is
// SPMD: every rank builds the same groups in the same order; then mpi::drive() splits the
// program (the driver calls, the workers serve).
//
// The group (rlflow/dispatch/worker_group.hpp) looks the method up and splits the arguments, as for the
// in-process transport; this transport sends one message per rank: Header {method index in the
// compile-time table, group id, call id, reply tag} + that rank's arguments (rlflow::wire;
// DataProto in its own self-describing format). The worker's serve loop finds the group by id
// and the method by index (a fold over the table: no strings, no type-erased callables), runs
// it, replies with the result or the error; the driver collects with the mode. Non-blocking
// calls are finished by the transport's progress thread, so a Pending resolves on its own. A
// rank that throws fails the call naming role, method and rank; a rank silent past
// mpi::Options::liveness_timeout (dead, stopped) fails it naming the rank.
//
// Started without mpirun (mpi::launched() false) the transport is the in-process one,
// unchanged: one binary runs both ways. verl: RayWorkerGroup over Ray actors in several processes.
#pragma once
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <rlflow/mpi/wire.hpp>
#include <rlflow/mpi/mpi_communicator.hpp>
#include <rlflow/mpi/mpi_runtime.hpp>
#include <rlflow/dispatch/worker_group.hpp>

namespace rlflow {
namespace mpi {
//! Puts the groups of the pool named 'pool_name' on world ranks first_world_rank, +1, ... (by
//! default every pool starts at world rank 1, so groups of different pools share processes, as
//! colocated roles do). Call it on every rank before the pool's first group: e.g. a trainer pool
//! of 2 on ranks 1-2 and a rollout pool of 2 on ranks 3-4 of 'mpirun -np 5'.
inline void place_pool(std::string_view pool_name, int first_world_rank) {
  Runtime::get().place(std::string(pool_name), first_world_rank);
}
}  // namespace mpi
namespace dispatch {
template <class Host>
class MpiTransport;
//! The MPI transport policy: WorkerGroup<Host, dispatch::Mpi>.
struct Mpi {
  static constexpr const char* name = "mpi";
  template <class Host>
  using transport = MpiTransport<Host>;
};
}  // namespace dispatch

namespace detail {
template <class L>
struct decayed_tuple;
template <class... P>
struct decayed_tuple<type_list<P...>> {
  using type = std::tuple<std::decay_t<P>...>;
};
template <class L>
struct all_wire;
template <class... P>
struct all_wire<type_list<P...>> : std::bool_constant<(wire::transportable<std::decay_t<P>> && ...)> {};
template <class T>
inline constexpr bool result_wire = std::is_void_v<T> || wire::transportable<T>;
}  // namespace detail

namespace dispatch {

//! The MPI transport's per-group object (policy dispatch::Mpi; see the file's comment). Without
//! mpirun every member forwards to an InProcessTransport.
template <class Host>
class MpiTransport {
 public:
  using entries = rlflow::detail::host_entries_t<Host>;

  ~MpiTransport() {
    shutdown();
    release_local();
  }

  // ---- lifetime ---------------------------------------------------------------------------------
  std::string_view backend_name() const { return local_ ? local_->backend_name() : std::string_view(Mpi::name); }
  //! Checks the job has the ranks for n workers (before the pool's lease); returns the prefix of
  //! construction errors. Without mpirun: the in-process transport.
  std::string open(ResourcePool const& pool, int n, std::string const& name) {
    if (!mpi::launched()) {
      local_.emplace();
      return local_->open(pool, n, name);
    }
    std::string who = msg("rlflow::WorkerGroup<", rlflow::detail::host_name<Host>(), ", dispatch::Mpi> '", name, "'");
    mpi::Runtime& rt = mpi::Runtime::get();
    if (rt.is_driver() && rt.driving())
      throw config_error(msg(who, ": built inside rlflow::mpi::drive()'s scope, while the worker ranks serve; build every "
                                  "MPI group on every rank before drive()"));
    base_ = rt.first_rank_of(pool.name());
    if (base_ + n > rt.size())
      throw config_error(msg(who, ": the group needs ", n, " worker ranks", base_ > 1 ? msg(" from world rank ", base_) : std::string(),
                             " but the job has ", rt.size(), " processes (", rt.size() - 1,
                             " workers + the driver); start it with mpirun -np ", base_ + n,
                             " or more, or lower the pool's devices"));
    return who;
  }
  //! Builds the group on every rank (call it on every rank, in the same order): the member
  //! ranks construct their host with make(optional<Host>&, ctx), and a constructor that throws
  //! on any rank fails the construction on every rank with that rank named.
  template <class Factory>
  void start(std::string const& name, GroupShape const& shape, std::vector<WorkerContext> ctxs, Factory const& make,
             GroupOptions const& opts, std::string const& who) {
    if (local_) return local_->start(name, shape, std::move(ctxs), make, opts, who);
    name_ = name;
    shape_ = shape;
    int const n = shape_.world_size;
    mpi::Runtime& rt = mpi::Runtime::get();
    id_ = rt.next_group_id();
    ctxs_ = std::move(ctxs);
    int const me = rt.rank() - base_;  // this process's group rank (if in [0, n))
    member_ = !rt.is_driver() && me >= 0 && me < n;
    mpi::detail::check(MPI_Comm_split(rt.control(), member_ ? 0 : MPI_UNDEFINED, me, &gcomm_), "MPI_Comm_split");

    std::string failure;
    if (member_) {
      served_ = std::make_unique<Served>(*this);
      Served& s = *served_;
      s.ctx = ctxs_[static_cast<std::size_t>(me)];
      s.comm = std::make_unique<comm::MpiCommunicator>(gcomm_, gcomm_);
      s.ctx.communicator = s.comm.get();
      auto& cur = dispatch::detail::current_worker();
      cur = &s.ctx;
      try {
        make(s.host, s.ctx);
      } catch (...) {
        failure = rlflow::detail::current_what();
      }
      cur = nullptr;
    }
    // every rank learns the first failing rank; it sends its message to the driver
    int const mine = member_ && !failure.empty() ? me : INT_MAX;
    int first = INT_MAX;
    mpi::detail::check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, rt.control()), "MPI_Allreduce");
    if (first != INT_MAX) {
      if (member_ && me == first) {
        MPI_Send(failure.data(), static_cast<int>(failure.size()), MPI_CHAR, 0, mpi::tag_ctor, rt.control());
      } else if (rt.is_driver()) {
        MPI_Status st;
        MPI_Probe(first + base_, mpi::tag_ctor, rt.control(), &st);
        int len = 0;
        MPI_Get_count(&st, MPI_CHAR, &len);
        failure.resize(static_cast<std::size_t>(len));
        MPI_Recv(failure.data(), len, MPI_CHAR, first + base_, mpi::tag_ctor, rt.control(), MPI_STATUS_IGNORE);
      }
      release_local();
      throw worker_error(msg(who, ": constructing the worker on rank ", first, " of ", n, " (MPI rank ", first + base_,
                             ") failed: ", failure.empty() ? std::string("see that rank's output") : failure,
                             "; no host of this group is left"));
    }
    if (member_) rt.register_group(id_, served_.get());
  }

  //! Driver: finishes the calls in flight; later calls throw. (Worker hosts are destroyed with
  //! the worker ranks' own group objects.)
  void shutdown() {
    if (local_) {
      local_->shutdown();
      return;
    }
    if (!running_) return;
    running_ = false;
    stop_progress();
  }
  bool running() const { return local_ ? local_->running() : running_; }
  WorkerContext const& context(int r) const {
    if (local_) return local_->context(r);
    return ctxs_.at(static_cast<std::size_t>(r));
  }
  bool in_process() const { return local_.has_value(); }

  // ---- calls ------------------------------------------------------------------------------------
  //! Under mpirun the arguments are encoded before submit returns, so modes may borrow.
  bool copies_arguments() const { return local_ ? local_->copies_arguments() : true; }
  void check_running() const {
    if (local_) return local_->check_running();
    if (!running_)
      throw error(msg("rlflow::WorkerGroup '", name_, "': the group has been shut down; create a new group"));
    if (!mpi::Runtime::get().is_driver())
      throw error(msg("rlflow::WorkerGroup '", name_, "': a call on MPI rank ", mpi::Runtime::get().rank(),
                      ", a worker rank; only the driver (rank 0) calls groups: put the driver's code after "
                      "'auto d = rlflow::mpi::drive(); if (!d) return;'"));
    if (!mpi::Runtime::get().driving())
      throw error(msg("rlflow::WorkerGroup '", name_, "': a call outside rlflow::mpi::drive()'s scope: the worker ranks "
                      "are not serving; open the scope (auto d = rlflow::mpi::drive();) after building the groups"));
  }

  //! Sends entry E's split arguments (op I, or its thunk for unregistered methods) to the ranks:
  //! the collected result (blocking) or a Pending of it.
  template <class E, std::size_t I>
  auto submit(rlflow::detail::split_call<E>&& s, bool thunk) {
    using M = typename E::method;
    using params = typename M::traits::params;
    using Ret = typename M::result_type;
    using C = rlflow::detail::collected_t<E>;
    static_assert(rlflow::detail::all_wire<params>::value && rlflow::detail::result_wire<Ret>,
                  "rlflow::WorkerGroup<R, dispatch::Mpi>::call<&R::fn>: an argument or the result of fn cannot cross "
                  "processes; use values rlflow::wire knows (numbers, strings, vectors, maps, optionals, tuples, "
                  "DataProto) or specialize rlflow::wire::codec<T>");
    if (local_) return local_->template submit<E, I>(std::move(s), thunk);
    mpi::Runtime& rt = mpi::Runtime::get();
    bool const zero_only = M::execute_mode_type::rank_zero_only;
    int const ranks = zero_only ? 1 : shape_.world_size;
    auto st = std::make_shared<Call<Ret, C>>();
    st->init(rt, *this, ranks, rlflow::detail::entry_names<E>::role(), rlflow::detail::entry_names<E>::method());

    // one message per rank; a value shared by several ranks is encoded once and copied
    for (int r = 0; r < ranks; ++r) {
      wire::Buffer& b = out_buffer(r);
      write_header(b, thunk ? mpi::op_thunk : static_cast<std::uint32_t>(I), *st, r);
      if (thunk) wire::put(b, &Served::template run_entry<E>);
    }
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (encode_arg(std::get<K>(s.args), ranks), ...);
    }(std::make_index_sequence<params::size>{});
    send_all(*st, ranks);

    st->finish = [shape = shape_, pad = s.pad, chunk_rows = s.chunk_rows](Call<Ret, C>& c, auto& res) {
      if constexpr (!std::is_void_v<Ret>) rlflow::detail::collect_into<E>(c.value, res, shape, pad, chunk_rows);
    };
    if constexpr (M::is_blocking) {
      wait_blocking(*st);
      if (st->error) std::rethrow_exception(st->error);
      if constexpr (!std::is_void_v<C>) return std::move(*st->value);
    } else {
      enqueue(st);
      return Pending<C>(std::shared_ptr<dispatch::Completion<C>>(std::move(st)));
    }
  }

  //! Runs f(args...) on rank 0. Under mpirun f must be stateless (a lambda without captures):
  //! rank 0's process builds its own F{}.
  template <class F, class... A>
  auto execute_func_rank_zero(F f, A&&... a) {
    if (local_) return local_->execute_func_rank_zero(std::move(f), std::forward<A>(a)...);
    static_assert(std::is_empty_v<F> && std::is_default_constructible_v<F>,
                  "rlflow::WorkerGroup<R, dispatch::Mpi>::execute_func_rank_zero(f, ...): f must be stateless (a lambda "
                  "without captures) to run in another process; pass the captured values as arguments");
    using R = std::invoke_result_t<F&, std::decay_t<A>&...>;
    check_running();
    mpi::Runtime& rt = mpi::Runtime::get();
    auto st = std::make_shared<Call<R, R>>();
    st->init(rt, *this, 1, "execute_func_rank_zero", "<function>");
    wire::Buffer& b = out_buffer(0);
    write_header(b, mpi::op_thunk, *st, 0);
    wire::put(b, &Served::template run_func<F, R, std::decay_t<A>...>);
    {
      wire::BulkScope scope(&out_bulk_[0], nullptr);
      (wire::put<std::decay_t<A>>(b, a), ...);
    }
    send_all(*st, 1);
    st->finish = [](Call<R, R>& c, auto& res) {
      if constexpr (!std::is_void_v<R>) c.value.emplace(std::move(*res[0]));
    };
    wait_blocking(*st);
    if (st->error) std::rethrow_exception(st->error);
    if constexpr (!std::is_void_v<R>) return std::move(*st->value);
  }

 private:
  int world_size() const { return shape_.world_size; }

  void release_local() {
    if (member_) {
      mpi::Runtime::get().unregister_group(id_);
      if (served_) {
        dispatch::detail::current_worker() = &served_->ctx;
        served_->host.reset();  // the host dies in the process that built it
        dispatch::detail::current_worker() = nullptr;
        served_->comm.reset();
      }
      served_.reset();
      member_ = false;
    }
    if (gcomm_ != MPI_COMM_NULL) MPI_Comm_free(&gcomm_);
  }

  // ---- worker side ------------------------------------------------------------------------------
  struct Served final : mpi::ServedGroup {
    explicit Served(MpiTransport& g) : group(&g) {}
    MpiTransport* group;
    std::optional<Host> host;
    WorkerContext ctx;
    std::unique_ptr<comm::MpiCommunicator> comm;

    using thunk_fn = void (*)(Served&, mpi::Header const&, wire::Reader&, wire::Buffer&);

    void handle(mpi::Header const& h, wire::Reader& in, wire::Buffer& reply) override {
      comm->set_call(h.call);
      dispatch::detail::current_worker() = &ctx;
      if (h.op == mpi::op_thunk) {
        thunk_fn f = wire::get<thunk_fn>(in);
        f(*this, h, in, reply);
      } else {
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          (void)((h.op == I && (run<rlflow::detail::at_t<I, entries>>(*this, h, in, reply), true)) || ...);
        }(std::make_index_sequence<entries::size>{});
      }
      dispatch::detail::current_worker() = nullptr;
    }
    void reset_collectives() override { comm->renew(); }

    //! Runs entry E with the arguments in 'in'; the reply is a status byte and the result.
    template <class E>
    static void run(Served& s, mpi::Header const& h, wire::Reader& in, wire::Buffer& reply) {
      using M = typename E::method;
      using Ret = typename M::result_type;
      using params = typename M::traits::params;
      try {
        auto args = [&]<std::size_t... K>(std::index_sequence<K...>) {
          return typename rlflow::detail::decayed_tuple<params>::type{wire::get<std::decay_t<rlflow::detail::at_t<K, params>>>(in)...};
        }(std::make_index_sequence<params::size>{});
        receive_bulk(h);
        auto& obj = rlflow::detail::owner_of<typename E::owner>(*s.host);
        [&]<std::size_t... K>(std::index_sequence<K...>) {
          if constexpr (std::is_void_v<Ret>) {
            std::invoke(M::fn, obj, std::forward<rlflow::detail::at_t<K, params>>(std::get<K>(args))...);
            reply.push_back(std::byte{0});
          } else {
            Ret r = std::invoke(M::fn, obj, std::forward<rlflow::detail::at_t<K, params>>(std::get<K>(args))...);
            reply.push_back(std::byte{0});
            put_result(reply, std::move(r));
          }
        }(std::make_index_sequence<params::size>{});
      } catch (...) {
        fail(s, h, reply);
      }
    }
    template <class E>
    static void run_entry(Served& s, mpi::Header const& h, wire::Reader& in, wire::Buffer& reply) {
      run<E>(s, h, in, reply);
    }
    template <class F, class R, class... A>
    static void run_func(Served& s, mpi::Header const& h, wire::Reader& in, wire::Buffer& reply) {
      try {
        std::tuple<A...> args{wire::get<A>(in)...};
        receive_bulk(h);
        F f{};
        if constexpr (std::is_void_v<R>) {
          std::apply(f, args);
          reply.push_back(std::byte{0});
        } else {
          R r = std::apply(f, args);
          reply.push_back(std::byte{0});
          put_result(reply, std::move(r));
        }
      } catch (...) {
        fail(s, h, reply);
      }
    }
    //! Encodes a result; when its large buffers became bulk segments, the result is kept alive
    //! (moved into the reply's Bulk) until the serve loop has sent them.
    template <class R>
    static void put_result(wire::Buffer& reply, R&& r) {
      wire::put<std::decay_t<R>>(reply, r);
      if (wire::Bulk* b = wire::detail::bulk_out(); b && !b->segs.empty()) b->hold(std::move(r));
    }
    //! The command's bulk segments, into the columns its decoded arguments allocated.
    static void receive_bulk(mpi::Header const& h) {
      if (wire::Bulk* b = wire::detail::bulk_in())
        mpi::Runtime::get().recv_bulk(0, h.tag, *b, h.bulk, [&] { return msg("rlflow::mpi: call ", h.call, "'s arguments"); });
    }
    //! The reply of a failed call: status 2 when this rank only left a collective because a peer
    //! failed (the driver names the peer), else 1 (and the peers are told to leave theirs).
    static void fail(Served& s, mpi::Header const& h, wire::Buffer& reply) {
      std::string what;
      try {
        throw;
      } catch (std::exception const& e) {
        what = e.what();
      } catch (...) {
        what = "unknown exception";
      }
      bool const victim = s.comm->poisoned();
      if (!victim) s.comm->announce_failure(h.call);
      reply.resize(mpi::reply_prefix_bytes);  // drop a partly written result (and its bulk segments)
      if (wire::Bulk* b = wire::detail::bulk_out()) b->segs.clear();
      reply.push_back(std::byte{static_cast<unsigned char>(victim ? 2 : 1)});
      wire::put(reply, what);
    }
  };

  // ---- driver side ------------------------------------------------------------------------------
  //! A call in flight: which ranks answered, their results or errors; 'finish' collects.
  struct CallBase {
    virtual ~CallBase() = default;
    virtual bool poll() = 0;  //!< receives what arrived; true when finished (published)
  };
  template <class R, class C = R>
  struct Call : CallBase, dispatch::Completion<C> {
    using slot = std::conditional_t<std::is_void_v<R>, char, R>;
    std::uint64_t id = 0;
    int tag = 0, n = 0, remaining = 0;
    std::string group, role, method;
    std::vector<std::optional<slot>> results;
    std::vector<std::uint8_t> status;  // 0 pending, 1 ok, 2 failed, 3 failed (victim)
    std::vector<std::string> errors;
    std::vector<char> got;
    mpi::Runtime* rt = nullptr;
    MpiTransport* g = nullptr;
    wire::Buffer buf;
    std::int64_t started_ms = 0;
    std::function<void(Call&, std::vector<std::optional<slot>>&)> finish;  // collects into value

    void init(mpi::Runtime& r, MpiTransport& grp, int ranks, std::string_view role_, std::string_view method_) {
      rt = &r;
      g = &grp;
      n = remaining = ranks;
      id = r.next_call_id();
      tag = r.tag_of(id);
      group = grp.name_;
      role = role_;
      method = method_;
      results.resize(static_cast<std::size_t>(ranks));
      status.assign(static_cast<std::size_t>(ranks), 0);
      errors.resize(static_cast<std::size_t>(ranks));
      started_ms = mpi::Runtime::now_ms();
      for (int k = 0; k < ranks; ++k) r.seen(k + g->base_);  // the liveness clock starts with the call
    }
    //! Receives every reply that has arrived; throws on a silent rank.
    bool receive(bool check_liveness) {
      for (int k = 0; k < n && remaining > 0; ++k) {
        if (status[static_cast<std::size_t>(k)] != 0) continue;
        int flag = 0;
        MPI_Message m;
        MPI_Status st;
        MPI_Improbe(k + g->base_, tag, rt->control(), &flag, &m, &st);
        if (!flag) continue;
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        buf.resize(static_cast<std::size_t>(count));
        MPI_Mrecv(buf.data(), count, MPI_BYTE, &m, MPI_STATUS_IGNORE);
        rt->seen(k + g->base_);
        --remaining;
        wire::Reader r(std::span<std::byte const>(buf.data(), buf.size()));
        wire::Bulk bin;
        std::uint32_t nb = 0;
        try {
          nb = r.u32("a reply's bulk count");
          auto const s = r.u8("a reply's status");
          if (s == 0) {
            if constexpr (!std::is_void_v<R>) {
              wire::BulkScope scope(nullptr, &bin);
              results[static_cast<std::size_t>(k)].emplace(wire::get<R>(r));
            }
            if (nb || !bin.segs.empty())
              rt->recv_bulk(k + g->base_, tag, bin, nb, [&] { return msg("rlflow::WorkerGroup '", group, "': ", role, "::", method, "'s reply"); });
            status[static_cast<std::size_t>(k)] = 1;
          } else {
            errors[static_cast<std::size_t>(k)] = r.str("an error text");
            status[static_cast<std::size_t>(k)] = s == 2 ? 3 : 2;
          }
        } catch (std::exception const& e) {
          errors[static_cast<std::size_t>(k)] = msg("the reply could not be read: ", e.what());
          status[static_cast<std::size_t>(k)] = 2;
          results[static_cast<std::size_t>(k)].reset();
          if (!bin.done && nb) {
            try {
              rt->drain_bulk(k + g->base_, tag, nb, [] { return std::string("the reply"); });  // the segments that could not be used
            } catch (...) {
            }
          }
        }
      }
      if (remaining > 0 && check_liveness) {
        rt->drain_heartbeats();
        auto const limit = rt->options().liveness_timeout.count();
        for (int k = 0; k < n; ++k)
          if (status[static_cast<std::size_t>(k)] == 0 && rt->silent_ms(k + g->base_) > limit) {
            rt->mark_broken();
            throw worker_error(msg("rlflow::WorkerGroup '", group, "': ", role, "::", method, ": rank ", k, " of ", g->world_size(),
                                   " (MPI rank ", k + g->base_, ") sent no reply and no heartbeat for ", rt->silent_ms(k + g->base_),
                                   " ms (liveness timeout ", limit,
                                   " ms): its process died or stopped; the job is aborted when the driver exits. Raise "
                                   "rlflow::mpi::Options::liveness_timeout or RLFLOW_MPI_TIMEOUT_S if it was only slow"));
          }
      }
      return remaining == 0;
    }
    //! Checks errors, collects, publishes.
    void settle() {
      try {
        int first = -1, failed = 0;
        for (int k = 0; k < n; ++k)
          if (status[static_cast<std::size_t>(k)] >= 2) {
            ++failed;
            if (first < 0 || (status[static_cast<std::size_t>(first)] == 3 && status[static_cast<std::size_t>(k)] == 2)) first = k;
          }
        if (failed) {
          bool victims = false;
          for (auto s : status) victims = victims || s == 3;
          if (victims) g->send_reset();
          throw rlflow::detail::call_failed(group, role, method, first, g->world_size(),
                                            msg(errors[static_cast<std::size_t>(first)], " (MPI rank ", first + g->base_, ")"),
                                            failed);
        }
        finish(*this, results);
      } catch (...) {
        this->error = std::current_exception();
      }
      this->publish();
    }
    bool poll() override {
      try {
        if (!receive(true)) return false;
      } catch (...) {
        this->error = std::current_exception();
        this->publish();
        return true;
      }
      settle();
      return true;
    }
  };

  wire::Buffer& out_buffer(int r) {
    if (out_.size() <= static_cast<std::size_t>(r)) {
      out_.resize(static_cast<std::size_t>(r) + 1);
      out_bulk_.resize(static_cast<std::size_t>(r) + 1);
    }
    out_[static_cast<std::size_t>(r)].clear();
    out_bulk_[static_cast<std::size_t>(r)].clear();
    return out_[static_cast<std::size_t>(r)];
  }
  template <class C>
  void write_header(wire::Buffer& b, std::uint32_t op, C const& call, int r) const {
    mpi::Header h;
    h.op = op;
    h.group = id_;
    h.call = call.id;
    h.tag = call.tag;
    h.group_rank = r;
    wire::detail::append(b, &h, sizeof h);
  }
  //! Sends each rank its message, then its bulk segments; returns when every send is done (the
  //! caller's tensors may change afterwards). A rank that stops taking data fails the call.
  template <class C>
  void send_all(C& call, int ranks) {
    mpi::Runtime& rt = mpi::Runtime::get();
    reqs_.clear();
    peers_.clear();
    for (int r = 0; r < ranks; ++r) {
      auto& b = out_[static_cast<std::size_t>(r)];
      auto const& bulk = out_bulk_[static_cast<std::size_t>(r)];
      auto const nb = static_cast<std::uint32_t>(bulk.segs.size());
      std::memcpy(b.data() + offsetof(mpi::Header, bulk), &nb, sizeof nb);
      reqs_.emplace_back();
      peers_.push_back(r + base_);
      mpi::detail::check(MPI_Isend(b.data(), static_cast<int>(b.size()), MPI_BYTE, r + base_, mpi::tag_cmd, rt.control(),
                                   &reqs_.back()),
                         "MPI_Isend");
      rt.post_bulk_sends(r + base_, call.tag, bulk.segs, reqs_, peers_);
    }
    try {
      rt.wait_requests(reqs_, peers_, [&] {
        return msg("rlflow::WorkerGroup '", name_, "': ", call.role, "::", call.method, ": sending the arguments");
      });
    } catch (...) {
      for (int r = 0; r < ranks; ++r) out_bulk_[static_cast<std::size_t>(r)].clear();
      throw;
    }
    for (int r = 0; r < ranks; ++r) out_bulk_[static_cast<std::size_t>(r)].clear();  // the columns may go
  }
  void send_reset() {
    mpi::Runtime& rt = mpi::Runtime::get();
    mpi::Header h;
    h.op = mpi::op_reset;
    h.group = id_;
    wire::Buffer b(sizeof h);
    std::memcpy(b.data(), &h, sizeof h);
    for (int r = 0; r < shape_.world_size; ++r) rt.send_command(r + base_, b);
  }
  template <class C>
  void wait_blocking(C& call) {
    mpi::detail::Backoff bo;
    for (unsigned k = 0;; ++k) {
      bool done = false;
      try {
        done = call.receive(k % 64 == 63);
      } catch (...) {
        call.error = std::current_exception();
        return;
      }
      if (done) break;
      bo.pause();
    }
    call.settle();
  }

  template <class T>
  void encode_arg(Dist<T> const& d, int ranks) {
    // value id of each rank, then: first rank holding a value encodes it, later ranks copy
    auto vid = [&](int r) -> int {
      if (d.borrowed || (d.index.empty() && d.values.size() == 1)) return 0;
      if (!d.index.empty()) return d.index[static_cast<std::size_t>(r)];
      return r;
    };
    segs_.clear();
    for (int r = 0; r < ranks; ++r) {
      auto const v = static_cast<std::size_t>(vid(r));
      if (segs_.size() <= v) segs_.resize(v + 1);
      auto& s = segs_[v];
      wire::Buffer& b = out_[static_cast<std::size_t>(r)];
      auto& bulk = out_bulk_[static_cast<std::size_t>(r)];
      if (s.rank < 0) {
        s.rank = r;
        s.off = b.size();
        s.bulk0 = bulk.segs.size();
        {
          wire::BulkScope scope(&bulk, nullptr);
          wire::put<T>(b, d.for_rank(r));
        }
        s.len = b.size() - s.off;
        s.bulk1 = bulk.segs.size();
      } else {
        wire::Buffer const& src = out_[static_cast<std::size_t>(s.rank)];
        wire::detail::append(b, src.data() + s.off, s.len);
        auto const& from = out_bulk_[static_cast<std::size_t>(s.rank)].segs;
        bulk.segs.insert(bulk.segs.end(), from.begin() + static_cast<std::ptrdiff_t>(s.bulk0),
                         from.begin() + static_cast<std::ptrdiff_t>(s.bulk1));
      }
    }
  }

  // ---- the progress thread (non-blocking calls) -------------------------------------------------
  void enqueue(std::shared_ptr<CallBase> c) {
    std::lock_guard lk(mu_);
    inflight_.push_back(std::move(c));
    if (!progress_.joinable()) progress_ = std::thread([this] { progress_loop(); });
    cv_.notify_one();
  }
  void progress_loop() {
    mpi::detail::Backoff bo;
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !inflight_.empty(); });
      if (inflight_.empty() && stop_) return;
      auto batch = inflight_;  // shared_ptrs: the calls outlive this pass
      lk.unlock();
      bool any = false;
      std::vector<CallBase*> done;
      for (auto& c : batch)
        if (c->poll()) {
          done.push_back(c.get());
          any = true;
        }
      lk.lock();
      for (auto* d : done) inflight_.remove_if([d](auto const& p) { return p.get() == d; });
      if (any) bo.reset();
      else if (!inflight_.empty()) {
        lk.unlock();
        bo.pause();
        lk.lock();
      }
    }
  }
  void stop_progress() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    if (progress_.joinable()) progress_.join();
  }

  std::optional<InProcessTransport<Host>> local_;  // without mpirun
  std::string name_;
  GroupShape shape_;
  std::vector<WorkerContext> ctxs_;
  std::uint32_t id_ = 0;
  int base_ = 1;  // world rank of group rank 0 (mpi::place_pool)
  bool member_ = false;
  bool running_ = true;
  MPI_Comm gcomm_ = MPI_COMM_NULL;
  std::unique_ptr<Served> served_;
  std::vector<wire::Buffer> out_;
  std::vector<MPI_Request> reqs_;
  std::vector<wire::Bulk> out_bulk_;  // per rank: the large columns sent after its message
  std::vector<int> peers_;
  struct SegInfo {
    int rank = -1;
    std::size_t off = 0, len = 0;
    std::size_t bulk0 = 0, bulk1 = 0;  // its bulk segments in out_bulk_[rank]
  };
  std::vector<SegInfo> segs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::shared_ptr<CallBase>> inflight_;
  bool stop_ = false;
  std::thread progress_;
};

}  // namespace dispatch
}  // namespace rlflow
