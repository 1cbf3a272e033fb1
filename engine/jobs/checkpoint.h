// recycle-train --checkpoint FILE: a head file (head_file.h) that also holds the optimizer's
// state and how many epochs are done, written after every epoch, and read back by a rerun of
// the same job, which goes on with the next epoch. Beside the head file's: the metadata entry
// "recycle.checkpoint", JSON {"epochs_done": N, "job": the options that must match}, and the
// optimizer's state as tensors "optimizer/I/FIELD" (I: the parameter's position; SGD's
// momentum_buffer, AdamW's step, exp_avg, exp_avg_sq), its kind in the entry "optimizer".
//
// A resumed run trains the epochs a whole run would have trained after epoch N, in the same
// orders, at the same learning rates, from the same parameters and optimizer state: alone, it
// ends with the head a run that was never stopped ends with. (Data-parallel: every rank reads
// the same file, compared by digest; the state of --grad-compression topk's residues starts
// over. Under --sync async rank 0 writes the servers' parameters as it sees each epoch
// complete; their optimizer state lives in shards on the servers' ranks and starts over.)
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "cache/manifest.h"
#include "engine/jobs/head_file.h"

namespace recycle {

struct TrainOptions;

// What a checkpoint must have been written by to be resumed: the options every data-parallel
// rank must share (TrainOptions::flag_values) and the world size, one "FLAG VALUE" per line.
std::string checkpoint_job(const TrainOptions& o, int world);

// Writes the checkpoint atomically (a reader sees the old file or the whole new one). Throws
// std::runtime_error "cannot write PATH: why".
void save_checkpoint(const std::string& path, BlockStack& head, const HeadIdentity& identity,
                     const torch::optim::Optimizer& optimizer, const std::string& job,
                     int64_t epochs_done);

// The xxh3 of the file's bytes, kNoCheckpoint when there is no file at `path`, or
// "unreadable (why)": what the ranks of a data-parallel job compare before they resume.
inline constexpr char kNoCheckpoint[] = "none";
std::string checkpoint_digest(const std::string& path);

// Reads the checkpoint at `path` into `head` and `optimizer` and returns its epochs done.
// Throws std::runtime_error with one line naming the file when it is not a checkpoint, was
// written by another job ("--lr: 0.05 in the checkpoint, 0.1 in this run") or for another
// cache (head_differences), or does not fit the head.
int64_t load_checkpoint(const std::string& path, const std::string& job, const Manifest& cache,
                        BlockStack& head, torch::optim::Optimizer& optimizer);

}  // namespace recycle
