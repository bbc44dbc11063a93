// Tests for rlflow::msg (rlflow/core/error.hpp): the message equals one ostream receiving every piece
// in order, the reference being a plain std::ostringstream fed the same arguments.
#include <catch2/catch.hpp>
#include <rlflow/core/error.hpp>

#include <cstdint>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

namespace test_error_msg {

namespace {
template <class... Args>
std::string reference(Args const&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
struct Streamable {
  int v;
  friend std::ostream& operator<<(std::ostream& os, Streamable const& s) { return os << "Streamable{" << s.v << "}"; }
};
}  // namespace

TEST_CASE("msg: pieces of every kind stream as one ostream would", "[foundation][error]") {
  char const* cstr = "c-string";
  std::string const s = "std::string";
  std::string_view const sv = "view";
  char buf[8] = "buf";
  CHECK(rlflow::msg() == "");
  CHECK(rlflow::msg("literal") == "literal");
  CHECK(rlflow::msg("a", cstr, s, sv, buf, 'x') == reference("a", cstr, s, sv, buf, 'x'));
  CHECK(rlflow::msg("a", cstr, s, sv, buf, 'x') == "ac-stringstd::stringviewbufx");
  CHECK(rlflow::msg(Streamable{7}, " and ", true, ' ', nullptr == cstr) == "Streamable{7} and 1 0");
  // stream state carries across pieces, as in one stream expression
  CHECK(rlflow::msg(std::setw(5), 42, "|", std::hex, 255, std::dec, ' ', 255) == reference(std::setw(5), 42, "|", std::hex, 255, std::dec, ' ', 255));
  std::mt19937_64 rng(14);
  std::uniform_real_distribution<double> ud(-1e6, 1e6);
  for (int i = 0; i < 200; ++i) {
    double const d = ud(rng);
    float const f = static_cast<float>(d);
    auto const i64 = static_cast<std::int64_t>(rng());
    auto const u64 = rng();
    int const i32 = static_cast<int>(rng() % 100000) - 50000;
    CHECK(rlflow::msg("d=", d, " f=", f, " i64=", i64, " u64=", u64, " i32=", i32) ==
          reference("d=", d, " f=", f, " i64=", i64, " u64=", u64, " i32=", i32));
  }
}

TEST_CASE("RLFLOW_EXPECTS throws the message built by msg", "[foundation][error]") {
  int const n = 3;
  auto fails = [&] { RLFLOW_EXPECTS(n > 5, "n = ", n, " must be > 5; raise it"); };
  CHECK_THROWS_MATCHES(fails(), rlflow::value_error, Catch::Matchers::Message("n = 3 must be > 5; raise it"));
}

}  // namespace test_error_msg
