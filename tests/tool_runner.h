// Running the built tools from tests: to completion with captured output, or in the
// background to be killed. Tool names are resolved in RECYCLE_TOOLS_DIR (the build directory,
// or the environment's).
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tests/test_paths.h"

namespace recycle::testing {

struct ToolRun {
  int code = -1;
  std::string out, err;
  nlohmann::json last;  // the last non-empty stdout line, parsed (discarded when not JSON)
};

// RECYCLE_TOOLS_DIR in the environment, where set (a test binary carried to another machine
// with its tools: scripts/device_check.sh), else the build directory it was compiled for.
inline std::string tool_path(const std::string& tool) {
  const char* moved = std::getenv("RECYCLE_TOOLS_DIR");
  return std::string(moved && *moved ? moved : kBuiltToolsDir) + "/" + tool;
}

// Runs a built tool with `args` (shell words) to completion; stdout and stderr go to files
// in `dir` and are read back.
inline ToolRun run_tool(const TempDir& dir, const std::string& tool, const std::string& args) {
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  const std::string cmd = tool_path(tool) + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  ToolRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  std::string line, last;
  std::istringstream lines(r.out);
  while (std::getline(lines, line)) {
    if (!line.empty()) last = line;
  }
  r.last = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  return r;
}

inline std::string describe(const ToolRun& r) {
  return "exit " + std::to_string(r.code) + "\nstdout:\n" + r.out + "stderr:\n" + r.err;
}

// Sets an environment variable for its life (unsets it with a null value) and restores what
// was there before. For the tools a test starts; not thread safe.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1); else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1); else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// A TCP port on 127.0.0.1 that was free a moment ago (bound, then released: the caller runs
// again when another program took it meanwhile).
inline int free_tcp_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Ranks started by hand (--master HOST:PORT) need a job token: a test's ranks share this one.
inline ScopedEnv test_job_token() { return ScopedEnv("RECYCLE_JOB_TOKEN", "recycle-tests"); }

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Starts a built tool in the background, its stdout and stderr to the files named (discarded
// by default); returns its pid.
inline pid_t spawn_tool(const std::string& tool, const std::vector<std::string>& args,
                        const std::string& out = "/dev/null",
                        const std::string& err = "/dev/null") {
  std::fflush(nullptr);  // else the child's freopen writes the parent's buffered output again
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(127);
    const std::string path = tool_path(tool);
    std::vector<char*> argv = {const_cast<char*>(path.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

inline bool have_fashion_mnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") &&
         std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz");
}

// Writes an IDX file of unsigned bytes (plain: the reader takes gzip or plain).
inline void write_idx(const std::string& path, const std::vector<int32_t>& dims,
                      const std::vector<uint8_t>& data) {
  std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
  for (int32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((d >> s) & 0xFF));
  }
  bytes.append(data.begin(), data.end());
  write_file(path, bytes);
}

// Waits for a spawned tool; returns its exit code, or -signal when a signal ended it.
inline int wait_tool(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// The pids of `parent`'s children (a launcher's workers).
inline std::vector<pid_t> children_of(pid_t parent) {
  std::ifstream in("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) +
                   "/children");
  std::vector<pid_t> pids;
  pid_t pid;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

// The worker of `launcher` started with --rank `rank` (its command line says so), or -1.
inline pid_t worker_of_rank(pid_t launcher, int rank) {
  for (pid_t pid : children_of(launcher)) {
    std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(" --rank " + std::to_string(rank) + " ") != std::string::npos) return pid;
  }
  return -1;
}

}  // namespace recycle::testing
