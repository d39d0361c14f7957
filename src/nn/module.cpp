// nn::Module: registration, traversal, train/eval, state dicts and the parameter table.
#include "attn/nn/module.h"
#include "attn/nn/tied.h"

#include <algorithm>
#include <functional>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "attn/autograd/grad_mode.h"
#include "attn/core/memory.h"

namespace attn::nn {

Module::~Module() = default;

void Module::check_new_name(const std::string& name, const char* what) const {
  ATTN_CHECK(!name.empty(), "Module: ", what, " name must not be empty");
  ATTN_CHECK(name.find('.') == std::string::npos, "Module: ", what, " name '", name,
             "' must not contain '.'");
  auto taken = [&](const auto& list) {
    for (const auto& e : list)
      if (e.name == name) return true;
    return false;
  };
  bool dup = taken(params_) || taken(buffers_);
  for (const auto& c : children_) dup = dup || c.first == name;
  ATTN_CHECK(!dup, "Module: cannot register ", what, " '", name, "': the name is already taken");
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  check_new_name(name, "parameter");
  if (t.defined()) {
    ATTN_CHECK(is_floating(t.dtype()), "Module: parameter '", name, "' must be a f32 or f64 tensor, got ",
               dtype_name(t.dtype()));
    ATTN_CHECK(t.is_leaf(), "Module: parameter '", name, "' must be a leaf tensor (use .detach())");
    t.requires_grad_(true);
  }
  params_.push_back({name, std::move(t), true});
  return params_.back().tensor;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name, "buffer");
  buffers_.push_back({name, std::move(t), persistent});
  return buffers_.back().tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name, "submodule");
  ATTN_CHECK(m != nullptr, "Module: cannot register submodule '", name, "': it is null");
  ATTN_CHECK(m.get() != this, "Module: cannot register a module as its own submodule ('", name, "')");
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, bool params, bool buffers, bool persistent_only, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  if (params)
    for (const auto& e : params_)
      if (e.tensor.defined()) out.emplace_back(prefix + e.name, e.tensor);
  if (buffers)
    for (const auto& e : buffers_)
      if (e.tensor.defined() && (e.persistent || !persistent_only)) out.emplace_back(prefix + e.name, e.tensor);
  if (!recurse) return;
  for (const auto& [name, child] : children_)
    child->collect(prefix + name + ".", params, buffers, persistent_only, true, out);
}

namespace {
// Keeps the first name of each tensor (tied weights appear once), as PyTorch's remove_duplicate.
std::vector<std::pair<std::string, Tensor>> dedup(std::vector<std::pair<std::string, Tensor>> v) {
  std::set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(v.size());
  for (auto& p : v)
    if (seen.insert(p.second.impl_ptr().get()).second) out.push_back(std::move(p));
  return out;
}
}  // namespace

void Module::to(DType dt) {
  ATTN_CHECK(is_floating(dt), "Module::to: expected a floating dtype (f32, f64, bf16), got ",
             dtype_name(dt));
  // One converted tensor per distinct source tensor, so tied entries stay tied.
  std::vector<std::pair<Tensor, Tensor>> done;
  std::function<void(Module&)> rec = [&](Module& m) {
    auto convert = [&](Tensor& t, bool param) {
      if (!t.defined() || t.dtype() == dt || !is_floating(t.dtype())) return;
      for (const auto& [from, into] : done)
        if (from.is_same(t)) { t = into; return; }
      Tensor c = t.detach().to(dt).contiguous();
      if (param) c.requires_grad_(true);
      done.emplace_back(t, c);
      t = c;
    };
    for (auto& e : m.params_) convert(e.tensor, true);
    for (auto& e : m.buffers_) convert(e.tensor, false);
    for (auto& [name, child] : m.children_) rec(*child);
  };
  rec(*this);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, false, false, recurse, out);
  return dedup(std::move(out));
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, true, false, recurse, out);
  return dedup(std::move(out));
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& p : named_parameters(recurse)) out.push_back(std::move(p.second));
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::function<void(const Module&, const std::string&)> rec = [&](const Module& m, const std::string& prefix) {
    for (const auto& [name, child] : m.children_) {
      out.emplace_back(prefix + name, child);
      rec(*child, prefix + name + ".");
    }
  };
  rec(*this, "");
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  on_train(on);
  for (auto& c : children_) c.second->train(on);
}

void Module::zero_grad() {
  for (auto& p : parameters()) p.zero_grad();
}

io::TensorList Module::state_dict() const {
  io::TensorList out;
  // PyTorch's order: own parameters, own persistent buffers, then each submodule.
  std::function<void(const Module&, const std::string&)> rec = [&](const Module& m, const std::string& prefix) {
    for (const auto& e : m.params_)
      if (e.tensor.defined()) out.emplace_back(prefix + e.name, e.tensor.detach());
    for (const auto& e : m.buffers_)
      if (e.tensor.defined() && e.persistent) out.emplace_back(prefix + e.name, e.tensor.detach());
    for (const auto& [name, child] : m.children_) rec(*child, prefix + name + ".");
  };
  rec(*this, "");
  return out;
}

namespace {
std::string join_limited(const std::vector<std::string>& items, size_t max_listed) {
  std::string s;
  const size_t n = max_listed == 0 ? items.size() : std::min(items.size(), max_listed);
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + items[i];
  if (n < items.size()) s += ", ... (" + std::to_string(items.size() - n) + " more)";
  return s;
}
}  // namespace

std::string Module::state_dict_mismatch(const io::TensorList& sd, bool strict, size_t max_listed) const {
  ShapeList shapes;
  shapes.reserve(sd.size());
  for (const auto& [name, t] : sd)
    shapes.emplace_back(name, t.defined() ? std::optional<Shape>(t.shape()) : std::nullopt);
  return shape_mismatch(shapes, strict, max_listed);
}

std::vector<std::pair<std::string, std::string>> tied_names(const Module& m) {
  const io::TensorList mine = m.state_dict();
  std::vector<std::pair<std::string, std::string>> tied;
  for (size_t i = 0; i < mine.size(); ++i) {
    const Tensor& t = mine[i].second;
    for (size_t j = 0; j < i && t.defined(); ++j) {
      const Tensor& u = mine[j].second;
      if (u.defined() && t.shares_storage(u) && t.offset() == u.offset() && t.shape() == u.shape() &&
          t.strides() == u.strides()) {
        tied.emplace_back(mine[i].first, mine[j].first);
        break;
      }
    }
  }
  return tied;
}

std::string Module::shape_mismatch(const ShapeList& sd, bool strict, size_t max_listed) const {
  const io::TensorList mine = state_dict();
  std::map<std::string, const std::optional<Shape>*> given;
  for (const auto& [name, s] : sd) given.emplace(name, &s);
  std::map<std::string, std::string> tied;   // a tied name -> its first name
  for (auto& [name, first] : tied_names(*this)) tied.emplace(std::move(name), std::move(first));
  std::set<std::string> expected;
  std::vector<std::string> missing, unexpected, misshaped;
  for (const auto& [name, t] : mine) {
    expected.insert(name);
    auto it = given.find(name);
    if (it == given.end()) {
      const auto tie = tied.find(name);
      if (tie == tied.end() || !given.count(tie->second)) missing.push_back(name);
    } else if (!it->second->has_value() || **it->second != t.shape()) {
      misshaped.push_back(name + " (model " + shape_str(t.shape()) + ", state dict " +
                          (it->second->has_value() ? shape_str(**it->second) : "undefined") + ")");
    }
  }
  std::set<std::string> reported;
  for (const auto& [name, s] : sd)
    if (!expected.count(name) && reported.insert(name).second) unexpected.push_back(name);
  if (!strict) missing.clear(), unexpected.clear();
  if (missing.empty() && unexpected.empty() && misshaped.empty()) return "";
  std::ostringstream os;
  os << "the state dict does not match the model";
  if (!missing.empty()) os << "\n  missing keys (" << missing.size() << "): " << join_limited(missing, max_listed);
  if (!unexpected.empty())
    os << "\n  unexpected keys (" << unexpected.size() << "): " << join_limited(unexpected, max_listed);
  if (!misshaped.empty())
    os << "\n  mis-shaped keys (" << misshaped.size() << "): " << join_limited(misshaped, max_listed);
  return os.str();
}

namespace {
// An int8 weight (i8 codes that mean something only with their scales) loads from int8 codes alone,
// and int8 codes load into nothing else: a dtype conversion either way would be silently wrong.
template <class Key>
void check_int8_dtypes(const std::vector<std::pair<std::string, DType>>& src, const Key& key,
                       const io::TensorList& mine) {
  std::map<std::string, DType> dst;
  for (const auto& [name, t] : mine) dst.emplace(name, t.dtype());
  for (const auto& [name, dt] : src) {
    const std::optional<std::string> k = key(name);
    auto it = k ? dst.find(*k) : dst.end();
    if (it == dst.end() || (it->second == DType::i8) == (dt == DType::i8)) continue;
    fail("load_state_dict: ", *k, " is ", dtype_name(it->second), " in the model and ", dtype_name(dt),
         " in the state dict; int8 weights load only from int8 weights (quantize the model's weights with "
         "nn::quantize_linear_weights_int8, or load an int8 checkpoint into a model made int8 with "
         "nn::make_linear_weights_int8)");
  }
}
}  // namespace

void Module::load_state_dict(StateSource from, const LoadOptions& o) {
  // The module key of a source key (nullopt: left out).
  auto key = [&](const std::string& name) { return o.key ? o.key(name) : std::optional<std::string>(name); };
  // Every key and shape first (a file's from its header): nothing is copied or read before they match.
  ShapeList shapes;
  std::vector<std::pair<std::string, DType>> dtypes;
  if (from.file_) {
    for (const io::SafetensorsEntry& e : from.file_->entries()) {
      if (auto k = key(e.name)) shapes.emplace_back(std::move(*k), e.shape);
      dtypes.emplace_back(e.name, e.dtype);
    }
  } else {
    for (const auto& [name, t] : from.list_ ? *from.list_ : *from.given_) {
      if (auto k = key(name)) shapes.emplace_back(std::move(*k), t.defined() ? std::optional<Shape>(t.shape()) : std::nullopt);
      if (t.defined()) dtypes.emplace_back(name, t.dtype());
    }
  }
  const std::string why = shape_mismatch(shapes, o.strict);
  if (!why.empty() && from.file_) fail("load_state_dict: '", from.file_->path(), "': ", why);
  if (!why.empty()) fail("load_state_dict: ", why);
  check_int8_dtypes(dtypes, key, state_dict());
  NoGradGuard ng;
  if (from.list_) {
    // In the module's order, each from the first entry of its key.
    std::map<std::string, const Tensor*> given;
    for (const auto& [name, t] : *from.list_)
      if (auto k = key(name)) given.emplace(std::move(*k), &t);
    for (auto& [name, t] : state_dict()) {
      auto it = given.find(name);
      if (it != given.end()) t.copy_(*it->second);   // converts the dtype (a bf16 checkpoint into an f32 model)
    }
    return;
  }
  // In the source's order, the first entry of a repeated key copied, each source dropped as soon as it is.
  std::map<std::string, Tensor> mine;
  for (auto& [name, t] : state_dict()) mine.emplace(name, std::move(t));
  std::set<std::string> done;
  auto target = [&](const std::string& name) -> Tensor* {
    const std::optional<std::string> k = key(name);
    auto it = k ? mine.find(*k) : mine.end();
    return it != mine.end() && done.insert(*k).second ? &it->second : nullptr;   // null: not loaded (non-strict)
  };
  if (from.given_) {
    for (auto& [name, t] : *from.given_) {
      if (Tensor* dst = target(name)) dst->copy_(t);
      t = Tensor();   // dropped now, not when the whole list goes
    }
    return;
  }
  const io::SafetensorsReader& file = *from.file_;
  for (size_t i = 0; i < file.entries().size(); ++i) {
    Tensor* dst = target(file.entries()[i].name);
    if (!dst) continue;
    dst->copy_(file.read(i));   // converts the dtype; the f32 source is dropped at once
    // Its pages back to the OS: freed blocks stay cached and the heap keeps freed memory resident
    // otherwise (src/core/memory.cpp), and the next source tensor may be of another size.
    if (file.entries()[i].end - file.entries()[i].begin >= (uint64_t(1) << 20)) release_cached_memory();
  }
}

std::string Module::parameter_table() const {
  const auto params = named_parameters();
  size_t wn = 4, ws = 5, wc = 6;
  int64_t total = 0;
  std::vector<std::string> shapes;
  for (const auto& [name, t] : params) {
    shapes.push_back(shape_str(t.shape()));
    wn = std::max(wn, name.size());
    ws = std::max(ws, shapes.back().size());
    wc = std::max(wc, std::to_string(t.numel()).size());
    total += t.numel();
  }
  wc = std::max(wc, std::to_string(total).size());
  std::ostringstream os;
  os << std::left << std::setw(int(wn)) << "name" << "  " << std::setw(int(ws)) << "shape" << "  " << std::right
     << std::setw(int(wc)) << "params" << "\n";
  for (size_t i = 0; i < params.size(); ++i)
    os << std::left << std::setw(int(wn)) << params[i].first << "  " << std::setw(int(ws)) << shapes[i] << "  "
       << std::right << std::setw(int(wc)) << params[i].second.numel() << "\n";
  os << std::left << std::setw(int(wn)) << "total" << "  " << std::setw(int(ws)) << "" << "  " << std::right
     << std::setw(int(wc)) << total << "\n";
  return os.str();
}

}  // namespace attn::nn
