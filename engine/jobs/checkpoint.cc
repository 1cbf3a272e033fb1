#include "engine/jobs/checkpoint.h"

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "base/strings.h"
#include "engine/data/regular_file.h"
#include "engine/distributed/dist_context.h"
#include "engine/models/tensor_file.h"
#include "engine/models/torch_compat.h"
#include "engine/train/trainer.h"
#include "recycle/options.h"
#include "recycle/train.h"

namespace recycle {

namespace {

constexpr const char* kCheckpointEntry = "recycle.checkpoint";
constexpr const char* kOptimizerEntry = "optimizer";

// "FLAG VALUE" lines into flag -> value.
std::map<std::string, std::string> job_lines(const std::string& job) {
  std::map<std::string, std::string> lines;
  std::istringstream in(job);
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    lines[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  return lines;
}

std::string shown(const std::string& value) { return value.empty() ? "none" : value; }

}  // namespace

std::string checkpoint_job(const TrainOptions& o, int world) {
  std::string job;
  for (const FlagValue& f : o.flag_values()) {
    if (f.same_on_every_rank && f.flag != "--world-size") job += f.flag + " " + f.value + "\n";
  }
  return job + "world " + std::to_string(world) + "\n";
}

namespace {

// The optimizer's state, as tensors named "optimizer/I/FIELD" (I: the parameter's position in
// its one param group, as make_optimizer makes it), and its kind in kOptimizerEntry.
std::string state_name(size_t i, const char* field) {
  return std::string(kOptimizerEntry) + "/" + std::to_string(i) + "/" + field;
}

void add_optimizer_state(const torch::optim::Optimizer& optimizer, TensorFile* file) {
  const bool sgd = dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr;
  file->metadata[kOptimizerEntry] = sgd ? "sgd" : "adamw";
  const auto& params = optimizer.param_groups().at(0).params();
  auto put = [&](size_t i, const char* field, const torch::Tensor& t) {
    if (t.defined()) file->tensors[state_name(i, field)] = t.detach().to(torch::kCPU).clone();
  };
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = optimizer.state().find(compat::optimizer_state_key(params[i]));
    if (it == optimizer.state().end()) continue;
    if (const auto* s = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
      put(i, "momentum_buffer", s->momentum_buffer());
    } else if (const auto* a =
                   dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get())) {
      put(i, "step", torch::tensor(a->step(), torch::kInt64));
      put(i, "exp_avg", a->exp_avg());
      put(i, "exp_avg_sq", a->exp_avg_sq());
      put(i, "max_exp_avg_sq", a->max_exp_avg_sq());
    }
  }
}

// Puts the state add_optimizer_state wrote into `optimizer`. Throws std::runtime_error (`where`)
// for state of another optimizer or of parameters of other shapes.
void load_optimizer_state(torch::optim::Optimizer& optimizer, const TensorFile& file,
                          const std::string& where) {
  const std::string misfit = where + ": its optimizer state does not fit this run's optimizer";
  const bool sgd = dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr;
  const auto kind = file.metadata.find(kOptimizerEntry);
  if (kind == file.metadata.end() || kind->second != (sgd ? "sgd" : "adamw")) {
    throw std::runtime_error(misfit);
  }
  const auto& params = optimizer.param_groups().at(0).params();
  size_t used = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    auto get = [&](const char* field) -> torch::Tensor {
      const auto it = file.tensors.find(state_name(i, field));
      if (it == file.tensors.end()) return {};
      ++used;
      if (std::string(field) != "step" && it->second.sizes() != params[i].sizes()) {
        throw std::runtime_error(misfit);
      }
      return it->second.to(params[i].device(), it->second.scalar_type()).clone();
    };
    if (sgd) {
      const torch::Tensor buffer = get("momentum_buffer");
      if (!buffer.defined()) continue;
      auto state = std::make_unique<torch::optim::SGDParamState>();
      state->momentum_buffer(buffer);
      optimizer.state()[compat::optimizer_state_key(params[i])] = std::move(state);
    } else {
      const torch::Tensor step = get("step"), avg = get("exp_avg"), sq = get("exp_avg_sq");
      const torch::Tensor max_sq = get("max_exp_avg_sq");
      if (!step.defined()) continue;
      if (!avg.defined() || !sq.defined() || step.numel() != 1) throw std::runtime_error(misfit);
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(step.item<int64_t>());
      state->exp_avg(avg);
      state->exp_avg_sq(sq);
      if (max_sq.defined()) state->max_exp_avg_sq(max_sq);
      optimizer.state()[compat::optimizer_state_key(params[i])] = std::move(state);
    }
  }
  size_t stored = 0;
  for (const auto& [name, t] : file.tensors) {
    stored += name.rfind(std::string(kOptimizerEntry) + "/", 0) == 0 ? 1 : 0;
  }
  if (used != stored) throw std::runtime_error(misfit);  // state of parameters this run lacks
}

}  // namespace

void save_checkpoint(const std::string& path, BlockStack& head, const HeadIdentity& identity,
                     const torch::optim::Optimizer& optimizer, const std::string& job,
                     const EpochPosition& at) {
  const nlohmann::json meta = {{"epochs_done", at.epoch}, {"batches_done", at.batches},
                               {"loss_sum", at.loss_sum},  {"correct", at.correct},
                               {"seen", at.seen},          {"job", job}};
  save_head(head, identity, path, [&](TensorFile& file) {
    file.metadata[kCheckpointEntry] = meta.dump();
    add_optimizer_state(optimizer, &file);
  });
}

EpochPosition load_checkpoint_bytes(const std::string& bytes, const std::string& path,
                                    const std::string& job, const Manifest& cache, BlockStack& head,
                                    torch::optim::Optimizer& optimizer) {
  const std::string where = "--checkpoint " + path;
  if (is_torch_archive(bytes)) {
    throw std::runtime_error(where + " is in the format of an older recycle (a TorchScript "
                             "archive, whose loading runs any code it holds), which this version "
                             "does not load: move it away, and the run starts over");
  }
  std::unique_ptr<HeadFile> read;
  try {
    read = std::make_unique<HeadFile>(HeadFile::of_bytes(bytes, path));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(where + " is not a checkpoint recycle-train can read (" + e.what() +
                             ")");
  }
  HeadFile& file = *read;
  const auto entry = file.file().metadata.find(kCheckpointEntry);
  if (entry == file.file().metadata.end()) {
    throw std::runtime_error(where + " is a head file, not a checkpoint (move it away, or give "
                                     "another path)");
  }
  nlohmann::json meta;
  EpochPosition at;
  try {
    meta = nlohmann::json::parse(entry->second);
    at.epoch = meta.at("epochs_done").get<int64_t>();
    meta.at("job").get<std::string>();
    // A checkpoint of an epoch's end written before --checkpoint-every has no position in it.
    at.batches = meta.value("batches_done", int64_t{0});
    at.loss_sum = meta.value("loss_sum", 0.0);
    at.correct = meta.value("correct", int64_t{0});
    at.seen = meta.value("seen", int64_t{0});
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error(where + " has a damaged checkpoint entry");
  }
  if (at.epoch < 0 || at.batches < 0 || at.seen < 0 || at.correct < 0 || at.correct > at.seen) {
    throw std::runtime_error(where + " has a damaged checkpoint entry");
  }
  // The same job: every shared option, the world, and the cache the head was trained on.
  const std::map<std::string, std::string> was = job_lines(meta["job"]), is = job_lines(job);
  std::vector<std::string> diffs;
  for (const auto& [flag, value] : is) {
    const auto it = was.find(flag);
    const std::string before = it == was.end() ? "(not set)" : shown(it->second);
    if (before != shown(value)) {
      diffs.push_back(flag + ": " + before + " in the checkpoint, " + shown(value) +
                      " in this run");
    }
  }
  for (const std::string& d : head_differences(file.identity(), cache)) diffs.push_back(d);
  if (!diffs.empty()) {
    throw std::runtime_error(where + " was written by another job (" + join(diffs, "; ") +
                             "): give another path, or the same options");
  }
  file.load_into(head);
  load_optimizer_state(optimizer, file.file(), where);
  return at;
}

namespace {

constexpr char kCheckpointKey[] = "recycle/checkpoint/";  // the job's store: rank 0's file
constexpr size_t kStorePart = size_t{8} << 20;            // bytes a store value holds at most

std::vector<uint8_t> as_bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string as_string(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// Rank 0's checkpoint file on every rank of `dist`, through the job's store (in parts of
// kStorePart bytes): only rank 0 writes the checkpoint, so its file is the job's, and no other
// rank needs to see rank 0's disk (the ranks of a sharded job, each on a machine of its own).
// Null when rank 0 has no file. A rank 0 that cannot read its file sends why, and every rank
// throws it (std::runtime_error); a rank 0 that never sends ends the wait at the store's timeout.
std::unique_ptr<std::string> rank0_checkpoint(const std::string& path, DistContext& dist) {
  c10d::Store& store = dist.store();
  if (dist.rank() == 0) {
    std::string state = "none";
    std::unique_ptr<std::string> bytes;
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      try {
        bytes = std::make_unique<std::string>(read_regular_file(path));
        const size_t parts = (bytes->size() + kStorePart - 1) / kStorePart;
        for (size_t i = 0; i < parts; ++i) {
          store.set(kCheckpointKey + std::to_string(i),
                    as_bytes(bytes->substr(i * kStorePart, kStorePart)));
        }
        state = "parts " + std::to_string(parts);
      } catch (const std::runtime_error& e) {
        state = std::string("error rank 0 cannot read --checkpoint ") + path + ": " + e.what();
      }
    }
    store.set(std::string(kCheckpointKey) + "state", as_bytes(state));
    if (state.rfind("error ", 0) == 0) throw std::runtime_error(state.substr(6));
    return bytes;
  }
  try {
    const std::string state = as_string(store.get(std::string(kCheckpointKey) + "state"));
    if (state == "none") return nullptr;
    if (state.rfind("error ", 0) == 0) throw std::runtime_error(state.substr(6));
    auto bytes = std::make_unique<std::string>();
    const size_t parts = std::stoull(state.substr(6));  // "parts N"
    for (size_t i = 0; i < parts; ++i) {
      *bytes += as_string(store.get(kCheckpointKey + std::to_string(i)));
    }
    return bytes;
  } catch (const c10::Error& e) {  // the store's timeout: rank 0 never sent it
    throw std::runtime_error(dist.explain_failure(e.what_without_backtrace()));
  }
}

}  // namespace

EpochPosition resume_from_checkpoint(const CheckpointPlan& checkpoint, DistContext* dist,
                                     BlockStack& head, Trainer& trainer, TrainReport* report) {
  EpochPosition from;
  std::unique_ptr<std::string> bytes;
  if (dist) {
    bytes = rank0_checkpoint(checkpoint.path, *dist);
  } else if (std::error_code ec; std::filesystem::exists(checkpoint.path, ec)) {
    bytes = std::make_unique<std::string>(read_regular_file(checkpoint.path));
  }
  if (bytes) {
    from = load_checkpoint_bytes(*bytes, checkpoint.path, checkpoint.job, *checkpoint.cache, head,
                                 trainer.optimizer());
  }
  report->resumed_epochs = from.epoch;
  report->resumed_batches = from.batches;
  return from;
}

CheckpointWrite checkpoint_writer(const CheckpointPlan& checkpoint, BlockStack& head,
                                  Trainer& trainer) {
  return [&checkpoint, &head, &trainer,
          identity = head_identity_of_cache(*checkpoint.cache)](const EpochPosition& at) {
    save_checkpoint(checkpoint.path, head, identity, trainer.optimizer(), checkpoint.job, at);
  };
}

EpochPosition epochs_done(int64_t epochs) {
  EpochPosition at;
  at.epoch = epochs;
  return at;
}

void add_checkpoint_hooks(Trainer& trainer, int64_t every, const CheckpointWrite& write) {
  trainer.add_epoch_end_hook([write](Trainer&, int64_t epoch) { write(epochs_done(epoch + 1)); });
  if (every <= 0) return;
  trainer.add_batch_end_hook([write, every](Trainer&, const EpochPosition& at, bool last) {
    if (!last && at.step % every == 0) write(at);
  });
}

}  // namespace recycle
