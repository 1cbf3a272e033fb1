// The local launcher behind --nproc N (as torchrun does): it makes the job's store a c10d
// FileStore in a new private directory (0700, removed at the end: no store socket at all),
// starts N copies of this program with the same arguments minus --nproc and --threads, plus
// --rank R --world-size N --master file:DIR/store --threads T (the cores split between them, at
// least 1 each) and RECYCLE_JOB_TOKEN (the user's, else a random one) in their environment,
// forwards SIGINT and SIGTERM to them and waits. No LibTorch here.
//
// When an essential worker fails (non-zero exit or a signal) the launcher prints one line naming
// its rank, leaves that line beside the store (launcher_reported_failure) for the others to
// find, gives them --timeout seconds to notice and exit on their own, then kills what is left.
// Another worker's failure is one line, and the job goes on. Only rank 0's stdout reaches the
// launcher's stdout; every worker's stderr does, each line prefixed with "[rank R] " except rank
// 0's.
#pragma once

#include <string>
#include <vector>

namespace recycle {

struct LaunchOptions {
  std::string tool;  // for messages: "recycle-train"
  int nproc = 2;
  int threads = 0;  // total threads over all workers (0 = every core)
  int timeout_seconds = 60;
  // Ranks 0..essential_ranks-1 are essential (0 = every rank): a failure of one of them fails
  // the job. A failure of another (an asynchronous job's worker that serves nothing) is reported
  // and the job goes on without it.
  int essential_ranks = 0;
};

// `args` are the tool's own arguments (argv[1..]), with --nproc and --threads already removed.
// Returns the launcher's exit code: 0 when every essential worker exited 0, else the first
// failing essential worker's code (1 when it died of a signal), 130/143 after SIGINT/SIGTERM.
int launch_local_workers(const LaunchOptions& options, const std::vector<std::string>& args);

// For a worker of a local job (--master file:DIR/store, as the launcher gives it): the line the
// launcher left in DIR when an essential worker failed ("rank 1 of 2 (pid 7) was killed by
// signal 9 (Killed)"), so that a rank waiting for that one stops at once instead of at its
// timeout. "" when there is none, or when `master` is not a local launcher's store.
std::string launcher_reported_failure(const std::string& master);

}  // namespace recycle
