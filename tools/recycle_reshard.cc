#include "engine/cli/commands.h"
#include "engine/util/omp_wait.h"

// OpenMP threads that sleep, not spin, while another process wants a core: chosen before
// libgomp loads (engine/util/omp_wait.h).
RECYCLE_CHOOSE_OMP_WAIT_AT_LOAD

int main(int argc, char** argv) { return recycle::reshard_main(argc, argv); }
