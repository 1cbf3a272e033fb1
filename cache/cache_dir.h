// CacheDir: what a cache is on disk apart from RocksDB's own files.
//
// - Path: a cache path is resolved through symbolic links before anything is read, written or
//   deleted; a link whose target does not exist is refused (nothing is created in its place).
// - Marker: every cache holds a file named RECYCLE-CACHE. Caches made before the marker existed
//   are recognised by a readable manifest instead. Nothing is ever deleted from a directory that
//   is not recognised as a cache.
// - Open lock: an flock(2) on the cache directory itself. Writers hold it exclusively while
//   they open, close or delete a cache; readers hold it shared only while they open. Together
//   with writers that keep RocksDB from deleting files while they run, a read-only open never
//   sees files vanish under it (see ActivationStore).
// - Writer lock: RocksDB's own LOCK file, held by the one process that writes the cache;
//   writer_pid() tells who holds it, for error messages.
//
// Thread safety: the functions are safe to call from many threads; an OpenLock is owned by one.
#pragma once

#include <functional>
#include <string>

#include "recycle/status.h"

namespace recycle {

constexpr const char* kCacheMarkerName = "RECYCLE-CACHE";
// The staging area inside a cache directory: record files made to be ingested (see
// ActivationStore::staging_dir). Only the cache's own tools put files there.
constexpr const char* kStagingDirName = "recycle-staging";

// How long an open, close or delete waits for another process to finish opening, closing or
// deleting the cache (the open lock below).
constexpr double kOpenLockSeconds = 60.0;

// The real path of `dir` with every symbolic link followed (dir need not exist, but a link
// in it must lead somewhere): InvalidArgument for a dangling link or a link loop. `followed`
// (optional) tells whether dir itself was a link.
Status resolve_cache_path(const std::string& dir, std::string* real, bool* followed = nullptr);

// Where the cache directory `dir` is, as a text equal for two paths of one directory on one
// machine and different otherwise (the host's name, the device and inode of the directory or of
// its nearest existing ancestor, and the rest of the path below that): how the ranks of a sharded
// build tell that two of them were given one directory (a symbolic link, "x/{rank}/../c").
std::string cache_location(const std::string& dir);

bool has_cache_marker(const std::string& real_dir);
Status write_cache_marker(const std::string& real_dir);

// True when the directory holds files of a RocksDB database (CURRENT, MANIFEST-*, *.sst,
// *.blob, *.log, OPTIONS-*) or the marker: something that was, or is becoming, a cache.
bool looks_like_a_database(const std::string& real_dir);

// Why `real` (the resolved `dir`) cannot be opened as a cache when it has no CURRENT file:
// NotFound (nothing there, or a directory that is no cache), InvalidArgument (not a
// directory) or Corruption (a cache's files without their CURRENT).
Status missing_cache_status(const std::string& dir, const std::string& real);

// Makes a new, empty cache at `real` (the resolved `dir`): create_db makes the database in a
// staging directory of this process (the path it is given), which is marked, then renamed into
// place, so that a kill never leaves a half-made cache and two processes creating the same
// cache never touch each other's files. When another process wins the race, its cache is left
// as it is and OK is returned, for the caller to open it. A non-empty directory at `real` that
// is not a cache is refused (InvalidArgument) and left untouched.
Status create_cache_dir(const std::string& dir, const std::string& real,
                        const std::function<Status(const std::string& path)>& create_db);

// The pid of the process holding RocksDB's writer lock (DIR/LOCK), or 0 when nobody holds it.
// For a cache this process writes (see note_writer) it is this process's pid: the file is then
// never opened here, because closing any descriptor of it would drop RocksDB's fcntl lock.
long writer_pid(const std::string& real_dir);
// Called by writers after opening and before closing a cache, for writer_pid.
void note_writer(const std::string& real_dir, bool open);

// "cache DIR is in use: process N holds its writer lock DIR/LOCK (is a build running?)".
std::string writer_lock_message(const std::string& dir, const std::string& real_dir);

class OpenLock {
 public:
  OpenLock() = default;
  ~OpenLock() { release(); }
  OpenLock(OpenLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  OpenLock& operator=(OpenLock&& other) noexcept;
  OpenLock(const OpenLock&) = delete;
  OpenLock& operator=(const OpenLock&) = delete;

  // Waits up to timeout_seconds for the lock on the directory real_dir (which must exist).
  // IOError naming the directory when it cannot be had in time. A lock taken on a directory
  // that was deleted and made anew meanwhile is dropped and taken again on the new one.
  static Status acquire(const std::string& real_dir, bool exclusive, double timeout_seconds,
                        OpenLock* out);
  void release();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace recycle
