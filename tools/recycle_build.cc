#include "engine/cli/commands.h"
#include "engine/util/omp_wait.h"

int main(int argc, char** argv) {
  recycle::exec_with_passive_omp_wait("/proc/self/exe", argv);  // sleep, not spin, on shared cores
  return recycle::build_main(argc, argv);
}
