// How many cores this process may use.
#pragma once

namespace recycle {

// The cores this process may run on (sched_getaffinity: taskset, a container's cpuset), not the
// machine's; the machine's (std::thread::hardware_concurrency) where the affinity is unknown.
// At least 1. The tools' default --threads, the launcher's threads per worker and the prefetch
// threads are taken from it.
int usable_cores();

}  // namespace recycle
