// rlflow/dispatch/dp_compute_proto.hpp: the row-container modes. Defines row_traits<T> (the
// customization point: size, chunk, concat, auto-padding flag, pad/unpad; DataProto satisfies it
// through its member functions), the mesh layouts GroupMesh and MeshLayout<TP, PP>, and the
// modes NDComputeProto<Layout>, DPComputeProto, DPComputeProtoWithFunc, DPComputeMetric.
// Chunks are zero-copy views; the collected result is the one copy (concat). Does not include
// data_proto.hpp: any type with DataProto's row API works.
#pragma once
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include <rlflow/dispatch/mode.hpp>  // dispatch_mode_tag, GroupShape, Dist, SplitContext

namespace rlflow::dispatch {

// ---------------------------------------------------------------------------------------------
// row containers

//! Customization point for the row-container modes. The primary template uses DataProto's
//! member API: size(), chunk(k) (exactly k contiguous views), static concat(span), and, when
//! present, auto_padding(), padded_repeat_last(p), unpad(p). Specialize it for other types.
template <class T>
struct row_traits {
  static std::int64_t size(T const& x)
    requires requires { x.size(); }
  { return static_cast<std::int64_t>(x.size()); }
  static std::vector<T> chunk(T const& x, std::int64_t k)
    requires requires { { x.chunk(k) } -> std::same_as<std::vector<T>>; }
  { return x.chunk(k); }
  static T concat(std::span<T const> parts)
    requires requires { { T::concat(parts) } -> std::same_as<T>; }
  { return T::concat(parts); }
  //! verl: DataProto.is_padding_enabled(); false for types without the flag.
  static bool auto_padding(T const& x) {
    if constexpr (requires { { x.auto_padding() } -> std::convertible_to<bool>; }) return x.auto_padding();
    else return false;
  }
  //! verl: DataProto.padding(p) (repeat the last row), as a copy (verl mutates the caller's object).
  static T pad(T const& x, std::int64_t p) { return x.padded_repeat_last(p); }
  //! Drops the trailing p rows (a view).
  static T unpad(T const& x, std::int64_t p) { return x.unpad(p); }
  //! Throws when the container's columns disagree on the row count (DataProto: check_consistency);
  //! a no-op for types without such a check.
  static void check(T const& x, const char* where) {
    if constexpr (requires { x.check_consistency(where); }) x.check_consistency(where);
  }
};

//! A type the row modes can split and collect.
template <class T>
concept row_container = requires(T const& x, std::span<T const> parts) {
  { row_traits<T>::size(x) } -> std::convertible_to<std::int64_t>;
  { row_traits<T>::chunk(x, std::int64_t{1}) } -> std::same_as<std::vector<T>>;
  { row_traits<T>::concat(parts) } -> std::same_as<T>;
};

// ---------------------------------------------------------------------------------------------
// mesh layouts: rank -> (dp rank, collector?)

//! The group's own mesh (GroupOptions tp/pp): rank = (pp_rank * dp + dp_rank) * tp + tp_rank;
//! the collector of each DP group has tp_rank 0 and the last pp_rank. With tp = pp = 1 this is
//! plain data parallelism (verl DP_COMPUTE_PROTO).
struct GroupMesh {
  static int dp_size(GroupShape const& g) { return g.dp(); }
  static int dp_rank(int rank, GroupShape const& g) { return g.coord(rank).dp; }
  static bool is_collector(int rank, GroupShape const& g) { return g.is_collector(rank); }
  static bool is_identity(GroupShape const& g) { return g.tp == 1 && g.pp == 1; }
};

//! A mesh fixed at compile time, independent of the group's own mesh (verl registers several
//! named meshes per worker, e.g. "infer" dp x tp4 and "train" pp2 x dp x tp2; test SC-DM-1).
//! Same rank order as GroupMesh; dp = world_size / (TP * PP), checked per call.
template <int TP, int PP = 1>
struct MeshLayout {
  static_assert(TP >= 1 && PP >= 1, "rlflow::dispatch::MeshLayout<TP, PP>: TP and PP must both be >= 1");
  static GroupShape shape(GroupShape const& g) {
    if (g.world_size % (TP * PP) != 0)
      throw config_error(msg("rlflow::dispatch::MeshLayout<", TP, ", ", PP, ">: the group has ", g.world_size,
                             " ranks, not a multiple of TP * PP = ", TP * PP,
                             "; build the group with a multiple of ", TP * PP, " workers"));
    return GroupShape{g.world_size, TP, PP};
  }
  static int dp_size(GroupShape const& g) { return shape(g).dp(); }
  static int dp_rank(int rank, GroupShape const& g) { return shape(g).coord(rank).dp; }
  static bool is_collector(int rank, GroupShape const& g) { return shape(g).is_collector(rank); }
  static bool is_identity(GroupShape const&) { return TP == 1 && PP == 1; }
};

namespace detail {

//! Splits one row-container argument into dp chunks (auto-padding a copy when asked for and
//! allowed); rank r receives chunk Layout::dp_rank(r).
template <class Layout, class T>
Dist<T> split_rows(T const& x, SplitContext& ctx, bool allow_padding, const char* mode) {
  static_assert(row_container<T>,
                "rlflow::dispatch::DPComputeProto: the argument type is not a row container; pass a "
                "rlflow::DataProto or specialize rlflow::dispatch::row_traits<T>");
  using tr = row_traits<T>;
  int const k = Layout::dp_size(ctx.shape);
  std::int64_t const n = tr::size(x);
  try {
    tr::check(x, mode);  // a column shorter than the batch would be read past its end when chunked
  } catch (error const& e) {
    throw shape_error(msg(ctx.role, "::", ctx.method, " (", mode, "): argument ", ctx.arg_index, ": ", e.what()));
  }
  ctx.record_rows(n);
  std::vector<T> chunks;
  if (allow_padding && tr::auto_padding(x)) {
    std::int64_t const p = n % k == 0 ? 0 : k - n % k;
    ctx.record_pad(n, p);
    chunks = p == 0 ? tr::chunk(x, k) : tr::chunk(tr::pad(x, p), k);
  } else {
    if (n % k != 0)
      throw shape_error(msg(ctx.role, "::", ctx.method, " (", mode, "): argument ", ctx.arg_index, " has ", n,
                            " rows, not a multiple of the DP size ", k,
                            "; pass a multiple of ", k, " rows or turn on auto-padding with data.set_auto_padding(true)",
                            allow_padding ? "" : " (this mode does not pad: pad the data first)"));
    chunks = tr::chunk(x, k);
  }
  ctx.chunk_rows = tr::size(chunks.front());  // every chunk holds the same count: n (+ padding) is a multiple of k
  if (Layout::is_identity(ctx.shape)) return Dist<T>::scatter(std::move(chunks));
  std::vector<int> index(static_cast<std::size_t>(ctx.shape.world_size));
  for (int r = 0; r < ctx.shape.world_size; ++r) index[static_cast<std::size_t>(r)] = Layout::dp_rank(r, ctx.shape);
  return Dist<T>::scatter(std::move(chunks), std::move(index));
}

//! Throws worker_error when rank r's result does not hold one row per row of its input chunk.
template <class T>
void check_result_rows(T const& out, int r, CollectContext const& ctx, const char* mode) {
  std::int64_t const got = row_traits<T>::size(out);
  if (ctx.chunk_rows >= 0 && got != ctx.chunk_rows)
    throw worker_error(msg(ctx.role, "::", ctx.method, " (", mode, "): worker rank ", r, " returned ", got, " rows for its ",
                           ctx.chunk_rows, "-row input chunk; a ", mode, " method returns one row per input row (a ",
                           "method that changes the row count needs a mode declaring 'changes_row_count = true')"));
}

//! Concatenates the collectors' results in DP order (checked: exactly one per DP rank; unless
//! 'check_rows' is false, each holds as many rows as its input chunk) and trims the auto-padding rows.
template <class Layout, class T>
T collect_rows(std::vector<T>&& outs, CollectContext const& ctx, const char* mode, bool check_rows = true) {
  static_assert(row_container<T>,
                "rlflow::dispatch::DPComputeProto: the method's return type is not a row container; return a "
                "rlflow::DataProto or specialize rlflow::dispatch::row_traits<T>");
  using tr = row_traits<T>;
  T out;
  if (!check_rows && ctx.pad > 0)
    throw worker_error(msg(ctx.role, "::", ctx.method, " (", mode, "): the input was auto-padded by ", ctx.pad,
                           " rows but this mode's methods change the row count, so the padding rows cannot be found in ",
                           "the result; pass a multiple of the DP size rows or turn auto-padding off"));
  if (Layout::is_identity(ctx.shape)) {
    if (check_rows)
      for (std::size_t r = 0; r < outs.size(); ++r) check_result_rows(outs[r], static_cast<int>(r), ctx, mode);
    out = tr::concat(std::span<T const>(outs));
  } else {
    int const k = Layout::dp_size(ctx.shape);
    std::vector<T> by_dp(static_cast<std::size_t>(k));
    std::vector<int> from(static_cast<std::size_t>(k), -1);
    for (int r = 0; r < ctx.shape.world_size; ++r) {
      if (!Layout::is_collector(r, ctx.shape)) continue;
      int const d = Layout::dp_rank(r, ctx.shape);
      if (d < 0 || d >= k)
        throw shape_error(msg(ctx.role, "::", ctx.method, " (", mode, "): rank ", r, " reports DP rank ", d,
                              " outside [0, ", k, "); fix the mesh layout"));
      if (from[static_cast<std::size_t>(d)] >= 0)
        throw shape_error(msg(ctx.role, "::", ctx.method, " (", mode, "): ranks ", from[static_cast<std::size_t>(d)],
                              " and ", r, " are both collectors of DP rank ", d,
                              "; a mesh layout must mark exactly one collector per DP group"));
      from[static_cast<std::size_t>(d)] = r;
      if (check_rows) check_result_rows(outs[static_cast<std::size_t>(r)], r, ctx, mode);
      by_dp[static_cast<std::size_t>(d)] = std::move(outs[static_cast<std::size_t>(r)]);
    }
    for (int d = 0; d < k; ++d)
      if (from[static_cast<std::size_t>(d)] < 0)
        throw shape_error(msg(ctx.role, "::", ctx.method, " (", mode, "): no collector for DP rank ", d, " of ", k,
                              "; a mesh layout must mark exactly one collector per DP group"));
    out = tr::concat(std::span<T const>(by_dp));
  }
  if (ctx.pad > 0) {
    if (tr::size(out) < ctx.pad)
      throw shape_error(msg(ctx.role, "::", ctx.method, " (", mode, "): the result has ", tr::size(out),
                            " rows, fewer than the ", ctx.pad, " auto-padding rows to trim; a DP method must return "
                            "one row per input row"));
    out = tr::unpad(out, ctx.pad);
  }
  return out;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// modes

namespace detail {
//! The split/collect pair shared by the auto-padding row modes. 'Mode' names itself in errors
//! (its 'mode_name'), so a DPComputeProto method's message says DPComputeProto.
template <class Layout, class Mode>
struct padded_row_mode {
  using dispatch_tag = dispatch_mode_tag;

  template <class P, class A>
  static Dist<P> split(A&& a, SplitContext& ctx) {
    if constexpr (row_container<P>) return split_rows<Layout, P>(a, ctx, true, Mode::mode_name);
    else return ctx.template broadcast<P>(std::forward<A>(a));
  }
  template <class R>
  static R collect(std::vector<R>&& outs, CollectContext const& ctx) {
    return collect_rows<Layout>(std::move(outs), ctx, Mode::mode_name, !changes_row_count_v<Mode>);
  }
};
}  // namespace detail

//! verl: make_nd_compute_dataproto_dispatch_fn(mesh_name). Every row-container argument is
//! chunked by the layout's DP size; all ranks of a DP group receive the same chunk; results are
//! taken from the one collector of each DP group, in DP order, and concatenated. Non-row
//! arguments are broadcast. Auto-padding as DPComputeProto.
template <class Layout = GroupMesh>
struct NDComputeProto : detail::padded_row_mode<Layout, NDComputeProto<Layout>> {
  static constexpr const char* verl_name = "make_nd_compute_dataproto_dispatch_fn";
  static constexpr const char* mode_name = "NDComputeProto";
};

//! verl: Dispatch.DP_COMPUTE_PROTO. Chunks every row-container argument by the group's DP size
//! (the same chunk to every TP/PP rank of a DP group); with data.auto_padding() set, a copy is
//! padded with its last row to a multiple of the DP size and the result is trimmed back to the
//! input length (blocking and non-blocking). Results are concatenated in DP order. Non-row
//! arguments are broadcast (verl allows only DataProto arguments).
struct DPComputeProto : detail::padded_row_mode<GroupMesh, DPComputeProto> {
  static constexpr const char* verl_name = "DP_COMPUTE_PROTO";
  static constexpr const char* mode_name = "DPComputeProto";
};

//! verl: Dispatch.DP_COMPUTE_PROTO_WITH_FUNC. The first argument (a function) is broadcast,
//! the others are chunked as DPComputeProto without auto-padding; results concatenated.
struct DPComputeProtoWithFunc {
  using dispatch_tag = dispatch_mode_tag;
  static constexpr const char* verl_name = "DP_COMPUTE_PROTO_WITH_FUNC";

  template <class P, class A>
  static Dist<P> split(A&& a, SplitContext& ctx) {
    if (ctx.arg_index == 0) return ctx.template broadcast<P>(std::forward<A>(a));
    if constexpr (row_container<P>) return detail::split_rows<GroupMesh, P>(a, ctx, false, "DPComputeProtoWithFunc");
    else return ctx.template broadcast<P>(std::forward<A>(a));
  }
  template <class R>
  static R collect(std::vector<R>&& outs, CollectContext const& ctx) {
    return detail::collect_rows<GroupMesh>(std::move(outs), ctx, "DPComputeProtoWithFunc",
                                           !changes_row_count_v<DPComputeProtoWithFunc>);
  }
};

//! verl: Dispatch.DP_COMPUTE_METRIC. Split as DPComputeProto (auto-padding included); the
//! result is the list of ws per-rank values, never trimmed (verl drops worker results here; padding
//! removal applies to rows, not to per-worker results).
struct DPComputeMetric {
  using dispatch_tag = dispatch_mode_tag;
  static constexpr const char* verl_name = "DP_COMPUTE_METRIC";

  static constexpr const char* mode_name = "DPComputeMetric";

  template <class P, class A>
  static Dist<P> split(A&& a, SplitContext& ctx) {
    return detail::padded_row_mode<GroupMesh, DPComputeMetric>::template split<P>(std::forward<A>(a), ctx);
  }
  template <class R>
  static std::vector<R> collect(std::vector<R>&& outs, CollectContext const&) {
    return std::move(outs);
  }
};

}  // namespace rlflow::dispatch
