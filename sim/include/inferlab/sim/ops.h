#pragma once
// The operator graph of one forward step of a decoder-only transformer, with the cost of each
// operator: FLOPs and the bytes of every tensor it reads or writes. This is the ONE place where
// FLOPs and bytes are computed: the roofline, the memory model, the experiment rows, the kernels'
// benchmarks and the plots all take their numbers from here.
//
// A step runs `new_tokens` tokens for each of `batch` sequences that already hold `past_tokens`
// tokens of KV cache:
//   prefill(b, s):  new = s, past = 0          decode(b, c): new = 1, past = c - 1
// (chunked prefill is new = chunk, past = tokens done). A serving engine's iteration mixes shapes:
// some sequences prefill a chunk while others decode one token; batch_ops costs such a Batch as ONE
// forward pass (see Batch below). Per layer, unfused, in launch order:
//   attn_norm, qkv_proj, rope, kv_cache_write, attention, o_proj, attn_residual,
//   ffn_norm, gate_up_proj (up_proj for two-matrix MLPs), act, down_proj, ffn_residual
// and once per step: embedding (before the layers), final_norm and lm_head (logits for each
// sequence's last token only, as serving engines compute them). Layers that differ get an op each
// kind (count = the layers of that kind):
//   - sliding window: `attention` (global layers) and `attention_window` when a model mixes both
//     (Gemma-2); Mistral, windowed everywhere, has one `attention`;
//   - MoE layers add `router`, their MLP ops (variant moe) cover the experts the tokens reach, and a
//     shared expert adds shared_gate_up_proj, shared_act, shared_down_proj (, shared_gate); a model
//     with dense and MoE layers (DeepSeek's first layers) has the dense MLP ops beside them;
//   - Gemma-2 adds attn_post_norm and ffn_post_norm (norms after attention and MLP);
//   - multi-head latent attention (DeepSeek-V2/V3, sim/src/mla.cpp) replaces qkv_proj by q_a_proj,
//     q_a_norm, q_b_proj (or q_proj), kv_a_proj, kv_a_norm; rope and kv_cache_write act on the
//     latent; its `attention` op (variant mla-absorbed / mla-expanded) includes the latent's
//     up-projections (W_UK/W_UV absorbed into the query and output, or kv_b_proj rebuilding K and V).
// Not counted: the tanh of logit soft-capping (Gemma-2) and the softmax's exponentials, which run
// on the special-function units the roofline does not model.
//
// Attention variants differ in bytes (and, under a causal mask, in FLOPs):
//   flash: Q read once, K and V read once (past tokens from the KV cache in the KV dtype, new tokens
//          from the QKV activation), O written once, the log-sum-exp (fp32) written; only the
//          (query, key) pairs the mask keeps are computed.
//   naive: S = Q K^T materialized in HBM (written by the QK^T GEMM, read and P written by the
//          softmax, P read by the PV GEMM: 4 passes of b*h*new*keys elements in the activation
//          dtype); the GEMMs compute the full new x keys rectangle whatever the mask; 3 launches.
// MHA, GQA and MQA differ through kv_heads: K/V bytes scale with kv_heads, FLOPs with heads.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/sim/dtype.h"
#include "inferlab/sim/kernels.h"
#include "inferlab/sim/model.h"

namespace inferlab {

enum class Phase { prefill, decode };
enum class AttentionVariant { naive, flash };
enum class OpClass { gemm, attention, elementwise, memory };
enum class TensorRole { weight, activation, kv_cache, scores };
// Where an op sits in the network: once before the layers (embedding), in every layer (count =
// layers), or once after them (final_norm, lm_head). Pipeline stages hold a range of layers; the
// first stage also runs the ops before, the last those after (sim/parallel.h).
enum class OpScope { before_layers, layer, after_layers };

// Logits are produced in fp32 for sampling (lm_head output, and what tensor parallelism gathers).
inline constexpr double kLogitBytes = 4;

std::string phase_name(Phase p);
Phase parse_phase(const std::string& s);
std::string attention_variant_name(AttentionVariant v);
AttentionVariant parse_attention_variant(const std::string& s);
std::string op_class_name(OpClass c);
std::string tensor_role_name(TensorRole r);

struct Traffic {
  std::string tensor;  // "W_qkv", "x", "k_cache", "S", ...
  TensorRole role;
  bool write;
  double bytes;        // per launch of the op
};

struct Op {
  std::string name;        // "qkv_proj"
  OpClass op_class = OpClass::elementwise;
  std::string variant;     // attention: "flash"/"naive"; MoE MLP: "moe"; else empty
  int64_t count = 1;       // instances per step (the layer count for per-layer ops)
  int launches = 1;        // kernel launches per instance
  OpScope scope = OpScope::layer;
  double flops = 0;        // per instance; matmul FLOPs count 2 per multiply-add
  bool tensor_core = false;  // flops run as matrix products in compute_dtype (else FP32 vector units)
  DType compute_dtype = DType::fp32;
  std::vector<Traffic> traffic;  // per instance
  // The kernel launches of one instance as the lab's kernel variant runs it (sim/kernels.h): when
  // present, predict() uses the refined model (per-pipe ceilings, grid, composition, floors).
  std::vector<KernelLaunch> kernels;

  double bytes() const;
  double bytes(TensorRole role) const;
  double ai() const;  // FLOP per byte of HBM traffic; 0 when the op moves no bytes
  double total_flops() const { return flops * double(count); }
  double total_bytes() const { return bytes() * double(count); }
};

struct Precision {
  DType weight = DType::fp16;
  DType act = DType::fp16;
  DType kv = DType::fp16;
};

struct Step {
  Phase phase = Phase::decode;
  int64_t batch = 1;
  int64_t new_tokens = 1;
  int64_t past_tokens = 0;
  int64_t tokens() const { return batch * new_tokens; }
  int64_t context() const { return past_tokens + new_tokens; }
};
// Throw inferlab::Error on non-positive sizes.
Step prefill_step(int64_t batch, int64_t prompt_tokens);
Step decode_step(int64_t batch, int64_t context_tokens);  // attends over context tokens (the new one included)
Step make_step(Phase phase, int64_t batch, int64_t context_tokens);

enum class WeightFormat;  // sim/linear.h

struct OpOptions {
  Precision precision;
  AttentionVariant attention = AttentionVariant::flash;
  bool causal = true;
  // The weights of the layer GEMMs (qkv_proj, o_proj, gate_up/up_proj, down_proj; not the router,
  // the embedding or lm_head) stored in this format, costed as sim/linear.h counts it; none: dense
  // in precision.weight.
  std::optional<WeightFormat> weight_format;
};

// (query, key) pairs one head of one sequence computes when `new_tokens` queries follow `past`
// cached tokens: causal query i sees past + i + 1 keys (at most `window`), non-causal all of them.
double attention_pairs(int64_t new_tokens, int64_t past, bool causal, std::optional<int64_t> window);
// Distinct keys one sequence's queries touch (the K/V rows read once).
int64_t attention_keys(int64_t new_tokens, int64_t past, std::optional<int64_t> window);
// Expected number of distinct experts that `routed` token-slots reach when each picks uniformly.
double expected_experts_touched(int64_t experts, int64_t top_k, int64_t tokens);

std::vector<Op> step_ops(const ModelConfig& model, const Step& step, const OpOptions& options);

// One forward pass over a heterogeneous batch, as a serving engine runs an iteration: each entry is
// `count` sequences that bring `new_tokens` tokens (a prompt chunk, or 1 when decoding) after
// `past_tokens` tokens already in their KV cache. Counted as one pass, not a sum of steps:
//   - every weight is read once; the GEMMs run over all the batch's tokens (sum of new tokens);
//   - attention is one launch per layer in which each sequence attends over its own context (its
//     FLOPs, K/V reads and outputs are summed over the sequences, no padding), costed as ONE
//     roofline term: the compute of prefill chunks overlaps the KV reads of decodes, as in a fused
//     variable-length kernel (FlashInfer, vLLM's unified attention); separate prefill and decode
//     kernels would take the sum of the two terms instead;
//   - logits (final_norm, lm_head) for `logits` positions of each sequence: 1 for a decode or the
//     chunk that completes a prompt, 0 for an earlier chunk of it, every new token when a target
//     model verifies drafted tokens (speculative decoding); no lm_head at all when no row needs one.
// A paged cache (kv_block_size > 0) adds the block-table reads of attention.
// Not counted: padding, the sampler itself, and the host-side scheduling between iterations.
struct SequenceWork {
  int64_t new_tokens = 1;
  int64_t past_tokens = 0;
  int64_t count = 1;
  int64_t logits = 1;  // positions whose logits are computed (0 .. new_tokens)
};
struct Batch {
  std::vector<SequenceWork> sequences;
  int64_t kv_block_size = 0;  // tokens per KV block of a paged cache; 0: contiguous
  int64_t tokens() const;     // new tokens of the pass
  int64_t logit_rows() const; // positions whose logits are computed
  static Batch of(const Step& step);  // `batch` sequences of the step's shape, logits of each last token
};
// Throws inferlab::Error on an empty batch or non-positive sizes. step_ops(m, s, o) is
// batch_ops(m, Batch::of(s), o).
std::vector<Op> batch_ops(const ModelConfig& model, const Batch& batch, const OpOptions& options);
// The attention ops of batch_ops alone (one per kind of layer, see above): what varies from one
// iteration to the next.
std::vector<Op> batch_attention_ops(const ModelConfig& model, const Batch& batch, const OpOptions& options);
// The one attention op of a model whose layers all attend alike (throws inferlab::Error otherwise).
Op batch_attention_op(const ModelConfig& model, const Batch& batch, const OpOptions& options);

// Medusa-1 draft heads (Cai et al. 2024) on `rows` hidden states (one per sequence): each head is a
// residual block (a hidden x hidden GEMM, SiLU, the residual add) and its own lm_head (hidden x
// vocab); count = heads. They run after the target's last layer, in the same pass.
std::vector<Op> medusa_head_ops(const ModelConfig& model, int64_t heads, int64_t rows, const OpOptions& options);
double medusa_head_params(const ModelConfig& model);  // one head

// The attention core of one layer as a bare shape: what kernels/attention computes, and what its
// benchmarks and experiments charge it with. `new_tokens` queries per sequence follow `past_tokens`
// cached keys (prefill: past 0; decode: new 1). K/V of past tokens are read in the KV dtype, those
// of the new tokens in the activation dtype.
struct AttentionShape {
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 128;
  int64_t new_tokens = 1, past_tokens = 0;
  bool causal = true;
  std::optional<int64_t> window;
  // Decode kernels (kernels/attention/decode.h): a paged cache adds the block-table reads
  // (4 bytes per block of every sequence); a context split into `splits` pieces adds the
  // pieces' partial outputs, written and read back in fp32 with their max and sum.
  int64_t block_size = 0;  // 0: contiguous cache
  int64_t splits = 1;
};
Op attention_cost(const AttentionShape& shape, AttentionVariant variant, DType act, DType kv);

// How many pieces the split (flash-decoding) kernel cuts each context into: enough for about one
// block per SM over `units` = batch x KV heads x head groups, at least 256 tokens a piece. The
// kernel (kernels/attention/decode.cu) and the model both use this one plan.
int64_t plan_decode_splits(int64_t units, int64_t max_context, int64_t sm_count);

// attention_cost for a model's layer (count = layers).
Op attention_op(const ModelConfig& model, const Step& step, const OpOptions& options);

}  // namespace inferlab
