// rlflow/core/error.hpp: the rlflow::error family and RLFLOW_EXPECTS.
// Every runtime failure in rlflow throws one of these (never exit/abort); the message names the
// thing, the numbers and the fix. Does not define CUDA/NCCL checks (see kernels/cuda).
#pragma once
#include <sstream>    // message building
#include <initializer_list>
#include <ostream>
#include <stdexcept>  // std::runtime_error
#include <string>
#include <type_traits>

namespace rlflow {

//! Base of every rlflow exception.
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
//! A configuration or construction argument is invalid (raised before any work starts).
struct config_error : error { using error::error; };
//! A tensor / column has the wrong shape or length.
struct shape_error : error { using error::error; };
//! A tensor is accessed as the wrong element type.
struct dtype_error : error { using error::error; };
//! A value is invalid (NaN reward, out-of-range index, unequal values in a union, ...).
struct value_error : error { using error::error; };
//! A key (column, meta entry, config key) is missing or duplicated.
struct key_error : error { using error::error; };
//! Serialized bytes or a file are truncated, corrupt or of an unknown format/version.
struct format_error : error { using error::error; };
//! A worker method threw; the message names role, method and rank.
struct worker_error : error { using error::error; };
//! An I/O operation failed (file open, write, rename, fsync).
struct io_error : error { using error::error; };

namespace detail {
//! One piece of a message: the object and the function that streams its type. The message is
//! built by one non-template function (cat), so a call site instantiates only an array of these,
//! not a stream expression per combination of argument types (compile time, docs/development.md).
struct msg_piece {
  void const* object;          //!< the piece (an object)
  void (*function)();          //!< or the piece (a function, e.g. the manipulator std::hex)
  void (*put)(std::ostream&, msg_piece const&);
};
template <class T>
void put_piece(std::ostream& os, msg_piece const& p) {
  if constexpr (std::is_function_v<T>)
    os << reinterpret_cast<T*>(p.function);
  else if constexpr (std::is_array_v<T>)
    os << static_cast<std::remove_extent_t<T> const*>(p.object);  // as its decayed pointer ("text" as char const*)
  else
    os << *static_cast<T const*>(p.object);
}
template <class T>
msg_piece piece(T const& x) {
  if constexpr (std::is_function_v<T>)
    return {nullptr, reinterpret_cast<void (*)()>(&x), &put_piece<T>};
  else if constexpr (std::is_array_v<T>)
    return {static_cast<void const*>(&x[0]), nullptr, &put_piece<T>};
  else
    return {static_cast<void const*>(&x), nullptr, &put_piece<T>};
}
inline std::string cat(std::initializer_list<msg_piece> pieces) {
  std::ostringstream os;
  for (msg_piece const& p : pieces) p.put(os, p);
  return os.str();
}
}  // namespace detail

//! Builds a message from streamable pieces: rlflow::msg("x = ", x, " must be > 0").
template <class... Args>
std::string msg(Args const&... args) {
  return detail::cat({detail::piece(args)...});
}

}  // namespace rlflow

//! Precondition check that throws ErrorType (default rlflow::value_error) with a built message.
#define RLFLOW_EXPECTS(cond, ...)                                              \
  do {                                                                         \
    if (!(cond)) throw ::rlflow::value_error(::rlflow::msg(__VA_ARGS__));      \
  } while (0)
#define RLFLOW_EXPECTS_T(ErrorType, cond, ...)                                 \
  do {                                                                         \
    if (!(cond)) throw ErrorType(::rlflow::msg(__VA_ARGS__));                  \
  } while (0)
