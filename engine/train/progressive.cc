#include "engine/train/progressive.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "engine/models/memory_format.h"
#include "engine/models/split_model.h"
#include "engine/train/prefetch.h"

namespace recycle {

void SwappableBatches::set(BatchSource* inner) {
  if (inner->size() != inner_->size()) {
    throw std::runtime_error("the new level's training split has " + std::to_string(inner->size()) +
                             " samples, the run trains on " + std::to_string(inner_->size()));
  }
  inner_ = inner;
}

FreezeSchedule make_freeze_schedule(const FreezeRule& rule, int64_t epochs, int64_t blocks) {
  return [rule, epochs, blocks](int64_t epoch, int64_t frozen, const GradNormHistory& history,
                                double* measure) {
    *measure = rule.kind == FreezeRule::Kind::kAuto
                   ? grad_norm_change(history, epoch, frozen)
                   : static_cast<double>(epoch + 1) / static_cast<double>(epochs);
    return frozen_blocks_after(rule, epoch, epochs, blocks, frozen, history);
  };
}

int64_t parameter_count(const std::vector<torch::Tensor>& params) {
  int64_t n = 0;
  for (const torch::Tensor& p : params) n += p.numel();
  return n;
}

ProgressiveFreezer::ProgressiveFreezer(BlockModel& model, int64_t frozen, std::string level_dir,
                                       FreezeSchedule schedule, ProgressiveOptions options,
                                       SwappableBatches& source)
    : model_(model),
      frozen_(frozen),
      level_dir_(std::move(level_dir)),
      schedule_(std::move(schedule)),
      options_(std::move(options)),
      source_(source) {
  if (frozen_ < 0 || frozen_ > model_.num_blocks() || (frozen_ > 0) == level_dir_.empty()) {
    throw std::invalid_argument("ProgressiveFreezer: a run at " + std::to_string(frozen_) +
                                " frozen blocks starts from " +
                                (level_dir_.empty() ? std::string("raw data") : level_dir_));
  }
}

ProgressiveFreezer::~ProgressiveFreezer() = default;

void ProgressiveFreezer::attach(Trainer& trainer) {
  if (options_.track_grad_norms) {
    trainer.add_after_backward_hook([this](Trainer& t, int64_t) { after_backward(t); });
  }
  trainer.add_epoch_end_hook([this](Trainer& t, int64_t epoch) { epoch_end(t, epoch); });
}

void ProgressiveFreezer::after_backward(Trainer&) {
  torch::NoGradGuard no_grad;
  const int64_t blocks = model_.num_blocks();
  if (norm_sums_.empty()) norm_sums_.assign(static_cast<size_t>(blocks), 0.0);
  for (int64_t b = frozen_; b < blocks; ++b) {
    double squares = 0;
    for (const torch::Tensor& p : model_.blocks[b].ptr()->parameters()) {
      if (p.grad().defined()) squares += p.grad().pow(2).sum().item<double>();
    }
    norm_sums_[b] += std::sqrt(squares);
  }
  ++norm_steps_;
}

void ProgressiveFreezer::epoch_end(Trainer& trainer, int64_t epoch) {
  epoch_sources_.push_back(frozen_ == 0 ? "raw" : level_dir_);
  if (options_.track_grad_norms) {
    std::vector<double> norms(static_cast<size_t>(model_.num_blocks()),
                              std::numeric_limits<double>::quiet_NaN());
    for (int64_t b = frozen_; b < model_.num_blocks() && norm_steps_ > 0; ++b) {
      norms[b] = norm_sums_[b] / static_cast<double>(norm_steps_);
    }
    history_.push_back(std::move(norms));
    norm_sums_.assign(static_cast<size_t>(model_.num_blocks()), 0.0);
    norm_steps_ = 0;
  }
  if (epoch + 1 >= trainer.hyper().epochs) return;  // nothing trains after the last epoch
  double measure = 0;
  const int64_t next = schedule_(epoch, frozen_, history_, &measure);
  if (next > frozen_) freeze(trainer, epoch, next, measure);
}

void ProgressiveFreezer::freeze(Trainer& trainer, int64_t epoch, int64_t to_blocks,
                                double measure) {
  FreezeEvent event;
  event.epoch = epoch + 2;  // 1-based: the epoch after the one that just ended
  event.rule = options_.rule;
  event.measure = measure;
  event.from_blocks = frozen_;
  event.to_blocks = to_blocks;
  for (int64_t b = frozen_; b < to_blocks; ++b) event.blocks.push_back(model_.block_names[b]);
  event.trainable_before = parameter_count(trainer.trainable());
  if (options_.before_freeze) {
    std::vector<torch::Tensor> state;
    for (int64_t b = frozen_; b < to_blocks; ++b) {
      for (const torch::Tensor& p : model_.blocks[b].ptr()->parameters()) state.push_back(p);
      for (const torch::Tensor& t : model_.blocks[b].ptr()->buffers()) {
        if (t.is_floating_point()) state.push_back(t);
      }
    }
    options_.before_freeze(state);
  }
  {
    // The level is made from the blocks as they are now (split_block_model puts them in eval
    // mode), laid out contiguous again: the trainer had them in its memory format.
    for (int64_t b = frozen_; b < to_blocks; ++b) {
      set_memory_format(*model_.blocks[b].ptr(), c10::MemoryFormat::Contiguous);
    }
    event.level = frozen_ == 0
                      ? build_level_from_raw(model_, to_blocks, options_.levels_dir, options_.raw)
                      : derive_level(level_dir_, model_, to_blocks, options_.levels_dir,
                                     options_.derive);
  }
  level_seconds_ += event.level.seconds;
  open_level(event.level.dir);
  frozen_ = to_blocks;
  level_dir_ = event.level.dir;
  trainer.set_module(split_block_model(model_, to_blocks).head);
  event.trainable_after = parameter_count(trainer.trainable());
  events_.push_back(std::move(event));
}

void ProgressiveFreezer::open_level(const std::string& dir) {
  Manifest m;
  std::unique_ptr<ActivationStore> store = open_level_read_only(dir, &m);
  auto cached = std::make_unique<CachedBatches>(*store, m, options_.train_split,
                                                options_.derive.device);
  std::unique_ptr<BatchSource> prefetched = load_ahead(*cached, options_.prefetch);
  source_.set(prefetched ? prefetched.get() : cached.get());
  // The old level's sources go before its store, newest first.
  prefetched_ = std::move(prefetched);
  cached_ = std::move(cached);
  store_ = std::move(store);
}

}  // namespace recycle
