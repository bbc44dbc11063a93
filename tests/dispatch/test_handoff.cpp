// tests/dispatch/test_handoff.cpp <-> include/rlflow/dispatch/handoff.hpp (Mailbox with its idle
// poll window) and the collect placement of include/rlflow/dispatch/worker_group.hpp: no message is lost
// or reordered whether it arrives while the consumer polls, just after the window closes, or
// while it sleeps; blocking calls collect on the driver, non-blocking calls on a worker.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "dispatch/roles.hpp"

namespace test_handoff {

using namespace rlflow;
using namespace std::chrono_literals;

namespace {

//! Sleeps about d (a busy wait below 50 us, where sleep_for would oversleep by far more).
void pause_for(std::chrono::microseconds d) {
  if (d >= 50us) {
    std::this_thread::sleep_for(d);
    return;
  }
  auto const until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

}  // namespace

TEST_CASE("Mailbox delivers every message in per-producer order across poll, wake and full paths",
          "[dispatch][handoff]") {
  for (auto spin : {std::chrono::microseconds{0}, std::chrono::microseconds{20}, std::chrono::microseconds{300}}) {
    DYNAMIC_SECTION("idle_spin " << spin.count() << " us") {
      dispatch::Mailbox box;
      box.set_idle_spin(spin);
      REQUIRE(box.idle_spin() == spin);
      constexpr int producers = 3;
      constexpr int per_producer = 1500;  // > capacity: the full path is taken while the consumer naps
      std::vector<std::vector<std::uintptr_t>> got(producers);
      std::thread consumer([&] {
        std::mt19937 rng(1);
        for (int n = 0; n < producers * per_producer; ++n) {
          dispatch::Message const m = box.pop();
          got[m.op].push_back(reinterpret_cast<std::uintptr_t>(m.state));
          if (n % 500 == 0) pause_for(200us);  // let the ring fill up
        }
      });
      std::vector<std::thread> ps;
      for (int p = 0; p < producers; ++p)
        ps.emplace_back([&, p] {
          std::mt19937 rng(static_cast<unsigned>(17 + p));
          // gaps around the poll window: none, inside it, just past it, well past it
          std::uniform_int_distribution<int> kind(0, 9);
          for (int i = 0; i < per_producer; ++i) {
            int const k = kind(rng);
            if (k == 7) pause_for(std::chrono::microseconds(spin.count() / 2 + 1));
            if (k == 8) pause_for(spin + 5us);
            if (k == 9 && i % 25 == 0) pause_for(spin + 400us);
            box.push(dispatch::Message{static_cast<std::uint32_t>(p), reinterpret_cast<void*>(static_cast<std::uintptr_t>(i + 1))});
          }
        });
      for (auto& t : ps) t.join();
      consumer.join();
      for (int p = 0; p < producers; ++p) {
        REQUIRE(got[p].size() == per_producer);
        for (int i = 0; i < per_producer; ++i) REQUIRE(got[p][static_cast<std::size_t>(i)] == static_cast<std::uintptr_t>(i + 1));
      }
    }
  }
}

TEST_CASE("Mailbox: a negative poll window means sleep at once", "[dispatch][handoff]") {
  dispatch::Mailbox box;
  REQUIRE(box.idle_spin() == dispatch::Mailbox::default_idle_spin);
  box.set_idle_spin(-5us);
  REQUIRE(box.idle_spin() == std::chrono::nanoseconds::zero());
}

namespace {

std::atomic<std::thread::id> collected_on{};

//! DPComputeProto that records the thread its collect runs on, and can fail there.
struct RecordingDP {
  using dispatch_tag = rlflow::dispatch_mode_tag;
  static inline std::atomic<bool> fail{false};
  template <class P, class A>
  static rlflow::Dist<P> split(A&& a, rlflow::SplitContext& ctx) {
    return dispatch::DPComputeProto::split<P>(std::forward<A>(a), ctx);
  }
  template <class R>
  static R collect(std::vector<R>&& outs, rlflow::CollectContext const& ctx) {
    collected_on = std::this_thread::get_id();
    if (fail) throw rlflow::shape_error("collect failed on purpose");
    return dispatch::DPComputeProto::collect(std::move(outs), ctx);
  }
};

struct Echo {
  using role_tag = rlflow::worker_tag;
  DataProto echo(DataProto const& d) { return d; }
  DataProto echo_async(DataProto const& d) { return d; }
  using methods = rlflow::methods<rlflow::method<&Echo::echo, RecordingDP>,
                                  rlflow::method<&Echo::echo_async, RecordingDP, execute::All, blocking<false>>>;
};

}  // namespace

TEST_CASE("blocking calls collect on the driver, non-blocking calls on a worker, collect errors reach the caller",
          "[dispatch][group][handoff]") {
  ResourcePool pool("p", {3}, 1);
  for (auto spin : {std::chrono::microseconds{0}, dispatch::Mailbox::default_idle_spin}) {
    GroupOptions opts;
    opts.idle_spin = spin;
    WorkerGroup<Echo> g(pool, opts);
    auto const d = test_dispatch::make_rows(7 * 3, 5);
    auto const driver = std::this_thread::get_id();
    for (int i = 0; i < 50; ++i) {  // calls back to back and after gaps longer than the window
      if (i % 10 == 9) std::this_thread::sleep_for(1ms);
      RecordingDP::fail = false;
      REQUIRE(g.call<&Echo::echo>(d) == d);
      REQUIRE(collected_on.load() == driver);
      Pending<DataProto> p = g.call<&Echo::echo_async>(d);
      REQUIRE(std::move(p).get() == d);
      REQUIRE(collected_on.load() != driver);
    }
    RecordingDP::fail = true;
    REQUIRE_THROWS_WITH(g.call<&Echo::echo>(d), Catch::Contains("collect failed on purpose"));
    REQUIRE_THROWS_WITH(g.call<&Echo::echo_async>(d).get(), Catch::Contains("collect failed on purpose"));
    RecordingDP::fail = false;
    REQUIRE(g.call<&Echo::echo>(d) == d);  // the group is still usable
  }
}

TEST_CASE("GroupOptions::idle_spin must not be negative", "[dispatch][group][handoff]") {
  ResourcePool pool("p", {2}, 1);
  GroupOptions opts;
  opts.idle_spin = -1us;
  REQUIRE_THROWS_WITH(WorkerGroup<Echo>(pool, opts), Catch::Contains("GroupOptions::idle_spin is -1 us"));
  REQUIRE(pool.used_slots() == std::vector<int>{0, 0});  // the lease was returned
}

}  // namespace test_handoff
