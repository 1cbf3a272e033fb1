#include "engine/util/omp_wait.h"

#include <dirent.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace recycle {

namespace {

// The choice made at load, "POLICY|WHY" (as RECYCLE_OMP_WAIT_CHOICE carries it); empty when
// none was made. Plain data only: choose_omp_wait_at_load runs before this program's own static
// constructors (and before libstdc++'s).
char g_choice[192] = "";

const char kChoiceVariable[] = "RECYCLE_OMP_WAIT_CHOICE";

// The value of variable `name` in `envp` (null when unset).
const char* find_variable(char** envp, const char* name) {
  const size_t n = std::strlen(name);
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return nullptr;
}

// Reads a small file whole into buf (NUL-terminated); false when it cannot be read.
bool read_small(const char* path, char* buf, size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t have = 0;
  for (;;) {
    const ssize_t n = read(fd, buf + have, size - 1 - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    if (have == size - 1) break;
  }
  close(fd);
  buf[have] = '\0';
  return have > 0;
}

// /proc/stat's procs_running (every runnable task, this one included); -1 when unreadable.
int procs_running(const char* proc) {
  char path[256];
  std::snprintf(path, sizeof path, "%s/stat", proc);
  static char buf[64 * 1024];  // the per-cpu lines come first: a machine of many cores
  if (!read_small(path, buf, sizeof buf)) return -1;
  const char* at = std::strstr(buf, "\nprocs_running ");
  return at ? std::atoi(at + 15) : -1;
}

// Whether the task whose stat line is `line` ("PID (COMM) STATE ... NICE ...") is runnable at
// nice `nice` or lower. COMM may hold blanks and parentheses: the fields start after the last ')'.
bool runnable_at_or_above(const char* line, long nice) {
  const char* close_paren = std::strrchr(line, ')');
  if (close_paren == nullptr || close_paren[1] != ' ') return false;
  const char* p = close_paren + 2;
  const char state = *p;
  if (state != 'R') return false;
  // Fields after COMM: 3 state, 4 ppid, ... 18 priority, 19 nice: 16 blanks after the state.
  for (int field = 3; field < 19; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  return std::strtol(p, nullptr, 10) <= nice;
}

// The runnable tasks of other processes at nice `nice` or lower, from PROC/*/task/*/stat.
int scan_competing(const char* proc, long nice, long self) {
  DIR* procs = opendir(proc);
  if (procs == nullptr) return 0;
  int count = 0;
  char path[512], line[1024];
  while (const dirent* e = readdir(procs)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    if (std::strtol(e->d_name, nullptr, 10) == self) continue;
    std::snprintf(path, sizeof path, "%s/%s/task", proc, e->d_name);
    DIR* tasks = opendir(path);
    if (tasks == nullptr) continue;  // gone since
    while (const dirent* t = readdir(tasks)) {
      if (!std::isdigit(static_cast<unsigned char>(t->d_name[0]))) continue;
      std::snprintf(path, sizeof path, "%s/%s/task/%s/stat", proc, e->d_name, t->d_name);
      if (read_small(path, line, sizeof line) && runnable_at_or_above(line, nice)) ++count;
    }
    closedir(tasks);
  }
  closedir(procs);
  return count;
}

void sleep_ms(long ms) {
  timespec t{0, ms * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

bool asks_for_help(int argc, char** argv) {
  for (int i = 1; i < argc && argv != nullptr && argv[i] != nullptr; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  }
  return false;
}

void copy_value(char* to, size_t size, const char* from) {
  std::snprintf(to, size, "%s", from);
}

}  // namespace

bool omp_wait_policy_is_valid(const char* value) {
  while (std::isspace(static_cast<unsigned char>(*value))) ++value;
  if (strncasecmp(value, "active", 6) == 0) {
    value += 6;
  } else if (strncasecmp(value, "passive", 7) == 0) {
    value += 7;
  } else {
    return false;
  }
  while (std::isspace(static_cast<unsigned char>(*value))) ++value;
  return *value == '\0';
}

int competing_tasks(const char* proc) {
  errno = 0;
  const long nice = getpriority(PRIO_PROCESS, 0);
  const long self = static_cast<long>(getpid());
  int readings[5];
  for (int i = 0; i < 5; ++i) {
    if (i > 0) sleep_ms(10);
    const int running = procs_running(proc);
    if (running < 1) return 0;
    // This process is one of procs_running's; a scan is needed only when some other task runs.
    readings[i] = running > 1 ? scan_competing(proc, nice, self) : 0;
  }
  for (int i = 1; i < 5; ++i) {  // the median, by insertion sort
    for (int j = i; j > 0 && readings[j - 1] > readings[j]; --j) {
      const int t = readings[j];
      readings[j] = readings[j - 1];
      readings[j - 1] = t;
    }
  }
  return readings[2];
}

namespace {

// Executes this program again with `envp` less OMP_WAIT_POLICY (when `drop`) and any earlier
// choice, plus `policy` (an OMP_WAIT_POLICY entry, or null) and the choice "POLICY|WHY".
// Returns only when it could not.
void exec_again(char** argv, char** envp, bool drop, const char* policy, const char* choice) {
  static char* env[4096];
  static char choice_entry[256];
  size_t n = 0;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (drop && std::strncmp(*e, "OMP_WAIT_POLICY=", 16) == 0) continue;
    if (std::strncmp(*e, kChoiceVariable, sizeof kChoiceVariable - 1) == 0 &&
        (*e)[sizeof kChoiceVariable - 1] == '=') {
      continue;
    }
    if (n + 3 >= sizeof env / sizeof env[0]) return;  // an environment this large runs as it is
    env[n++] = *e;
  }
  if (policy != nullptr) env[n++] = const_cast<char*>(policy);
  std::snprintf(choice_entry, sizeof choice_entry, "%s=%s", kChoiceVariable, choice);
  env[n++] = choice_entry;
  env[n] = nullptr;
  execve("/proc/self/exe", argv, env);
}

}  // namespace

void choose_omp_wait_at_load(int argc, char** argv, char** envp) {
  const char* inherited = find_variable(envp, kChoiceVariable);
  if (inherited != nullptr) {  // chosen by the start before this one, or by the launcher
    copy_value(g_choice, sizeof g_choice, inherited);
    return;
  }
  const char* policy = find_variable(envp, "OMP_WAIT_POLICY");
  const char* spincount = find_variable(envp, "GOMP_SPINCOUNT");
  int competing = 0;
  const OmpWaitDecision d =
      decide_omp_wait(policy, spincount, asks_for_help(argc, argv), [&competing] {
        competing = competing_tasks();
        return competing;
      });
  const char* dropped = "";
  if (d.drop_invalid_policy) {
    char line[160];
    const int n = std::snprintf(line, sizeof line,
                                "%s: note: OMP_WAIT_POLICY='%.40s' is neither ACTIVE nor PASSIVE: "
                                "ignored\n",
                                argc > 0 && argv[0] ? basename(argv[0]) : "recycle", policy);
    if (n > 0) (void)!write(STDERR_FILENO, line, std::min<size_t>(n, sizeof line - 1));
    dropped = " (an invalid OMP_WAIT_POLICY was ignored)";
  }
  switch (d.kind) {
    case OmpWaitDecision::kHelp:
      std::snprintf(g_choice, sizeof g_choice, "libgomp's default|--help: not measured%s", dropped);
      break;
    case OmpWaitDecision::kUser:
      if (!d.drop_invalid_policy && policy != nullptr) {
        std::snprintf(g_choice, sizeof g_choice, "%.60s|set in the environment%s", policy, dropped);
      } else {
        std::snprintf(g_choice, sizeof g_choice, "GOMP_SPINCOUNT=%.40s|set in the environment%s",
                      spincount, dropped);
      }
      break;
    case OmpWaitDecision::kPassive:
      std::snprintf(g_choice, sizeof g_choice,
                    "passive|%d other task(s) runnable at this priority or higher%s", competing,
                    dropped);
      break;
    case OmpWaitDecision::kDefault:
      std::snprintf(g_choice, sizeof g_choice,
                    "libgomp's default|no other task runnable at this priority or higher%s",
                    dropped);
      break;
  }
  if (d.exec_again()) {
    exec_again(argv, envp, d.drop_invalid_policy,
               d.kind == OmpWaitDecision::kPassive ? "OMP_WAIT_POLICY=PASSIVE" : nullptr, g_choice);
    // The exec failed: go on as this process is (libgomp keeps its default).
    copy_value(g_choice, sizeof g_choice, "libgomp's default|could not start again");
  }
}

OmpWaitChoice omp_wait_choice() {
  const std::string choice = g_choice;
  if (choice.empty()) return {"libgomp's default", "not chosen (not started as a recycle tool)"};
  const size_t bar = choice.find('|');
  if (bar == std::string::npos) return {choice, "chosen by the process that started this one"};
  return {choice.substr(0, bar), choice.substr(bar + 1)};
}

}  // namespace recycle
