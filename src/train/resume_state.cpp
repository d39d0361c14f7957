// A resumed run's state from its checkpoint's metadata (see resume_state.h).
#include "resume_state.h"

namespace attn::train {

namespace {

std::string context_of(const std::string& checkpoint) { return "train --resume: '" + checkpoint + "'"; }

}  // namespace

ResumeState read_resume_state(const nlohmann::json& meta, const std::string& checkpoint) {
  ConfigReader r(meta, context_of(checkpoint));
  ATTN_CHECK(r.has("train_state"), "train --resume: '", checkpoint,
             "' has no training state (expected __metadata__.train_state)");
  ConfigReader ts = r.object("train_state");
  ResumeState s;
  s.step = ts.get<int64_t>("step", Range::non_negative);
  s.rng_seed = ts.get<uint64_t>("rng_seed");
  s.rng_offset = ts.get<uint64_t>("rng_offset");
  s.history = ts.get_or<nlohmann::json>("history", nlohmann::json::array());
  if (!s.history.is_array()) ts.fail("history", "a list of objects", describe_json(s.history));
  for (size_t i = 0; i < s.history.size(); ++i)
    ConfigReader(s.history[i], r.context(), ts.name("history[" + std::to_string(i) + "]."));   // an object
  s.seconds = ts.get_or("seconds", 0.0, Range::non_negative);
  s.items = ts.get_or("items", int64_t(0), Range::non_negative);
  if (ts.has("window")) {
    ConfigReader w = ts.object("window");
    Window win;
    win.loss = w.get<double>("loss");
    win.steps = w.get<int64_t>("steps", Range::non_negative);
    win.items = w.get<int64_t>("items", Range::non_negative);
    win.sums = w.get<std::vector<double>>("sums");
    s.window = win;
  }
  return s;
}

std::string checkpoint_model_name(const nlohmann::json& meta, const std::string& checkpoint) {
  return ConfigReader(meta, context_of(checkpoint)).object("config").get<std::string>("model");
}

}  // namespace attn::train
