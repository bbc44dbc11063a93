// examples/02_custom_dispatch_mode.cpp: a user-defined dispatch mode (verl's two_to_all test,
// checklist A-44) and the built-in modes on a small worker group.
//   TwoToAll: a two-value argument is rewritten to [a0, a1, a0, a1, ...] over the ranks.
// Run: ./build/examples/02_custom_dispatch_mode   prints "two_to_all: 8 10 8 10" and more.
#include <cstdio>
#include <vector>

#include <rlflow/core/data_proto.hpp>
#include <rlflow/dispatch/worker_group.hpp>

// example-begin custom_mode
struct TwoToAll {
  using dispatch_tag = rlflow::dispatch_mode_tag;  // opts into the dispatch-mode family

  // one driver argument -> what each rank receives (here: a0 to even ranks, a1 to odd ranks)
  template <class P, class A>
  static rlflow::Dist<P> split(A&& a, rlflow::SplitContext& ctx) {
    static_assert(rlflow::is_per_rank_v<A>, "TwoToAll: pass rlflow::PerRank<T> with two values");
    if (a.size() != 2) throw rlflow::shape_error("TwoToAll: expects exactly two values");
    std::vector<int> rank_to_value;
    for (int r = 0; r < ctx.shape.world_size; ++r) rank_to_value.push_back(r % 2);
    return rlflow::Dist<P>::scatter({P(a.values[0]), P(a.values[1])}, std::move(rank_to_value));
  }
  // per-rank results -> what the call returns
  template <class R>
  static std::vector<R> collect(std::vector<R>&& outs, rlflow::CollectContext const&) {
    return std::move(outs);
  }
};

struct Adder {
  using role_tag = rlflow::worker_tag;
  explicit Adder(rlflow::WorkerContext const& ctx) : rank(ctx.rank) {}
  int rank;
  int sum(int x, int y) { return x + y; }
  int add_rank(int x) { return x + rank; }
  rlflow::DataProto double_rows(rlflow::DataProto const& chunk) { return chunk.repeat(1); }
  using methods = rlflow::methods<
      rlflow::method<&Adder::sum, TwoToAll>,
      rlflow::method<&Adder::add_rank, rlflow::dispatch::OneToAll, rlflow::execute::All, rlflow::blocking<false>>,
      rlflow::method<&Adder::double_rows, rlflow::dispatch::DPComputeProto>>;
};
// example-end custom_mode

int main() {
  rlflow::ResourcePool pool("global_pool", {4}, /*max_colocate_count=*/1);
  rlflow::WorkerGroup<Adder> group(pool);

  std::vector<int> r = group.call<&Adder::sum>(rlflow::per_rank(std::vector<int>{1, 2}), rlflow::per_rank(std::vector<int>{7, 8}));
  std::printf("two_to_all:");
  for (int v : r) std::printf(" %d", v);
  std::printf("\n");

  rlflow::Pending<std::vector<int>> p = group.call<&Adder::add_rank>(100);  // non-blocking
  std::printf("one_to_all (non-blocking):");
  for (int v : p.get()) std::printf(" %d", v);
  std::printf("\n");

  std::vector<std::int64_t> ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto batch = rlflow::DataProto::from_dict({{"id", rlflow::Tensor::from(ids)}});
  batch.set_auto_padding(true);  // 10 rows on 4 workers: padded to 12, trimmed back to 10
  rlflow::DataProto out = group.call<&Adder::double_rows>(batch);
  std::printf("dp_compute_proto with auto-padding: %lld rows in, %lld rows out\n", static_cast<long long>(batch.size()),
              static_cast<long long>(out.size()));
  return out == batch ? 0 : 1;
}
