// DataProto acceptance items A-1..A-18 (verl's DataProto behaviour), adapted from torch /
// numpy to rlflow::Tensor and rlflow::Value, plus the places where rlflow differs from verl.
#include <catch2/catch.hpp>

#include "data_proto/dp_test_util.hpp"

namespace test_data_proto_ops {

using namespace rlflow;
using dp_test::floats;
using dp_test::strings;

namespace {
Tensor iota_f(std::int64_t rows, std::int64_t cols, float start = 0.f) {
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::from(v, Shape{rows, cols});
}
NonTensorColumn labels(std::initializer_list<const char*> l) {
  NonTensorColumn c;
  for (auto s : l) c.emplace_back(s);
  return c;
}
DataProto abc() {  // P-14 style: obs [[1,2],[3,4],[5,6]], labels a,b,c, meta {"info": "test_info"}
  return DataProto::from_dict({{"obs", Tensor::from(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{3, 2})}},
                              {{"labels", labels({"a", "b", "c"})}}, Meta{{"info", "test_info"}});
}
}  // namespace

TEST_CASE("A-1 construction checks", "[data_proto]") {
  // tensors (100,10) and (100,10,3) share batch size 100
  auto d = DataProto::from_dict({{"obs", Tensor::zeros(DType::float32, Shape{100, 10})},
                                 {"act", Tensor::zeros(DType::float32, Shape{100, 10, 3})}});
  CHECK(d.size() == 100);
  CHECK(d.has_batch());
  // mismatched leading sizes
  CHECK_THROWS_AS(DataProto::from_dict({{"a", Tensor::zeros(DType::float32, Shape{4, 2})},
                                        {"b", Tensor::zeros(DType::float32, Shape{5, 2})}}),
                  shape_error);
  CHECK_THROWS_WITH(DataProto::from_dict({{"a", Tensor::zeros(DType::float32, Shape{4, 2})},
                                          {"b", Tensor::zeros(DType::float32, Shape{5, 2})}}),
                    Catch::Contains("'a' has 4 rows") && Catch::Contains("'b' has shape (5, 2)"));
  // rank 0 has no batch dimension (num_batch_dims != 1)
  CHECK_THROWS_AS(DataProto::from_dict({{"s", Tensor::zeros(DType::float32, Shape{})}}), shape_error);
  // undefined tensor
  CHECK_THROWS_AS(DataProto::from_dict({{"u", Tensor()}}), value_error);
  // non-tensor length != batch size
  CHECK_THROWS_WITH(DataProto::from_dict({{"obs", Tensor::zeros(DType::float32, Shape{3, 1})}},
                                         {{"labels", labels({"a", "b"})}}),
                    Catch::Contains("key labels length 2 is not equal to batch size 3"));
  // unlike verl: batch-less columns are checked against each other
  CHECK_THROWS_AS(DataProto::from_dict({}, {{"x", labels({"a", "b"})}, {"y", labels({"a"})}}), shape_error);
  // duplicate keys and tensor/non-tensor overlap
  CHECK_THROWS_AS(DataProto::from_dict({{"a", iota_f(2, 1)}, {"a", iota_f(2, 1)}}), key_error);
  CHECK_THROWS_AS(DataProto::from_dict({{"a", iota_f(2, 1)}}, {{"a", labels({"x", "y"})}}), key_error);
  // set_tensor / set_non_tensor checks
  DataProto e;
  e.set_tensor("x", iota_f(3, 2));
  CHECK(e.size() == 3);
  CHECK_THROWS_AS(e.set_tensor("y", iota_f(4, 2)), shape_error);
  CHECK_THROWS_AS(e.set_non_tensor("z", labels({"a"})), shape_error);
  e.set_non_tensor("z", labels({"a", "b", "c"}));
  CHECK_THROWS_AS(e.set_tensor("z", iota_f(3, 1)), key_error);
  e.set_tensor("x", iota_f(3, 5));  // replace keeps position
  CHECK(e.tensor_keys() == std::vector<std::string>{"x"});
  CHECK(e.tensor("x").shape() == Shape{3, 5});
  CHECK_THROWS_WITH(e.tensor("nope"), Catch::Contains("'nope'") && Catch::Contains("'x'"));
  CHECK_THROWS_AS(e.non_tensor("nope"), key_error);
}

TEST_CASE("A-2 length rules", "[data_proto]") {
  CHECK(abc().size() == 3);
  CHECK(DataProto::from_dict({}, {{"labels", labels({"a", "b", "c"})}}).size() == 3);
  CHECK(DataProto::from_dict({}, {}).size() == 0);
  CHECK(DataProto().size() == 0);
  CHECK(DataProto::with_batch_size(10).size() == 10);
  CHECK(DataProto::with_batch_size(10).tensor_keys().empty());
  CHECK_THROWS_AS(DataProto::with_batch_size(-1), value_error);
}

TEST_CASE("A-3 indexing by int, slice, index list, mask and tensors", "[data_proto]") {
  std::mt19937_64 rng(3);
  auto d = DataProto::from_dict({{"obs", iota_f(10, 3)}, {"ids", Tensor::from(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}},
                                {{"labels", labels({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})}}, Meta{{"m", 1}});
  // int -> item (negative from the end)
  auto it = d.item(-1);
  CHECK(it.tensor("obs").shape() == Shape{3});
  CHECK(it.tensor("obs").span<float>()[0] == 27.f);
  CHECK(it.non_tensor("labels").as_string() == "j");
  CHECK(it.meta_info.get("m").as_int() == 1);
  CHECK_THROWS_AS(d.item(10), value_error);
  CHECK_THROWS_AS(d.item(-11), value_error);
  // slices follow Python rules
  CHECK(dp_test::rows_match(d.slice(2, 5), d, {2, 3, 4}));
  CHECK(dp_test::rows_match(d.slice(-3, 100), d, {7, 8, 9}));
  CHECK(dp_test::rows_match(d.slice(1, 9, 3), d, {1, 4, 7}));
  CHECK(d.slice(5, 2).size() == 0);
  CHECK(d.slice(2, 5).tensor("obs").shares_storage_with(d.tensor("obs")));  // zero copy
  CHECK_THROWS_AS(d.slice(0, 5, 0), value_error);
  // index lists (duplicates, any order, negative) against a plain reference
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::int64_t> idx(rng() % 15);
    std::vector<std::int64_t> ref;
    for (auto& i : idx) {
      i = static_cast<std::int64_t>(rng() % 20) - 10;
      ref.push_back(i < 0 ? i + 10 : i);
    }
    auto r = d.index(idx);
    CHECK(dp_test::rows_match(r, d, ref));
    CHECK(r.meta_info() == d.meta_info());
    // the same via int32 and int64 tensors
    std::vector<std::int32_t> idx32(idx.begin(), idx.end());
    CHECK(d.index(Tensor::from(idx32, Shape{static_cast<std::int64_t>(idx32.size())})) == r);
    CHECK(d.index(Tensor::from(idx, Shape{static_cast<std::int64_t>(idx.size())})) == r);
    // boolean masks (std::vector<bool>, span<bool>, bool tensor)
    std::vector<bool> m(10);
    std::vector<std::int64_t> mref;
    for (std::size_t i = 0; i < 10; ++i) {
      m[i] = rng() % 2;
      if (m[i]) mref.push_back(static_cast<std::int64_t>(i));
    }
    auto rm = d.mask(m);
    CHECK(dp_test::rows_match(rm, d, mref));
    CHECK(rm.size() == static_cast<std::int64_t>(mref.size()));
    bool mb[10];
    for (std::size_t i = 0; i < 10; ++i) mb[i] = m[i];
    CHECK(d.mask(std::span<bool const>(mb, 10)) == rm);
    CHECK(d.index(Tensor::from(std::span<bool const>(mb, 10), Shape{10})) == rm);
  }
  CHECK(d.index(std::vector<std::int64_t>{}).size() == 0);
  CHECK(d.index(std::vector<std::int64_t>{}).tensor("obs").shape() == Shape{0, 3});
  CHECK_THROWS_WITH(d.index({0, 10}), Catch::Contains("index 10 at position 1 is out of range for 10 rows"));
  CHECK_THROWS_AS(d.mask(std::vector<bool>(9, true)), shape_error);
  // unsupported index type -> dtype_error (verl's TypeError)
  CHECK_THROWS_AS(d.index(Tensor::zeros(DType::float32, Shape{2})), dtype_error);
  CHECK_THROWS_AS(d.index(Tensor::zeros(DType::int64, Shape{2, 1})), shape_error);
}

TEST_CASE("A-4 A-5 chunk and concat", "[data_proto]") {
  auto d = DataProto::from_dict({{"obs", Tensor::from(std::vector<float>{1, 2, 3, 4, 5, 6})}},
                                {{"labels", labels({"a", "b", "c", "d", "e", "f"})}}, Meta{{"name", "abdce"}});
  CHECK_THROWS_WITH(d.chunk_equal(5), Catch::Contains("only support equal chunk") && Catch::Contains("6") &&
                                          Catch::Contains("chunk 5"));
  auto parts = d.chunk_equal(2);
  REQUIRE(parts.size() == 2);
  CHECK(floats(parts[0].tensor("obs")) == std::vector<float>{1, 2, 3});
  CHECK(floats(parts[1].tensor("obs")) == std::vector<float>{4, 5, 6});
  CHECK(strings(parts[0].non_tensor("labels")) == std::vector<std::string>{"a", "b", "c"});
  CHECK(strings(parts[1].non_tensor("labels")) == std::vector<std::string>{"d", "e", "f"});
  CHECK(parts[0].meta_info().get("name").as_string() == "abdce");
  CHECK(parts[1].meta_info() == d.meta_info());
  CHECK(parts[1].tensor("obs").shares_storage_with(d.tensor("obs")));
  auto back = DataProto::concat(parts);
  CHECK(back == d);
  // one rule, exactly k pieces (verl: two rules): 9 rows into 4 -> 3,2,2,2 with and without a batch
  auto nine = DataProto::from_dict({{"x", iota_f(9, 1)}});
  auto nine_nb = DataProto::from_dict({}, {{"x", labels({"1", "2", "3", "4", "5", "6", "7", "8", "9"})}});
  for (auto const* src : {&nine, &nine_nb}) {
    auto c = src->chunk(4);
    REQUIRE(c.size() == 4);
    CHECK(c[0].size() == 3);
    CHECK(c[1].size() == 2);
    CHECK(c[2].size() == 2);
    CHECK(c[3].size() == 2);
    CHECK(DataProto::concat(c) == *src);
  }
  // k > n: empty tail pieces; n == 0: k empty pieces; no columns: k empty pieces
  auto c7 = DataProto::from_dict({{"x", iota_f(3, 1)}}).chunk(7);
  REQUIRE(c7.size() == 7);
  CHECK(c7[2].size() == 1);
  CHECK(c7[3].size() == 0);
  CHECK(c7[6].has_batch());
  CHECK(DataProto::from_dict({{"x", iota_f(0, 2)}}).chunk(3).size() == 3);
  CHECK(DataProto().chunk(2).size() == 2);
  CHECK_THROWS_AS(d.chunk(0), value_error);
  CHECK_THROWS_AS(d.chunk(-1), value_error);
  // split
  auto sp = d.split(4);
  REQUIRE(sp.size() == 2);
  CHECK(sp[0].size() == 4);
  CHECK(sp[1].size() == 2);
  CHECK(DataProto::concat(sp) == d);
  CHECK(DataProto::from_dict({{"x", iota_f(0, 2)}}).split(3).empty());
  CHECK_THROWS_AS(d.split(0), value_error);
}

TEST_CASE("concat errors: empty, mixed presence, keys, dtypes, shapes", "[data_proto]") {
  auto a = abc();
  CHECK_THROWS_AS(DataProto::concat(std::vector<DataProto>{}), value_error);
  auto nb = DataProto::from_dict({}, {{"labels", labels({"x"})}});
  CHECK_THROWS_WITH(DataProto::concat({a, nb}), Catch::Contains("mixed presence"));  // verl drops the batches
  CHECK_THROWS_WITH(DataProto::concat({nb, a}), Catch::Contains("mixed presence"));
  auto extra = abc();
  extra.set_tensor("more", iota_f(3, 1));
  CHECK_THROWS_AS(DataProto::concat({a, extra}), key_error);
  CHECK_THROWS_AS(DataProto::concat({extra, a}), key_error);
  auto wrong_dtype = DataProto::from_dict({{"obs", Tensor::zeros(DType::int32, Shape{1, 2})}}, {{"labels", labels({"x"})}});
  CHECK_THROWS_WITH(DataProto::concat({a, wrong_dtype}), Catch::Contains("'obs'") && Catch::Contains("int32"));
  auto wrong_shape = DataProto::from_dict({{"obs", Tensor::zeros(DType::float32, Shape{1, 3})}}, {{"labels", labels({"x"})}});
  CHECK_THROWS_AS(DataProto::concat({a, wrong_shape}), shape_error);
  // single part, batch-less, empty-batch (0 keys) parts
  CHECK(DataProto::concat({a}) == a);
  auto e = DataProto::concat({DataProto::with_batch_size(2), DataProto::with_batch_size(3)});
  CHECK(e.size() == 5);
  CHECK(e.has_batch());
  CHECK(DataProto::concat({nb, nb}).size() == 2);
}

TEST_CASE("A-6 concat meta merge rules", "[data_proto]") {
  auto with_meta = [](Meta m) { return DataProto::from_dict({{"x", iota_f(1, 1)}}, {}, std::move(m)); };
  // P-7: metrics as one-element lists of dicts from three workers
  auto r = DataProto::concat({with_meta(Meta{{"metrics", Value::List{Dict{{"loss", 0.5}, {"accuracy", 0.9}}}}, {"config_flag", true}}),
                              with_meta(Meta{{"metrics", Value::List{Dict{{"loss", 0.6}, {"accuracy", 0.85}}}}, {"config_flag", true}}),
                              with_meta(Meta{{"metrics", Value::List{Dict{{"loss", 0.55}, {"accuracy", 0.88}}}}, {"config_flag", true}})});
  CHECK(r.meta_info().get("metrics") ==
        Value(Dict{{"loss", Value::List{0.5, 0.6, 0.55}}, {"accuracy", Value::List{0.9, 0.85, 0.88}}}));
  CHECK(r.meta_info().get("config_flag") == Value(true));
  // P-8: only the first has metrics
  r = DataProto::concat({with_meta(Meta{{"metrics", Value::List{Dict{{"loss", 0.5}}}}, {"k", 1}}), with_meta(Meta{{"k", 1}})});
  CHECK(r.meta_info().get("metrics") == Value(Dict{{"loss", Value::List{0.5}}}));
  CHECK(r.meta_info().get("k") == Value(1));
  // P-9: first lacks metrics, others have dict metrics
  r = DataProto::concat({with_meta(Meta{}), with_meta(Meta{{"metrics", Dict{{"loss", 0.6}}}}),
                         with_meta(Meta{{"metrics", Dict{{"loss", 0.55}}}})});
  CHECK(r.meta_info().get("metrics") == Value(Dict{{"loss", Value::List{0.6, 0.55}}}));
  // P-10: dict metrics; None skipped; keys missing in some dicts give shorter lists
  r = DataProto::concat({with_meta(Meta{{"metrics", Dict{{"a", 1}, {"b", 2}}}}), with_meta(Meta{{"metrics", Value()}}),
                         with_meta(Meta{{"metrics", Dict{{"a", 3}}}})});
  CHECK(r.meta_info().get("metrics") == Value(Dict{{"a", Value::List{1, 3}}, {"b", Value::List{2}}}));
  // no metrics anywhere -> no key
  CHECK_FALSE(DataProto::concat({with_meta(Meta{{"x", 1}}), with_meta(Meta{})}).meta_info().contains("metrics"));
  // P-11: different non-metric keys are unioned
  r = DataProto::concat({with_meta(Meta{{"a", 1}}), with_meta(Meta{{"b", "two"}})});
  CHECK(r.meta_info() == Meta{{"a", 1}, {"b", "two"}});
  // P-12: conflicting values name the key
  CHECK_THROWS_WITH(DataProto::concat({with_meta(Meta{{"config", "A"}}), with_meta(Meta{{"config", "B"}})}),
                    Catch::Contains("Conflicting values for meta_info key 'config'"));
  // metrics of a wrong kind
  CHECK_THROWS_AS(DataProto::concat({with_meta(Meta{{"metrics", 3}})}), value_error);
  CHECK_THROWS_AS(DataProto::concat({with_meta(Meta{{"metrics", Value::List{1}}})}), value_error);
}

TEST_CASE("A-7 repeat interleave and tile", "[data_proto]") {
  auto d = abc();
  auto r = d.repeat(2, true);
  CHECK(floats(r.tensor("obs")) == std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6});
  CHECK(r.tensor("obs").shape() == Shape{6, 2});
  CHECK(strings(r.non_tensor("labels")) == std::vector<std::string>{"a", "a", "b", "b", "c", "c"});
  CHECK(r.meta_info() == d.meta_info());
  auto t = d.repeat(2, false);
  CHECK(floats(t.tensor("obs")) == std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  CHECK(strings(t.non_tensor("labels")) == std::vector<std::string>{"a", "b", "c", "a", "b", "c"});
  CHECK(d.repeat(0).size() == 0);
  CHECK(d.repeat(1) == d);
  CHECK_THROWS_AS(d.repeat(-1), value_error);
  // batch-less
  auto nb = DataProto::from_dict({}, {{"l", labels({"x", "y"})}});
  CHECK(strings(nb.repeat(3, false).non_tensor("l")) == std::vector<std::string>{"x", "y", "x", "y", "x", "y"});
}

TEST_CASE("A-8 sample_level_repeat", "[data_proto]") {
  auto d = abc();
  auto r = d.sample_level_repeat(std::vector<std::int64_t>{3, 1, 2});
  CHECK(strings(r.non_tensor("labels")) == std::vector<std::string>{"a", "a", "a", "b", "c", "c"});
  CHECK(floats(r.tensor("obs")) == std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 5, 6, 5, 6});
  auto r2 = d.sample_level_repeat(Tensor::from(std::vector<std::int32_t>{1, 2, 3}));
  CHECK(strings(r2.non_tensor("labels")) == std::vector<std::string>{"a", "b", "b", "c", "c", "c"});
  CHECK(r2.meta_info() == d.meta_info());
  CHECK(d.sample_level_repeat(Tensor::from(std::vector<std::int64_t>{0, 0, 1})).size() == 1);
  CHECK_THROWS_AS(d.sample_level_repeat(std::vector<std::int64_t>{1, 2}), shape_error);
  CHECK_THROWS_AS(d.sample_level_repeat(std::vector<std::int64_t>{1, -1, 2}), value_error);
  CHECK_THROWS_AS(d.sample_level_repeat(Tensor::from(std::vector<float>{1, 1, 1})), dtype_error);
}

TEST_CASE("A-9 pad_to_divisor cycles from the first row, unpad inverts", "[data_proto]") {
  auto d = abc();
  struct Case { std::int64_t divisor, pad; std::vector<std::string> rows; };
  for (auto const& c : {Case{2, 1, {"a", "b", "c", "a"}}, Case{3, 0, {"a", "b", "c"}},
                        Case{7, 4, {"a", "b", "c", "a", "b", "c", "a"}}}) {
    auto [p, pad] = pad_dataproto_to_divisor(d, c.divisor);
    CHECK(pad == c.pad);
    CHECK(strings(p.non_tensor("labels")) == c.rows);
    CHECK(p.size() % c.divisor == 0);
    CHECK(p.meta_info() == d.meta_info());
    CHECK(unpad_dataproto(p, pad) == d);
  }
  CHECK(d == abc());  // the caller's object is untouched
  auto [e, epad] = DataProto::from_dict({{"x", iota_f(0, 1)}}).pad_to_divisor(4);
  CHECK(epad == 0);
  CHECK(e.size() == 0);
  CHECK_THROWS_AS(d.pad_to_divisor(0), value_error);
  CHECK_THROWS_AS(d.unpad(4), value_error);
  CHECK_THROWS_AS(d.unpad(-1), value_error);
}

TEST_CASE("A-10 auto-padding repeats the last row, then chunk gives equal pieces", "[data_proto]") {
  auto d = DataProto::from_dict({{"x", iota_f(10, 2)}}, {{"l", labels({"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"})}});
  d.set_auto_padding(true);
  CHECK(d.auto_padding());
  std::int64_t const pad = DataProto::pad_size_for(d.size(), 4);
  CHECK(pad == 2);
  auto p = d.padded_repeat_last(pad);
  CHECK(d.size() == 10);  // not mutated (verl mutates it)
  CHECK(strings(p.non_tensor("l")) == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "9", "9"});
  CHECK(floats(p.tensor("x"))[22] == 18.f);
  auto chunks = p.chunk_equal(4);
  for (auto const& c : chunks) {
    CHECK(c.size() == 3);
    CHECK(c.auto_padding());  // the flag travels in meta_info
  }
  CHECK(DataProto::concat(chunks).unpad(pad) == d);
  CHECK(d.padded(0, PadPolicy::repeat_last) == d);
  CHECK_THROWS_AS(DataProto::from_dict({{"x", iota_f(0, 1)}}).padded_repeat_last(1), value_error);
  CHECK_THROWS_AS(d.padded(-1, PadPolicy::cycle_from_first), value_error);
  d.set_auto_padding(false);
  CHECK_FALSE(d.auto_padding());
}

TEST_CASE("A-11 A-12 pop and select", "[data_proto]") {
  auto d = DataProto::from_dict({{"obs", iota_f(3, 2)}, {"act", iota_f(3, 1)}}, {{"labels", labels({"a", "b", "c"})}},
                                Meta{{"1", 1}, {"2", 2}});
  auto popped = d.pop({"obs"}, {}, {"2"});
  CHECK(popped.tensor_keys() == std::vector<std::string>{"obs"});
  CHECK(popped.meta_info().keys() == std::vector<std::string>{"2"});
  CHECK(popped.size() == 3);
  CHECK(d.tensor_keys() == std::vector<std::string>{"act"});
  CHECK(d.meta_info().keys() == std::vector<std::string>{"1"});
  // missing keys: error before anything moves
  CHECK_THROWS_AS(d.pop({"act", "missing"}), key_error);
  CHECK(d.has_tensor("act"));
  CHECK_THROWS_AS(d.pop({}, {"missing"}), key_error);
  CHECK_THROWS_AS(d.pop({}, {}, {"missing"}), key_error);
  CHECK_THROWS_AS(d.pop({"act", "act"}), key_error);
  // popping every tensor keeps the batch size (P-37 shape)
  d.pop({"act"});
  CHECK(d.has_batch());
  CHECK(d.size() == 3);
  // batch-less: select by non-tensor key, then pop it
  auto nb = DataProto::from_dict({}, {{"labels", labels({"a", "b"})}, {"other", labels({"x", "y"})}}, Meta{{"m", 1}});
  auto sel = nb.select(std::nullopt, std::vector<std::string>{"labels"});
  CHECK(sel.non_tensor_keys() == std::vector<std::string>{"labels"});
  CHECK(sel.size() == 2);
  CHECK(sel.meta_info() == nb.meta_info());
  auto p2 = nb.pop({}, {"labels"});
  CHECK(p2.non_tensor_keys() == std::vector<std::string>{"labels"});
  CHECK_FALSE(p2.has_batch());
  CHECK(nb.non_tensor_keys() == std::vector<std::string>{"other"});
  // select semantics: strict keys everywhere (verl: tensors only), tensors shared, meta filtered
  auto f = abc();
  auto s = f.select(std::vector<std::string>{"obs"}, std::vector<std::string>{}, std::vector<std::string>{});
  CHECK(s.tensor("obs").shares_storage_with(f.tensor("obs")));
  CHECK(s.non_tensor_keys().empty());
  CHECK(s.meta_info().empty());
  CHECK(s.size() == 3);
  CHECK_THROWS_AS(f.select(std::vector<std::string>{"nope"}), key_error);
  CHECK_THROWS_AS(f.select(std::nullopt, std::vector<std::string>{"nope"}), key_error);
  CHECK_THROWS_AS(f.select(std::nullopt, std::nullopt, std::vector<std::string>{"nope"}), key_error);
  CHECK(f.select(std::nullopt) == f);
  CHECK(f.select({"obs"}).tensor_keys() == std::vector<std::string>{"obs"});  // braced keys
  CHECK(f.select({"obs"}, std::vector<std::string>{"labels"}).non_tensor_keys() == std::vector<std::string>{"labels"});
}

TEST_CASE("rename", "[data_proto]") {
  auto d = abc();
  d.rename("obs", "observation");
  CHECK(d.tensor_keys() == std::vector<std::string>{"observation"});
  d.rename(std::vector<std::string>{"observation", "labels"}, std::vector<std::string>{"labels", "obs"});  // swap-like
  CHECK(d.tensor_keys() == std::vector<std::string>{"labels"});
  CHECK(d.non_tensor_keys() == std::vector<std::string>{"obs"});
  CHECK_THROWS_WITH(d.rename(std::vector<std::string>{"labels"}, std::vector<std::string>{"a", "b"}),
                    Catch::Contains("same length, but got 2 and 1"));
  CHECK_THROWS_AS(d.rename("missing", "x"), key_error);
  CHECK_THROWS_AS(d.rename("labels", "obs"), key_error);  // collision
  CHECK(d.tensor_keys() == std::vector<std::string>{"labels"});
}

TEST_CASE("A-13 reorder in place", "[data_proto]") {
  auto d = DataProto::from_dict({{"obs", Tensor::from(std::vector<float>{1, 2, 3, 4, 5, 6})}},
                                {{"labels", labels({"a", "b", "c", "d", "e", "f"})}}, Meta{{"name", "abdce"}});
  d.reorder(std::vector<std::int64_t>{3, 4, 2, 0, 1, 5});
  CHECK(floats(d.tensor("obs")) == std::vector<float>{4, 5, 3, 1, 2, 6});
  CHECK(strings(d.non_tensor("labels")) == std::vector<std::string>{"d", "e", "c", "a", "b", "f"});
  CHECK(d.meta_info() == Meta{{"name", "abdce"}});
  d.reorder(Tensor::from(std::vector<std::int64_t>{5, 4, 3, 2, 1, 0}));
  CHECK(strings(d.non_tensor("labels")) == std::vector<std::string>{"f", "b", "a", "c", "e", "d"});
  CHECK_THROWS_AS(d.reorder(std::vector<std::int64_t>{6}), value_error);
}

TEST_CASE("A-14 union value-equality checks", "[data_proto]") {
  auto obs = iota_f(3, 2);
  auto a = DataProto::from_dict({{"obs", obs}}, {{"l", labels({"a", "b", "c"})}}, Meta{{"m", 1}});
  auto b = DataProto::from_dict({{"obs", obs}, {"act", iota_f(3, 1)}}, {{"l", labels({"a", "b", "c"})}, {"o", Value::List{1, 2, 3}}},
                                Meta{{"m", 1}, {"n", 2}});
  a.union_with(b);
  CHECK(a.tensor_keys() == std::vector<std::string>{"obs", "act"});
  CHECK(a.tensor("act").shares_storage_with(b.tensor("act")));
  CHECK(a.non_tensor_keys() == std::vector<std::string>{"l", "o"});
  CHECK(a.meta_info() == Meta{{"m", 1}, {"n", 2}});
  // equal by value (different storage) is fine; different values are not
  auto c = DataProto::from_dict({{"obs", obs.clone()}});
  CHECK_NOTHROW(c.union_with(a));
  auto diff = DataProto::from_dict({{"obs", iota_f(3, 2, 1.f)}});
  CHECK_THROWS_WITH(DataProto(a).union_with(diff), Catch::Contains("tensor 'obs' differs"));
  // deep equality of Values: NaN == NaN, nested lists / dicts, None vs string
  NonTensorColumn nested{Value::List{std::nan(""), "nan", Dict{{"x", Value::List{1, 2}}}}, Value(), 3.5};
  auto n1 = DataProto::from_dict({}, {{"v", nested}});
  auto n2 = DataProto::from_dict({}, {{"v", nested}});
  CHECK_NOTHROW(n1.union_with(n2));
  auto changed = nested;
  changed[1] = "other";
  CHECK_THROWS_WITH(n1.union_with(DataProto::from_dict({}, {{"v", changed}})), Catch::Contains("non-tensor 'v' differs"));
  changed = nested;
  changed[0].as_list()[0] = 1.0;  // NaN vs number
  CHECK_THROWS_AS(n1.union_with(DataProto::from_dict({}, {{"v", changed}})), value_error);
  // meta conflicts
  CHECK_THROWS_WITH(DataProto(a).union_with(DataProto::from_dict({}, {}, Meta{{"m", 2}})),
                    Catch::Contains("meta_info key 'm' differs"));
  // a missing batch is empty (verl crashes); row counts re-validated, nothing changes on failure
  auto nb = DataProto::from_dict({}, {{"z", labels({"p", "q", "r"})}});
  nb.union_with(DataProto::from_dict({{"obs", obs}}));
  CHECK(nb.has_batch());
  CHECK(nb.size() == 3);
  auto before = nb;
  CHECK_THROWS_AS(nb.union_with(DataProto::from_dict({{"x", iota_f(4, 1)}})), shape_error);
  CHECK_THROWS_AS(nb.union_with(DataProto::from_dict({}, {{"w", labels({"p"})}})), shape_error);
  CHECK(nb == before);
  CHECK_THROWS_AS(nb.union_with(DataProto::from_dict({}, {{"obs", labels({"p", "q", "r"})}})), key_error);
  // union with an empty DataProto is a no-op
  CHECK(DataProto(before).union_with(DataProto()) == before);
}

TEST_CASE("A-15 make_iterator is reproducible per seed", "[data_proto]") {
  auto d = DataProto::from_dict({{"obs", iota_f(100, 2)}}, {}, Meta{{"p", "parent"}});
  auto collect = [&](std::optional<std::uint64_t> seed, bool shuffle) {
    std::vector<DataProto> out;
    for (auto const& mb : d.make_iterator(10, 2, seed, shuffle)) out.push_back(mb);
    return out;
  };
  auto a = collect(1, true), b = collect(1, true), c = collect(2, true);
  REQUIRE(a.size() == 20);
  bool any_diff = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i] == b[i]);
    CHECK(a[i].size() == 10);
    CHECK(a[i].meta_info().get("p").as_string() == "parent");
    any_diff = any_diff || !(a[i] == c[i]);
  }
  CHECK(any_diff);
  // each epoch is a permutation of all rows; the two epochs differ
  for (int e = 0; e < 2; ++e) {
    std::vector<float> seen;
    for (int j = 0; j < 10; ++j) {
      auto v = floats(a[static_cast<std::size_t>(e * 10 + j)].tensor("obs"));
      for (std::size_t r = 0; r < v.size(); r += 2) seen.push_back(v[r] / 2);
    }
    std::sort(seen.begin(), seen.end());
    for (int i = 0; i < 100; ++i) CHECK(seen[static_cast<std::size_t>(i)] == static_cast<float>(i));
  }
  // no shuffle: sequential views
  auto s = collect(std::nullopt, false);
  REQUIRE(s.size() == 20);
  CHECK(s[3] == d.slice(30, 40));
  CHECK(s[13] == d.slice(30, 40));
  auto it = d.make_iterator(50, 1);
  CHECK(it.count() == 2);
  CHECK(it.next().has_value());
  CHECK(it.next().has_value());
  CHECK_FALSE(it.next().has_value());
  CHECK_THROWS_WITH(d.make_iterator(7), Catch::Contains("100 % 7 != 0"));
  CHECK_THROWS_AS(d.make_iterator(0), value_error);
}

TEST_CASE("A-16 fold and unfold batch dim with grouped reorder", "[data_proto]") {
  auto d = abc().repeat(2, true);  // a,a,b,b,c,c
  auto folded = fold_batch_dim(d, 3);
  CHECK(folded.size() == 3);
  CHECK(folded.tensor("obs").shape() == Shape{3, 2, 2});
  CHECK(folded.non_tensor("labels")[0] == Value(Value::List{"a", "a"}));
  CHECK(d.size() == 6);  // input untouched (verl mutates it)
  folded.reorder(std::vector<std::int64_t>{1, 2, 0});
  auto un = unfold_batch_dim(folded);
  CHECK(strings(un.non_tensor("labels")) == std::vector<std::string>{"b", "b", "c", "c", "a", "a"});
  CHECK(floats(un.tensor("obs")) == std::vector<float>{3, 4, 3, 4, 5, 6, 5, 6, 1, 2, 1, 2});
  CHECK(un.meta_info() == d.meta_info());
  CHECK(unfold_batch_dim(fold_batch_dim(d, 2)) == d);
  CHECK_THROWS_AS(d.fold_batch_dim(4), value_error);
  CHECK_THROWS_AS(d.unfold_batch_dim(), value_error);  // labels rows are strings, not groups
}

TEST_CASE("A-17 unfold_column_chunks", "[data_proto]") {
  auto d = DataProto::from_dict({{"obs1", iota_f(3, 4)}, {"obs2", iota_f(3, 2, 100.f)}},
                                {{"labels", labels({"a", "b", "c"})}}, Meta{{"name", "abc"}});
  auto r = d.unfold_column_chunks(2, {"obs1"});
  CHECK(r.size() == 6);
  CHECK(r.tensor("obs1").shape() == Shape{6, 2});
  CHECK(floats(r.tensor("obs1")) == floats(d.tensor("obs1")));  // row-major: same element order
  CHECK(floats(r.tensor("obs2")) == std::vector<float>{100, 101, 100, 101, 102, 103, 102, 103, 104, 105, 104, 105});
  CHECK(strings(r.non_tensor("labels")) == std::vector<std::string>{"a", "a", "b", "b", "c", "c"});
  CHECK(r.meta_info() == d.meta_info());
  // object (list) rows split too: 3 rows of 2 values -> 6 rows of 1
  auto o = DataProto::from_dict({{"obs1", iota_f(3, 4)}},
                                {{"pairs", NonTensorColumn{Value::List{"a1", "a2"}, Value::List{"b1", "b2"}, Value::List{"c1", "c2"}}}});
  auto ro = o.unfold_column_chunks(2, {"obs1", "pairs"});
  CHECK(ro.non_tensor("pairs")[1] == Value(Value::List{"a2"}));
  CHECK(ro.non_tensor("pairs")[4] == Value(Value::List{"c1"}));
  // 3-d tensors (3,4,2) -> (6,2,2)
  auto t3 = DataProto::from_dict({{"x", Tensor::from(std::vector<float>(24, 1.f), Shape{3, 4, 2})}});
  CHECK(t3.unfold_column_chunks(2, {"x"}).tensor("x").shape() == Shape{6, 2, 2});
  // no split keys (verl crashes on non-tensors) repeats everything, non-tensors included
  CHECK(d.unfold_column_chunks(3) == d.repeat(3, true));
  CHECK_THROWS_AS(d.unfold_column_chunks(3, {"obs1"}), shape_error);
  CHECK_THROWS_AS(d.unfold_column_chunks(2, {"nope"}), key_error);
  CHECK_THROWS_AS(d.unfold_column_chunks(0), value_error);
}

TEST_CASE("A-18 value-type factories: every derived object is a DataProto with its own meta", "[data_proto]") {
  // C++ has no subclass-preserving classmethods; what the port guarantees instead is value
  // semantics: a derived object's meta is a copy, so changing it never reaches the parent.
  auto d = abc();
  auto c = d.chunk(3);
  c[0].meta_info().set("info", "changed");
  CHECK(d.meta_info().get("info").as_string() == "test_info");
  auto s = d.slice(0, 2);
  s.meta_info().set("new", 1);
  CHECK_FALSE(d.meta_info().contains("new"));
  // tensors of views are shared (writes show through), clone() detaches
  auto v = d.slice(0, 1);
  v.tensor("obs").span<float>()[0] = 42.f;
  CHECK(d.tensor("obs").span<float>()[0] == 42.f);
  auto k = d.clone();
  k.tensor("obs").span<float>()[0] = 7.f;
  CHECK(d.tensor("obs").span<float>()[0] == 42.f);
  CHECK_FALSE(k.tensor("obs").shares_storage_with(d.tensor("obs")));
  CHECK(d.describe().find("tensor obs") != std::string::npos);
}

TEST_CASE("equality", "[data_proto]") {
  auto a = abc();
  CHECK(a == abc());
  auto b = abc();
  b.meta_info().set("x", 1);
  CHECK_FALSE(a == b);
  b = abc();
  b.non_tensor("labels")[2] = "z";
  CHECK_FALSE(a == b);
  b = abc();
  b.tensor("obs").span<float>()[5] = 0.f;
  CHECK_FALSE(a == b);
  CHECK_FALSE(DataProto::with_batch_size(0) == DataProto());
  // key order is ignored
  auto x = DataProto::from_dict({{"p", iota_f(2, 1)}, {"q", iota_f(2, 1)}});
  auto y = DataProto::from_dict({{"q", iota_f(2, 1)}, {"p", iota_f(2, 1)}});
  CHECK(x == y);
}

}  // namespace test_data_proto_ops
