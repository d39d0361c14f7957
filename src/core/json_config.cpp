// Checked reading of JSON configs (see include/attn/core/json_config.h).
#include "attn/core/json_config.h"

#include <algorithm>
#include <limits>

namespace attn {

namespace {

constexpr size_t kShown = 60;   // characters of a value shown in a message

std::string cut(std::string s) {
  if (s.size() > kShown) s = s.substr(0, kShown - 3) + "...";
  return s;
}

// The value as JSON text: integers without a fraction, others as nlohmann writes them.
std::string text(const nlohmann::json& v) { return cut(v.dump()); }

std::string range_suffix(Range r) {
  switch (r) {
    case Range::any: return "";
    case Range::positive: return "";
    case Range::non_negative: return " >= 0";
    case Range::probability: return " in [0, 1)";
    case Range::unit_interval: return " in [0, 1]";
  }
  return "";
}

// "<context>: " ("" without a context: the caller puts the source in front).
std::string lead(const std::string& context) { return context.empty() ? "" : context + ": "; }

bool in_range(double x, Range r) {
  switch (r) {
    case Range::any: return true;
    case Range::positive: return x > 0;
    case Range::non_negative: return x >= 0;
    case Range::probability: return x >= 0 && x < 1;
    case Range::unit_interval: return x >= 0 && x <= 1;
  }
  return true;
}

}  // namespace

std::string describe_json(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return std::string("the boolean ") + (v.get<bool>() ? "true" : "false");
    case nlohmann::json::value_t::string: return "the string " + text(v);
    case nlohmann::json::value_t::array: return v.empty() ? "an empty list" : "the list " + text(v);
    case nlohmann::json::value_t::object: return v.empty() ? "an empty object" : "the object " + text(v);
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return "the number " + text(v);
    default: return text(v);
  }
}

namespace detail {

void config_fail(const ConfigSite& at, const std::string& expected, const std::string& found) {
  throw ConfigError(lead(at.context) + "key \"" + at.key + "\": expected " + expected + ", found " + found);
}

std::string config_expected(const bool*, Range) { return "a boolean (true or false)"; }
std::string config_expected(const int64_t*, Range r) {
  return r == Range::positive ? "a positive integer" : "an integer" + range_suffix(r);
}
std::string config_expected(const uint64_t*, Range r) {
  return r == Range::positive ? "a positive integer" : "an integer >= 0";
}
std::string config_expected(const double*, Range r) {
  return r == Range::positive ? "a positive number" : "a number" + range_suffix(r);
}
std::string config_expected(const float*, Range r) { return config_expected(static_cast<const double*>(nullptr), r); }
std::string config_expected(const std::string*, Range) { return "a string"; }
std::string config_expected(const nlohmann::json*, Range) { return "a value"; }

std::string config_list_of(const std::string& expected) {
  // "a positive integer" -> "a list of positive integers", "an integer >= 0" -> "a list of integers >= 0",
  // "a number in [0, 1)" -> "a list of numbers in [0, 1)".
  std::string s = expected;
  if (s.starts_with("a list")) return "a list of lists";
  if (s.starts_with("an ")) s = s.substr(3);
  else if (s.starts_with("a ")) s = s.substr(2);
  const std::string nouns[] = {"integer", "number", "string", "boolean", "value"};
  for (const std::string& n : nouns) {
    const size_t at = s.find(n);
    if (at != std::string::npos) {
      s.insert(at + n.size(), "s");
      break;
    }
  }
  return "a list of " + s;
}

void config_read(const nlohmann::json& v, const ConfigSite& at, Range, bool& out) {
  if (!v.is_boolean()) config_fail(at, config_expected(&out, Range::any), describe_json(v));
  out = v.get<bool>();
}

void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, int64_t& out) {
  const std::string expected = config_expected(&out, r);
  if (!v.is_number_integer()) config_fail(at, expected, describe_json(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    config_fail(at, expected + " (64-bit)", text(v));
  out = v.get<int64_t>();
  if (!in_range(double(out), r)) config_fail(at, expected, text(v));
}

void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, uint64_t& out) {
  const std::string expected = config_expected(&out, r);
  if (!v.is_number_integer()) config_fail(at, expected, describe_json(v));
  if (!v.is_number_unsigned() && v.get<int64_t>() < 0) config_fail(at, expected, text(v));
  out = v.get<uint64_t>();
  if (r == Range::positive && out == 0) config_fail(at, expected, text(v));
}

void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, double& out) {
  const std::string expected = config_expected(&out, r);
  if (!v.is_number()) config_fail(at, expected, describe_json(v));
  out = v.get<double>();
  if (!in_range(out, r)) config_fail(at, expected, text(v));   // NaN is in no range but `any`
}

void config_read(const nlohmann::json& v, const ConfigSite& at, Range r, float& out) {
  double d = 0;
  config_read(v, at, r, d);
  out = float(d);
}

void config_read(const nlohmann::json& v, const ConfigSite& at, Range, std::string& out) {
  if (!v.is_string()) config_fail(at, config_expected(&out, Range::any), describe_json(v));
  out = v.get<std::string>();
}

void config_read(const nlohmann::json& v, const ConfigSite&, Range, nlohmann::json& out) { out = v; }

}  // namespace detail

// ---- ConfigReader ----

ConfigReader::ConfigReader(const nlohmann::json& j, std::string context, std::string prefix)
    : j_(&j), context_(std::move(context)), prefix_(std::move(prefix)) {
  if (j.is_object()) return;
  if (prefix_.empty()) throw ConfigError(lead(context_) + "expected a JSON object, found " + describe_json(j));
  const std::string key = prefix_.substr(0, prefix_.size() - 1);   // "train_state." -> "train_state"
  throw ConfigError(lead(context_) + "key \"" + key + "\": expected an object, found " + describe_json(j));
}

const nlohmann::json& ConfigReader::empty_object() {
  static const nlohmann::json e = nlohmann::json::object();
  return e;
}

void ConfigReader::remember(const std::string& key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.push_back(key);
}

bool ConfigReader::has(const std::string& key) {
  remember(key);
  auto it = j_->find(key);
  return it != j_->end() && !(null_is_absent_ && it->is_null());
}

const nlohmann::json& ConfigReader::at(const std::string& key, const std::string& expected) {
  if (!has(key)) throw ConfigError(lead(context_) + "key \"" + name(key) + "\": missing (expected " + expected + ")");
  return (*j_)[key];
}

void ConfigReader::fail(const std::string& key, const std::string& expected, const std::string& found) const {
  detail::config_fail(detail::ConfigSite{context_, name(key)}, expected, found);
}

std::string ConfigReader::one_of(const std::string& key, const std::vector<std::string>& allowed) {
  std::string expected = "one of ";
  for (size_t i = 0; i < allowed.size(); ++i) expected += (i ? ", \"" : "\"") + allowed[i] + "\"";
  const nlohmann::json& v = at(key, expected);
  if (!v.is_string() || std::find(allowed.begin(), allowed.end(), v.get<std::string>()) == allowed.end())
    fail(key, expected, describe_json(v));
  return v.get<std::string>();
}

std::string ConfigReader::one_of_or(const std::string& key, const std::string& fallback,
                                    const std::vector<std::string>& allowed) {
  return has(key) ? one_of(key, allowed) : fallback;
}

ConfigReader ConfigReader::object(const std::string& key) {
  ConfigReader child(at(key, "an object"), context_, name(key) + ".");
  child.null_is_absent_ = null_is_absent_;
  return child;
}

ConfigReader ConfigReader::object_or_empty(const std::string& key) {
  if (has(key)) return object(key);
  ConfigReader child(empty_object(), context_, name(key) + ".");
  child.null_is_absent_ = null_is_absent_;
  return child;
}

void ConfigReader::ignore(const std::string& key) { remember(key); }

void ConfigReader::finish() const {
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
    std::string known;
    for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
    throw ConfigError(lead(context_) + "unknown key \"" + name(it.key()) + "\" (known: " + known + ")");
  }
}

}  // namespace attn
