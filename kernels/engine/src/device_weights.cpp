// The engine's weights on the GPU (engine_impl.h). Three sources, one list (weights.h weight_specs):
//   random   each tensor filled on the GPU with normal(0, initializer_range) from a seed of its own
//            (kernels/common/random.h), norms 1, biases 0 (Hugging Face's init); a 7B model in seconds;
//   folder   each tensor of a Hugging Face checkpoint converted to bf16 on the host and copied up;
//   host     HostWeights (random_host_weights with `perturb`, for tests).
// q/k/v and gate/up are stacked into one matrix each (one GEMM per pair). A quantized format packs the
// stacked float matrix on the host (kernels/gemm/quant.h), in row blocks across threads: for random
// weights the floats come from the same seeds as the bf16 engine's, so the int4 engine holds the
// quantized version of the bf16 engine's weights.
#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include "engine_impl.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/random.h"
#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

uint64_t tensor_seed(uint64_t seed, std::size_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + index + 1;  // splitmix64 of (seed, index)
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Where a tensor's values come from: fills `out` with the spec's elements as floats (a quantized format
// needs them) or `bits` with its bf16 bits (the dense path), or fills device memory directly.
class Source {
 public:
  virtual ~Source() = default;
  virtual void floats(std::size_t index, const WeightSpec& s, std::vector<float>& out) = 0;
  virtual void bf16_to_device(std::size_t index, const WeightSpec& s, uint16_t* dst, cudaStream_t st) = 0;
};

class RandomSource : public Source {
 public:
  RandomSource(uint64_t seed, double sd) : seed_(seed), sd_(float(sd)) {}
  void floats(std::size_t index, const WeightSpec& s, std::vector<float>& out) override {
    out.assign(std::size_t(s.elements()), 0.f);
    if (s.kind == WeightKind::norm) {
      std::fill(out.begin(), out.end(), 1.f);
      return;
    }
    if (s.kind == WeightKind::bias) return;
    DeviceBuffer<float> tmp(out.size());
    fill_normal(tmp.get(), s.elements(), DType::fp32, tensor_seed(seed_, index), sd_, nullptr);
    out = tmp.download();
  }
  void bf16_to_device(std::size_t index, const WeightSpec& s, uint16_t* dst, cudaStream_t st) override {
    if (s.kind == WeightKind::norm || s.kind == WeightKind::bias) {
      const std::vector<uint16_t> v(std::size_t(s.elements()), s.kind == WeightKind::norm ? bf16_bits(1.f) : 0);
      INFERLAB_CUDA_CHECK(cudaMemcpyAsync(dst, v.data(), v.size() * 2, cudaMemcpyHostToDevice, st));
      INFERLAB_CUDA_CHECK(cudaStreamSynchronize(st));
      return;
    }
    fill_normal(dst, s.elements(), DType::bf16, tensor_seed(seed_, index), sd_, st);
  }

 private:
  uint64_t seed_;
  float sd_;
};

// Host floats (a folder's tensors converted, or HostWeights).
class HostSource : public Source {
 public:
  explicit HostSource(std::function<std::vector<float>(const WeightSpec&)> get) : get_(std::move(get)) {}
  void floats(std::size_t, const WeightSpec& s, std::vector<float>& out) override { out = get_(s); }
  void bf16_to_device(std::size_t, const WeightSpec& s, uint16_t* dst, cudaStream_t st) override {
    const std::vector<float> f = get_(s);
    std::vector<uint16_t> b(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) b[i] = bf16_bits(f[i]);
    INFERLAB_CUDA_CHECK(cudaMemcpyAsync(dst, b.data(), b.size() * 2, cudaMemcpyHostToDevice, st));
    INFERLAB_CUDA_CHECK(cudaStreamSynchronize(st));
  }

 private:
  std::function<std::vector<float>(const WeightSpec&)> get_;
};

// A folder: bf16 tensors are copied as they are (no float round trip).
class FolderSource : public HostSource {
 public:
  explicit FolderSource(const SafetensorsFolder& f)
      : HostSource([&f](const WeightSpec& s) { return to_floats(f.get(s.name)); }), folder_(f) {}
  void bf16_to_device(std::size_t, const WeightSpec& s, uint16_t* dst, cudaStream_t st) override {
    const std::vector<uint16_t> b = to_bf16_bits(folder_.get(s.name));
    INFERLAB_CUDA_CHECK(cudaMemcpyAsync(dst, b.data(), b.size() * 2, cudaMemcpyHostToDevice, st));
    INFERLAB_CUDA_CHECK(cudaStreamSynchronize(st));
  }

 private:
  const SafetensorsFolder& folder_;
};

// pack_weight over row blocks of 16-row multiples in parallel, then the pieces put together in the
// layouts of quant.h (values and 2:4 metadata are ordered by row tile; int8's scales by row; int4's
// scales are [k/128][n], interleaved).
PackedWeight pack_parallel(const std::vector<float>& w, int64_t n, int64_t k, WeightFormat f) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), n / 256));
  if (threads == 1 || f == WeightFormat::fp8) return pack_weight(w, n, k, f);  // fp8: one scale per tensor
  const int64_t tiles = n / 16, per = (tiles + threads - 1) / threads;
  std::vector<PackedWeight> parts(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const int64_t r0 = std::min(tiles, t * per) * 16, r1 = std::min(tiles, (t + 1) * per) * 16;
      if (r1 <= r0) return;
      std::vector<float> block(w.begin() + r0 * k, w.begin() + r1 * k);
      parts[std::size_t(t)] = pack_weight(block, r1 - r0, k, f);
    });
  for (auto& th : pool) th.join();
  PackedWeight out;
  out.format = f, out.n = n, out.k = k;
  for (const auto& p : parts) {
    out.values.insert(out.values.end(), p.values.begin(), p.values.end());
    out.metadata.insert(out.metadata.end(), p.metadata.begin(), p.metadata.end());
    if (f != WeightFormat::int4) out.scales.insert(out.scales.end(), p.scales.begin(), p.scales.end());
  }
  if (f == WeightFormat::int4) {
    const int64_t groups = k / kInt4GroupSize;
    out.scales.resize(std::size_t(groups * n * 4));
    int64_t row0 = 0;
    for (const auto& p : parts) {
      for (int64_t g = 0; g < groups && p.n > 0; ++g)
        std::memcpy(&out.scales[std::size_t((g * n + row0) * 4)], &p.scales[std::size_t(g * p.n * 4)], std::size_t(p.n * 4));
      row0 += p.n;
    }
  }
  return out;
}

template <class T>
DeviceBuffer<T> device_of(const std::vector<T>& v) {
  return v.empty() ? DeviceBuffer<T>() : DeviceBuffer<T>(v);
}

// One tensor a device holds: its index in the full model's list (the random seeds), its full spec and
// the part of it held (weights.h shard_slice).
struct Held {
  std::size_t index = 0;
  const WeightSpec* spec = nullptr;
  TensorSlice slice;
};

// The held part's bf16 bits into dst (slice.elements() values): the whole tensor goes up first and the
// part is cut on the device (a row range, or a column range by a strided copy); padding rows are zero.
void held_to_device(Source& src, const Held& h, uint16_t* dst, cudaStream_t st) {
  const TensorSlice& t = h.slice;
  if (t.cut == TensorSlice::Cut::whole) {
    src.bf16_to_device(h.index, *h.spec, dst, st);
    return;
  }
  DeviceBuffer<uint16_t> full(std::size_t(h.spec->elements()));
  src.bf16_to_device(h.index, *h.spec, full.get(), st);
  const int64_t cols = h.spec->shape.size() > 1 ? h.spec->shape[1] : 1;
  if (t.cut == TensorSlice::Cut::rows) {
    INFERLAB_CUDA_CHECK(cudaMemsetAsync(dst, 0, std::size_t(t.elements()) * 2, st));
    INFERLAB_CUDA_CHECK(cudaMemcpyAsync(dst, full.get() + t.offset * cols, std::size_t(t.count * cols) * 2,
                                        cudaMemcpyDeviceToDevice, st));
  } else {
    INFERLAB_CUDA_CHECK(cudaMemcpy2DAsync(dst, std::size_t(t.count) * 2, full.get() + t.offset, std::size_t(cols) * 2,
                                          std::size_t(t.count) * 2, std::size_t(h.spec->shape[0]),
                                          cudaMemcpyDeviceToDevice, st));
  }
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(st));
}

// A stacked linear weight (q|k|v or gate|up, or a single matrix) from its parts' held slices.
LinearWeight make_linear(Source& src, const std::vector<Held>& parts, std::optional<WeightFormat> format, cudaStream_t st) {
  LinearWeight lw;
  lw.k = parts[0].slice.shape[1];
  for (const auto& p : parts) lw.n += p.slice.shape[0];
  lw.format = format.value_or(WeightFormat::bf16);
  if (lw.format == WeightFormat::bf16) {
    lw.values = DeviceBuffer<uint8_t>(std::size_t(lw.n * lw.k * 2));
    auto* dst = reinterpret_cast<uint16_t*>(lw.values.get());
    for (const auto& p : parts) {
      held_to_device(src, p, dst, st);
      dst += p.slice.elements();
    }
    return lw;
  }
  std::vector<float> all, part;
  all.reserve(std::size_t(lw.n * lw.k));
  for (const auto& p : parts) {
    src.floats(p.index, *p.spec, part);
    part = slice_values(part, *p.spec, p.slice);
    for (float& v : part) v = round_bf16(v);  // the bf16 checkpoint's values are what gets quantized
    all.insert(all.end(), part.begin(), part.end());
  }
  const PackedWeight pw = pack_parallel(all, lw.n, lw.k, lw.format);
  lw.values = device_of(pw.values);
  lw.scales = device_of(pw.scales);
  lw.metadata = device_of(pw.metadata);
  return lw;
}

DeviceBuffer<uint16_t> make_vector(Source& src, const Held& h, cudaStream_t st) {
  DeviceBuffer<uint16_t> b(std::size_t(h.slice.elements()));
  held_to_device(src, h, b.get(), st);
  return b;
}

}  // namespace

std::size_t planned_weight_bytes(const ModelConfig& m, const ArchConfig& a, std::optional<WeightFormat> f, bool embedding,
                                 bool head) {
  double bytes = 0;
  const WeightFormat lf = f.value_or(WeightFormat::bf16);
  for (const auto& s : weight_specs(m, a)) {
    if (s.kind == WeightKind::linear) continue;
    if (s.kind == WeightKind::embedding && !embedding) continue;
    if ((s.kind == WeightKind::lm_head || s.name == "model.norm.weight") && !head) continue;
    bytes += 2.0 * double(s.elements());
  }
  const double q = double(m.q_dim()), kv = double(m.kv_dim());
  bytes += double(m.layers) * (weight_format_bytes(lf, int64_t(q + 2 * kv), m.hidden).total() +
                               weight_format_bytes(lf, m.hidden, int64_t(q)).total() +
                               weight_format_bytes(lf, 2 * m.intermediate, m.hidden).total() +
                               weight_format_bytes(lf, m.hidden, m.intermediate).total());
  return std::size_t(bytes);
}

DeviceWeights load_device_weights(const EngineModel& em, const EngineOptions& o, cudaStream_t st) {
  const ModelConfig& m = em.model;
  const std::vector<WeightSpec> specs = weight_specs(m, em.arch);
  std::unique_ptr<SafetensorsFolder> folder;
  std::unique_ptr<Source> src;
  HostWeights host;
  if (o.weights == "random") {
    if (o.perturb) {
      host = random_host_weights(m, em.arch, o.seed, true);
      src = std::make_unique<HostSource>([&host](const WeightSpec& s) { return host.at(s.name); });
    } else {
      src = std::make_unique<RandomSource>(o.seed, em.arch.initializer_range);
    }
  } else {
    folder = std::make_unique<SafetensorsFolder>(o.weights);
    check_checkpoint(*folder, m, em.arch);
    src = std::make_unique<FolderSource>(*folder);
  }
  if (o.weight_format && *o.weight_format != WeightFormat::bf16) {
    const WeightFormat f = *o.weight_format;
    if (f != WeightFormat::int4 && f != WeightFormat::int8 && f != WeightFormat::sparse24)
      throw Error("engine: weight format " + weight_format_name(f) +
                  " is not run by the engine (bf16, int8, int4, sparse24: fp8 would need fp8 activations)");
    const ModelConfig held_model = shard_config(m, o.parallel.shard);
    for (int64_t k : {held_model.hidden, held_model.q_dim(), held_model.intermediate})
      if (k % 128 != 0)
        throw Error("engine: weight format " + weight_format_name(f) + " needs every linear layer's input width to be a " +
                    "multiple of 128 (the weight-only kernels' k tile); this model (or its shard) has " + std::to_string(k));
  }
  const WeightShard& shard = o.parallel.shard;
  const ModelConfig local = shard_config(m, shard);
  const int64_t first_layer = shard_first_layer(m, shard);
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < specs.size(); ++i) index[specs[i].name] = i;
  auto held = [&](const std::string& name) {
    const std::size_t i = index.at(name);
    const std::optional<TensorSlice> t = shard_slice(specs[i], m, shard);
    if (!t) throw Error("engine: the shard does not hold '" + name + "'");  // callers ask only for held tensors
    return Held{i, &specs[i], *t};
  };
  DeviceWeights w;
  const bool embedding = shard.first() || (m.tied_embeddings && shard.last());
  if (embedding) w.embed = make_vector(*src, held("model.embed_tokens.weight"), st);
  if (shard.last()) {
    w.final_norm = make_vector(*src, held("model.norm.weight"), st);
    if (!m.tied_embeddings) w.lm_head = make_vector(*src, held("lm_head.weight"), st);
  }
  for (int64_t l = first_layer; l < first_layer + local.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights lw;
    lw.attn_norm = make_vector(*src, held(p + "input_layernorm.weight"), st);
    lw.ffn_norm = make_vector(*src, held(p + "post_attention_layernorm.weight"), st);
    if (em.arch.qkv_bias) {
      lw.qkv_bias = DeviceBuffer<uint16_t>(std::size_t(local.q_dim() + 2 * local.kv_dim()));
      uint16_t* dst = lw.qkv_bias.get();
      for (const char* b : {"q_proj.bias", "k_proj.bias", "v_proj.bias"}) {
        const Held h = held(p + "self_attn." + b);
        held_to_device(*src, h, dst, st);
        dst += h.slice.elements();
      }
    }
    lw.qkv = make_linear(*src, {held(p + "self_attn.q_proj.weight"), held(p + "self_attn.k_proj.weight"),
                                held(p + "self_attn.v_proj.weight")},
                         o.weight_format, st);
    lw.o = make_linear(*src, {held(p + "self_attn.o_proj.weight")}, o.weight_format, st);
    lw.gate_up = make_linear(*src, {held(p + "mlp.gate_proj.weight"), held(p + "mlp.up_proj.weight")}, o.weight_format, st);
    lw.down = make_linear(*src, {held(p + "mlp.down_proj.weight")}, o.weight_format, st);
    w.layers.push_back(std::move(lw));
  }
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(st));
  w.bytes = w.embed.bytes() + w.final_norm.bytes() + w.lm_head.bytes();
  for (const auto& l : w.layers)
    w.bytes += l.attn_norm.bytes() + l.ffn_norm.bytes() + l.qkv_bias.bytes() + l.qkv.bytes() + l.o.bytes() +
               l.gate_up.bytes() + l.down.bytes();
  return w;
}

namespace {
std::vector<float> bf16_floats(const uint16_t* d, std::size_t n) {
  std::vector<uint16_t> b(n);
  INFERLAB_CUDA_CHECK(cudaMemcpy(b.data(), d, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = bf16_value(b[i]);
  return f;
}

std::vector<float> linear_floats(const LinearWeight& lw) {
  if (lw.format == WeightFormat::bf16) return bf16_floats(reinterpret_cast<const uint16_t*>(lw.values.get()), std::size_t(lw.n * lw.k));
  PackedWeight pw;
  pw.format = lw.format, pw.n = lw.n, pw.k = lw.k;
  pw.values = lw.values.download();
  pw.scales = lw.scales.download();
  pw.metadata = lw.metadata.download();
  return unpack_weight(pw);
}

// Splits a stacked matrix back into its parts (rows).
void unstack(HostWeights& out, const std::vector<float>& all, int64_t k, const std::vector<std::pair<std::string, int64_t>>& parts) {
  std::size_t at = 0;
  for (const auto& [name, rows] : parts) {
    out[name] = std::vector<float>(all.begin() + long(at), all.begin() + long(at + std::size_t(rows * k)));
    at += std::size_t(rows * k);
  }
}
}  // namespace

HostWeights download_device_weights(const EngineModel& em, const EngineOptions& o, const DeviceWeights& w) {
  if (!o.parallel.shard.whole())
    throw Error("engine: download_weights of a sharded engine (it holds a slice of " + em.model.name +
                "; weights.h shard_host_weights gives the same slice of host weights)");
  const ModelConfig& m = em.model;
  HostWeights out;
  out["model.embed_tokens.weight"] = bf16_floats(w.embed.get(), w.embed.size());
  out["model.norm.weight"] = bf16_floats(w.final_norm.get(), w.final_norm.size());
  if (!m.tied_embeddings) out["lm_head.weight"] = bf16_floats(w.lm_head.get(), w.lm_head.size());
  for (int l = 0; l < int(m.layers); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const LayerWeights& lw = w.layers[std::size_t(l)];
    out[p + "input_layernorm.weight"] = bf16_floats(lw.attn_norm.get(), lw.attn_norm.size());
    out[p + "post_attention_layernorm.weight"] = bf16_floats(lw.ffn_norm.get(), lw.ffn_norm.size());
    if (em.arch.qkv_bias)
      unstack(out, bf16_floats(lw.qkv_bias.get(), lw.qkv_bias.size()), 1,
              {{p + "self_attn.q_proj.bias", m.q_dim()}, {p + "self_attn.k_proj.bias", m.kv_dim()},
               {p + "self_attn.v_proj.bias", m.kv_dim()}});
    unstack(out, linear_floats(lw.qkv), m.hidden,
            {{p + "self_attn.q_proj.weight", m.q_dim()}, {p + "self_attn.k_proj.weight", m.kv_dim()},
             {p + "self_attn.v_proj.weight", m.kv_dim()}});
    out[p + "self_attn.o_proj.weight"] = linear_floats(lw.o);
    unstack(out, linear_floats(lw.gate_up), m.hidden,
            {{p + "mlp.gate_proj.weight", m.intermediate}, {p + "mlp.up_proj.weight", m.intermediate}});
    out[p + "mlp.down_proj.weight"] = linear_floats(lw.down);
  }
  return out;
}

}  // namespace inferlab
