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

#include "recycle/options.h"  // FreezeRule

namespace recycle {

// FreezeRule and parse_freeze_rule (the --freeze spec, the rule as TrainOptions holds it) are in
// recycle/options.h.

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

}  // namespace recycle
