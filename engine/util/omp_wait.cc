#include "engine/util/omp_wait.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace recycle {

void exec_with_passive_omp_wait(const char* exe, char** argv, bool busy) {
  if (!busy) return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv(exe, argv);
  unsetenv("OMP_WAIT_POLICY");  // the exec failed: go on as this process is
}

int others_running() {
  std::vector<int> readings;
  for (int i = 0; i < 5; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream stat("/proc/stat");
    std::string word;
    int running = -1;
    while (stat >> word) {
      if (word == "procs_running") {
        stat >> running;
        break;
      }
    }
    if (running < 1) return 0;
    readings.push_back(running - 1);  // this process is one of them
  }
  std::sort(readings.begin(), readings.end());
  return readings[readings.size() / 2];
}

}  // namespace recycle
