#include "engine/util/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace recycle {

namespace {
std::string format_duration(double seconds) {
  if (seconds < 0 || seconds > 359999) return "--:--";
  const int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  }
  return buf;
}
// RECYCLE_PROGRESS_SECONDS: seconds between plain lines (default 30; 0 or less: none).
double plain_interval() {
  const char* v = std::getenv("RECYCLE_PROGRESS_SECONDS");
  if (v == nullptr || *v == '\0') return 30.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !std::isfinite(s)) return 30.0;
  return s > 0 ? s : 0.0;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      active_(enabled && isatty(STDERR_FILENO)),
      plain_every_(enabled && !active_ ? plain_interval() : 0.0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_) finish();
}

void Progress::advance(int64_t n) {
  done_ += n;
  if (!active_ && plain_every_ <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (active_) {
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    draw(false);
  } else if (std::chrono::duration<double>(now - last_draw_).count() >= plain_every_) {
    last_draw_ = now;
    line(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (active_) draw(true);
  if (plain_printed_) line(true);
}

void Progress::line(bool final) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  const double eta = rate > 0 ? (total_ - done_) / rate : -1.0;
  const double frac = total_ > 0 ? static_cast<double>(done_) / total_ : 1.0;
  std::fprintf(stderr, "%s: %lld/%lld (%.0f%%), %.0f/s, %s%s\n", label_.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_), 100.0 * frac, rate,
               final ? ("done in " + format_duration(elapsed)).c_str()
                     : ("ETA " + format_duration(eta)).c_str(),
               suffix_.c_str());
  std::fflush(stderr);
  plain_printed_ = true;
}

void Progress::draw(bool final) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  const double eta = rate > 0 ? (total_ - done_) / rate : -1.0;
  const int width = 24;
  const double frac = total_ > 0 ? static_cast<double>(done_) / total_ : 1.0;
  const int filled = static_cast<int>(frac * width);
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r%s [%s] %lld/%lld %3.0f%% %.0f/s %s %s%s\033[K", label_.c_str(),
               bar.c_str(), static_cast<long long>(done_), static_cast<long long>(total_),
               100.0 * frac, rate,
               final ? ("in " + format_duration(elapsed)).c_str()
                     : ("ETA " + format_duration(eta)).c_str(),
               suffix_.c_str(), final ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace recycle
