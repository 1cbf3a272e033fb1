// Progress: a one-line progress bar on stderr (count, rate, ETA), drawn only when stderr is a
// terminal, at most ten times a second. Not thread safe: call from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace recycle {

class Progress {
 public:
  // enabled: draw at all (callers pass false for --json or quiet runs); drawing also needs
  // stderr to be a terminal.
  Progress(std::string label, int64_t total, bool enabled = true);
  ~Progress();
  void advance(int64_t n);
  void set_suffix(std::string suffix) { suffix_ = std::move(suffix); }
  // Draws the final state and ends the line.
  void finish();

 private:
  void draw(bool final);
  std::string label_;
  std::string suffix_;
  int64_t total_;
  int64_t done_ = 0;
  bool active_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace recycle
