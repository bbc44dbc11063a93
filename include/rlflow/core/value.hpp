// rlflow/core/value.hpp: Value, a host value for DataProto's non-tensor columns and meta_info
// (None, bool, int64, double, string, list, ordered dict), and Dict, the insertion-ordered
// string -> Value map (also used as DataProto::Meta).
// Values are trees with value semantics (copies are deep); equality is deep, NaN == NaN.
// Does not hold tensors (tensor columns live in DataProto's batch) and cannot form cycles.
#pragma once
#include <cmath>        // std::isnan
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>  // std::is_unsigned_v
#include <utility>      // std::pair, std::move
#include <variant>
#include <vector>

#include <rlflow/core/config.hpp>  // RLFLOW_DECL, RLFLOW_DEFINE_BODIES
#include <rlflow/core/error.hpp>  // key_error, dtype_error, value_error

namespace rlflow {

class Value;

//! An insertion-ordered map from string keys to Values (Python dict semantics: a key appears
//! once, set() on an existing key replaces the value in place, equality ignores order).
//! verl: the plain dicts of meta_info and of object-array elements.
class Dict {
 public:
  using item_type = std::pair<std::string, Value>;
  Dict() = default;
  Dict(std::initializer_list<item_type> items);

  bool contains(std::string_view key) const { return find(key) != nullptr; }
  //! The value under key; key_error naming the available keys when missing.
  Value const& get(std::string_view key) const;
  Value& get(std::string_view key);
  //! Pointer to the value under key, or nullptr.
  Value const* find(std::string_view key) const;
  Value* find(std::string_view key);
  //! Inserts (at the end) or replaces (keeping the position).
  void set(std::string key, Value v);
  //! Appends without looking for an existing key. Precondition: key is not present (callers
  //! that already checked, e.g. the deserializer, use it to stay linear).
  void append_new_unchecked(std::string key, Value v);
  //! Removes key; returns whether it was present.
  bool erase(std::string_view key);
  std::size_t size() const;
  bool empty() const;
  std::vector<std::string> keys() const;
  //! Comma-separated keys in order, for error messages.
  std::string key_list() const;

  using iterator = std::vector<item_type>::iterator;
  using const_iterator = std::vector<item_type>::const_iterator;
  const_iterator begin() const;
  const_iterator end() const;
  iterator begin();
  iterator end();
  std::vector<item_type> const& items() const { return items_; }

  //! Deep equality ignoring key order (Python dict ==, with NaN == NaN inside values).
  friend bool operator==(Dict const& a, Dict const& b);

 private:
  std::vector<item_type> items_;
};

//! The kinds a Value can hold, in serialization tag order.
enum class ValueKind : std::uint8_t { none = 0, boolean = 1, integer = 2, floating = 3, string = 4, list = 5, dict = 6 };

constexpr const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::none: return "none";
    case ValueKind::boolean: return "bool";
    case ValueKind::integer: return "int";
    case ValueKind::floating: return "float";
    case ValueKind::string: return "string";
    case ValueKind::list: return "list";
    case ValueKind::dict: return "dict";
  }
  return "unknown";
}

//! A host value: None, bool, int64, double, string, list of Values or Dict.
//! verl: the elements of non_tensor_batch's object arrays and the values of meta_info.
//! Equality is deep and kind-strict (int 1 != float 1.0), floats compare NaN == NaN (verl's
//! _deep_equal); Dict equality ignores key order.
class Value {
 public:
  using List = std::vector<Value>;
  using variant_type = std::variant<std::monostate, bool, std::int64_t, double, std::string, List, Dict>;

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  //! Any integer type; an unsigned value above INT64_MAX is a value_error (no silent wrap).
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  Value(I i) : v_(static_cast<std::int64_t>(i)) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(std::int64_t))
      if (i > static_cast<I>(INT64_MAX))
        throw value_error(msg("rlflow::Value: unsigned integer ", i, " does not fit in int64; store it as a string or double"));
  }
  Value(double d) : v_(d) {}
  Value(float f) : v_(static_cast<double>(f)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(char* s) : v_(std::string(s)) {}
  //! Any other pointer would silently become a bool; refuse it at compile time.
  template <class T>
  Value(T*) : Value() {
    static_assert(sizeof(T) == 0,
                  "rlflow::Value: cannot hold a pointer (it would silently become a bool); store the pointed-to value, or a std::string for text");
  }
  Value(List l) : v_(std::move(l)) {}
  Value(Dict d) : v_(std::move(d)) {}

  ValueKind kind() const { return static_cast<ValueKind>(v_.index()); }
  bool is_none() const { return kind() == ValueKind::none; }
  bool is_bool() const { return kind() == ValueKind::boolean; }
  bool is_int() const { return kind() == ValueKind::integer; }
  bool is_double() const { return kind() == ValueKind::floating; }
  bool is_string() const { return kind() == ValueKind::string; }
  bool is_list() const { return kind() == ValueKind::list; }
  bool is_dict() const { return kind() == ValueKind::dict; }

  //! Typed access; dtype_error naming both kinds on mismatch.
  bool as_bool() const { return get<bool>(ValueKind::boolean); }
  std::int64_t as_int() const { return get<std::int64_t>(ValueKind::integer); }
  double as_double() const { return get<double>(ValueKind::floating); }
  //! int or float as double (convenience for metrics).
  double as_number() const {
    if (is_int()) return static_cast<double>(as_int());
    return as_double();
  }
  std::string const& as_string() const { return get<std::string>(ValueKind::string); }
  List const& as_list() const { return get<List>(ValueKind::list); }
  List& as_list() { return get<List>(ValueKind::list); }
  Dict const& as_dict() const { return get<Dict>(ValueKind::dict); }
  Dict& as_dict() { return get<Dict>(ValueKind::dict); }

  variant_type const& variant() const { return v_; }

  //! Python-like text (None, True, 3, 2.5, 'abc', [..], {'k': ..}) for messages and debugging.
  std::string repr() const;

  //! Deep equality; NaN == NaN; int and float never equal each other.
  friend bool operator==(Value const& a, Value const& b);

 private:
  template <class T>
  T const& get(ValueKind want) const {
    if (auto const* p = std::get_if<T>(&v_)) return *p;
    throw dtype_error(msg("rlflow::Value: accessed as ", value_kind_name(want), " but it holds ",
                          value_kind_name(kind()), " (", repr(), "); check kind() first"));
  }
  template <class T>
  T& get(ValueKind want) {
    return const_cast<T&>(static_cast<Value const&>(*this).get<T>(want));
  }
  variant_type v_;
};

// ---------------------------------------------------------------------------------------------
// Dict members (defined here, where Value is complete)

// (Out of the class body: nvcc instantiates std::pair<std::string, Value> eagerly for in-class
// bodies, where Value is still incomplete.)
inline std::size_t Dict::size() const { return items_.size(); }
inline bool Dict::empty() const { return items_.empty(); }
inline Dict::const_iterator Dict::begin() const { return items_.begin(); }
inline Dict::const_iterator Dict::end() const { return items_.end(); }
inline Dict::iterator Dict::begin() { return items_.begin(); }
inline Dict::iterator Dict::end() { return items_.end(); }
inline Dict::Dict(std::initializer_list<item_type> items) {
  for (auto const& it : items) set(it.first, it.second);
}
inline Value const* Dict::find(std::string_view key) const {
  for (auto const& it : items_)
    if (it.first == key) return &it.second;
  return nullptr;
}
inline Value* Dict::find(std::string_view key) {
  return const_cast<Value*>(static_cast<Dict const&>(*this).find(key));
}
inline Value& Dict::get(std::string_view key) {
  return const_cast<Value&>(static_cast<Dict const&>(*this).get(key));
}
inline void Dict::append_new_unchecked(std::string key, Value v) { items_.emplace_back(std::move(key), std::move(v)); }

// Dict::get / set / erase / keys / key_list, the == operators and Value::repr: core/impl/value.ipp.

}  // namespace rlflow

#if RLFLOW_DEFINE_BODIES
#include <rlflow/core/impl/value.ipp>
#endif
