// Freeze schedules: how many leading encoder blocks are frozen (and recycled from a cache level)
// for the next epoch, decided at an epoch boundary. Pure functions of the epoch and the history
// of per-block gradient norms, so they are tested without a model. No LibTorch here.
//
//   linear:START:LEVEL  Composer's LayerFreezing over blocks: with t = (epoch + 1) / epochs the
//                       fraction of training done at the end of `epoch`, nothing is frozen
//                       while t <= START; after it floor(blocks * LEVEL * (t - START) /
//                       (1 - START)) blocks are. START in [0, 1), LEVEL in (0, 1].
//   auto[:THRESHOLD]    AutoFreeze's rule, one block at a time: the first trainable block
//                       freezes when the relative change of its gradient norm between the last
//                       two epochs, |n_e - n_(e-1)| / n_(e-1), falls below THRESHOLD
//                       (default kDefaultAutoThreshold, in (0, 1]).
//
// Either way the frozen count never goes down and never passes `blocks`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recycle {

constexpr double kDefaultAutoThreshold = 0.1;

struct FreezeRule {
  enum class Kind { kNone, kLinear, kAuto };
  Kind kind = Kind::kNone;
  double start = 0.5;                       // linear: START
  double level = 1.0;                       // linear: LEVEL
  double threshold = kDefaultAutoThreshold; // auto: THRESHOLD

  bool enabled() const { return kind != Kind::kNone; }
  // "linear:0.25:0.75", "auto:0.1" (the canonical spec: what --json reports).
  std::string spec() const;
  // "linear" or "auto".
  std::string name() const;
};

// Parses --freeze; throws std::invalid_argument with one line naming the accepted forms.
FreezeRule parse_freeze_rule(const std::string& spec);

// Per epoch (outer, in order) the mean gradient L2 norm of each encoder block (inner, block
// index) over the epoch's steps; a block that was frozen during the epoch has no norm (NaN).
using GradNormHistory = std::vector<std::vector<double>>;

// The number of blocks frozen for epoch `epoch` + 1, decided at the end of `epoch` (0-based)
// of `epochs`, when `frozen` blocks of `blocks` are frozen now. `history` needs entries up
// to `epoch` for the auto rule (the linear rule ignores it).
int64_t frozen_blocks_after(const FreezeRule& rule, int64_t epoch, int64_t epochs,
                            int64_t blocks, int64_t frozen, const GradNormHistory& history);

// The linear rule alone: blocks frozen once a fraction `done` of training is over.
int64_t linear_frozen_blocks(double start, double level, double done, int64_t blocks);

// The auto rule's measure for block `block` at the end of `epoch`: |n_e - n_(e-1)| / n_(e-1);
// NaN when either norm is missing or the older one is not positive.
double grad_norm_change(const GradNormHistory& history, int64_t epoch, int64_t block);

// A cache level as a progressive run made or found it (engine/train/cache_levels.h).
struct LevelInfo {
  std::string dir;            // its cache directory
  int64_t prefix_blocks = 0;
  std::string split_at;       // its last frozen block
  std::string fingerprint;
  std::string source;         // "raw" (built by run_build) or the level directory it came from
  bool reused = false;        // found complete with this identity: nothing computed
  int64_t computed = 0;       // records computed and written
  int64_t bytes = 0;          // record bytes written (before compression; 0 when reused)
  int64_t samples = 0;        // index entries over its splits
  double seconds = 0;         // wall time of making (or finding) it
};

// One freeze of a progressive run, for its report.
struct FreezeEvent {
  int64_t epoch = 0;          // the first epoch (1-based) trained with these blocks frozen
  std::string rule;           // what decided it: the rule's spec, e.g. "auto:0.1"
  double measure = 0;         // auto: the relative change of the gradient norm; linear: the
                              // fraction of training done
  int64_t from_blocks = 0, to_blocks = 0;
  std::vector<std::string> blocks;  // names of the blocks frozen by it
  int64_t trainable_before = 0, trainable_after = 0;  // parameters (elements) the optimizer
                                                      // updates, before and after
  LevelInfo level;            // the level the next epochs train from
};

}  // namespace recycle
