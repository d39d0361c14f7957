// Model EMA (timm's ModelEmaV2 update rule; buffers copied); see attn/train/ema.h.
#include "attn/train/ema.h"

#include "attn/autograd/grad_mode.h"
#include "attn/nn/init.h"

namespace attn::train {
namespace {

void check_same(const std::vector<std::pair<std::string, Tensor>>& a, const std::vector<std::pair<std::string, Tensor>>& b,
                const char* what) {
  ATTN_CHECK(a.size() == b.size(), "model_ema: the EMA copy has ", a.size(), " ", what, ", the model ", b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ATTN_CHECK(a[i].first == b[i].first, "model_ema: ", what, " ", i, " is '", a[i].first, "' in the EMA copy but '",
               b[i].first, "' in the model");
    ATTN_CHECK(a[i].second.shape() == b[i].second.shape(), "model_ema: ", what, " '", a[i].first, "' has shape ",
               a[i].second.shape(), " in the EMA copy but ", b[i].second.shape(), " in the model");
  }
}

template <class T>
void ema_loop(T* e, const T* p, int64_t n, double decay) {
  const T d = T(decay), d1 = T(1.0 - decay);
  for (int64_t i = 0; i < n; ++i) e[i] = d * e[i] + d1 * p[i];
}

}  // namespace

ModelEma::ModelEma(std::shared_ptr<nn::Module> ema, const nn::Module& model, double decay) : ema_(std::move(ema)) {
  ATTN_CHECK(ema_ != nullptr, "model_ema: expected an EMA module, got null");
  set_decay(decay);
  set(model);
  ema_->eval();
}

ModelEma ModelEma::of(const models::Model& model, double decay) {
  const nlohmann::json cfg = model.config();
  ATTN_CHECK(cfg.contains("model"), "model_ema: the model's config has no \"model\" name: ", cfg.dump());
  // The copy's initial weights are overwritten from the model at once: do not draw them (which also
  // leaves the global random stream where it was).
  std::shared_ptr<models::Model> copy;
  {
    nn::init::SkipRandomInit skip;
    copy = models::create(cfg["model"].get<std::string>(), cfg);
  }
  return ModelEma(copy, model, decay);
}

std::shared_ptr<models::Model> ModelEma::model() const {
  auto m = std::dynamic_pointer_cast<models::Model>(ema_);
  ATTN_CHECK(m != nullptr, "model_ema: the EMA copy is not a registry model");
  return m;
}

std::shared_ptr<models::ImageClassifier> ModelEma::classifier() const {
  auto c = std::dynamic_pointer_cast<models::ImageClassifier>(ema_);
  ATTN_CHECK(c != nullptr, "model_ema: the EMA copy is not an image classifier");
  return c;
}

void ModelEma::set_decay(double d) {
  ATTN_CHECK(d >= 0.0 && d <= 1.0, "model_ema: expected decay in [0, 1], got ", d);
  decay_ = d;
}

void ModelEma::update(const nn::Module& model) { step(model, false); }
void ModelEma::set(const nn::Module& model) { step(model, true); }

void ModelEma::step(const nn::Module& model, bool copy_all) {
  NoGradGuard ng;
  const auto ep = ema_->named_parameters(), mp = model.named_parameters();
  const auto eb = ema_->named_buffers(), mb = model.named_buffers();
  check_same(ep, mp, "parameters");
  check_same(eb, mb, "buffers");
  for (size_t i = 0; i < ep.size(); ++i) {
    Tensor e = ep[i].second;
    const Tensor& p = mp[i].second;
    if (copy_all || !(e.dtype() == DType::f32 || e.dtype() == DType::f64) || e.dtype() != p.dtype() ||
        !e.is_contiguous()) {
      if (copy_all) {
        e.copy_(p);
        continue;
      }
      ATTN_CHECK(e.dtype() == p.dtype() && (e.dtype() == DType::f32 || e.dtype() == DType::f64) && e.is_contiguous(),
                 "model_ema: parameter '", ep[i].first, "' must be a contiguous f32 or f64 tensor of the model's dtype, got ",
                 dtype_name(e.dtype()), " (model: ", dtype_name(p.dtype()), ")");
    }
    Tensor pc = p.contiguous();
    if (e.dtype() == DType::f32)
      ema_loop(e.data<float>(), pc.data<float>(), e.numel(), decay_);
    else
      ema_loop(e.data<double>(), pc.data<double>(), e.numel(), decay_);
  }
  for (size_t i = 0; i < eb.size(); ++i) {
    Tensor e = eb[i].second;
    if (e.defined() && eb[i].second.numel() > 0) e.copy_(mb[i].second);
  }
}

}  // namespace attn::train
