// Writes the indices (into the 60,000-image training file) of attn's Fashion-MNIST training split,
// one per line, ascending: the 55,000 images `attn train` learns from (the other 5,000 are its fixed
// validation set; attn/data/fashion_mnist.h). The PyTorch peer (bench/peers/vit_fmnist_train.py
// --train-indices FILE) trains on exactly these images, so both sides see the same data.
//
//   build/bench/fmnist_split OUT.txt
#include <cstdio>
#include <fstream>

#include "attn/data/fashion_mnist.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fmnist_split OUT.txt\n");
    return 2;
  }
  std::ofstream out(argv[1]);
  if (!out) {
    std::fprintf(stderr, "fmnist_split: cannot write %s\n", argv[1]);
    return 1;
  }
  for (int64_t i : attn::data::FashionMnist::split_indices(attn::data::Split::train)) out << i << '\n';
  return out.good() ? 0 : 1;
}
