#pragma once
// A sweep spread over processes or machines: `inferlab run SPEC --shard I/N` runs the points I, I+N,
// I+2N, ... of the spec into NAME.shard-I-of-N.{csv,json} (runner.h: Shard); `inferlab merge` joins the
// N shards into NAME.{csv,json}, the rows in spec order, as one run of the whole spec writes them, then
// draws the spec's figures. The scheduler of the cluster (a Slurm job array, mpirun) starts the shards;
// nothing here schedules anything.
//
// Shards are joined only when they agree: the same spec (its text's hash), the same code (commit), the
// same ceilings (datasheet, or the same measured file of the same date), the same mode (all predicted
// or all measured), every shard 0..N-1 present once, each complete. Anything else throws inferlab::Error
// naming the shards and what differs, before anything is written; the merged files are written
// atomically.
#include <filesystem>
#include <string>
#include <vector>

namespace inferlab {

struct MergeOptions {
  std::filesystem::path out_dir;  // default: the folder of the first shard
  bool plots = true;
};

struct MergedSpec {
  std::string spec_name;
  std::filesystem::path csv, provenance;
  std::vector<std::filesystem::path> shards;  // the shards' provenance files, by index
  std::vector<std::filesystem::path> figures;
  int64_t points = 0, rows = 0;
};

// `inputs`: folders (every NAME.shard-I-of-N.json in them) or shard files (.json or .csv). Every spec
// found is merged. Throws inferlab::Error when no shard is found (naming a folder without any results
// CSV as such) or when the shards of a spec do not agree.
std::vector<MergedSpec> merge_shards(const std::vector<std::filesystem::path>& inputs, const MergeOptions& options);

}  // namespace inferlab
