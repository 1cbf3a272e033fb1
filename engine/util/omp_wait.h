// How the tools make OpenMP's waiting threads sleep instead of spin on shared cores.
#pragma once

namespace recycle {

// libgomp's threads spin while they wait for each other (OMP_WAIT_POLICY unset: for a while;
// `active`: for ever). On cores another process keeps busy a spinning thread takes the core its
// neighbour needs: head training beside one busy process ran 2.2x slower than with
// OMP_WAIT_POLICY=passive, while on idle cores passive ran 1.4x slower than spinning
// (docs/performance.md). libgomp reads the variable once, when it loads (before main), so only a
// new exec applies it: when `busy` (another process wants a core now: others_running() > 0)
// and neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, this sets OMP_WAIT_POLICY=PASSIVE and
// replaces the process by `exe` with `argv` (the tools pass "/proc/self/exe": the same program,
// same pid, same arguments). A user's own setting wins: then, on idle cores, or when the exec
// fails, it returns and nothing changes. Call first in main, before any thread starts (not
// thread safe). Returns only when it did not exec.
void exec_with_passive_omp_wait(const char* exe, char** argv, bool busy);

// How many other tasks are runnable now: /proc/stat's procs_running less this process, the
// median of 5 readings 10 ms apart (0 when it cannot be read).
int others_running();

}  // namespace recycle
