// rlflow/dispatch/one_to_all.hpp: dispatch::OneToAll, every rank receives the same arguments and
// the call returns one result per rank, in rank order (verl: Dispatch.ONE_TO_ALL). Arguments
// of a blocking call are borrowed from the driver, never copied per rank.
#pragma once
#include <vector>

#include <rlflow/dispatch/mode.hpp>  // dispatch_mode_tag, Dist, SplitContext

namespace rlflow::dispatch {

//! verl: Dispatch.ONE_TO_ALL. split: broadcast each argument; collect: the list of ws results.
struct OneToAll {
  using dispatch_tag = dispatch_mode_tag;
  static constexpr const char* verl_name = "ONE_TO_ALL";

  template <class P, class A>
  static Dist<P> split(A&& a, SplitContext& ctx) {
    return ctx.template broadcast<P>(std::forward<A>(a));
  }
  template <class R>
  static std::vector<R> collect(std::vector<R>&& outs, CollectContext const&) {
    return std::move(outs);
  }
};

}  // namespace rlflow::dispatch
