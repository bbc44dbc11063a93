// tests/dispatch/roles.hpp: roles used by the WorkerGroup / fused tests and the TwoToAll mode
// (verl's two_to_all test, A-44).
#pragma once
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "dispatch/support.hpp"

namespace test_dispatch {

using rlflow::DataProto;

//! verl test SC-WG-5: a user dispatch mode whose split rewrites a 2-element argument to
//! [a0, a1, a0, a1, ...] over the ranks; collect returns the per-rank list.
// example-begin two_to_all
struct TwoToAll {
  using dispatch_tag = rlflow::dispatch_mode_tag;
  template <class P, class A>
  static rlflow::Dist<P> split(A&& a, rlflow::SplitContext& ctx) {
    static_assert(rlflow::is_per_rank_v<A>, "TwoToAll: pass rlflow::PerRank<T> with two values");
    if (a.size() != 2) throw rlflow::shape_error("TwoToAll: expects exactly two values");
    std::vector<int> index;
    for (int r = 0; r < ctx.shape.world_size; ++r) index.push_back(r % 2);
    return rlflow::Dist<P>::scatter({P(a.values[0]), P(a.values[1])}, std::move(index));
  }
  template <class R>
  static std::vector<R> collect(std::vector<R>&& outs, rlflow::CollectContext const&) {
    return std::move(outs);
  }
};
// example-end two_to_all

//! x + 10 + rank in a new column "y" (verl test SC-DEC-1).
inline DataProto plus_ten_rank(DataProto const& d, int rank) {
  DataProto out = d.clone();
  auto x = d.tensor("x");
  std::vector<float> y(static_cast<std::size_t>(x.numel()));
  auto xs = x.span<float>();
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = xs[i] + 10.f + static_cast<float>(rank);
  out.set_tensor("y", rlflow::Tensor::from(y, x.shape()));
  return out;
}

//! Doubles "x" (a driver-side function shipped with DPComputeProtoWithFunc, A-32).
inline DataProto double_x(DataProto const& d) {
  DataProto out = d.clone();
  auto x = d.tensor("x");
  std::vector<float> y(static_cast<std::size_t>(x.numel()));
  auto xs = x.span<float>();
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = 2.f * xs[i];
  out.set_tensor("x", rlflow::Tensor::from(y, x.shape()));
  return out;
}

struct Calc {
  using role_tag = rlflow::worker_tag;
  static constexpr std::string_view role_name = "Calc";
  explicit Calc(rlflow::WorkerContext const& c) : ctx(c) {}
  rlflow::WorkerContext const& ctx;
  std::vector<std::int64_t> seen_first_id;  // first "id" of every chunk this rank received

  int add_rank(int x) { return x + ctx.rank; }
  void nothing() {}
  int sum2(int x, int y) { return x + y; }
  DataProto plus(DataProto const& d) { return plus_ten_rank(d, ctx.rank); }
  DataProto echo(DataProto d) {
    seen_first_id.push_back(d.size() ? ids_of(d).front() : -1);
    return d;
  }
  int five() { return 5; }
  int fail_on(int bad_rank) {
    if (ctx.rank == bad_rank) throw rlflow::value_error("boom on purpose");
    return ctx.rank;
  }
  //! all-reduce of [rank, 1]; rank bad_rank throws before joining the collective
  std::vector<float> reduce(int bad_rank) {
    if (ctx.rank == bad_rank) throw std::runtime_error("failed before the all-reduce");
    std::vector<float> v{static_cast<float>(ctx.rank), 1.f};
    ctx.comm().allreduce_sum(v);
    return v;
  }
  std::string env(std::string key) const { return ctx.getenv(key); }
  rlflow::MeshCoord coords() const { return ctx.mesh; }
  int unregistered(int y) const { return y + ctx.rank; }
  DataProto apply(DataProto (*f)(DataProto const&), DataProto const& d) { return f(d); }
  std::vector<std::int64_t> seen() const { return seen_first_id; }
  DataProto tag_rank(DataProto const& d) {
    DataProto out = d.clone();
    out.set_tensor("rank", rlflow::Tensor::full(rlflow::Shape{d.size()}, static_cast<std::int64_t>(ctx.rank)));
    return out;
  }
  double metric(DataProto const& d) { return static_cast<double>(d.size()) + 0.5 * ctx.rank; }

  using methods = rlflow::methods<
      rlflow::method<&Calc::add_rank, rlflow::dispatch::OneToAll>,
      rlflow::method<&Calc::nothing, rlflow::dispatch::OneToAll>,
      rlflow::method<&Calc::sum2, rlflow::dispatch::AllToAll>,
      rlflow::method<&Calc::plus, rlflow::dispatch::DPComputeProto>,
      rlflow::method<&Calc::echo, rlflow::dispatch::DPComputeProto, rlflow::execute::All, rlflow::blocking<false>>,
      rlflow::method<&Calc::five, rlflow::dispatch::OneToAll, rlflow::execute::RankZero>,
      rlflow::method<&Calc::fail_on, rlflow::dispatch::OneToAll>,
      rlflow::method<&Calc::reduce, rlflow::dispatch::OneToAll>,
      rlflow::method<&Calc::env, rlflow::dispatch::OneToAll>,
      rlflow::method<&Calc::coords, rlflow::dispatch::OneToAll>,
      rlflow::method<&Calc::apply, rlflow::dispatch::DPComputeProtoWithFunc>,
      rlflow::method<&Calc::seen, rlflow::dispatch::OneToAll>,
      rlflow::method<&Calc::tag_rank, rlflow::dispatch::NDComputeProto<rlflow::dispatch::MeshLayout<4>>>,
      rlflow::method<&Calc::metric, rlflow::dispatch::DPComputeMetric>>;
};

//! A second role with the same method names as Calc's echo, to check views route correctly.
struct Pair {
  using role_tag = rlflow::worker_tag;
  int sum2(int x, int y) { return x + y; }
  using methods = rlflow::methods<rlflow::method<&Pair::sum2, TwoToAll>>;
};

}  // namespace test_dispatch
