#include "engine/util/omp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace recycle {

void exec_with_passive_omp_wait(const char* exe, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv(exe, argv);
  unsetenv("OMP_WAIT_POLICY");  // the exec failed: go on as this process is
}

}  // namespace recycle
