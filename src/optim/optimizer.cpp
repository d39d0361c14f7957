// optim::Optimizer: parameter groups, the step loop, state dicts; the weight-decay grouping rule.
#include "attn/optim/optimizer.h"

#include <set>

#include "attn/autograd/grad_mode.h"
#include "attn/core/profile.h"
#include "attn/nn/module.h"

namespace attn::optim {

const std::vector<std::string>& no_weight_decay_names() {
  static const std::vector<std::string> names = {"cls_token", "dist_token", "pos_embed", "position_embedding",
                                                 "relative_position_bias_table"};
  return names;
}

bool skip_weight_decay(const std::string& name, const Tensor& param) {
  if (param.dim() <= 1) return true;
  for (const auto& n : no_weight_decay_names())
    if (name.find(n) != std::string::npos) return true;
  return false;
}

std::vector<ParamGroup> param_groups_weight_decay(const nn::Module& module, double weight_decay) {
  ParamGroup no_decay, decay;
  no_decay.weight_decay = 0.0;
  decay.weight_decay = weight_decay;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.requires_grad()) continue;
    (skip_weight_decay(name, p) ? no_decay : decay).params.push_back(p);
  }
  return {no_decay, decay};
}

Optimizer::~Optimizer() = default;

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay,
                     const std::map<std::string, double>& defaults)
    : groups_(std::move(groups)) {
  std::set<const TensorImpl*> seen;
  size_t total = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& pg = groups_[g];
    if (std::isnan(pg.lr)) pg.lr = lr;
    if (std::isnan(pg.weight_decay)) pg.weight_decay = weight_decay;
    for (const auto& [k, v] : defaults) pg.options.emplace(k, v);
    for (const auto& [k, v] : pg.options)
      ATTN_CHECK(defaults.count(k), "optimizer: parameter group ", g, " has unknown option '", k, "'");
    ATTN_CHECK(pg.lr >= 0, "optimizer: expected lr >= 0, got ", pg.lr, " in parameter group ", g);
    ATTN_CHECK(pg.weight_decay >= 0, "optimizer: expected weight_decay >= 0, got ", pg.weight_decay,
               " in parameter group ", g);
    for (size_t i = 0; i < pg.params.size(); ++i) {
      const Tensor& p = pg.params[i];
      ATTN_CHECK(p.defined(), "optimizer: parameter ", i, " of group ", g, " is undefined");
      ATTN_CHECK(is_floating(p.dtype()), "optimizer: parameter ", i, " of group ", g,
                 " must be f32 or f64, got ", dtype_name(p.dtype()));
      ATTN_CHECK(p.is_leaf(), "optimizer: parameter ", i, " of group ", g, " is not a leaf tensor");
      ATTN_CHECK(p.is_contiguous(), "optimizer: parameter ", i, " of group ", g, " (shape ", p.shape(),
                 ") is not contiguous");
      ATTN_CHECK(seen.insert(p.impl_ptr().get()).second, "optimizer: parameter ", i, " of group ", g,
                 " appears in more than one place");
    }
    total += pg.params.size();
  }
  ATTN_CHECK(total > 0, "optimizer: got an empty parameter list");
  state_.resize(total);
}

void Optimizer::step() {
  ATTN_PROFILE("optimizer step");
  NoGradGuard ng;
  size_t idx = 0;
  for (const ParamGroup& pg : groups_) {
    for (Tensor p : pg.params) {
      auto& st = state_[idx++];
      Tensor g = p.grad();
      if (!g.defined()) continue;
      ATTN_CHECK(g.shape() == p.shape(), name(), ".step: gradient of shape ", g.shape(), " for a parameter of shape ",
                 p.shape());
      if (g.dtype() != p.dtype()) g = g.to(p.dtype());
      update(pg, p, g.contiguous(), st);
    }
  }
}

void Optimizer::zero_grad() {
  for (auto& pg : groups_)
    for (auto& p : pg.params) p.zero_grad();
}

void Optimizer::set_lr(double lr) {
  for (auto& pg : groups_) pg.lr = lr;
}

io::TensorList Optimizer::state_dict() const {
  io::TensorList out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& pg = groups_[g];
    const std::string pre = "param_groups." + std::to_string(g) + ".";
    out.emplace_back(pre + "num_params", Tensor::scalar(double(pg.params.size()), DType::i64));
    out.emplace_back(pre + "lr", Tensor::scalar(pg.lr, DType::f64));
    out.emplace_back(pre + "weight_decay", Tensor::scalar(pg.weight_decay, DType::f64));
    out.emplace_back(pre + "lr_scale", Tensor::scalar(pg.lr_scale, DType::f64));
    for (const auto& [k, v] : pg.options) out.emplace_back(pre + k, Tensor::scalar(v, DType::f64));
  }
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [k, t] : state_[i]) out.emplace_back("state." + std::to_string(i) + "." + k, t.detach());
  return out;
}

namespace {
// "a.12.rest" -> (12, "rest"); false when malformed.
bool split_index(const std::string& s, size_t& index, std::string& rest) {
  const size_t dot = s.find('.');
  if (dot == 0 || dot == std::string::npos || dot + 1 >= s.size()) return false;
  index = 0;
  for (size_t i = 0; i < dot; ++i) {
    if (s[i] < '0' || s[i] > '9' || index > 100000000) return false;
    index = index * 10 + size_t(s[i] - '0');
  }
  rest = s.substr(dot + 1);
  return true;
}
}  // namespace

void Optimizer::load_state_dict(const io::TensorList& sd) {
  const std::string op = std::string(name()) + ".load_state_dict";
  std::vector<const ParamGroup*> param_of;
  for (const auto& pg : groups_)
    for (size_t i = 0; i < pg.params.size(); ++i) param_of.push_back(&pg);
  std::vector<const Tensor*> params;
  for (const auto& pg : groups_)
    for (const auto& p : pg.params) params.push_back(&p);

  // Check everything first.
  std::vector<std::map<std::string, double>> hyper(groups_.size());
  std::vector<std::map<std::string, Tensor>> state(state_.size());
  std::set<size_t> groups_seen;
  for (const auto& [key, t] : sd) {
    size_t idx;
    std::string rest;
    ATTN_CHECK(t.defined(), op, ": key '", key, "' holds an undefined tensor");
    if (key.rfind("param_groups.", 0) == 0) {
      ATTN_CHECK(split_index(key.substr(13), idx, rest), op, ": malformed key '", key, "'");
      ATTN_CHECK(idx < groups_.size(), op, ": key '", key, "' is for parameter group ", idx, " but the optimizer has ",
                 groups_.size(), " groups");
      ATTN_CHECK(t.numel() == 1, op, ": key '", key, "' must hold one number, got shape ", t.shape());
      groups_seen.insert(idx);
      if (rest == "num_params") {
        ATTN_CHECK(size_t(t.item()) == groups_[idx].params.size(), op, ": parameter group ", idx, " has ",
                   groups_[idx].params.size(), " parameters but the state dict has ", int64_t(t.item()));
      } else if (rest == "lr" || rest == "weight_decay" || rest == "lr_scale" || groups_[idx].options.count(rest)) {
        hyper[idx][rest] = t.item();
      } else {
        fail(op, ": key '", key, "' names an option ", name(), " does not have");
      }
    } else if (key.rfind("state.", 0) == 0) {
      ATTN_CHECK(split_index(key.substr(6), idx, rest), op, ": malformed key '", key, "'");
      ATTN_CHECK(idx < params.size(), op, ": key '", key, "' is for parameter ", idx, " but the optimizer has ",
                 params.size(), " parameters");
      const Tensor& p = *params[idx];
      if (rest == "step") {
        ATTN_CHECK(t.numel() == 1, op, ": key '", key, "' must hold one number, got shape ", t.shape());
        state[idx][rest] = t.to(DType::f64).reshape({}).clone();
      } else {
        ATTN_CHECK(t.shape() == p.shape(), op, ": key '", key, "' has shape ", t.shape(), " but parameter ", idx,
                   " has shape ", p.shape());
        state[idx][rest] = t.to(p.dtype()).clone();
      }
    } else {
      fail(op, ": unexpected key '", key, "'");
    }
  }
  ATTN_CHECK(groups_seen.size() == groups_.size(), op, ": the state dict has ", groups_seen.size(),
             " parameter groups but the optimizer has ", groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    size_t expected = 3 + groups_[g].options.size();
    ATTN_CHECK(hyper[g].size() == expected, op, ": parameter group ", g, " has ", hyper[g].size(),
               " hyper-parameters in the state dict, expected ", expected);
  }
  // Apply.
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& pg = groups_[g];
    for (const auto& [k, v] : hyper[g]) {
      if (k == "lr") pg.lr = v;
      else if (k == "weight_decay") pg.weight_decay = v;
      else if (k == "lr_scale") pg.lr_scale = v;
      else pg.options[k] = v;
    }
  }
  state_ = std::move(state);
}

}  // namespace attn::optim
