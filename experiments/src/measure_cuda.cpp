// Measured columns for the scenarios with kernels. The cost that turns a time into FLOP/s and
// GB/s is the row's own (sim/ops.h), never a second formula.
#include <cmath>
#include <cstdlib>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/roofline/measure_attention.h"
#include "inferlab/roofline/measure_decode.h"
#include "inferlab/roofline/measure_linear.h"
#include "inferlab/sim/error.h"
#include "measurers.h"

namespace inferlab {
namespace {

// The GPU this process measures must be the hardware the row is predicted for.
void check_same_gpu(const Hardware& hw) {
  static const GpuInfo gpu = detect_gpu();
  if (!gpu.present) throw Error("measuring needs a GPU: " + gpu.reason);
  const std::string id = hardware_for_device(gpu.name);
  if (id != hw.id)
    throw Error("this GPU is " + gpu.name + " (" + (id.empty() ? std::string("no hardware file lists it") : id) +
                ") but the point predicts for " + hw.id + ": measure on that GPU, set hardware, or use --predict-only");
}

// The raw measurement; derive_measured (scenarios.cpp) computes the rest from it and the row's cost.
void fill_measured(Row& r, const Timing& t, const std::string& kernels) {
  set_cell(r, "measured_s", num(t.median_s));
  set_cell(r, "measured_p10_s", num(t.p10_s));
  set_cell(r, "measured_p90_s", num(t.p90_s));
  set_cell(r, "kernels", kernels);
  derive_measured(r);
}

}  // namespace

std::function<void(const Params&)> attention_preflight() {
  return [](const Params& p) {
    const AttentionPoint ap = evaluate_attention_point(p);
    check_same_gpu(ap.hardware);
    check_attention_fits(params_for(ap.shape, ap.dtype), ap.variant);
  };
}

std::function<void(const Params&, std::vector<Row>&)> attention_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    const AttentionPoint ap = evaluate_attention_point(p);
    const AttentionMeasurement m = measure_attention(params_for(ap.shape, ap.dtype), ap.variant);
    for (Row& r : rows) fill_measured(r, m.timing, m.kernels);
  };
}

namespace {
DecodeShape decode_shape(const DecodePoint& dp) {
  DecodeShape s;
  s.dtype = dp.dtype;
  s.batch = dp.shape.batch;
  s.heads = dp.shape.heads;
  s.kv_heads = dp.shape.kv_heads;
  s.head_dim = dp.shape.head_dim;
  s.context = dp.shape.past_tokens + 1;
  s.layout = parse_kv_layout(dp.layout);
  s.block_size = dp.layout == "paged" ? dp.shape.block_size : 16;
  return s;
}
}  // namespace

std::function<void(const Params&)> decode_preflight() {
  return [](const Params& p) {
    const DecodePoint dp = evaluate_decode_point(p);
    check_same_gpu(dp.hardware);
    check_decode_fits(decode_shape(dp), parse_decode_variant(dp.variant));
  };
}

std::function<void(const Params&, std::vector<Row>&)> decode_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    const DecodePoint dp = evaluate_decode_point(p);
    const DecodeMeasurement m = measure_decode(decode_shape(dp), parse_decode_variant(dp.variant));
    if (m.splits != dp.shape.splits)
      throw Error("the kernel used " + std::to_string(m.splits) + " pieces where the model planned " +
                  std::to_string(dp.shape.splits) + " (SM count of the hardware file differs from the GPU?)");
    for (Row& r : rows) fill_measured(r, m.timing, "");  // measured_kv_bytes_per_s: the row's K/V bytes / time
  };
}

std::function<void(const Params&)> linear_preflight() {
  return [](const Params& p) {
    const LinearPoint lp = evaluate_linear_point(p);
    check_same_gpu(lp.hardware);
    check_linear_supported(lp.shape, lp.format);
  };
}

std::function<void(const Params&, std::vector<Row>&)> linear_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    const LinearPoint lp = evaluate_linear_point(p);
    const LinearMeasurement m = measure_linear(lp.shape, lp.format);
    for (Row& r : rows) {
      set_cell(r, "measured_bf16_s", num(m.baseline.median_s));
      set_cell(r, "rel_error", num(m.rel_error));
      fill_measured(r, m.timing, "");
    }
  };
}

}  // namespace inferlab
