// rlflow/dispatch/dp_compute.hpp: dispatch::DPCompute, every argument is already split per rank
// (a rlflow::PerRank<T> of world-size length) and the call returns one result per rank
// (verl: Dispatch.DP_COMPUTE). Passing anything else is a compile error.
#pragma once
#include <vector>

#include <rlflow/detail/meta.hpp>    // dependent_false
#include <rlflow/dispatch/mode.hpp>  // dispatch_mode_tag, PerRank, Dist

namespace rlflow::dispatch {

//! verl: Dispatch.DP_COMPUTE. split: each argument must be PerRank<T> of ws values; collect: ws results.
struct DPCompute {
  using dispatch_tag = dispatch_mode_tag;
  static constexpr const char* verl_name = "DP_COMPUTE";

  template <class P, class A>
  static Dist<P> split(A&& a, SplitContext& ctx) {
    static_assert(is_per_rank_v<A>,
                  "rlflow::dispatch::DPCompute: every argument must be split per rank already; "
                  "wrap it as rlflow::per_rank(std::vector<T>{...}) with one value per rank, or register the "
                  "method with rlflow::dispatch::AllToAll to broadcast it");
    detail::check_per_rank_size(a, ctx, "DPCompute");
    return Dist<P>::scatter(detail::convert_all<P>(std::forward<A>(a)));
  }
  template <class R>
  static std::vector<R> collect(std::vector<R>&& outs, CollectContext const& ctx) {
    if (static_cast<int>(outs.size()) != ctx.shape.world_size)
      throw shape_error(msg(ctx.role, "::", ctx.method, " (DPCompute): collected ", outs.size(), " results from ",
                            ctx.shape.world_size, " ranks"));
    return std::move(outs);
  }
};

}  // namespace rlflow::dispatch
