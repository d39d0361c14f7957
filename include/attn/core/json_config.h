// Reading a JSON config key by key, every value checked: a model's config, a checkpoint's metadata,
// a foreign config.json. A missing key, a value of the wrong type or out of range, or a key no one
// reads throws attn::ConfigError naming the config, the key, what was expected and what was found.
//
//   ConfigReader r(j, "vit config");
//   c.depth = r.get<int64_t>("depth", Range::positive);          // required
//   c.drop = r.get_or("drop", 0.0, Range::probability);          // optional: absent -> 0.0
//   c.hidden = r.get<std::vector<int64_t>>("hidden", Range::positive);   // each element: "hidden[2]"
//   c.pool = r.one_of("global_pool", {"token", "avg"});
//   ConfigReader ts = r.object("train_state");                   // its keys: "train_state.step", ...
//   r.ignore("model");                                           // known, not read here
//   r.finish();                                                  // any other key: "unknown key ..."
//
// Messages:
//   vit config: key "depth": expected a positive integer, found the string "six"
//   mlp config: key "hidden[2]": expected a positive integer, found the number 6.5
//   vit config: key "global_pool": expected one of "token", "avg", found the string "max"
//   vit config: key "depth": missing (expected a positive integer)
//   vit config: unknown key "deph" (known: image_size, patch_size, ...)
//
// Integers must be JSON integers (6, not 6.5 or true); numbers (double) take integers too; booleans
// only true / false; strings only strings; lists element by element. The reader keeps a pointer to
// the JSON it reads: that JSON must outlive it (and the readers object() returns).
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/core/error.h"

namespace attn {

// The attn::Error of a bad config value. A caller that knows the file the config came from catches
// it to put the file's name in front (it rethrows a plain Error, so the name goes in once).
class ConfigError : public Error {
 public:
  using Error::Error;
};

// The values a number may take, besides its type.
enum class Range {
  any,
  positive,        // > 0
  non_negative,    // >= 0
  probability,     // [0, 1)
  unit_interval,   // [0, 1]
};

// How a value is described in messages: `the string "six"`, `the number 6.5`, `the boolean true`,
// `null`, `the list [1,2]`, `the object {"a":1}` (long ones cut at 60 characters).
std::string describe_json(const nlohmann::json& v);

namespace detail {
// One value checked and converted; `key` is its full name in messages ("hidden[2]").
struct ConfigSite {
  const std::string& context;
  const std::string& key;
};
[[noreturn]] void config_fail(const ConfigSite& at, const std::string& expected, const std::string& found);
void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, bool& out);
void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, int64_t& out);
void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, uint64_t& out);
void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, double& out);
void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, float& out);
void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, std::string& out);
void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, nlohmann::json& out);   // any value
// What a type (with its range) is called in messages: "a positive integer", "a list of numbers".
std::string config_expected(const bool*, Range r);
std::string config_expected(const int64_t*, Range r);
std::string config_expected(const uint64_t*, Range r);
std::string config_expected(const double*, Range r);
std::string config_expected(const float*, Range r);
std::string config_expected(const std::string*, Range r);
std::string config_expected(const nlohmann::json*, Range r);
std::string config_list_of(const std::string& expected);   // "a positive integer" -> "a list of positive integers"

template <class T>
std::string config_expected(const std::vector<T>*, Range r) {
  return config_list_of(config_expected(static_cast<const T*>(nullptr), r));
}

template <class T>
void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, std::vector<T>& out) {
  if (!v.is_array()) config_fail(at, config_expected(static_cast<const std::vector<T>*>(nullptr), r), describe_json(v));
  out.clear();
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string key = at.key + "[" + std::to_string(i) + "]";
    T x{};
    config_read(v[i], ConfigSite{at.context, key}, r, x);
    out.push_back(std::move(x));
  }
}
}  // namespace detail

// Reads one value outside a reader (e.g. a list's element): `context: key "<key>": ...` on error.
template <class T>
T read_json_value(const nlohmann::json& v, const std::string& context, const std::string& key, Range r = Range::any) {
  T out{};
  detail::config_read(v, detail::ConfigSite{context, key}, r, out);
  return out;
}

class ConfigReader {
 public:
  // `j` must be a JSON object ("<context>: expected a JSON object, found ..."). `prefix` goes in front
  // of every key in messages (object() passes "train_state." to its child). An empty context: the
  // messages start at the key, for a caller that puts the source (a file's name) in front.
  ConfigReader(const nlohmann::json& j, std::string context, std::string prefix = "");
  // From here on a key whose value is null counts as absent (Hugging Face's config.json writes null
  // for "not set"); the readers object() returns inherit it.
  ConfigReader& null_is_absent() {
    null_is_absent_ = true;
    return *this;
  }

  // Whether the key is there (and not null when null_is_absent); the key becomes known.
  bool has(const std::string& key);

  // A required value.
  template <class T>
  T get(const std::string& key, Range r = Range::any) {
    T out{};
    detail::config_read(at(key, detail::config_expected(static_cast<const T*>(nullptr), r)), site(key), r, out);
    return out;
  }
  // An optional value: `fallback` when the key is absent.
  template <class T>
  T get_or(const std::string& key, const T& fallback, Range r = Range::any) {
    if (!has(key)) return fallback;
    return get<T>(key, r);
  }
  std::string get_or(const std::string& key, const char* fallback) { return get_or(key, std::string(fallback)); }

  // A string that must be one of `allowed`.
  std::string one_of(const std::string& key, const std::vector<std::string>& allowed);
  std::string one_of_or(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);

  // A nested object, read by its own reader (keys named "<key>.<its key>"); object_or_empty: {} when absent.
  ConfigReader object(const std::string& key);
  ConfigReader object_or_empty(const std::string& key);

  // The key is known without being read here (e.g. "model", read by the registry).
  void ignore(const std::string& key);
  // Rejects every key that was neither read nor ignored: "<context>: unknown key "x" (known: ...)".
  void finish() const;

  // The value's full name in messages ("train_state.step") and a failure about it:
  // "<context>: key "<name>": expected <expected>, found <found>".
  std::string name(const std::string& key) const { return prefix_ + key; }
  [[noreturn]] void fail(const std::string& key, const std::string& expected, const std::string& found) const;
  // `found` as its JSON text, for range checks a model makes itself.
  template <class T>
  void check(bool ok, const std::string& key, const std::string& expected, const T& found) const {
    if (!ok) fail(key, expected, nlohmann::json(found).dump());
  }

  const std::string& context() const { return context_; }
  const nlohmann::json& json() const { return *j_; }

 private:
  const nlohmann::json& at(const std::string& key, const std::string& expected);
  detail::ConfigSite site(const std::string& key) {
    key_name_ = name(key);
    return detail::ConfigSite{context_, key_name_};
  }
  void remember(const std::string& key);

  static const nlohmann::json& empty_object();

  const nlohmann::json* j_;
  std::string context_, prefix_;
  bool null_is_absent_ = false;
  std::vector<std::string> known_;
  std::string key_name_;
};

}  // namespace attn
