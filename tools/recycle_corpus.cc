#include "engine/cli/commands.h"
#include "engine/util/omp_wait.h"

int main(int argc, char** argv) {
  // OpenMP threads that sleep, not spin, while another process wants a core.
  recycle::exec_with_passive_omp_wait("/proc/self/exe", argv, recycle::others_running() > 0);
  return recycle::corpus_main(argc, argv);
}
