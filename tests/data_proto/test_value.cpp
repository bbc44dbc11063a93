// rlflow::Value and rlflow::Dict: kinds, access errors, deep equality (verl _deep_equal rules:
// NaN == NaN, the string "nan" != NaN, nested containers), ordered dict semantics.
#include <catch2/catch.hpp>

#include <cmath>

#include <rlflow/core/value.hpp>

namespace test_value {

using namespace rlflow;

TEST_CASE("Value kinds and typed access", "[data_proto][value]") {
  CHECK(Value().is_none());
  CHECK(Value(nullptr).is_none());
  CHECK(Value(true).is_bool());
  CHECK(Value(3).is_int());
  CHECK(Value(std::uint8_t{3}).as_int() == 3);
  CHECK(Value(std::int64_t{-5}).as_int() == -5);
  CHECK(Value(std::uint64_t{INT64_MAX}).as_int() == INT64_MAX);
  CHECK_THROWS_AS(Value(std::uint64_t{INT64_MAX} + 1), value_error);
  CHECK(Value(2.5).is_double());
  CHECK(Value(2.5f).as_double() == 2.5);
  CHECK(Value("s").is_string());  // not bool
  CHECK(Value(std::string_view("sv")).as_string() == "sv");
  CHECK(Value(Value::List{1, "a"}).is_list());
  CHECK(Value(Dict{{"a", 1}}).is_dict());
  CHECK(Value(7).as_number() == 7.0);
  CHECK_THROWS_AS(Value("x").as_int(), dtype_error);
  CHECK_THROWS_WITH(Value(1).as_string(), Catch::Contains("accessed as string but it holds int"));
  CHECK(Value(Value::List{Value(), true, 1, 1.5, "s", Dict{{"k", Value::List{}}}}).repr() ==
        "[None, True, 1, 1.5, 's', {'k': []}]");
}

TEST_CASE("Value deep equality", "[data_proto][value]") {
  double const nan = std::nan("");
  CHECK(Value(nan) == Value(nan));
  CHECK(Value(-nan) == Value(nan));
  CHECK_FALSE(Value(nan) == Value("nan"));
  CHECK_FALSE(Value(1) == Value(1.0));  // kind-strict
  CHECK_FALSE(Value(true) == Value(1));
  CHECK(Value(0.0) == Value(-0.0));
  CHECK(Value() == Value());
  CHECK_FALSE(Value() == Value("other"));
  Value::List big;
  for (int i = 0; i < 99; ++i) big.emplace_back(nan);
  big.emplace_back("nan");
  CHECK(Value(big) == Value(big));
  auto nested = Value(Value::List{Value::List{1, Value::List{2, nan}}, Dict{{"a", Value::List{"x"}}}});
  auto same = nested;
  CHECK(nested == same);
  same.as_list()[0].as_list()[1].as_list()[0] = 3;
  CHECK_FALSE(nested == same);
  CHECK_FALSE(Value(Value::List{1, 2}) == Value(Value::List{1}));
  // dict equality ignores order
  CHECK(Value(Dict{{"a", 1}, {"b", 2}}) == Value(Dict{{"b", 2}, {"a", 1}}));
  CHECK_FALSE(Value(Dict{{"a", 1}}) == Value(Dict{{"a", 1}, {"b", 2}}));
  CHECK_FALSE(Value(Dict{{"a", 1}}) == Value(Dict{{"a", 2}}));
}

TEST_CASE("Dict is an insertion-ordered map", "[data_proto][value]") {
  Dict d;
  d.set("z", 1);
  d.set("a", 2);
  d.set("z", 3);  // replace keeps position
  CHECK(d.keys() == std::vector<std::string>{"z", "a"});
  CHECK(d.get("z").as_int() == 3);
  CHECK(d.contains("a"));
  CHECK(d.find("q") == nullptr);
  CHECK_THROWS_WITH(d.get("q"), Catch::Contains("no key 'q'") && Catch::Contains("'z', 'a'"));
  CHECK(d.erase("z"));
  CHECK_FALSE(d.erase("z"));
  CHECK(d.size() == 1);
  Dict dup{{"k", 1}, {"k", 2}};  // later wins, like a Python dict literal
  CHECK(dup.size() == 1);
  CHECK(dup.get("k").as_int() == 2);
}

}  // namespace test_value
