#include "bench/bench_util.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace recycle::bench {

namespace fs = std::filesystem;

bool ChildExit::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string ChildExit::how() const {
  return WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                           : "was killed by signal " + std::to_string(WTERMSIG(status));
}

std::string ChildExit::first_error_line() const { return stderr_text.substr(0, stderr_text.find('\n')); }

ChildExit spawn_child(const std::vector<std::string>& argv, const std::string& dir) {
  const std::string out = dir + "/child.stdout", err = dir + "/child.stderr";
  const auto start = std::chrono::steady_clock::now();
  std::fflush(nullptr);  // else the child's freopen writes our buffered output again
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(127);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::perror(args[0]);
    std::fflush(stderr);  // a freopen'd stderr is buffered, and _exit does not flush
    _exit(127);
  }
  ChildExit e;
  struct rusage usage {};
  if (wait4(pid, &e.status, 0, &usage) < 0) throw std::runtime_error("wait4 failed");
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  e.peak_mb = usage.ru_maxrss / 1024.0;
  e.stderr_path = err;
  std::ifstream so(out), se(err);
  e.stderr_text.assign(std::istreambuf_iterator<char>(se), std::istreambuf_iterator<char>());
  std::string line;
  while (std::getline(so, line)) {
    if (!line.empty()) e.last_line = line;
  }
  return e;
}

ChildRun run_child(const std::vector<std::string>& argv, const std::string& dir) {
  const ChildExit e = spawn_child(argv, dir);
  std::string cmd;
  for (const auto& a : argv) cmd += a + " ";
  if (!e.ok()) {
    // One line: which child, how it ended, and the first line it wrote on stderr.
    throw std::runtime_error(fs::path(argv[0]).filename().string() + " " + e.how() + " (" +
                             e.first_error_line() + "); the command was: " + cmd + "; see " +
                             e.stderr_path);
  }
  ChildRun run;
  run.seconds = e.seconds;
  run.peak_mb = e.peak_mb;
  run.result = nlohmann::json::parse(e.last_line, nullptr, false);
  if (run.result.is_discarded() || !run.result.is_object()) throw std::runtime_error("no JSON from: " + cmd);
  return run;
}

void append(std::vector<std::string>* argv, const std::vector<std::string>& more) {
  argv->insert(argv->end(), more.begin(), more.end());
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / (v.size() - 1));
}

std::string fmt(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string bytes_text(double b) {
  if (b <= 0) return "-";
  if (b >= 1e6) return fmt(b / 1e6, 2) + " MB";
  if (b >= 1e3) return fmt(b / 1e3, 1) + " kB";
  return fmt(b, 0) + " B";
}

void note(const std::string& line) { std::cerr << "recycle-bench: " << line << std::endl; }

}  // namespace recycle::bench
