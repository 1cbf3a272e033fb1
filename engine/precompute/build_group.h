// BuildGroup: how the processes (ranks) of a distributed build talk to each other: a board of
// keys and values that every rank sees, and a way to tell the others that this rank failed.
// The job's implementation is on the job's c10d store with heartbeats (engine/jobs/build_job.cc);
// tests use one in memory. No LibTorch here.
//
// Thread safety: one thread per rank calls a group's methods; fail() may be called from any.
#pragma once

#include <string>

namespace recycle {

class BuildGroup {
 public:
  virtual ~BuildGroup() = default;

  virtual int rank() const = 0;
  virtual int world() const = 0;

  // Publishes `value` (bytes) under `key`, for every rank to read. A key is set once.
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits for `key`, which rank `from` sets, and returns its value. Throws std::runtime_error
  // with one line when a rank reported a failure (that rank's line, whoever it was), or when
  // rank `from` is lost: it gave no sign of life within the group's timeout (a rank that is
  // alive but slow is waited for).
  virtual std::string wait(const std::string& key, int from) = 0;
  // Tells every rank that this one failed, with one line ("rank R: what went wrong"). The first
  // failure reported is the one every wait() throws. Never throws.
  virtual void fail(const std::string& line) noexcept = 0;
};

}  // namespace recycle
