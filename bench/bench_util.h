// Helpers shared by recycle-bench's benchmarks (bench/*_bench.cc): running
// a tool as a child process and reading its JSON line, and small number formatting. No LibTorch.
// Not thread safe (they fork and write files under a directory of the caller's choosing).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace recycle::bench {

// How a child process ended.
struct ChildExit {
  int status = 0;           // as from wait4()
  double seconds = 0;       // wall time
  double peak_mb = 0;       // peak resident set size
  std::string last_line;    // its last non-empty stdout line
  std::string stderr_text;  // everything it wrote on stderr
  std::string stderr_path;  // where that is kept

  bool ok() const;
  // "exited 3" / "was killed by signal 9"
  std::string how() const;
  std::string first_error_line() const;
};

// Runs argv[0] (a path; no PATH search) with argv, stdout and stderr to files under `dir`
// (overwritten by the next child). Throws only when it cannot fork or wait.
ChildExit spawn_child(const std::vector<std::string>& argv, const std::string& dir);

struct ChildRun {
  nlohmann::json result;  // the child's last stdout line, parsed
  double seconds = 0;     // wall time
  double peak_mb = 0;     // peak resident set size
};

// spawn_child, then throws one line (which child, how it ended, its first stderr line, the
// command) unless it exited 0 with a JSON object as its last stdout line.
ChildRun run_child(const std::vector<std::string>& argv, const std::string& dir);

// Appends `more` to argv (the pieces of a child's command line).
void append(std::vector<std::string>* argv, const std::vector<std::string>& more);

double mean(const std::vector<double>& v);
double stddev(const std::vector<double>& v);  // sample standard deviation; 0 below 2 values
std::string fmt(double v, int digits);        // fixed, `digits` after the point
std::string bytes_text(double b);             // "2.63 MB", "62.0 kB", "512 B"; "-" for 0

// Writes "recycle-bench: LINE" on stderr.
void note(const std::string& line);

}  // namespace recycle::bench
