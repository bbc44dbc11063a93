// rlflow/dispatch/handoff.hpp: the in-process hand-off primitives. Message (an operation index
// plus a typed state pointer), Mailbox (a bounded FIFO per worker thread whose consumer
// yield-polls briefly, then sleeps on a C++20 atomic wait, i.e. a futex; toolchain.md section 8
// measured it 10-20x below a condition variable and safe when threads outnumber cores, where
// pause-spinning collapses), and
// Completion<T> (a one-shot result slot the driver waits on). No virtual functions.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>    // std::this_thread::yield
#include <utility>

namespace rlflow::dispatch {

//! What crosses to a worker: 'op' indexes the host's compile-time method table (or names a
//! control operation); 'state' points at the call's typed state, known from 'op'.
struct Message {
  std::uint32_t op = 0;
  void* state = nullptr;
};

//! A bounded multi-producer, single-consumer FIFO of Messages. The consumer (one worker
//! thread), finding it empty, first polls for idle_spin (yielding the core between polls, so
//! it only uses time no other thread wants), then sleeps in std::atomic::wait; producers block
//! the same way when full. The poll window exists because a sleeping thread whose (v)CPU went
//! idle wakes slowly: on the 2-vCPU dev VM a worker idle for more than ~60 us took about 50 us
//! to wake, against ~1 us when the call arrives while it polls (docs/controller.md, "Dispatch
//! overhead"). Yield-polling, unlike a pause-spin, stays cheap when threads outnumber cores
//! (toolchain.md section 8).
//!
//! Each side announces that it is about to sleep (consumer_sleeping_ / producer_waiting_) and
//! the other side notifies only then: libstdc++ hashes wait addresses into 16 shared buckets
//! (every 64-byte-aligned head_/tail_ of every mailbox lands in one), so an unconditional
//! notify costs a futex syscall whenever any thread waits in that bucket. The flag protocol is
//! Dekker's (all flag and index accesses on the sleeping paths are seq_cst): either the
//! notifier sees the flag, or the sleeper sees the new index and does not sleep.
class Mailbox {
 public:
  static constexpr std::uint32_t capacity = 256;
  //! How long an idle consumer polls before it sleeps (GroupOptions::idle_spin's default).
  static constexpr std::chrono::microseconds default_idle_spin{100};

  //! Sets the poll window of the consumer (0: sleep at once). Call before the consumer starts.
  void set_idle_spin(std::chrono::nanoseconds d) { idle_spin_ = d.count() > 0 ? d : std::chrono::nanoseconds::zero(); }
  std::chrono::nanoseconds idle_spin() const { return idle_spin_; }

  void push(Message m) {
    std::lock_guard lock(producer_mu_);
    std::uint32_t const h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) >= capacity) {  // full: one producer waits (it holds the lock)
      producer_waiting_.store(1, std::memory_order_seq_cst);
      for (std::uint32_t t = tail_.load(std::memory_order_seq_cst); h - t >= capacity;
           t = tail_.load(std::memory_order_seq_cst))
        tail_.wait(t, std::memory_order_acquire);
      producer_waiting_.store(0, std::memory_order_seq_cst);
    }
    ring_[h % capacity] = m;
    head_.store(h + 1, std::memory_order_seq_cst);
    if (consumer_sleeping_.load(std::memory_order_seq_cst) != 0) head_.notify_one();
  }

  //! Blocks until a message is available.
  Message pop() {
    std::uint32_t const t = tail_.load(std::memory_order_relaxed);
    if (head_.load(std::memory_order_acquire) == t && idle_spin_.count() > 0) poll(t);
    if (head_.load(std::memory_order_acquire) == t) {  // still empty: announce, re-check, sleep
      consumer_sleeping_.store(1, std::memory_order_seq_cst);
      for (std::uint32_t h = head_.load(std::memory_order_seq_cst); h == t; h = head_.load(std::memory_order_seq_cst))
        head_.wait(h, std::memory_order_acquire);
      consumer_sleeping_.store(0, std::memory_order_seq_cst);
    }
    Message const m = ring_[t % capacity];
    tail_.store(t + 1, std::memory_order_seq_cst);
    if (producer_waiting_.load(std::memory_order_seq_cst) != 0) tail_.notify_one();
    return m;
  }

 private:
  //! Yield-polls until a message is at tail t or the poll window has passed (the clock is read
  //! every 16 polls; a yield is a syscall, so that is every few microseconds).
  void poll(std::uint32_t t) const {
    auto const until = std::chrono::steady_clock::now() + idle_spin_;
    for (unsigned k = 1; head_.load(std::memory_order_acquire) == t; ++k) {
      std::this_thread::yield();
      if (k % 16 == 0 && std::chrono::steady_clock::now() >= until) return;
    }
  }

  std::array<Message, capacity> ring_{};
  std::mutex producer_mu_;
  alignas(64) std::atomic<std::uint32_t> head_{0};
  std::atomic<std::uint32_t> producer_waiting_{0};  // read by the consumer after each pop
  alignas(64) std::atomic<std::uint32_t> tail_{0};
  std::atomic<std::uint32_t> consumer_sleeping_{0};  // read by producers after each push
  std::chrono::nanoseconds idle_spin_{default_idle_spin};
};

//! A countdown the driver can wait on: the thread that brings it to zero wakes the waiter.
class CountDown {
 public:
  explicit CountDown(int n = 0) : left_(n) {}
  void reset(int n) { left_.store(n, std::memory_order_relaxed); }
  //! Returns true for the call that reached zero.
  bool arrive() {
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      left_.notify_all();
      return true;
    }
    return false;
  }
  void wait() const {
    for (int v = left_.load(std::memory_order_acquire); v != 0; v = left_.load(std::memory_order_acquire))
      left_.wait(v, std::memory_order_acquire);
  }

 private:
  std::atomic<int> left_;
};

namespace detail {
//! The signalling part of a Completion: 'done' wakes waiters; 'released' is the publisher's
//! very last write, so the owner may free the state only after seeing it.
struct CompletionSignal {
  std::atomic<std::uint32_t> done{0};
  std::atomic<std::uint32_t> released{0};
  std::exception_ptr error;

  bool is_done() const { return done.load(std::memory_order_acquire) != 0; }
  void wait() const {
    while (done.load(std::memory_order_acquire) == 0) done.wait(0, std::memory_order_acquire);
  }
  //! Waits until the publishing thread no longer touches this object.
  void wait_released() const {
    wait();
    while (released.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  }
  void publish() {
    done.store(1, std::memory_order_release);
    done.notify_all();
    released.store(1, std::memory_order_release);  // last access by the publisher
  }
};
}  // namespace detail

//! A one-shot result slot: set once by a worker, read by the driver (or whoever holds the
//! Pending). An untouched completion (never published) is not waited for on destruction.
template <class T>
struct Completion : detail::CompletionSignal {
  std::optional<T> value;
};
template <>
struct Completion<void> : detail::CompletionSignal {};

}  // namespace rlflow::dispatch
