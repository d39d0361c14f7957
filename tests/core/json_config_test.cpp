// attn/core/json_config.h: every value type the reader takes, with its ranges, and every message:
// a wrong type, a value out of range, a list element, a missing key, an enum, a nested object, an
// unknown key, a config that is not an object, null read as absent.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attn/core/json_config.h"
#include "errors.h"

using namespace attn;
using nlohmann::json;
using test::error_of;

namespace {

// The message of reading j[key] as T (in range r) from {key: value}, context "cfg".
template <class T>
std::string read_error(const json& value, Range r = Range::any) {
  return error_of([&] {
    const json j = {{"k", value}};
    ConfigReader(j, "cfg").get<T>("k", r);
  });
}

template <class T>
T read_ok(const json& value, Range r = Range::any) {
  const json j = {{"k", value}};
  return ConfigReader(j, "cfg").get<T>("k", r);
}

}  // namespace

TEST(JsonConfig, DescribesEveryKindOfValue) {
  EXPECT_EQ(describe_json(json()), "null");
  EXPECT_EQ(describe_json(true), "the boolean true");
  EXPECT_EQ(describe_json(false), "the boolean false");
  EXPECT_EQ(describe_json("six"), "the string \"six\"");
  EXPECT_EQ(describe_json(6), "the number 6");
  EXPECT_EQ(describe_json(-6), "the number -6");
  EXPECT_EQ(describe_json(6.5), "the number 6.5");
  EXPECT_EQ(describe_json(json::array({1, 2})), "the list [1,2]");
  EXPECT_EQ(describe_json(json::array()), "an empty list");
  EXPECT_EQ(describe_json(json{{"a", 1}}), "the object {\"a\":1}");
  EXPECT_EQ(describe_json(json::object()), "an empty object");
  // Long values are cut to 60 characters.
  const std::string d = describe_json(std::string(100, 'x'));
  EXPECT_EQ(d, "the string \"" + std::string(56, 'x') + "...");
}

TEST(JsonConfig, Integers) {
  EXPECT_EQ(read_ok<int64_t>(6), 6);
  EXPECT_EQ(read_ok<int64_t>(-6), -6);
  EXPECT_EQ(read_ok<int64_t>(std::numeric_limits<int64_t>::max()), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(read_error<int64_t>("six"), "cfg: key \"k\": expected an integer, found the string \"six\"");
  EXPECT_EQ(read_error<int64_t>(6.5), "cfg: key \"k\": expected an integer, found the number 6.5");
  EXPECT_EQ(read_error<int64_t>(6.0), "cfg: key \"k\": expected an integer, found the number 6.0");
  EXPECT_EQ(read_error<int64_t>(true), "cfg: key \"k\": expected an integer, found the boolean true");
  EXPECT_EQ(read_error<int64_t>(json()), "cfg: key \"k\": expected an integer, found null");
  EXPECT_EQ(read_error<int64_t>(json::array({6})), "cfg: key \"k\": expected an integer, found the list [6]");
  EXPECT_EQ(read_error<int64_t>(json{{"v", 6}}), "cfg: key \"k\": expected an integer, found the object {\"v\":6}");
  EXPECT_EQ(read_error<int64_t>(std::numeric_limits<uint64_t>::max()),
            "cfg: key \"k\": expected an integer (64-bit), found 18446744073709551615");
  // Ranges.
  EXPECT_EQ(read_ok<int64_t>(1, Range::positive), 1);
  EXPECT_EQ(read_error<int64_t>(0, Range::positive), "cfg: key \"k\": expected a positive integer, found 0");
  EXPECT_EQ(read_error<int64_t>("6", Range::positive),
            "cfg: key \"k\": expected a positive integer, found the string \"6\"");
  EXPECT_EQ(read_ok<int64_t>(0, Range::non_negative), 0);
  EXPECT_EQ(read_error<int64_t>(-1, Range::non_negative), "cfg: key \"k\": expected an integer >= 0, found -1");
}

TEST(JsonConfig, UnsignedIntegers) {
  EXPECT_EQ(read_ok<uint64_t>(std::numeric_limits<uint64_t>::max()), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(read_ok<uint64_t>(0), 0u);
  EXPECT_EQ(read_error<uint64_t>(-1), "cfg: key \"k\": expected an integer >= 0, found -1");
  EXPECT_EQ(read_error<uint64_t>(1.5), "cfg: key \"k\": expected an integer >= 0, found the number 1.5");
  EXPECT_EQ(read_error<uint64_t>(0, Range::positive), "cfg: key \"k\": expected a positive integer, found 0");
}

TEST(JsonConfig, Numbers) {
  EXPECT_EQ(read_ok<double>(3), 3.0);   // an integer is a number
  EXPECT_EQ(read_ok<double>(0.25), 0.25);
  EXPECT_EQ(read_ok<float>(0.5), 0.5f);
  EXPECT_EQ(read_error<double>("0.1"), "cfg: key \"k\": expected a number, found the string \"0.1\"");
  EXPECT_EQ(read_error<double>(false), "cfg: key \"k\": expected a number, found the boolean false");
  EXPECT_EQ(read_error<float>(json()), "cfg: key \"k\": expected a number, found null");
  EXPECT_EQ(read_error<double>(0, Range::positive), "cfg: key \"k\": expected a positive number, found 0");
  EXPECT_EQ(read_error<double>(-0.5, Range::non_negative), "cfg: key \"k\": expected a number >= 0, found -0.5");
  EXPECT_EQ(read_ok<double>(0.0, Range::probability), 0.0);
  EXPECT_EQ(read_ok<double>(0.999, Range::probability), 0.999);
  EXPECT_EQ(read_error<double>(1, Range::probability), "cfg: key \"k\": expected a number in [0, 1), found 1");
  EXPECT_EQ(read_error<double>(-0.1, Range::probability), "cfg: key \"k\": expected a number in [0, 1), found -0.1");
  EXPECT_EQ(read_ok<double>(1.0, Range::unit_interval), 1.0);
  EXPECT_EQ(read_error<double>(1.5, Range::unit_interval), "cfg: key \"k\": expected a number in [0, 1], found 1.5");
}

TEST(JsonConfig, BooleansAndStrings) {
  EXPECT_TRUE(read_ok<bool>(true));
  EXPECT_EQ(read_error<bool>(1), "cfg: key \"k\": expected a boolean (true or false), found the number 1");
  EXPECT_EQ(read_error<bool>("true"), "cfg: key \"k\": expected a boolean (true or false), found the string \"true\"");
  EXPECT_EQ(read_ok<std::string>("gelu"), "gelu");
  EXPECT_EQ(read_error<std::string>(5), "cfg: key \"k\": expected a string, found the number 5");
  EXPECT_EQ(read_ok<json>(json::array({1, "a"})), json::array({1, "a"}));   // any value
}

TEST(JsonConfig, ListsElementByElement) {
  using Ints = std::vector<int64_t>;
  EXPECT_EQ(read_ok<Ints>(json::array({1, 2, 3}), Range::positive), (Ints{1, 2, 3}));
  EXPECT_EQ(read_ok<Ints>(json::array()), Ints{});
  EXPECT_EQ(read_error<Ints>(json::array({512, 512, "x"})),
            "cfg: key \"k[2]\": expected an integer, found the string \"x\"");
  EXPECT_EQ(read_error<Ints>(json::array({1, 0}), Range::positive), "cfg: key \"k[1]\": expected a positive integer, found 0");
  EXPECT_EQ(read_error<Ints>(256, Range::positive),
            "cfg: key \"k\": expected a list of positive integers, found the number 256");
  EXPECT_EQ(read_error<Ints>(json::array({1.5})), "cfg: key \"k[0]\": expected an integer, found the number 1.5");
  EXPECT_EQ(read_error<std::vector<uint64_t>>("x"), "cfg: key \"k\": expected a list of integers >= 0, found the string \"x\"");
  EXPECT_EQ(read_ok<std::vector<float>>(json::array({0.5, 1})), (std::vector<float>{0.5f, 1.0f}));
  EXPECT_EQ(read_error<std::vector<double>>(json{{"a", 1}}),
            "cfg: key \"k\": expected a list of numbers, found the object {\"a\":1}");
  EXPECT_EQ(read_error<std::vector<double>>(json::array({0.5, 2}), Range::probability),
            "cfg: key \"k[1]\": expected a number in [0, 1), found 2");
  EXPECT_EQ(read_error<std::vector<std::string>>(json::array({"a", 1})),
            "cfg: key \"k[1]\": expected a string, found the number 1");
  EXPECT_EQ(read_error<std::vector<bool>>("x"), "cfg: key \"k\": expected a list of booleans (true or false), found the string \"x\"");
  EXPECT_EQ(read_error<std::vector<std::vector<int64_t>>>(json::array({json::array({1}), json::array({2, "b"})})),
            "cfg: key \"k[1][1]\": expected an integer, found the string \"b\"");
}

TEST(JsonConfig, MissingAndOptionalKeys) {
  const json j = {{"depth", 6}, {"name", "vit"}};
  ConfigReader r(j, "vit config");
  EXPECT_EQ(error_of([&] { r.get<int64_t>("dim", Range::positive); }),
            "vit config: key \"dim\": missing (expected a positive integer)");
  EXPECT_EQ(error_of([&] { r.get<std::vector<int64_t>>("hidden"); }),
            "vit config: key \"hidden\": missing (expected a list of integers)");
  EXPECT_EQ(r.get_or("dim", int64_t(192), Range::positive), 192);   // absent: the fallback, unchecked
  EXPECT_EQ(r.get_or("depth", int64_t(1)), 6);
  EXPECT_EQ(r.get_or("act", "relu"), "relu");
  EXPECT_EQ(error_of([&] { r.get_or("name", 1.0); }), "vit config: key \"name\": expected a number, found the string \"vit\"");
  EXPECT_TRUE(r.has("depth"));
  EXPECT_FALSE(r.has("heads"));
}

TEST(JsonConfig, Enums) {
  const json j = {{"pool", "max"}, {"act", 1}, {"cell", "gru"}};
  ConfigReader r(j, "cfg");
  EXPECT_EQ(error_of([&] { r.one_of("pool", {"token", "avg"}); }),
            "cfg: key \"pool\": expected one of \"token\", \"avg\", found the string \"max\"");
  EXPECT_EQ(error_of([&] { r.one_of("act", {"relu", "gelu"}); }),
            "cfg: key \"act\": expected one of \"relu\", \"gelu\", found the number 1");
  EXPECT_EQ(error_of([&] { r.one_of("kind", {"a"}); }), "cfg: key \"kind\": missing (expected one of \"a\")");
  EXPECT_EQ(r.one_of("cell", {"gru", "lstm"}), "gru");
  EXPECT_EQ(r.one_of_or("local", "none", {"none", "m", "p"}), "none");
  EXPECT_EQ(error_of([&] { r.one_of_or("pool", "avg", {"avg"}); }),
            "cfg: key \"pool\": expected one of \"avg\", found the string \"max\"");
}

TEST(JsonConfig, NestedObjectsNameTheirPath) {
  const json j = {{"train_state", {{"step", "ten"}, {"window", {{"sums", {1, "x"}}}}}}, {"config", 3}};
  ConfigReader r(j, "train --resume: 'ckpt'");
  ConfigReader ts = r.object("train_state");
  EXPECT_EQ(error_of([&] { ts.get<int64_t>("step", Range::non_negative); }),
            "train --resume: 'ckpt': key \"train_state.step\": expected an integer >= 0, found the string \"ten\"");
  EXPECT_EQ(error_of([&] { ts.object("window").get<std::vector<double>>("sums"); }),
            "train --resume: 'ckpt': key \"train_state.window.sums[1]\": expected a number, found the string \"x\"");
  EXPECT_EQ(error_of([&] { ts.get<int64_t>("items"); }),
            "train --resume: 'ckpt': key \"train_state.items\": missing (expected an integer)");
  EXPECT_EQ(error_of([&] { r.object("config"); }),
            "train --resume: 'ckpt': key \"config\": expected an object, found the number 3");
  EXPECT_EQ(error_of([&] { r.object("data"); }), "train --resume: 'ckpt': key \"data\": missing (expected an object)");
  ConfigReader none = r.object_or_empty("distill");
  EXPECT_EQ(none.get_or("tau", 1.0), 1.0);
  EXPECT_EQ(error_of([&] { none.get<double>("tau"); }),
            "train --resume: 'ckpt': key \"distill.tau\": missing (expected a number)");
  // A reader of its own with a prefix (a list's element), and without a context.
  EXPECT_EQ(error_of([] { ConfigReader(json(5), "", "history[3]."); }), "key \"history[3]\": expected an object, found the number 5");
  const json rec = {{"val_loss", nullptr}};
  EXPECT_EQ(error_of([&] { ConfigReader(rec, "", "history[0].").get<double>("val_loss"); }),
            "key \"history[0].val_loss\": expected a number, found null");
}

TEST(JsonConfig, ANonObjectConfig) {
  EXPECT_EQ(error_of([] { ConfigReader(json("six"), "vit config"); }),
            "vit config: expected a JSON object, found the string \"six\"");
  EXPECT_EQ(error_of([] { ConfigReader(json::array({1}), "vit config"); }),
            "vit config: expected a JSON object, found the list [1]");
  EXPECT_EQ(error_of([] { ConfigReader(json(), ""); }), "expected a JSON object, found null");
}

TEST(JsonConfig, UnknownKeys) {
  const json j = {{"model", "vit"}, {"depth", 6}, {"deph", 6}, {"dim", 8}};
  ConfigReader r(j, "vit config");
  r.get<int64_t>("depth");
  r.get_or("heads", int64_t(3));   // asked for, absent: known
  r.ignore("model");
  EXPECT_EQ(error_of([&] { r.finish(); }), "vit config: unknown key \"deph\" (known: depth, heads, model)");
  r.get<int64_t>("dim");
  r.ignore("deph");
  EXPECT_EQ(error_of([&] { r.finish(); }), test::kNoError);
  // A nested reader names the key with its path.
  const json m = {{"data", {{"seed", 1}, {"sed", 2}}}};
  ConfigReader d = ConfigReader(m, "ckpt").object("data");
  d.get<uint64_t>("seed");
  EXPECT_EQ(error_of([&] { d.finish(); }), "ckpt: unknown key \"data.sed\" (known: seed)");
}

TEST(JsonConfig, NullAsAbsent) {
  const json j = {{"hidden_size", nullptr}, {"qkv_bias", nullptr}, {"num_labels", "x"}};
  ConfigReader r(j, "config.json");
  EXPECT_EQ(error_of([&] { r.get_or("hidden_size", int64_t(768)); }),
            "config.json: key \"hidden_size\": expected an integer, found null");
  r.null_is_absent();
  EXPECT_EQ(r.get_or("hidden_size", int64_t(768)), 768);
  EXPECT_TRUE(r.get_or("qkv_bias", true));
  EXPECT_FALSE(r.has("qkv_bias"));
  EXPECT_EQ(error_of([&] { r.get<int64_t>("hidden_size"); }),
            "config.json: key \"hidden_size\": missing (expected an integer)");
  EXPECT_EQ(error_of([&] { r.get<int64_t>("num_labels"); }),
            "config.json: key \"num_labels\": expected an integer, found the string \"x\"");
}

TEST(JsonConfig, ChecksOfItsOwnAndSingleValues) {
  const json j = {{"heads", 5}};
  ConfigReader r(j, "vit config");
  EXPECT_EQ(error_of([&] { r.check(false, "heads", "a divisor of dim 192", 5); }),
            "vit config: key \"heads\": expected a divisor of dim 192, found 5");
  EXPECT_EQ(error_of([&] { r.fail("heads", "3", "4"); }), "vit config: key \"heads\": expected 3, found 4");
  EXPECT_EQ(r.name("heads"), "heads");
  EXPECT_EQ(read_json_value<int64_t>(json(7), "cfg", "x"), 7);
  EXPECT_EQ(error_of([] { read_json_value<std::string>(json(7), "cfg", "names[0]"); }),
            "cfg: key \"names[0]\": expected a string, found the number 7");
  // Every error is a ConfigError, an attn::Error.
  EXPECT_THROW(ConfigReader(json(1), "cfg"), ConfigError);
  EXPECT_THROW(read_ok<int64_t>("x"), Error);
}
