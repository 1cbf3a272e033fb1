// Progressive recycling: a freeze point that moves deeper during training, and training data
// that follows it (docs/progressive.md). A ProgressiveFreezer hooks into a Trainer:
//
// - after every backward (auto rule only): the gradient L2 norm of each trainable encoder
//   block, averaged over the epoch's steps, into the history the rule reads;
// - at the end of every epoch but the last: the schedule gives the blocks frozen for the next
//   epoch. When that is deeper than now, the new level is made (from raw data for the first
//   freeze of a run that started there, else derived from the current level: never from raw
//   data again), the batch source is switched to the new level's training split, and the
//   trainer's module becomes the new head (set_module: frozen parameters leave the optimizer,
//   the ones that stay keep their state).
//
// The trainer must train `model` split after `frozen` blocks (split_block_model(model,
// frozen).head) from `source`, whose current inner source is the raw data (frozen 0) or the
// training split of `level` (frozen > 0). Not thread safe: the hooks run on the trainer's thread.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/activation_store.h"
#include "engine/models/block_model.h"
#include "engine/train/batch_sources.h"
#include "engine/train/cache_levels.h"
#include "engine/train/freeze_schedule.h"
#include "engine/train/trainer.h"
#include "recycle/train.h"  // LevelInfo, FreezeEvent

namespace recycle {

// A batch source that forwards to another, which can be replaced between epochs (never while
// a plan is being loaded). Every inner source must have the same size.
class SwappableBatches final : public BatchSource {
 public:
  explicit SwappableBatches(BatchSource* inner) : inner_(inner) {}
  int64_t size() const override { return inner_->size(); }
  void load(const int64_t* indices, int64_t n, Batch* out) override {
    inner_->load(indices, n, out);
  }
  void plan(const std::vector<int64_t>& order, int64_t batch) override {
    inner_->plan(order, batch);
  }
  std::string explain_non_finite(int64_t index) const override {
    return inner_->explain_non_finite(index);
  }
  // Throws std::runtime_error when `inner` has another size.
  void set(BatchSource* inner);

 private:
  BatchSource* inner_;
};

// The blocks frozen for the next epoch: (epoch just ended, 0-based; blocks frozen now; the
// gradient norm history) -> blocks frozen next, and what the rule measured (for the report).
using FreezeSchedule =
    std::function<int64_t(int64_t epoch, int64_t frozen, const GradNormHistory& history,
                          double* measure)>;

// The schedule of `rule` over `blocks` encoder blocks and `epochs` epochs.
FreezeSchedule make_freeze_schedule(const FreezeRule& rule, int64_t epochs, int64_t blocks);

struct ProgressiveOptions {
  std::string rule;             // the rule's spec, for the report
  bool track_grad_norms = false;  // the rule reads the history (auto)
  std::string levels_dir;       // where levels go
  DeriveOptions derive;         // how levels are derived from levels
  RawLevelOptions raw;          // how the first level is built from raw data
  int64_t prefetch = 0;         // batches loaded ahead from a level, as load_ahead takes it
  std::string train_split = "train";
  // Called with the parameters and floating-point buffers of the blocks about to freeze, before
  // their level is made: a data-parallel job makes them rank 0's on every rank (batch-norm
  // statistics differ between ranks), so that every rank's shard of the level comes from the
  // same weights. Empty: nothing is called.
  std::function<void(const std::vector<torch::Tensor>&)> before_freeze;
};

class ProgressiveFreezer {
 public:
  // `level_dir` is "" when frozen is 0 (the run starts on raw data).
  ProgressiveFreezer(BlockModel& model, int64_t frozen, std::string level_dir,
                     FreezeSchedule schedule, ProgressiveOptions options,
                     SwappableBatches& source);
  ~ProgressiveFreezer();

  // Adds the hooks to `trainer`, which must outlive neither this nor the source.
  void attach(Trainer& trainer);

  int64_t frozen() const { return frozen_; }
  const std::string& level_dir() const { return level_dir_; }  // "" while on raw data
  const std::vector<FreezeEvent>& events() const { return events_; }
  // Per epoch trained so far: "raw" or the level directory it trained from.
  const std::vector<std::string>& epoch_sources() const { return epoch_sources_; }
  const GradNormHistory& history() const { return history_; }
  // Seconds spent making levels (builds and derivations, reused ones included).
  double level_seconds() const { return level_seconds_; }

 private:
  void after_backward(Trainer& trainer);
  void epoch_end(Trainer& trainer, int64_t epoch);
  void freeze(Trainer& trainer, int64_t epoch, int64_t to_blocks, double measure);
  void open_level(const std::string& dir);

  BlockModel& model_;
  int64_t frozen_;
  std::string level_dir_;
  FreezeSchedule schedule_;
  ProgressiveOptions options_;
  SwappableBatches& source_;
  // The current level, opened read-only, and the sources over its training split.
  std::unique_ptr<ActivationStore> store_;
  std::unique_ptr<BatchSource> cached_;
  std::unique_ptr<BatchSource> prefetched_;
  std::vector<FreezeEvent> events_;
  std::vector<std::string> epoch_sources_;
  GradNormHistory history_;
  std::vector<double> norm_sums_;  // this epoch's per-block sums
  int64_t norm_steps_ = 0;
  double level_seconds_ = 0;
};

// Parameters (elements) of `params`.
int64_t parameter_count(const std::vector<torch::Tensor>& params);

}  // namespace recycle
