// Saving a file atomically: readers of `path` see its old content or the whole new one, never
// a part, whatever happens to the writer. The new content goes to a temporary file in the same
// directory (path + ".tmp-PID-N"), which is synced, renamed over `path`, and the directory
// synced. The temporary file is removed when writing fails, and when the process gets SIGTERM
// or SIGINT while it exists: a handler, installed on first use where the signal's disposition
// is the default, unlinks every temporary file registered (async-signal-safe), then restores
// the default and raises the signal again (so the exit status still says SIGTERM/SIGINT).
// Thread safety: any number of AtomicFiles may exist at once, in any threads (up to 64 at a
// time are unlinked by the signal handler; more are still removed on failure). No LibTorch.
#pragma once

#include <functional>
#include <string>

namespace recycle {

class AtomicFile {
 public:
  // Picks and registers the temporary file's name; creates nothing.
  explicit AtomicFile(std::string path);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  // Where to write the new content.
  const std::string& temp_path() const { return temp_; }
  // Syncs the temporary file, renames it over path() and syncs the directory. Throws
  // std::runtime_error "cannot write PATH: why" (the temporary file removed, path() as it was).
  void commit();

 private:
  std::string path_, temp_;
  int slot_ = -1;  // in the signal handler's registry, -1 when not registered
  bool committed_ = false;
};

// A file the process makes for its own use and removes when done (e.g. weights handed to a
// stage that reads a file): removed on destruction, and on SIGTERM/SIGINT by the handler that
// removes AtomicFile's temporary files. Registers the name only; creates nothing.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int slot_ = -1;
};

// Removes the files of `dir` named PREFIX<PID>SUFFIX (PID in decimal) whose process no longer
// runs: what a process killed with SIGKILL, which no handler sees, left behind. Files of
// running processes and of this one are kept; errors are ignored (best effort).
void remove_orphaned_temporaries(const std::string& dir, const std::string& prefix,
                                 const std::string& suffix);

// Why write_file_atomically(path, ...) would fail for the path alone, or "" when it would not
// as far as can be told before writing: an empty path, a directory at path, a folder that does
// not exist, is not a folder or cannot be written (the temporary file goes beside path). For
// checking output paths before a long run.
std::string output_path_problem(const std::string& path);

// Writes `path` atomically: write(temp) writes the whole file at temp (and may throw, which
// leaves path as it was and removes temp), then AtomicFile::commit().
void write_file_atomically(const std::string& path,
                           const std::function<void(const std::string& temp)>& write);

}  // namespace recycle
