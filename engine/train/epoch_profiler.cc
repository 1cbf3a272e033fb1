#include "engine/train/epoch_profiler.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <fstream>
#include <memory>
#include <stdexcept>

#include "engine/train/trainer.h"
#include "engine/util/atomic_file.h"

namespace recycle {

void profile_epoch(Trainer& trainer, const std::string& path, int64_t epoch) {
  // The trace goes to a temporary file renamed over `path` when the epoch ends (AtomicFile):
  // a kill or a failure leaves an older trace at `path` whole, and no temporary file.
  auto file = std::make_shared<AtomicFile>(path);
  {
    std::ofstream probe(file->temp_path(), std::ios::binary | std::ios::trunc);
    if (!probe) throw std::invalid_argument("--profile: cannot write " + path);
  }
  // Shared by the two hooks: made when the epoch starts, destroyed (the trace written) when
  // it ends, or with the trainer's hooks if the epoch never ends.
  auto recording = std::make_shared<std::unique_ptr<torch::autograd::profiler::RecordProfile>>();
  trainer.add_epoch_start_hook([recording, file, epoch](Trainer&, int64_t e) {
    if (e == epoch) {
      *recording = std::make_unique<torch::autograd::profiler::RecordProfile>(file->temp_path());
    }
  });
  trainer.add_epoch_end_hook([recording, file, epoch](Trainer&, int64_t e) {
    if (e == epoch) {
      recording->reset();  // writes the trace
      file->commit();
    }
  });
}

}  // namespace recycle
