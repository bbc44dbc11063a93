// rlflow/dispatch/all_to_all.hpp: dispatch::AllToAll, arguments wrapped in rlflow::PerRank<T>
// are scattered (rank i gets element i), every other argument is broadcast; the call returns
// one result per rank (verl: Dispatch.ALL_TO_ALL, the default of @register). The explicit
// wrapper replaces verl's "a list of world-size length is scattered" rule.
#pragma once
#include <vector>

#include <rlflow/dispatch/mode.hpp>  // dispatch_mode_tag, PerRank, Dist

namespace rlflow::dispatch {

//! verl: Dispatch.ALL_TO_ALL. split: PerRank<T> scattered, others broadcast; collect: ws results.
struct AllToAll {
  using dispatch_tag = dispatch_mode_tag;
  static constexpr const char* verl_name = "ALL_TO_ALL";

  template <class P, class A>
  static Dist<P> split(A&& a, SplitContext& ctx) {
    if constexpr (is_per_rank_v<A>) {
      detail::check_per_rank_size(a, ctx, "AllToAll");
      return Dist<P>::scatter(detail::convert_all<P>(std::forward<A>(a)));
    } else {
      return ctx.template broadcast<P>(std::forward<A>(a));
    }
  }
  template <class R>
  static std::vector<R> collect(std::vector<R>&& outs, CollectContext const&) {
    return std::move(outs);
  }
};

}  // namespace rlflow::dispatch
