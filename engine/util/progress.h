// Progress: a one-line progress bar on stderr (count, rate, ETA), redrawn at most ten times a
// second when stderr is a terminal. When it is not (nohup, a pipe, a job scheduler's log), a plain
// line every RECYCLE_PROGRESS_SECONDS seconds (default 30; 0: none), as tqdm's file mode and
// Keras' verbose=2 do, and a last line at the end when any was printed (so short runs print
// nothing). Not thread safe: call from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace recycle {

class Progress {
 public:
  // enabled: report at all (callers pass false for --json or quiet runs).
  Progress(std::string label, int64_t total, bool enabled = true);
  ~Progress();
  void advance(int64_t n);
  void set_suffix(std::string suffix) { suffix_ = std::move(suffix); }
  // Draws the final state and ends the line.
  void finish();

 private:
  void draw(bool final);
  void line(bool final);
  std::string label_;
  std::string suffix_;
  int64_t total_;
  int64_t done_ = 0;
  bool active_;           // a bar on a terminal
  double plain_every_;    // seconds between plain lines when not a terminal; 0: none
  bool plain_printed_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace recycle
