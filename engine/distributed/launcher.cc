#include "engine/distributed/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

// Beside the store in the job's directory: the line of the first essential failure.
const char* const kFailureFile = "/failure";

// The job's private directory: removed, with the store file in it, when the launcher is done.
struct StoreDirectory {
  std::string path;
  explicit StoreDirectory(std::string p) : path(std::move(p)) {}
  ~StoreDirectory() {
    unlink((path + "/store").c_str());
    unlink((path + kFailureFile).c_str());
    rmdir(path.c_str());
  }
};

// Writes `line` to DIR/failure whole (a temporary file renamed over it), so that a worker never
// reads half of it. Best effort: a worker that does not find it notices at its timeout.
void leave_failure_line(const std::string& dir, const std::string& line) {
  const std::string path = dir + kFailureFile, temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << line << '\n';
    if (!out.flush()) return;
  }
  std::rename(temporary.c_str(), path.c_str());
}

struct Worker {
  pid_t pid = -1;
  int rank = 0;
  bool running = true;
  int status = 0;
  bool reported = false;  // its end was said when it came
  std::thread relay;
};

using Clock = std::chrono::steady_clock;

// Threads for each worker: --threads (else every usable core) split between them, at least 1.
int threads_per_worker(const LaunchOptions& o) {
  const int cores = usable_cores();
  const int total = o.threads > 0 ? o.threads : cores;
  const int per_worker = std::max(1, total / o.nproc);
  if (o.nproc > total) {
    std::cerr << o.tool << ": note: " << o.nproc << " workers on " << total
              << " threads: each still gets 1 thread (oversubscribed)" << std::endl;
  }
  return per_worker;
}

// The job's store: a file in a directory only this user can enter (mkdtemp makes it 0700),
// which outlives any one worker; so a local job listens on no socket but Gloo's, on
// 127.0.0.1. Returns the new directory's path; the caller owns its removal.
std::string make_job_directory() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp && *tmp ? tmp : "/tmp") + "/recycle-job-XXXXXX";
  if (!mkdtemp(dir_template.data())) {
    throw std::runtime_error("cannot make the job's directory " + dir_template + ": " +
                             strerror(errno));
  }
  return dir_template;
}

// The token: the user's RECYCLE_JOB_TOKEN, else a new random one.
std::string job_token() {
  std::string token = job_token_from_environment();
  if (token.empty()) token = random_hex(16);
  return token;
}

// Until restore_stop_signals, SIGINT and SIGTERM only set g_signal: LocalJob::watch forwards
// them to the workers.
void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void restore_stop_signals() {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}

// A worker's command line: this program with the tool's arguments, then its place in the job.
std::vector<std::string> worker_arguments(const std::vector<std::string>& args, int rank,
                                          int nproc, const std::string& master, int per_worker) {
  std::vector<std::string> argv_s = {"/proc/self/exe"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  for (const std::string& s :
       {std::string("--rank"), std::to_string(rank), std::string("--world-size"),
        std::to_string(nproc), std::string("--master"), master, std::string("--threads"),
        std::to_string(per_worker)}) {
    argv_s.push_back(s);
  }
  return argv_s;
}

// The child's side of fork, up to execv. Only this thread survives the fork, and a relay thread
// may have held malloc's lock: argv and the token were made before it; allocate nothing here.
[[noreturn]] void exec_worker(int rank, pid_t launcher, const std::string& token, int err_fd,
                              char** argv) {
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
    dup2(err_fd, STDERR_FILENO);
  }
  execv("/proc/self/exe", argv);
  _exit(127);
}

// The launcher's side of the job: its workers, and what their ends make of it. Its relay
// threads must be joined (finish) before it is destroyed.
class LocalJob {
 public:
  // `job_dir`: the job's private directory, where a failure's line is left for the workers.
  LocalJob(const LaunchOptions& o, std::string job_dir) : o_(o), job_dir_(std::move(job_dir)) {}

  // Starts rank `rank`; the stderr of any rank but 0 comes back through a pipe and a relay.
  void start_worker(int rank, std::vector<std::string> argv_s, const std::string& token,
                    pid_t launcher);
  // Reaps the workers until none is running, forwarding a stop signal and killing what is left
  // at the deadline.
  void watch();
  // Joins the relays; after a failure, says how every other rank ended.
  void finish();
  int exit_code() const { return forwarded_ != 0 ? 128 + forwarded_ : exit_code_; }

 private:
  void forward_stop_signal();
  void start_grace_once_essentials_done();
  void kill_if_past_deadline();
  void on_worker_end(Worker& w);
  void report_other_ends();

  const LaunchOptions& o_;
  const std::string job_dir_;
  std::map<pid_t, Worker> workers_;
  int exit_code_ = 0;
  bool failed_ = false;
  pid_t first_failed_ = -1;
  Clock::time_point deadline_ = Clock::time_point::max();
  int forwarded_ = 0;
  bool grace_given_ = false;  // the essential ranks are done; the others' time is counted
};

void LocalJob::start_worker(int rank, std::vector<std::string> argv_s, const std::string& token,
                            pid_t launcher) {
  std::vector<char*> argv;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);

  int err_pipe[2] = {-1, -1};
  if (rank > 0 && pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("cannot make a pipe: ") + strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("cannot start a worker: ") + strerror(errno));
  if (pid == 0) exec_worker(rank, launcher, token, err_pipe[1], argv.data());
  Worker& w = workers_[pid];
  w.pid = pid;
  w.rank = rank;
  if (rank > 0) {
    close(err_pipe[1]);
    w.relay = std::thread(relay_lines, err_pipe[0], rank);
  }
}

void LocalJob::watch() {
  size_t running = workers_.size();
  while (running > 0) {
    forward_stop_signal();
    start_grace_once_essentials_done();
    kill_if_past_deadline();
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    auto it = workers_.find(pid);
    if (it == workers_.end()) continue;
    Worker& w = it->second;
    w.running = false;
    w.status = status;
    --running;
    on_worker_end(w);
  }
}

void LocalJob::forward_stop_signal() {
  if (g_signal != 0 && forwarded_ == 0) {
    forwarded_ = g_signal;
    for (auto& [pid, w] : workers_) {
      if (w.running) kill(pid, forwarded_);
    }
    deadline_ = std::min(deadline_, Clock::now() + std::chrono::seconds(10));
  }
}

void LocalJob::start_grace_once_essentials_done() {
  if (o_.essential_ranks > 0 && !failed_ && forwarded_ == 0 && !grace_given_) {
    // Every essential rank is done: the job is over. A worker still running (stopped, or
    // dropped by its servers) gets the timeout to end on its own.
    bool essential_running = false;
    for (const auto& [pid, w] : workers_) {
      essential_running |= w.running && w.rank < o_.essential_ranks;
    }
    if (!essential_running) {
      grace_given_ = true;
      deadline_ = Clock::now() + std::chrono::seconds(o_.timeout_seconds + 10);
    }
  }
}

void LocalJob::kill_if_past_deadline() {
  if (Clock::now() > deadline_) {
    std::vector<std::string> left;
    for (auto& [pid, w] : workers_) {
      if (w.running) {
        kill(pid, SIGKILL);
        left.push_back(std::to_string(w.rank));
      }
    }
    std::lock_guard<std::mutex> lock(g_stderr_mutex);
    std::cerr << o_.tool << ": killed rank(s) " << join(left, ", ") << " that did not stop in time"
              << std::endl;
    deadline_ = Clock::time_point::max();
  }
}

// A worker has just been reaped: the first essential failure fails the job and starts the
// others' deadline; a non-essential one's is reported and the job goes on.
void LocalJob::on_worker_end(Worker& w) {
  const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
  const bool essential = o_.essential_ranks <= 0 || w.rank < o_.essential_ranks;
  if (!ok && !essential && !failed_ && forwarded_ == 0) {
    w.reported = true;
    std::lock_guard<std::mutex> lock(g_stderr_mutex);
    std::cerr << o_.tool << ": rank " << w.rank << " of " << o_.nproc << " (pid " << w.pid << ") "
              << describe_status(w.status) << "; the job goes on without it" << std::endl;
    return;
  }
  if (!ok && !failed_ && forwarded_ == 0) {
    failed_ = true;
    first_failed_ = w.pid;
    exit_code_ = WIFEXITED(w.status) ? WEXITSTATUS(w.status) : 1;
    const std::string line = "rank " + std::to_string(w.rank) + " of " +
                             std::to_string(o_.nproc) + " (pid " + std::to_string(w.pid) + ") " +
                             describe_status(w.status);
    {
      std::lock_guard<std::mutex> lock(g_stderr_mutex);
      std::cerr << o_.tool << ": " << line << std::endl;
    }
    // The others find the line at their next look (a build's ranks wait on the store, where a
    // dead rank would otherwise show only by its heartbeat standing still for the timeout), or
    // notice on their own (Gloo's connections close); what is left at the deadline is killed.
    leave_failure_line(job_dir_, line);
    deadline_ = Clock::now() + std::chrono::seconds(o_.timeout_seconds + 10);
  }
}

void LocalJob::finish() {
  for (auto& [pid, w] : workers_) {
    if (w.relay.joinable()) w.relay.join();
  }
  if (failed_) report_other_ends();
}

// How the others ended, so that every rank's fate is on record.
void LocalJob::report_other_ends() {
  for (auto& [pid, w] : workers_) {
    const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
    if (ok || pid == first_failed_ || w.reported) continue;
    std::cerr << o_.tool << ": rank " << w.rank << " " << describe_status(w.status) << std::endl;
  }
}

}  // namespace

int launch_local_workers(const LaunchOptions& o, const std::vector<std::string>& args) {
  if (o.nproc < 1) throw std::invalid_argument("--nproc must be at least 1");
  const int per_worker = threads_per_worker(o);
  const StoreDirectory store_dir(make_job_directory());
  const std::string master = "file:" + store_dir.path + "/store";
  const std::string token = job_token();
  catch_stop_signals();

  LocalJob job(o, store_dir.path);
  const pid_t launcher = getpid();
  for (int rank = 0; rank < o.nproc; ++rank) {
    job.start_worker(rank, worker_arguments(args, rank, o.nproc, master, per_worker), token,
                     launcher);
  }
  job.watch();
  job.finish();
  restore_stop_signals();
  return job.exit_code();
}

std::string launcher_reported_failure(const std::string& master) {
  static const std::string kFile = "file:", kStore = "/store";
  if (master.compare(0, kFile.size(), kFile) != 0 ||
      master.size() <= kFile.size() + kStore.size() ||
      master.compare(master.size() - kStore.size(), kStore.size(), kStore) != 0) {
    return "";
  }
  const std::string dir = master.substr(kFile.size(), master.size() - kFile.size() - kStore.size());
  std::ifstream in(dir + kFailureFile);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

}  // namespace recycle
