#include "engine/distributed/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "base/strings.h"
#include "engine/distributed/dist_options.h"
#include "engine/util/cores.h"

namespace recycle {

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

std::mutex g_stderr_mutex;

// Copies a worker's stderr to ours, a line at a time, each line prefixed with "[rank R] ".
void relay_lines(int fd, int rank) {
  std::string pending;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = pending.find_first_of("\n\r")) != std::string::npos) {
      const std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (line.empty()) continue;  // progress redraws and blank lines
      std::lock_guard<std::mutex> lock(g_stderr_mutex);
      std::cerr << "[rank " << rank << "] " << line << std::endl;
    }
  }
  if (!pending.empty()) {
    std::lock_guard<std::mutex> lock(g_stderr_mutex);
    std::cerr << "[rank " << rank << "] " << pending << std::endl;
  }
  close(fd);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

// The job's private directory: removed, with the store file in it, when the launcher is done.
struct StoreDirectory {
  std::string path;
  explicit StoreDirectory(std::string p) : path(std::move(p)) {}
  ~StoreDirectory() {
    unlink((path + "/store").c_str());
    rmdir(path.c_str());
  }
};

struct Worker {
  pid_t pid = -1;
  int rank = 0;
  bool running = true;
  int status = 0;
  bool reported = false;  // its end was said when it came
  std::thread relay;
};

}  // namespace

int launch_local_workers(const LaunchOptions& o, const std::vector<std::string>& args) {
  if (o.nproc < 1) throw std::invalid_argument("--nproc must be at least 1");
  const int cores = usable_cores();
  const int total = o.threads > 0 ? o.threads : cores;
  const int per_worker = std::max(1, total / o.nproc);
  if (o.nproc > total) {
    std::cerr << o.tool << ": note: " << o.nproc << " workers on " << total
              << " threads: each still gets 1 thread (oversubscribed)" << std::endl;
  }

  // The job's store: a file in a directory only this user can enter (mkdtemp makes it 0700),
  // which outlives any one worker; so a local job listens on no socket but Gloo's, on
  // 127.0.0.1. The token: the user's RECYCLE_JOB_TOKEN, else a new random one.
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp && *tmp ? tmp : "/tmp") + "/recycle-job-XXXXXX";
  if (!mkdtemp(dir_template.data())) {
    throw std::runtime_error("cannot make the job's directory " + dir_template + ": " +
                             strerror(errno));
  }
  const StoreDirectory store_dir(dir_template);
  const std::string master = "file:" + store_dir.path + "/store";
  std::string token = job_token_from_environment();
  if (token.empty()) token = random_hex(16);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::map<pid_t, Worker> workers;
  const pid_t launcher = getpid();
  for (int rank = 0; rank < o.nproc; ++rank) {
    std::vector<std::string> argv_s = {"/proc/self/exe"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    for (const std::string& s :
         {std::string("--rank"), std::to_string(rank), std::string("--world-size"),
          std::to_string(o.nproc), std::string("--master"), master, std::string("--threads"),
          std::to_string(per_worker)}) {
      argv_s.push_back(s);
    }
    std::vector<char*> argv;
    for (std::string& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);

    int err_pipe[2] = {-1, -1};
    if (rank > 0 && pipe2(err_pipe, O_CLOEXEC) != 0) {
      throw std::runtime_error(std::string("cannot make a pipe: ") + strerror(errno));
    }
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("cannot start a worker: ") + strerror(errno));
    if (pid == 0) {
      // A worker: dies with the launcher; only rank 0 speaks on stdout.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != launcher) _exit(1);
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      setenv("RECYCLE_LAUNCHED", "1", 1);
      setenv(kJobTokenVariable, token.c_str(), 1);
      if (rank > 0) {
        const int null_fd = open("/dev/null", O_WRONLY);
        dup2(null_fd, STDOUT_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
      }
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    Worker& w = workers[pid];
    w.pid = pid;
    w.rank = rank;
    if (rank > 0) {
      close(err_pipe[1]);
      w.relay = std::thread(relay_lines, err_pipe[0], rank);
    }
  }

  using Clock = std::chrono::steady_clock;
  int exit_code = 0;
  bool failed = false;
  pid_t first_failed = -1;
  Clock::time_point deadline = Clock::time_point::max();
  int forwarded = 0;
  bool grace_given = false;  // the essential ranks are done; the others' time is counted
  size_t running = workers.size();
  while (running > 0) {
    if (g_signal != 0 && forwarded == 0) {
      forwarded = g_signal;
      for (auto& [pid, w] : workers) {
        if (w.running) kill(pid, forwarded);
      }
      deadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    }
    if (o.essential_ranks > 0 && !failed && forwarded == 0 && !grace_given) {
      // Every essential rank is done: the job is over. A worker still running (stopped, or
      // dropped by its servers) gets the timeout to end on its own.
      bool essential_running = false;
      for (const auto& [pid, w] : workers) essential_running |= w.running && w.rank < o.essential_ranks;
      if (!essential_running) {
        grace_given = true;
        deadline = Clock::now() + std::chrono::seconds(o.timeout_seconds + 10);
      }
    }
    if (Clock::now() > deadline) {
      std::vector<std::string> left;
      for (auto& [pid, w] : workers) {
        if (w.running) {
          kill(pid, SIGKILL);
          left.push_back(std::to_string(w.rank));
        }
      }
      std::lock_guard<std::mutex> lock(g_stderr_mutex);
      std::cerr << o.tool << ": killed rank(s) " << join(left, ", ") << " that did not stop in time"
                << std::endl;
      deadline = Clock::time_point::max();
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    auto it = workers.find(pid);
    if (it == workers.end()) continue;
    Worker& w = it->second;
    w.running = false;
    w.status = status;
    --running;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const bool essential = o.essential_ranks <= 0 || w.rank < o.essential_ranks;
    if (!ok && !essential && !failed && forwarded == 0) {
      w.reported = true;
      std::lock_guard<std::mutex> lock(g_stderr_mutex);
      std::cerr << o.tool << ": rank " << w.rank << " of " << o.nproc << " (pid " << pid << ") "
                << describe_status(status) << "; the job goes on without it" << std::endl;
      continue;
    }
    if (!ok && !failed && forwarded == 0) {
      failed = true;
      first_failed = pid;
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      {
        std::lock_guard<std::mutex> lock(g_stderr_mutex);
        std::cerr << o.tool << ": rank " << w.rank << " of " << o.nproc << " (pid " << pid << ") "
                  << describe_status(status) << std::endl;
      }
      // The others should notice within their timeout and stop on their own.
      deadline = Clock::now() + std::chrono::seconds(o.timeout_seconds + 10);
    }
  }
  for (auto& [pid, w] : workers) {
    if (w.relay.joinable()) w.relay.join();
  }
  if (failed) {
    // How the others ended, so that every rank's fate is on record.
    for (auto& [pid, w] : workers) {
      const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
      if (ok || pid == first_failed || w.reported) continue;
      std::cerr << o.tool << ": rank " << w.rank << " " << describe_status(w.status) << std::endl;
    }
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (forwarded != 0) return 128 + forwarded;
  return exit_code;
}

}  // namespace recycle
