// rlflow/dispatch/in_process.hpp: the in-process transport's engine. dispatch::InProcess (the
// transport policy a WorkerGroup takes as its template parameter; its per-group object,
// InProcessTransport, is in rlflow/dispatch/worker_group.hpp) and InProcessEngine<Host, Handler>: one
// persistent thread per worker, each owning its host object (constructed and destroyed on that
// thread), a Mailbox for messages and a LocalCommunicator shared by the group. The engine knows
// nothing about methods: Handler::handle(host, ctx, msg) runs a message.
#pragma once
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <rlflow/comm/communicator.hpp>  // comm::LocalCommunicator
#include <rlflow/dispatch/context.hpp>       // WorkerContext, current_worker
#include <rlflow/dispatch/handoff.hpp>       // Mailbox, Message, CountDown
#include <rlflow/core/error.hpp>

namespace rlflow::dispatch {

//! Control operations share the op space with method indices (which start at 0).
inline constexpr std::uint32_t op_stop = 0xffffffffu;
inline constexpr std::uint32_t op_thunk = 0xfffffffeu;

//! A message that carries its own function (used only by execute_all / run_on_rank_zero for
//! unregistered functions; registered methods never take this path).
template <class Host>
struct Thunk {
  void (*fn)(Thunk*, Host&, WorkerContext&) = nullptr;
};

template <class Host, class Handler>
class InProcessEngine {
 public:
  //! Starts one thread per context; each constructs its host with make(optional<Host>&, ctx).
  //! If any construction throws, every thread is joined and a worker_error naming 'what' and
  //! the rank is thrown. idle_spin: how long an idle worker polls its mailbox before sleeping.
  template <class Factory>
  InProcessEngine(std::vector<WorkerContext> ctxs, Factory const& make, std::string const& what,
                  std::chrono::nanoseconds idle_spin = Mailbox::default_idle_spin) {
    int const n = static_cast<int>(ctxs.size());
    comms_ = comm::LocalCommunicator::make_group(n);
    slots_.reserve(ctxs.size());
    for (int r = 0; r < n; ++r) {
      slots_.push_back(std::make_unique<Slot>());
      slots_.back()->box.set_idle_spin(idle_spin);
      slots_.back()->ctx = std::move(ctxs[static_cast<std::size_t>(r)]);
      slots_.back()->ctx.communicator = comms_[static_cast<std::size_t>(r)].get();
    }
    ready_.reset(n);
    for (int r = 0; r < n; ++r) {
      Slot* s = slots_[static_cast<std::size_t>(r)].get();
      s->thread = std::thread([this, s, &make] { run(*s, make, ready_); });
    }
    ready_.wait();
    for (int r = 0; r < n; ++r) {
      if (auto e = slots_[static_cast<std::size_t>(r)]->ctor_error) {
        std::string what_failed;
        try { std::rethrow_exception(e); } catch (std::exception const& ex) { what_failed = ex.what(); } catch (...) {
          what_failed = "unknown exception";
        }
        shutdown();
        throw worker_error(msg(what, ": constructing the worker on rank ", r, " of ", n, " failed: ", what_failed,
                               "; every worker thread has been joined"));
      }
    }
  }
  InProcessEngine(InProcessEngine const&) = delete;
  InProcessEngine& operator=(InProcessEngine const&) = delete;
  ~InProcessEngine() { shutdown(); }

  int world_size() const { return static_cast<int>(slots_.size()); }
  bool running() const { return running_; }
  WorkerContext const& context(int r) const { return slots_[static_cast<std::size_t>(r)]->ctx; }
  //! Queues a message for rank r (FIFO per rank).
  void post(int r, Message m) { slots_[static_cast<std::size_t>(r)]->box.push(m); }

  //! Wakes every rank blocked in a collective (a rank failed) / re-arms afterwards.
  void abort_collectives(int by) { comms_[static_cast<std::size_t>(by)]->abort(); }
  bool collectives_aborted() const { return !comms_.empty() && comms_[0]->aborted(); }
  //! The rank that aborted the collectives of the current call, or -1.
  int collectives_aborted_by() const { return comms_.empty() ? -1 : comms_[0]->aborted_by(); }
  void reset_collectives() { if (!comms_.empty()) comms_[0]->reset(); }

  //! Runs every queued message, then stops and joins each thread (idempotent).
  void shutdown() {
    if (!running_) return;
    running_ = false;
    for (auto& s : slots_)
      if (!s->ctor_error && s->thread.joinable()) s->box.push(Message{op_stop, nullptr});
    for (auto& s : slots_)
      if (s->thread.joinable()) s->thread.join();
  }

 private:
  struct Slot {
    Mailbox box;
    std::optional<Host> host;
    WorkerContext ctx;
    std::exception_ptr ctor_error;
    std::thread thread;
  };

  template <class Factory>
  static void run(Slot& s, Factory const& make, CountDown& ready) {
    detail::current_worker() = &s.ctx;
    try {
      make(s.host, s.ctx);
    } catch (...) {
      s.ctor_error = std::current_exception();
      detail::current_worker() = nullptr;
      ready.arrive();
      return;
    }
    ready.arrive();
    for (;;) {
      Message const m = s.box.pop();
      if (m.op == op_stop) break;
      if (m.op == op_thunk) {
        auto* t = static_cast<Thunk<Host>*>(m.state);
        t->fn(t, *s.host, s.ctx);
        continue;
      }
      Handler::handle(*s.host, s.ctx, m);
    }
    s.host.reset();  // the role is destroyed on the thread that built it
    detail::current_worker() = nullptr;
  }

  CountDown ready_;  // a member: the last arriver may still touch it after the constructor returns
  std::vector<std::unique_ptr<comm::LocalCommunicator>> comms_;
  std::vector<std::unique_ptr<Slot>> slots_;
  bool running_ = true;
};

template <class Host>
class InProcessTransport;  // rlflow/dispatch/worker_group.hpp

//! The in-process transport policy: worker threads in the driver's process (the default
//! transport of WorkerGroup). verl: the Ray backend (RayWorkerGroup) in a single process.
struct InProcess {
  static constexpr const char* name = "in_process";
  template <class Host>
  using transport = InProcessTransport<Host>;
};

}  // namespace rlflow::dispatch
