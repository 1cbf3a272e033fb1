// recycle-train --checkpoint FILE: a head file (head_file.h) that also holds the optimizer's
// state and where training stands, written after every epoch (and with --checkpoint-every N
// after every N steps), and read back by a rerun of the same job, which goes on from there.
// Beside the head file's: the metadata entry "recycle.checkpoint", JSON {"epochs_done": N,
// "batches_done": B (of epoch N + 1), "loss_sum", "correct", "seen" (that epoch's
// figures so far), "job": the options that must match}, and the optimizer's state as tensors
// "optimizer/I/FIELD" (I: the parameter's position; SGD's momentum_buffer, AdamW's step,
// exp_avg, exp_avg_sq), its kind in the entry "optimizer".
//
// A resumed run trains the steps a whole run would have trained after it, in the same orders,
// at the same learning rates, from the same parameters and optimizer state: alone, it ends
// with the head a run that was never stopped ends with. (Data-parallel: every rank reads
// rank 0's file, which rank 0 alone writes and sends to the others through the job's store: no
// rank needs to see another's disk; the state of --grad-compression topk's residues starts
// over. Under --sync async rank 0 writes the servers' parameters as it sees each epoch
// complete; their optimizer state lives in shards on the servers' ranks and starts over.)
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "cache/manifest.h"
#include "engine/jobs/head_file.h"

namespace recycle {

class DistContext;
class Trainer;
struct EpochPosition;  // engine/train/trainer.h
struct TrainOptions;
struct TrainReport;

// What a checkpoint must have been written by to be resumed: the options every data-parallel
// rank must share (TrainOptions::flag_values) and the world size, one "FLAG VALUE" per line.
std::string checkpoint_job(const TrainOptions& o, int world);

// Writes the checkpoint atomically (a reader sees the old file or the whole new one). Throws
// std::runtime_error "cannot write PATH: why".
// `at`: where training stands (at.epoch epochs done and at.batches of the next).
void save_checkpoint(const std::string& path, BlockStack& head, const HeadIdentity& identity,
                     const torch::optim::Optimizer& optimizer, const std::string& job,
                     const EpochPosition& at);

// Reads the checkpoint in `bytes` (the file at `path`, read by this process or by rank 0) into
// `head` and `optimizer` and returns where it stood (a checkpoint of an epoch's end: its batches
// 0). Throws std::runtime_error with one line naming the file when it is not a checkpoint, was
// written by another job ("--lr: 0.05 in the checkpoint, 0.1 in this run") or for another cache
// (head_differences), or does not fit the head.
EpochPosition load_checkpoint_bytes(const std::string& bytes, const std::string& path,
                                    const std::string& job, const Manifest& cache, BlockStack& head,
                                    torch::optim::Optimizer& optimizer);

// recycle-train's --checkpoint: where, the job it belongs to, and the cache the head trains from.
struct CheckpointPlan {
  std::string path;
  std::string job;  // checkpoint_job
  const Manifest* cache = nullptr;
};

// Where the checkpoint the trainer resumes from stood, its weights and optimizer state loaded
// into `head` and `trainer` (the start where there is none yet); every rank of `dist` (when
// given) loads rank 0's file, sent through the job's store. Sets report->resumed_epochs and
// resumed_batches.
EpochPosition resume_from_checkpoint(const CheckpointPlan& checkpoint, DistContext* dist,
                                     BlockStack& head, Trainer& trainer, TrainReport* report);

// Writes the plan's checkpoint of `head` and `trainer`'s optimizer where training stands.
using CheckpointWrite = std::function<void(const EpochPosition&)>;
CheckpointWrite checkpoint_writer(const CheckpointPlan& checkpoint, BlockStack& head,
                                  Trainer& trainer);

// The position after `epochs` whole epochs.
EpochPosition epochs_done(int64_t epochs);

// `write` after every epoch of `trainer` and, when `every` > 0, after every every-th step but an
// epoch's last (the epoch's end writes then). Register it after the hooks that change the
// parameters at an epoch's end (the checkpoint holds the epoch's final state).
void add_checkpoint_hooks(Trainer& trainer, int64_t every, const CheckpointWrite& write);

}  // namespace recycle
