// tests/dispatch/laws.hpp: the laws every dispatch mode must pass, applied to a
// mode directly, without workers: a split that covers every rank, collect(split(x)) == x for
// lossless modes, broadcast equality for one-to-all modes, same chunk per DP group on meshes.
#pragma once
#include <vector>

#include <catch2/catch.hpp>
#include <rlflow/dispatch/dispatch.hpp>

namespace test_dispatch::laws {

//! Runs Mode's split for one argument and returns what each rank receives (by value).
template <class Mode, class P, class A>
std::vector<P> split_per_rank(A&& a, rlflow::GroupShape const& g, std::int64_t* pad = nullptr, bool blocking = true) {
  rlflow::SplitContext ctx{g, "Law", "law", 0, blocking};
  rlflow::Dist<P> d = Mode::template split<P>(std::forward<A>(a), ctx);
  REQUIRE(d.covers(g.world_size));
  std::vector<P> out;
  for (int r = 0; r < g.world_size; ++r) out.push_back(d.for_rank(r));
  if (pad) *pad = ctx.pad > 0 ? ctx.pad : 0;
  return out;
}

//! Lossless law: collect(identity applied to split(x)) == x.
template <class Mode, class P>
void check_lossless(P const& x, rlflow::GroupShape const& g) {
  std::int64_t pad = 0;
  auto parts = split_per_rank<Mode, P>(x, g, &pad);
  rlflow::CollectContext cctx{g, "Law", "law", pad};
  auto back = Mode::collect(std::move(parts), cctx);
  REQUIRE(back == x);
}

//! One-to-all law: every rank receives a value equal to x.
template <class Mode, class P>
void check_broadcast(P const& x, rlflow::GroupShape const& g) {
  auto parts = split_per_rank<Mode, P>(x, g);
  for (auto const& p : parts) REQUIRE(p == x);
}

}  // namespace test_dispatch::laws
