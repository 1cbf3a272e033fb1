// How the tools make OpenMP's waiting threads sleep instead of spin on shared cores.
#pragma once

namespace recycle {

// libgomp's threads spin while they wait for each other (OMP_WAIT_POLICY unset: for a while;
// `active`: for ever). On shared cores a spinning thread takes the core its busy neighbour
// needs: recycle-build with --threads 2 beside one busy process ran 5-8x slower than with
// OMP_WAIT_POLICY=passive (docs/performance.md). libgomp reads the variable once, when it loads
// (before main), so only a new exec applies it: when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT
// is set, this sets OMP_WAIT_POLICY=PASSIVE and replaces the process by `exe` with `argv` (the
// tools pass "/proc/self/exe": the same program, same pid, same arguments). A user's own
// setting wins: then, or when the exec fails, it returns and nothing changes. Call first in
// main, before any thread starts (not thread safe). Returns only when it did not exec.
void exec_with_passive_omp_wait(const char* exe, char** argv);

}  // namespace recycle
