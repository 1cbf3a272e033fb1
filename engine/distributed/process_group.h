// make_gloo_group and make_tcp_store: the one place that knows how the LibTorch in use makes a
// c10d process group and a job's TCP store.
// LibTorch 1.13 (Debian's) has ProcessGroupGloo as a ProcessGroup; 2.x (pip's wheel) has it as a
// Backend that a ProcessGroup dispatches to by device. Everything above this file holds a
// c10::intrusive_ptr<c10d::ProcessGroup> and calls allreduce/broadcast/send/recv on it, the same
// under both.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace recycle {

// A Gloo group of `world` ranks meeting in `store`, this process as `rank`, its pairs listening
// on `host` (an address of this machine the other ranks reach), collectives timing out after
// `timeout`. Blocks until every rank has made its group; throws what c10d throws.
// Thread safe: each call makes its own group.
c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int world,
                                                       std::chrono::milliseconds timeout,
                                                       const std::string& host);

// Makes `group` (make_gloo_group's) send the collectives of CUDA tensors to NCCL, as
// torch.distributed's "cpu:gloo,cuda:nccl" does: gradients and parameters on a GPU go GPU to GPU,
// the CPU tensors of the job's checks stay on Gloo. The NCCL communicator is made at the first
// collective, its ranks meeting in `store`. Throws std::invalid_argument in one line where it
// cannot be: a LibTorch without CUDA or NCCL (Debian's 1.13), a build without nccl.h, or no GPU.
// Throws use_nccl_for_cuda's refusal where it cannot be; returns where it can.
void require_nccl();
void use_nccl_for_cuda(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                       const c10::intrusive_ptr<c10d::Store>& store, int rank, int world,
                       std::chrono::milliseconds timeout);

// What make_tcp_store's client throws when something listens at --master but is no store: it
// never answered, or answered otherwise (what() says which).
struct NotAStoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The job's TCPStore at host:port: its server when `server` (listening on the address `bind`,
// the --master host resolved, where the LibTorch in use lets the store take a socket of ours:
// 2.x; 1.13's listens on every interface), else a client of it, which gives up after `timeout`
// (2.x's client would wait for ever at a listener that never answers). Throws what c10d throws,
// std::system_error (EADDRINUSE ...) when the server's socket cannot be bound, and
// NotAStoreError when what listens there does not answer as a store.
c10::intrusive_ptr<c10d::Store> make_tcp_store(const std::string& host, int port, bool server,
                                               const std::string& bind, int family,
                                               std::chrono::milliseconds timeout);

}  // namespace recycle
