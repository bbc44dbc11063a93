// rlflow/dispatch/mode.hpp: what every dispatch mode is built from. Defines dispatch_mode_tag
// and the 'dispatch_mode' concept, GroupShape (world size and the DP x TP x PP mesh of a
// worker group), PerRank<T> (an explicit per-rank argument), Dist<T> (how one argument reaches
// the ranks: one shared value or one value per rank), SplitContext / CollectContext, and the
// execute modes (execute::All, execute::RankZero). Does not define any mode (see one_to_all.hpp...).
#pragma once
#include <concepts>  // std::convertible_to
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <rlflow/core/error.hpp>  // config_error, shape_error, msg

namespace rlflow {

//! Opt-in tag of a dispatch mode: 'using dispatch_tag = rlflow::dispatch_mode_tag;'.
struct dispatch_mode_tag {};
//! Opt-in tag of an execute mode.
struct execute_mode_tag {};

template <class D>
concept dispatch_mode = requires { typename D::dispatch_tag; } &&
                        std::is_same_v<typename D::dispatch_tag, dispatch_mode_tag>;
template <class E>
concept execute_mode = requires { typename E::execute_tag; } &&
                       std::is_same_v<typename E::execute_tag, execute_mode_tag>;

namespace execute {
//! verl: Execute.ALL. Every rank runs the method.
struct All {
  using execute_tag = execute_mode_tag;
  static constexpr bool rank_zero_only = false;
};
//! verl: Execute.RANK_ZERO. Only rank 0 runs; the call returns its single value (no list).
struct RankZero {
  using execute_tag = execute_mode_tag;
  static constexpr bool rank_zero_only = true;
};
}  // namespace execute

//! verl: register(blocking=...). blocking<false> makes the call return a Pending<T>.
template <bool B>
struct blocking : std::bool_constant<B> {};

// ---------------------------------------------------------------------------------------------
// Group shape and mesh coordinates

//! A rank's coordinates in the group's DP x TP x PP mesh.
struct MeshCoord {
  int dp = 0, tp = 0, pp = 0;
  friend bool operator==(MeshCoord const&, MeshCoord const&) = default;
};

//! The shape of a worker group: world size and its mesh, laid out as
//! rank = (pp_rank * dp + dp_rank) * tp + tp_rank (verl's Megatron order: tp fastest, pp slowest).
//! The collector of a DP group is its rank with tp_rank == 0 and pp_rank == pp - 1.
struct GroupShape {
  int world_size = 1;
  int tp = 1;
  int pp = 1;

  //! Checks tp * pp divides world_size; throws config_error with the numbers and the fix.
  static GroupShape make(int world_size, int tp = 1, int pp = 1) {
    if (world_size < 1) throw config_error(msg("rlflow::GroupShape: world_size = ", world_size, " must be >= 1"));
    if (tp < 1 || pp < 1)
      throw config_error(msg("rlflow::GroupShape: tp = ", tp, " and pp = ", pp, " must both be >= 1"));
    if (world_size % (tp * pp) != 0)
      throw config_error(msg("rlflow::GroupShape: world_size ", world_size, " is not a multiple of tp * pp = ", tp,
                             " * ", pp, " = ", tp * pp, "; choose tp and pp whose product divides ", world_size));
    return GroupShape{world_size, tp, pp};
  }
  int dp() const { return world_size / (tp * pp); }
  MeshCoord coord(int rank) const {
    int const d = dp();
    return MeshCoord{(rank / tp) % d, rank % tp, rank / (tp * d)};
  }
  bool is_collector(int rank) const {
    MeshCoord const c = coord(rank);
    return c.tp == 0 && c.pp == pp - 1;
  }
  friend bool operator==(GroupShape const&, GroupShape const&) = default;
};

// ---------------------------------------------------------------------------------------------
// Per-rank arguments and their distribution

//! An argument that holds one value per rank (verl passes a list of world-size length; rlflow
//! marks it explicitly; verl scatters any list of world-size length). Rank i receives values[i].
template <class T>
struct PerRank {
  std::vector<T> values;
  PerRank() = default;
  explicit PerRank(std::vector<T> v) : values(std::move(v)) {}
  PerRank(std::initializer_list<T> v) : values(v) {}
  std::size_t size() const { return values.size(); }
};
template <class T>
PerRank(std::vector<T>) -> PerRank<T>;

//! Wraps a vector as a per-rank argument: group.call<&R::fn>(rlflow::per_rank(xs)).
template <class T>
PerRank<std::decay_t<T>> per_rank(std::vector<T> v) {
  return PerRank<std::decay_t<T>>(std::move(v));
}

template <class T>
struct is_per_rank : std::false_type {};
template <class T>
struct is_per_rank<PerRank<T>> : std::true_type {};
template <class T>
inline constexpr bool is_per_rank_v = is_per_rank<std::remove_cvref_t<T>>::value;

//! How one argument of type T reaches the ranks of a group: one value shared by every rank
//! (broadcast; possibly borrowed from the driver during a blocking call), or 'values' indexed
//! by rank, or 'values' indexed through 'index' (rank -> value, e.g. a DP chunk per DP group).
template <class T>
struct Dist {
  std::vector<T> values;
  std::vector<int> index;     //!< rank -> position in values; empty: identity (or broadcast of one value)
  T const* borrowed = nullptr;  //!< a driver-owned value shared by all ranks (blocking calls only)

  static Dist broadcast(T v) {
    Dist d;
    d.values.push_back(std::move(v));
    return d;
  }
  static Dist borrow(T const& v) {
    Dist d;
    d.borrowed = &v;
    return d;
  }
  static Dist scatter(std::vector<T> v) {
    Dist d;
    d.values = std::move(v);
    return d;
  }
  static Dist scatter(std::vector<T> v, std::vector<int> rank_to_value) {
    Dist d;
    d.values = std::move(v);
    d.index = std::move(rank_to_value);
    return d;
  }
  //! The value rank r receives (a bool by value: std::vector<bool> has no bool objects to refer to).
  std::conditional_t<std::is_same_v<T, bool>, bool, T const&> for_rank(int r) const {
    if (borrowed) return *borrowed;
    if (!index.empty()) return values[static_cast<std::size_t>(index[static_cast<std::size_t>(r)])];
    if (values.size() == 1) return values[0];
    return values[static_cast<std::size_t>(r)];
  }
  //! True when every rank of a world of size ws has a value.
  bool covers(int ws) const {
    if (borrowed) return true;
    if (!index.empty()) return static_cast<int>(index.size()) == ws;
    return values.size() == 1 || static_cast<int>(values.size()) == ws;
  }
};

//! Given to Mode::split for each argument of a call.
struct SplitContext {
  GroupShape const& shape;
  std::string_view role;     //!< for messages
  std::string_view method;   //!< for messages
  std::size_t arg_index = 0;  //!< position of the argument being split
  bool blocking = true;       //!< whether the driver waits (lets modes borrow driver values)
  std::int64_t pad = -1;      //!< rows of auto-padding added (-1: no padded argument yet)
  std::int64_t padded_from = -1;  //!< row count of the first padded argument, before padding
  std::int64_t rows = -1;         //!< row count of the first row-container argument (-1: none yet)
  std::int64_t chunk_rows = -1;   //!< rows of each DP rank's chunk, padding included (-1: no row argument)
  std::size_t rows_arg = 0;       //!< its position

  //! The same value for every rank: borrowed from the driver for blocking calls on lvalues,
  //! otherwise one owned copy (or the moved rvalue) shared by all ranks.
  template <class T, class A>
  Dist<T> broadcast(A&& a) const {
    if constexpr (std::is_lvalue_reference_v<A> && std::is_same_v<std::remove_cvref_t<A>, T>) {
      if (blocking) return Dist<T>::borrow(a);
      return Dist<T>::broadcast(T(a));
    } else {
      return Dist<T>::broadcast(T(std::forward<A>(a)));
    }
  }
  //! Records the row count of a row-container argument; every one of a call must have the same
  //! number of rows (they are chunked in step), else a shape_error before any worker runs.
  void record_rows(std::int64_t n) {
    if (rows >= 0 && rows != n)
      throw shape_error(msg(role, "::", method, ": argument ", arg_index, " has ", n, " rows but argument ", rows_arg,
                            " has ", rows, "; the row-container arguments of one call are split together and must have "
                            "the same number of rows"));
    if (rows < 0) {
      rows = n;
      rows_arg = arg_index;
    }
  }
  //! Records auto-padding of 'n' rows by 'p'; every padded argument must have the same length.
  void record_pad(std::int64_t n, std::int64_t p) {
    if (pad >= 0 && padded_from != n)
      throw shape_error(msg(role, "::", method, ": argument ", arg_index, " has ", n,
                            " rows but an earlier auto-padded argument has ", padded_from,
                            "; all auto-padded arguments of one call must have the same number of rows"));
    pad = p;
    padded_from = n;
  }
};

//! Given to Mode::collect.
struct CollectContext {
  GroupShape const& shape;
  std::string_view role;
  std::string_view method;
  std::int64_t pad = 0;  //!< rows of auto-padding to trim from a row-container result
  std::int64_t chunk_rows = -1;  //!< rows each DP rank received (-1: unknown, the result's rows are not checked)
};

//! Whether dispatch mode D's methods may return a row count other than their input chunk's.
//! The row modes (DPComputeProto and its family) check each worker's result rows against its
//! chunk unless the mode declares 'static constexpr bool changes_row_count = true;' (e.g. a
//! mode for a method that returns n rows per input row). Default: false.
template <class D>
inline constexpr bool changes_row_count_v = [] {
  if constexpr (requires { { D::changes_row_count } -> std::convertible_to<bool>; }) return static_cast<bool>(D::changes_row_count);
  else return false;
}();

namespace dispatch::detail {
//! Checks a per-rank argument has one value per rank.
template <class T>
void check_per_rank_size(PerRank<T> const& a, SplitContext const& ctx, std::string_view mode) {
  if (static_cast<int>(a.size()) != ctx.shape.world_size)
    throw shape_error(msg(ctx.role, "::", ctx.method, " (", mode, "): argument ", ctx.arg_index, " has ", a.size(),
                          " per-rank values but the group has ", ctx.shape.world_size,
                          " ranks; pass exactly one value per rank"));
}
//! Converts one per-rank element to the parameter type T (copy or move).
template <class T, class A>
std::vector<T> convert_all(A&& a) {
  std::vector<T> out;
  out.reserve(a.values.size());
  for (auto& v : a.values) {
    if constexpr (std::is_rvalue_reference_v<A&&>) out.push_back(T(std::move(v)));
    else out.push_back(T(v));
  }
  return out;
}
}  // namespace dispatch::detail

}  // namespace rlflow
