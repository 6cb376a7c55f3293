#pragma once
// Internal to sim/: the builder the cost functions (ops.cpp, linear.cpp) list an operator's tensor
// traffic and FLOPs with, and the size check they share.
#include <cstdint>
#include <string>
#include <utility>

#include "inferlab/sim/error.h"
#include "inferlab/sim/ops.h"

namespace inferlab::detail {

struct OpBuilder {
  Op op;
  OpBuilder(std::string name, OpClass c, int64_t count) {
    op.name = std::move(name);
    op.op_class = c;
    op.count = count;
  }
  OpBuilder& read(std::string t, TensorRole r, double bytes) {
    op.traffic.push_back({std::move(t), r, false, bytes});
    return *this;
  }
  OpBuilder& write(std::string t, TensorRole r, double bytes) {
    op.traffic.push_back({std::move(t), r, true, bytes});
    return *this;
  }
  OpBuilder& matmul(double flops, DType t) {
    op.flops = flops;
    op.tensor_core = true;
    op.compute_dtype = t;
    return *this;
  }
  OpBuilder& vector(double flops) {
    op.flops = flops;
    op.tensor_core = false;
    op.compute_dtype = DType::fp32;
    return *this;
  }
  OpBuilder& scope(OpScope s) {
    op.scope = s;
    return *this;
  }
  OpBuilder& variant(std::string v) {
    op.variant = std::move(v);
    return *this;
  }
};

// A linear layer's traffic and FLOPs (sim/linear.h, the one place they are counted): `rows`
// tokens x k inputs read in `act` (fp8 for the fp8 format, with its scale), `copies` weights of
// n x k in format f (tensor `weight`, its scales and indices as `weight`_scales... entries), rows x n
// outputs written in `act`; the matmul runs in the input type.
void add_linear(OpBuilder& ob, WeightFormat f, DType act, double rows, int64_t n, int64_t k, double copies,
                const std::string& weight);

inline void check_positive(int64_t v, const char* what) {
  if (v <= 0) throw Error(std::string(what) + " must be positive, got " + std::to_string(v));
}

}  // namespace inferlab::detail
