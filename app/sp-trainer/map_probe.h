#pragma once
// sp-trainer --probe-maps FILE --probe-out FILE: paired measures of precision maps with no training
// noise. At each step the maps file names, between two training steps (after that many updates),
// the trainer runs the forward and backward passes on the held-out evaluation batches under
// all-BF16 and then under each map, on the same weights, and writes per map:
//   eval_loss, and gap_pct = 100 * (eval_loss / BF16's - 1);
//   grad_rel_error = |g - g_bf16| / |g_bf16| and grad_cosine, over every trainable parameter's
//   gradient (all of them in a full fine-tune, the adapters with --finetune-mode adapters);
//   bytes / bytes_bf16 / saving_pct: what one materialization of the map copies (the runtime's count).
// Then the training map is put back: the run's trajectory is the same as without probes (the
// probes' copies do count into that step's bytes).
//
// Maps file, one JSON object per line: {"step": S, "name": "N", "map": ["bf16", "int8", ...]}
// with one format per routed block; S from 0 (the initial weights) to --steps (the final ones).
// A line that is not such an object is a ProbeMapsError naming the file and line.
#include <cstdint>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "sp/precision.h"

namespace sp::agent {
class ReferencePrecisionRuntime;
}

namespace sp::trainer {

class GptModel;
struct Batch;

class ProbeMapsError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

struct ProbeMap {
    std::string name;
    std::vector<Precision> formats;  // one per block
};

class MapProbe {
  public:
    // Reads every map (ProbeMapsError on a bad line, a map of another length or a step past
    // `steps`) and opens `out_path` (std::runtime_error when it cannot).
    MapProbe(const std::string& maps_path, const std::string& out_path, int blocks, std::int64_t steps);

    // Probes the maps due after `step` updates; does nothing when none is. The runtime must be
    // between steps (after after_optimizer_step, or freshly built).
    void run_due(std::int64_t step, GptModel& model, agent::ReferencePrecisionRuntime& runtime,
                 const std::vector<Batch>& batches, std::size_t int4_group);

    std::size_t probes_written() const { return written_; }

  private:
    std::map<std::int64_t, std::vector<ProbeMap>> due_;
    std::string out_path_;
    std::ofstream out_;
    std::size_t written_ = 0;
};

}  // namespace sp::trainer
