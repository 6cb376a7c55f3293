#pragma once
// Models or GPUs side by side (`inferlab compare`, inferlab.compare in Python): every model on every
// hardware at one batch and context, through the memory and model scenarios (the rows `memory` and
// `model` print): weights, KV cache per token, whether the batch fits and the largest batch that fits at
// the context, the prefill step (batch prompts of `context` tokens) and the decode step (batch sequences
// attending `context` tokens) with their tokens/s. One device per entry.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/spec.h"

namespace inferlab {

struct CompareEntry {
  std::string model, hardware;
  Params point;                 // the memory point's parameters, completed with their defaults
  Row memory, prefill, decode;  // the memory row and the two steps' total rows
};

// Every model on every hardware (at least two entries in all). `common` holds the parameters every entry
// shares (context, batch, dtype, kv_dtype, ceilings, kv_heads, ...): those that both the memory and the
// model scenario take. Anything else, or a bad value, throws inferlab::Error naming it.
std::vector<CompareEntry> compare_entries(const std::vector<std::string>& models, const std::vector<std::string>& hardware,
                                          const Params& common);

// The parameters compare takes: those both the memory and the model scenario take, but model, hardware, phase.
std::vector<std::string> compare_parameters();

// One row per entry: model, hardware, ceilings, batch, context, params, weights_bytes, kv_bytes_per_token,
// kv_cache_bytes, total_bytes, capacity_bytes, fits, max_batch, prefill_s, prefill_tokens_per_s,
// prefill_bound, decode_s, decode_tokens_per_s, decode_bound.
std::vector<Row> compare_rows(const std::vector<CompareEntry>& entries);

// The table for people: aligned text, or Markdown.
std::string compare_table(const std::vector<Row>& rows, bool markdown);

// The figure's plot entry (plots/plot.py grouped_bars, a panel per quantity) for these rows.
nlohmann::json compare_plot(const std::vector<Row>& rows);

}  // namespace inferlab
