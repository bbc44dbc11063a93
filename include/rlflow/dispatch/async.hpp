// rlflow/dispatch/async.hpp: Pending<T>, the result of a non-blocking WorkerGroup call (verl: the list of
// Ray object refs / DataProtoFuture), plus sync_wait and when_all (stdexec's names; eager and
// minimal: work starts when the call is made, not when it is awaited). A Pending can be passed
// straight into another group's call; it resolves to exactly what the blocking call returns
// (auto-padding trimmed; verl leaves it on non-blocking results). Copies share one result.
#pragma once
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include <rlflow/dispatch/handoff.hpp>  // Completion
#include <rlflow/core/error.hpp>

namespace rlflow {

//! A result still being computed by the workers of a group. get() waits, then returns the value
//! or rethrows the call's error (a worker_error naming role, method and rank). Destroying the
//! last copy of an unfinished Pending waits for the call to finish (like std::future).
template <class T>
class Pending {
 public:
  using value_type = T;
  Pending() = default;
  explicit Pending(std::shared_ptr<dispatch::Completion<T>> st) : st_(std::move(st)) {}

  //! A Pending that already holds v.
  static Pending ready(T v) {
    auto st = std::make_shared<dispatch::Completion<T>>();
    st->value.emplace(std::move(v));
    st->publish();
    return Pending(std::move(st));
  }

  bool valid() const { return st_ != nullptr; }
  bool is_ready() const { return st_ && st_->is_done(); }
  void wait() const {
    check();
    st_->wait();
  }
  //! Waits and returns the value (shared by every copy of this Pending).
  T const& get() const& {
    wait();
    if (st_->error) std::rethrow_exception(st_->error);
    return *st_->value;
  }
  //! Waits and returns the value, moved out when this is the only copy.
  T get() && {
    wait();
    if (st_->error) std::rethrow_exception(st_->error);
    if (st_.use_count() == 1) return std::move(*st_->value);
    return *st_->value;
  }

 private:
  void check() const {
    if (!st_) throw error("rlflow::Pending::get: this Pending is empty (default-constructed or moved from)");
  }
  std::shared_ptr<dispatch::Completion<T>> st_;
};

template <>
class Pending<void> {
 public:
  using value_type = void;
  Pending() = default;
  explicit Pending(std::shared_ptr<dispatch::Completion<void>> st) : st_(std::move(st)) {}
  static Pending ready() {
    auto st = std::make_shared<dispatch::Completion<void>>();
    st->publish();
    return Pending(std::move(st));
  }
  bool valid() const { return st_ != nullptr; }
  bool is_ready() const { return st_ && st_->is_done(); }
  void wait() const {
    if (!st_) throw error("rlflow::Pending::get: this Pending is empty (default-constructed or moved from)");
    st_->wait();
  }
  void get() const {
    wait();
    if (st_->error) std::rethrow_exception(st_->error);
  }

 private:
  std::shared_ptr<dispatch::Completion<void>> st_;
};

template <class T>
struct is_pending : std::false_type {};
template <class T>
struct is_pending<Pending<T>> : std::true_type {};
template <class T>
inline constexpr bool is_pending_v = is_pending<std::remove_cvref_t<T>>::value;

//! Waits for a Pending and returns its value; a plain value is returned as is, so one driver
//! function serves blocking and non-blocking registrations.
template <class T>
auto sync_wait(T&& x) {
  if constexpr (is_pending_v<T>) {
    if constexpr (std::is_void_v<typename std::remove_cvref_t<T>::value_type>) x.get();
    else if constexpr (std::is_rvalue_reference_v<T&&>) return std::move(x).get();
    else return typename std::remove_cvref_t<T>::value_type(x.get());
  } else {
    return std::remove_cvref_t<T>(std::forward<T>(x));
  }
}

//! Several results awaited together: sync_wait(when_all(a, b, c)) -> std::tuple<A, B, C>.
template <class... Ts>
struct WhenAll {
  std::tuple<Ts...> parts;
};
template <class... Ts>
WhenAll<std::remove_cvref_t<Ts>...> when_all(Ts&&... xs) {
  return {std::tuple<std::remove_cvref_t<Ts>...>(std::forward<Ts>(xs)...)};
}
template <class... Ts>
auto sync_wait(WhenAll<Ts...> w) {
  return std::apply([](auto&... p) { return std::tuple(sync_wait(std::move(p))...); }, w.parts);
}

}  // namespace rlflow
