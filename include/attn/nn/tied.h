// Tied tensors of a module's state dict: names that are the same tensor as an earlier name (weight
// tying: BERT's MLM decoder weight IS its word embeddings, a Transformer's output projection IS its
// target embedding). Defined with Module's state dict (src/nn/module.cpp).
//
//   for (const auto& [name, first] : nn::tied_names(model))   // {"cls.predictions.decoder.weight",
//     ...                                                     //  "bert.embeddings.word_embeddings.weight"}
//
// Module::load_state_dict and its mismatch reports accept a state dict that leaves a tied name out
// when its first name is there (loading the first name loads both), so train::save_checkpoint stores a
// tied tensor once.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace attn::nn {

class Module;

// (name, first name) for each state_dict() entry that is the same tensor (storage, offset, shape,
// strides) as an earlier entry, in state_dict() order.
std::vector<std::pair<std::string, std::string>> tied_names(const Module& m);

}  // namespace attn::nn
