// rlflow/dispatch/worker_group.hpp: WorkerGroup<Host, Transport>, the driver's handle on the workers of
// one role (or of a Fused<Roles...> colocated worker) placed on a ResourcePool (verl:
// WorkerGroup / RayWorkerGroup). group.call<&R::fn>(args...) looks fn up in the compile-time
// method table, splits the arguments with the method's dispatch mode and hands the split call
// to the transport policy, which carries it to the workers and the results back: here the
// in-process transport (dispatch::InProcess: one Message {method index, call state} per rank
// into worker threads' mailboxes); rlflow/mpi/mpi.hpp adds dispatch::Mpi. The worker side
// runs the message through a table generated from the method list: no virtual functions, no
// string lookups, no type-erased callables on this path. Also: views of fused groups,
// execute_all for unregistered methods, execute_func_rank_zero, make_colocated_group.
#pragma once
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>  // std::invoke
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <rlflow/dispatch/async.hpp>              // Pending
#include <rlflow/detail/meta.hpp>        // type_list, find_if, count_if, value_tag
#include <rlflow/dispatch/dispatch.hpp>  // modes, InProcess, WorkerContext, Message
#include <rlflow/core/error.hpp>
#include <rlflow/dispatch/method.hpp>             // method, methods, member_fn_traits
#include <rlflow/config/policy.hpp>             // Colocate<N>
#include <rlflow/dispatch/resource_pool.hpp>      // ResourcePool
#include <rlflow/dispatch/fused.hpp>        // Fused
#include <rlflow/dispatch/role.hpp>         // role, role_name

namespace rlflow {

//! How a group is laid out and named. verl: RayWorkerGroup(name_prefix, worker_env, ...).
struct GroupOptions {
  std::string name;  //!< group name (WG_PREFIX); default: the role's name
  int world_size = 0;  //!< workers; 0 = one per device of the pool
  int tp = 1;          //!< tensor-parallel size of the group's mesh (NDComputeProto / DPComputeProto)
  int pp = 1;          //!< pipeline-parallel size of the group's mesh
  std::vector<std::pair<std::string, std::string>> env;  //!< extra env (protected keys rejected)
  //! How long an idle worker polls for the next call (yielding its core between polls) before
  //! it sleeps on a futex; 0 = sleep at once. A call that arrives while the worker polls skips
  //! a wake-up, which costs ~50 us on a VM once the worker's vCPU has gone idle.
  std::chrono::microseconds idle_spin = dispatch::Mailbox::default_idle_spin;
};

//! Env keys a user may not override (verl: "Cannot override protected system env").
inline constexpr std::string_view protected_env_keys[] = {"WORLD_SIZE",  "RANK",       "LOCAL_WORLD_SIZE",
                                                          "LOCAL_RANK",  "MASTER_ADDR", "MASTER_PORT",
                                                          "WG_PREFIX",   "WG_BACKEND",  "RAY_LOCAL_WORLD_SIZE"};

//! Builds each worker's host by calling f(WorkerContext const&) on the worker's thread.
template <class F>
struct ConstructWith {
  F make;
};
template <class F>
ConstructWith<std::decay_t<F>> construct_with(F&& f) {
  return {std::forward<F>(f)};
}

namespace detail {

//! Every worker's context (rank, device, mesh coordinate, names, verl's env keys) for a group of
//! n workers on pool; shared by the in-process and the MPI worker groups.
inline std::vector<WorkerContext> make_worker_contexts(ResourcePool const& pool, GroupOptions const& opts, int n,
                                                       GroupShape const& shape, std::string const& group_name,
                                                       std::string_view backend_name) {
  std::vector<WorkerContext> ctxs(static_cast<std::size_t>(n));
  auto const lws = pool.local_world_size_list();
  auto const lrs = pool.local_rank_list();
  for (int r = 0; r < n; ++r) {
    WorkerContext& c = ctxs[static_cast<std::size_t>(r)];
    c.rank = r;
    c.world_size = n;
    c.device = pool.device_of(r);
    c.node = c.device.node;
    c.local_rank = lrs[static_cast<std::size_t>(r)];
    c.local_world_size = lws[static_cast<std::size_t>(r)];
    c.device_share = pool.device_share();
    c.shape = shape;
    c.mesh = shape.coord(r);
    c.group_name = group_name;
    c.pool_name = pool.name();
    c.env = {{"WORLD_SIZE", std::to_string(n)},
             {"RANK", std::to_string(r)},
             {"LOCAL_WORLD_SIZE", std::to_string(c.local_world_size)},
             {"LOCAL_RANK", std::to_string(c.local_rank)},
             {"RAY_LOCAL_WORLD_SIZE", std::to_string(c.local_world_size)},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", "0"},
             {"WG_PREFIX", group_name},
             {"WG_BACKEND", std::string(backend_name)}};
    if (c.device.type == Device::cuda) c.env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(c.device.index));
    for (auto const& kv : opts.env) c.env.push_back(kv);
  }
  return ctxs;
}

// ---------------------------------------------------------------------------------------------
// the host's method table: entries (owner type, method descriptor)

template <class Owner, class M>
struct entry {
  using owner = Owner;
  using method = M;
};

template <class Owner, class L>
struct entries_of;
template <class Owner, class... Ms>
struct entries_of<Owner, type_list<Ms...>> {
  using type = type_list<entry<Owner, Ms>...>;
};

template <class H>
concept fused_host = requires { typename H::fused_roles; };

template <class H, class Roles>
struct fused_entries;
template <class H, class... Roles>
struct fused_entries<H, type_list<Roles...>> {
  using type = concat_t<typename entries_of<H, typename H::methods::list>::type,
                        typename entries_of<Roles, typename Roles::methods::list>::type...>;
};

template <class H>
struct host_entries {
  using type = typename entries_of<H, typename H::methods::list>::type;
};
template <fused_host H>
struct host_entries<H> {
  using type = typename fused_entries<H, typename H::fused_roles>::type;
};
template <class H>
using host_entries_t = typename host_entries<H>::type;

//! The object that owns an entry's method inside host h.
template <class Owner, class H>
Owner& owner_of(H& h) {
  if constexpr (std::is_base_of_v<Owner, H>) return h;
  else return h.template get<Owner>();
}

template <auto Fn, class Owner>
struct matches_fn {
  template <class E>
  struct pred : std::bool_constant<std::is_same_v<value_tag<E::method::fn>, value_tag<Fn>> &&
                                   (std::is_void_v<Owner> || std::is_same_v<typename E::owner, Owner>)> {};
};

template <class E, class Ret>
struct collected {
  using M = typename E::method;
  using type = decltype(M::dispatch_mode_type::collect(std::declval<std::vector<Ret>&&>(),
                                                       std::declval<CollectContext const&>()));
};
template <class E>
struct collected<E, void> {
  using type = void;
};
//! What a call of entry E returns (blocking) or resolves to (non-blocking).
template <class E>
using collected_t = std::conditional_t<
    E::method::execute_mode_type::rank_zero_only, typename E::method::result_type,
    typename collected<E, typename E::method::result_type>::type>;

template <class P>
decltype(auto) pass_arg(std::decay_t<P> const& v) {
  if constexpr (std::is_rvalue_reference_v<P>) return std::decay_t<P>(v);
  else return (v);
}

template <class L>
struct dists_of;
template <class... P>
struct dists_of<type_list<P...>> {
  using type = std::tuple<Dist<std::decay_t<P>>...>;
};

template <class T>
decltype(auto) materialize(T&& x) {
  if constexpr (is_pending_v<T>) return x.get();  // verl: materialize_futures
  else return std::forward<T>(x);
}

template <class H>
constexpr std::string_view host_name() {
  return role_name<H>();
}

//! An entry's role and method names, computed once (role_name / name() parse
//! __PRETTY_FUNCTION__ and, called in an ordinary expression, did so on every call: about 40%
//! of the driver's instructions per no-op call). A function-local static rather than a
//! constexpr member: a role's own 'role_name' member need not be a constant expression.
template <class E>
struct entry_names {
  static std::string_view role() {
    static std::string_view const r = role_name<typename E::owner>();
    return r;
  }
  static std::string_view method() {
    static std::string_view const m = E::method::name();
    return m;
  }
};

//! The arguments of one call of entry E, split per rank by its dispatch mode, and the rows the
//! mode padded (the collect drops them).
template <class E>
struct split_call {
  typename dists_of<typename E::method::traits::params>::type args;
  std::int64_t pad = 0;
  std::int64_t chunk_rows = -1;  //!< rows each DP rank received (row modes; -1: none)
};

//! Collects entry E's results (one per rank; rank 0's alone for execute::RankZero) into 'out'
//! with E's dispatch mode. Both transports end a call with it.
template <class E, class Ret, class C>
void collect_into(std::optional<C>& out, std::vector<std::optional<Ret>>& results, GroupShape const& shape,
                  std::int64_t pad, std::int64_t chunk_rows) {
  using M = typename E::method;
  if constexpr (M::execute_mode_type::rank_zero_only) {
    out.emplace(std::move(*results[0]));
  } else {
    std::vector<Ret> outs;
    outs.reserve(results.size());
    for (auto& o : results) outs.push_back(std::move(*o));
    CollectContext cctx{shape, entry_names<E>::role(), entry_names<E>::method(), pad, chunk_rows};
    out.emplace(M::dispatch_mode_type::collect(std::move(outs), cctx));
  }
}

//! The error of a call that failed on 'failed' ranks; rank 'first' is the one shown.
inline worker_error call_failed(std::string const& group, std::string_view role, std::string_view method, int first,
                                int world_size, std::string const& what, int failed) {
  return worker_error(msg("rlflow::WorkerGroup '", group, "': ", role, "::", method, " failed on rank ", first, " of ",
                          world_size, ": ", what,
                          failed > 1 ? msg(" (", failed, " ranks failed; the first is shown)") : std::string()));
}

//! The text of the exception in flight (inside a catch block).
inline std::string current_what() {
  try {
    throw;
  } catch (std::exception const& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

template <class T>
struct is_construct_with : std::false_type {};
template <class F>
struct is_construct_with<ConstructWith<F>> : std::true_type {};
template <class... T>
struct single_construct_with : std::false_type {};
template <class T>
struct single_construct_with<T> : is_construct_with<T> {};

//! Lets optional::emplace construct a non-movable host from a factory's prvalue.
template <class Host, class F>
struct Emplacer {
  F f;
  operator Host() const { return f(); }
};

//! Constructs a worker's host into h: f(ctx) for a single construct_with(f) argument, else
//! Host(ctx, args...) when that compiles, else Host(args...). Runs where the host lives.
template <class Host, class... Args>
void construct_host(std::optional<Host>& h, WorkerContext& ctx, std::tuple<Args...>& args) {
  if constexpr (single_construct_with<Args...>::value) {
    auto f = [&] { return std::get<0>(args).make(static_cast<WorkerContext const&>(ctx)); };
    h.emplace(Emplacer<Host, decltype(f)>{f});
  } else {
    auto f = [&] { return construct_role<Host>(ctx, args); };
    h.emplace(Emplacer<Host, decltype(f)>{f});
  }
}

}  // namespace detail

namespace dispatch {

//! The in-process transport (policy dispatch::InProcess): one persistent thread per worker
//! (InProcessEngine). A call posts one Message {entry index, call state} per rank into the
//! ranks' mailboxes; each worker runs the method with its rank's Dist slot and stores the result
//! in the call state; the last rank (a Pending) or the waiting driver (a blocking call) collects.
//! verl: the Ray backend (RayWorkerGroup) in a single process.
template <class Host>
class InProcessTransport {
 public:
  using entries = rlflow::detail::host_entries_t<Host>;


  // ---- lifetime ---------------------------------------------------------------------------------
  std::string_view backend_name() const { return InProcess::name; }
  std::string open(ResourcePool const&, int, std::string const& name) { return msg("rlflow::WorkerGroup '", name, "'"); }
  //! Starts one thread per context; each builds its host with make(optional<Host>&, ctx).
  template <class Factory>
  void start(std::string const& name, GroupShape const& shape, std::vector<WorkerContext> ctxs, Factory const& make,
             GroupOptions const& opts, std::string const& who) {
    if (opts.idle_spin.count() < 0)
      throw config_error(msg(who, ": GroupOptions::idle_spin is ", opts.idle_spin.count(),
                             " us; pass 0 (workers sleep at once) or a positive poll window"));
    name_ = name;
    shape_ = shape;
    engine_ = std::make_unique<engine_type>(std::move(ctxs), make, who, opts.idle_spin);
  }
  void shutdown() {
    if (engine_) engine_->shutdown();
  }
  bool running() const { return engine_ && engine_->running(); }
  WorkerContext const& context(int r) const { return engine_->context(r); }
  bool in_process() const { return true; }

  // ---- calls ------------------------------------------------------------------------------------
  //! Modes may borrow driver values only for blocking calls: the workers read the Dists later.
  bool copies_arguments() const { return false; }
  void check_running() const {
    if (!engine_ || !engine_->running())
      throw error(msg("rlflow::WorkerGroup '", name_, "': the group has been shut down; create a new group"));
  }

  //! Runs entry E (message op I, or its thunk for unregistered methods) with the split arguments:
  //! the collected result (blocking) or a Pending of it.
  template <class E, std::size_t I>
  auto submit(rlflow::detail::split_call<E>&& s, bool thunk) {
    using M = typename E::method;
    using C = rlflow::detail::collected_t<E>;
    if constexpr (M::is_blocking) {
      CallState<E> st(*this);
      st.collect_on_driver = true;
      st.args = std::move(s.args);
      st.pad = s.pad;
      st.chunk_rows = s.chunk_rows;
      post<E, I>(st, thunk);
      st.wait();
      settle<E>(&st);  // on this thread, awake (see run)
      if (st.error) std::rethrow_exception(st.error);
      if constexpr (!std::is_void_v<C>) return std::move(*st.value);
    } else {
      auto st = std::make_shared<CallState<E>>(*this);
      st->args = std::move(s.args);
      st->pad = s.pad;
      st->chunk_rows = s.chunk_rows;
      post<E, I>(*st, thunk);
      return Pending<C>(std::shared_ptr<Completion<C>>(std::move(st)));
    }
  }

  //! Runs f(args...) on rank 0's thread and returns its value.
  template <class F, class... A>
  auto execute_func_rank_zero(F f, A&&... a) {
    using R = std::invoke_result_t<F&, std::decay_t<A>&...>;
    struct State : Thunk<Host>, Completion<R> {
      F func;
      std::tuple<std::decay_t<A>...> args;
      bool posted = false;
      State(F f_, A&&... xs) : func(std::move(f_)), args(std::forward<A>(xs)...) {}
      ~State() {
        if (posted) this->wait_released();
      }
    };
    State st(std::move(f), std::forward<A>(a)...);
    static_cast<Thunk<Host>&>(st).fn = [](Thunk<Host>* t, Host&, WorkerContext&) {
      auto* s = static_cast<State*>(t);
      try {
        if constexpr (std::is_void_v<R>) std::apply(s->func, s->args);
        else s->value.emplace(std::apply(s->func, s->args));
      } catch (...) {
        s->error = std::current_exception();
      }
      s->publish();
    };
    check_running();
    st.posted = true;
    engine_->post(0, Message{op_thunk, static_cast<Thunk<Host>*>(&st)});
    st.wait();
    if (st.error) std::rethrow_exception(st.error);
    if constexpr (!std::is_void_v<R>) return std::move(*st.value);
  }

 private:
  struct Handler;
  using engine_type = InProcessEngine<Host, Handler>;

  //! The typed state of one call of entry E; workers find its type from the message's index.
  template <class E>
  struct CallState : Thunk<Host>, Completion<rlflow::detail::collected_t<E>> {
    using M = typename E::method;
    using Ret = typename M::result_type;
    using result_slots = std::conditional_t<std::is_void_v<Ret>, std::vector<char>, std::vector<std::optional<Ret>>>;
    typename rlflow::detail::dists_of<typename M::traits::params>::type args;
    result_slots results;
    std::vector<std::exception_ptr> errors;
    std::atomic<int> remaining{0};
    InProcessTransport* transport = nullptr;
    std::int64_t pad = 0;
    std::int64_t chunk_rows = -1;
    bool posted = false;
    //! Blocking calls collect on the waiting driver (see run); non-blocking ones on the last rank.
    bool collect_on_driver = false;

    explicit CallState(InProcessTransport& t) : transport(&t) {}
    CallState(CallState const&) = delete;
    ~CallState() {
      if (posted) this->wait_released();
    }
  };

  struct Handler {
    static void handle(Host& host, WorkerContext& ctx, Message const& m) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (void)((m.op == I && (run<rlflow::detail::at_t<I, entries>>(
                                  host, ctx, static_cast<CallState<rlflow::detail::at_t<I, entries>>*>(m.state)),
                              true)) ||
               ...);
      }(std::make_index_sequence<entries::size>{});
    }
  };

  template <class E>
  static void run_thunk(Thunk<Host>* t, Host& host, WorkerContext& ctx) {
    run<E>(host, ctx, static_cast<CallState<E>*>(t));
  }

  //! Worker side of one call: invoke the method with this rank's arguments, store the result.
  template <class E>
  static void run(Host& host, WorkerContext& ctx, CallState<E>* st) {
    using M = typename E::method;
    using Ret = typename M::result_type;
    using params = typename M::traits::params;
    namespace d = rlflow::detail;
    auto const r = static_cast<std::size_t>(ctx.rank);
    try {
      auto& obj = d::owner_of<typename E::owner>(host);
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        if constexpr (std::is_void_v<Ret>)
          std::invoke(M::fn, obj, d::pass_arg<d::at_t<K, params>>(std::get<K>(st->args).for_rank(ctx.rank))...);
        else
          st->results[r].emplace(
              std::invoke(M::fn, obj, d::pass_arg<d::at_t<K, params>>(std::get<K>(st->args).for_rank(ctx.rank))...));
      }(std::make_index_sequence<params::size>{});
    } catch (...) {
      st->errors[r] = std::current_exception();
      st->transport->engine_->abort_collectives(ctx.rank);
    }
    if (st->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // A blocking call's driver is waiting and will collect on its own thread, where the copy
      // runs while it is awake: collecting here instead would make it sleep through the copy,
      // and a long sleep costs a slow wake-up (tens of µs on a VM). A Pending is collected here,
      // so it is ready without the driver.
      if (!st->collect_on_driver) settle<E>(st);
      st->publish();  // the last access to *st by this thread
    }
  }

  //! Checks the ranks' errors and collects the result into st->value (or st->error). Runs on the
  //! last rank to finish (non-blocking calls) or on the driver after it (blocking calls).
  template <class E>
  static void settle(CallState<E>* st) {
    using M = typename E::method;
    InProcessTransport& t = *st->transport;
    try {
      int first = -1, failed = 0;
      for (std::size_t r = 0; r < st->errors.size(); ++r)
        if (st->errors[r]) {
          ++failed;
          if (first < 0) first = static_cast<int>(r);
        }
      if (failed) {
        int const by = t.engine_->collectives_aborted_by();
        if (by >= 0 && st->errors[static_cast<std::size_t>(by)]) first = by;
        std::string what;
        try {
          std::rethrow_exception(st->errors[static_cast<std::size_t>(first)]);
        } catch (...) {
          what = rlflow::detail::current_what();
        }
        t.engine_->reset_collectives();
        throw rlflow::detail::call_failed(t.name_, role_name<typename E::owner>(), M::name(), first, t.shape_.world_size,
                                          what, failed);
      }
      if constexpr (!std::is_void_v<typename M::result_type>)
        rlflow::detail::collect_into<E>(st->value, st->results, t.shape_, st->pad, st->chunk_rows);
    } catch (...) {
      st->error = std::current_exception();
    }
  }

  template <class E, std::size_t I>
  void post(CallState<E>& st, bool thunk) {
    using M = typename E::method;
    int const n = M::execute_mode_type::rank_zero_only ? 1 : shape_.world_size;
    if constexpr (!std::is_void_v<typename M::result_type>) st.results.resize(static_cast<std::size_t>(shape_.world_size));
    st.errors.resize(static_cast<std::size_t>(shape_.world_size));
    st.remaining.store(n, std::memory_order_relaxed);
    st.posted = true;
    if (thunk) {
      static_cast<Thunk<Host>&>(st).fn = &run_thunk<E>;
      for (int r = 0; r < n; ++r) engine_->post(r, Message{op_thunk, static_cast<Thunk<Host>*>(&st)});
    } else {
      for (int r = 0; r < n; ++r) engine_->post(r, Message{static_cast<std::uint32_t>(I), &st});
    }
  }

  std::string name_;
  GroupShape shape_;
  std::unique_ptr<engine_type> engine_;
};

}  // namespace dispatch

//! A transport policy: a tag with 'name' (the WG_BACKEND value) and 'transport<Host>', the
//! per-group object that carries calls to the workers (docs/controller.md lists its members).
template <class T>
concept transport_policy = requires {
  { T::name } -> std::convertible_to<char const*>;
  typename T::template transport<int>;
};

template <class Host, class Transport>
class WorkerGroup;

//! A per-role view of a fused group: same workers and devices, calls restricted to Role.
//! verl: the role worker groups returned by spawn(prefix_set) / fuse().
template <class Host, class Transport, class Role>
class WorkerGroupView {
 public:
  explicit WorkerGroupView(WorkerGroup<Host, Transport>& g) : g_(&g) {}
  template <auto Fn, class... A>
  auto call(A&&... a) {
    return g_->template call_as<Role, Fn>(std::forward<A>(a)...);
  }
  int world_size() const { return g_->world_size(); }
  WorkerGroup<Host, Transport>& group() const { return *g_; }

 private:
  WorkerGroup<Host, Transport>* g_;
};

//! The workers of one host type on a pool. Host is a role (R::role_tag, R::methods) or a
//! Fused<Roles...> (optionally derived, with its own methods). Transport: the policy that
//! carries calls to the workers, dispatch::InProcess (threads) or dispatch::Mpi (processes,
//! rlflow/mpi/mpi.hpp). The group owns what every transport shares: the method lookup,
//! the argument split, the options' checks, views, execute_all; the transport only moves a
//! split call to the workers and the results back, and owns the workers' lifetime.
template <class Host, class Transport = dispatch::InProcess>
class WorkerGroup {
  static_assert(role<Host>,
                "rlflow::WorkerGroup<R, ...>: R is not a role; add 'using role_tag = rlflow::actor_tag;' (or "
                "rollout_tag, reference_tag, critic_tag, reward_tag, worker_tag) and 'using methods = "
                "rlflow::methods<...>;'");
  static_assert(transport_policy<Transport>,
                "rlflow::WorkerGroup<R, T>: T is not a transport policy; use rlflow::dispatch::InProcess or "
                "rlflow::dispatch::Mpi");

 public:
  using host_type = Host;
  using backend_type = Transport;
  using transport_type = typename Transport::template transport<Host>;
  using entries = detail::host_entries_t<Host>;

  //! Starts world_size workers on the first devices of 'pool'. Each worker constructs its host
  //! where it lives: Host(ctx, args...) when that compiles, else Host(args...), or f(ctx) for a
  //! single rlflow::construct_with(f) argument. Throws config_error when the pool is too small
  //! or full, worker_error when a constructor throws (no host of the group is left).
  template <class... CtorArgs>
  explicit WorkerGroup(ResourcePool const& pool, GroupOptions opts = {}, CtorArgs&&... ctor_args)
      : name_(opts.name.empty() ? std::string(detail::host_name<Host>()) : opts.name) {
    int const n = opts.world_size > 0 ? opts.world_size : pool.world_size();
    std::string const who = transport_.open(pool, n, name_);
    lease_ = pool.acquire(n, who);
    shape_ = GroupShape::make(n, opts.tp, opts.pp);
    for (auto const& [k, v] : opts.env)
      for (auto p : protected_env_keys)
        if (k == p)
          throw config_error(msg(who, ": GroupOptions::env sets '", k,
                                 "', a protected system env key; remove it (rlflow sets it per worker)"));
    std::vector<WorkerContext> ctxs =
        detail::make_worker_contexts(pool, opts, n, shape_, name_, transport_.backend_name());
    auto args = std::tuple<std::decay_t<CtorArgs>...>(std::forward<CtorArgs>(ctor_args)...);
    auto make = [&args](std::optional<Host>& h, WorkerContext& ctx) { detail::construct_host(h, ctx, args); };
    transport_.start(name_, shape_, std::move(ctxs), make, opts, who);
  }

  WorkerGroup(WorkerGroup const&) = delete;
  WorkerGroup& operator=(WorkerGroup const&) = delete;
  //! Finishes queued calls; the hosts are destroyed where they were built.
  ~WorkerGroup() { shutdown(); }

  //! Same as destruction, earlier; later calls throw.
  void shutdown() { transport_.shutdown(); }
  bool running() const { return transport_.running(); }

  int world_size() const { return shape_.world_size; }
  GroupShape const& shape() const { return shape_; }
  std::string const& name() const { return name_; }
  //! Rank r's identity (as its worker sees it).
  WorkerContext const& context(int r) const { return transport_.context(r); }
  //! True when the workers are threads of this process (always for dispatch::InProcess; for
  //! dispatch::Mpi when the program was not started by mpirun).
  bool in_process() const { return transport_.in_process(); }

  //! Calls registered method fn on the workers (verl: group.fn(...)). Returns the collected
  //! result (blocking<true>) or a Pending of it (blocking<false>).
  template <auto Fn, class... A>
  auto call(A&&... a) {
    return call_as<void, Fn>(std::forward<A>(a)...);
  }

  //! A per-role view (fused groups): view<Actor>().call<&Actor::fn>(...).
  template <class Role>
  WorkerGroupView<Host, Transport, Role> view() {
    static_assert(detail::fused_host<Host>,
                  "rlflow::WorkerGroup<R>::view<Role>(): views exist for fused groups only; call the group directly");
    return WorkerGroupView<Host, Transport, Role>(*this);
  }

  //! Runs any member function of the host (or of one fused role), registered or not, on every
  //! rank: PerRank<T> arguments scattered, others broadcast; one result per rank (void: none).
  //! verl: execute_all_sync("fn", ...). The message carries the function.
  template <auto Fn, class... A>
  auto execute_all(A&&... a) {
    return execute_all_async<Fn>(std::forward<A>(a)...).get();
  }
  //! verl: execute_all_async.
  template <auto Fn, class... A>
  auto execute_all_async(A&&... a) {
    using C = typename member_fn_traits<decltype(Fn)>::class_type;
    using E = detail::entry<C, method<Fn, dispatch::AllToAll, execute::All, blocking<false>>>;
    return post_call<E, 0>(/*thunk=*/true, std::forward<A>(a)...);
  }

  //! Runs f(args...) on rank 0 and returns its value (verl: execute_func_rank_zero, A-46).
  //! dispatch::Mpi under mpirun: f must be stateless (rank 0's process builds its own F{}).
  template <class F, class... A>
  auto execute_func_rank_zero(F f, A&&... a) {
    return transport_.execute_func_rank_zero(std::move(f), std::forward<A>(a)...);
  }

  // ---- used by views -------------------------------------------------------------------------
  template <class Owner, auto Fn, class... A>
  auto call_as(A&&... a) {
    using pred = typename detail::matches_fn<Fn, Owner>;
    constexpr std::size_t hits = detail::count_if<pred::template pred, entries>::value;
    static_assert(hits != 0,
                  "rlflow::WorkerGroup<R>::call<&R::fn>: fn is not listed in R::methods; add rlflow::method<&R::fn, "
                  "rlflow::dispatch::...> to R's 'using methods = rlflow::methods<...>;' (or use execute_all<&R::fn>)");
    static_assert(hits <= 1,
                  "rlflow::WorkerGroup<Fused<...>>::call<&R::fn>: fn is registered by more than one fused role; call "
                  "it through group.view<Role>()");
    if constexpr (hits == 1) {
      constexpr std::size_t I = detail::find_if<pred::template pred, entries>::value;
      using E = detail::at_t<I, entries>;
      return post_call<E, I>(/*thunk=*/false, std::forward<A>(a)...);
    }
  }

 private:
  //! Checks, splits the arguments with E's dispatch mode, hands the call to the transport.
  template <class E, std::size_t I, class... A>
  auto post_call(bool thunk, A&&... a) {
    using M = typename E::method;
    using params = typename M::traits::params;
    static_assert(sizeof...(A) == params::size,
                  "rlflow::WorkerGroup::call<&R::fn>(args...): the number of arguments differs from fn's parameters");
    transport_.check_running();
    detail::split_call<E> s;
    using Mode = typename M::dispatch_mode_type;
    SplitContext ctx{shape_, detail::entry_names<E>::role(), detail::entry_names<E>::method(), 0,
                     M::is_blocking || transport_.copies_arguments()};
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (((ctx.arg_index = K),
        (std::get<K>(s.args) = Mode::template split<std::decay_t<detail::at_t<K, params>>>(
             detail::materialize(std::forward<A>(a)), ctx)),
        check_cover(std::get<K>(s.args), ctx)),
       ...);
    }(std::make_index_sequence<params::size>{});
    s.pad = ctx.pad > 0 ? ctx.pad : 0;
    s.chunk_rows = ctx.chunk_rows;
    return transport_.template submit<E, I>(std::move(s), thunk);
  }

  template <class T>
  void check_cover(Dist<T> const& d, SplitContext const& ctx) const {
    if (!d.covers(shape_.world_size))
      throw shape_error(msg("rlflow::WorkerGroup '", name_, "': ", ctx.role, "::", ctx.method, ": the dispatch mode gave ",
                            d.values.size(), " values (", d.index.size(), " indices) for argument ", ctx.arg_index,
                            " of a group of ", shape_.world_size,
                            " ranks; a mode's split must give 1 value, one per rank, or an index per rank"));
  }

  std::string name_;
  ResourcePool::Lease lease_;
  GroupShape shape_;
  transport_type transport_;  // last: the workers stop before the lease is returned
};

//! A fused colocated group for placement Colocate<N>: one worker per device of 'pool' holding
//! one object of each role (verl: create_colocated_worker_cls + spawn). Per-role constructor
//! arguments are std::tuples, one per role (or none). Use group.view<Role>() for each role.
template <class Placement, class... Roles, class... Tuples>
auto make_colocated_group(ResourcePool const& pool, GroupOptions opts = {}, Tuples&&... per_role_args) {
  static_assert(sizeof...(Roles) <= static_cast<std::size_t>(Placement::max_colocate_count),
                "rlflow::make_colocated_group<Colocate<N>, Roles...>: more roles than N; raise N or put some roles on "
                "another pool");
  static_assert(sizeof...(Tuples) == 0 || sizeof...(Tuples) == sizeof...(Roles),
                "rlflow::make_colocated_group<Placement, Roles...>(pool, opts, args...): give one std::tuple of "
                "constructor arguments per role, or none");
  return WorkerGroup<Fused<Roles...>>(pool, std::move(opts), std::forward<Tuples>(per_role_args)...);
}

}  // namespace rlflow
