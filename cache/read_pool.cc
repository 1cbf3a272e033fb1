#include "cache/read_pool.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace recycle {

Status read_threads_from_environment(int* threads) {
  const char* v = std::getenv("RECYCLE_READ_THREADS");
  if (v == nullptr || *v == '\0') return Status();
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1 || n > 64) {
    return Status::invalid_argument("RECYCLE_READ_THREADS=" + std::string(v) +
                                    ": expected a whole number from 1 to 64");
  }
  *threads = static_cast<int>(n);
  return Status();
}

Status verify_reads_from_environment(bool* verify) {
  const char* v = std::getenv("RECYCLE_VERIFY_READS");
  if (v == nullptr || *v == '\0') return Status();
  const std::string s(v);
  if (s != "0" && s != "1") {
    return Status::invalid_argument("RECYCLE_VERIFY_READS=" + s + ": expected 0 or 1");
  }
  *verify = s == "1";
  return Status();
}

struct ReadPool::Job {
  const std::function<void(int)>* task = nullptr;
  int n = 0;
  std::atomic<int> next{0};  // the next task to start
  std::atomic<int> done{0};  // tasks that returned
  std::mutex mu;
  std::condition_variable finished;
};

struct ReadPool::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> jobs;  // with tasks left to start
  bool stop = false;
  std::vector<std::thread> workers;
};

ReadPool::ReadPool(int threads)
    : state_(new State), owner_(static_cast<int>(::getpid())) {
  for (int i = 1; i < threads; ++i) state_->workers.emplace_back([s = state_] { work(s); });
}

ReadPool::~ReadPool() {
  if (static_cast<int>(::getpid()) != owner_) {
    // A forked child's copy: the threads are the parent's, and its mutex and condition
    // variable may have been in use by them at the fork. Left as they are, never freed.
    return;
  }
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  for (auto& t : state_->workers) t.join();
  delete state_;
}

int ReadPool::threads() const { return static_cast<int>(state_->workers.size()) + 1; }

bool ReadPool::drain(Job& job) {
  bool last = false;
  for (int i = job.next.fetch_add(1); i < job.n; i = job.next.fetch_add(1)) {
    (*job.task)(i);
    last = job.done.fetch_add(1) + 1 == job.n;
  }
  return last;
}

void ReadPool::run(int n, const std::function<void(int)>& task) {
  if (n <= 0) return;
  if (n == 1 || state_->workers.empty() || static_cast<int>(::getpid()) != owner_) {
    for (int i = 0; i < n; ++i) task(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->task = &task;
  job->n = n;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->jobs.push_back(job);
  }
  state_->cv.notify_all();
  drain(*job);
  std::unique_lock<std::mutex> lock(job->mu);
  job->finished.wait(lock, [&] { return job->done.load() == job->n; });
}

void ReadPool::work(State* s) {
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    // A job whose every task has started needs no other thread: its caller waits for it.
    while (!s->jobs.empty() && s->jobs.front()->next.load() >= s->jobs.front()->n) {
      s->jobs.pop_front();
    }
    if (s->stop) return;
    if (s->jobs.empty()) {
      s->cv.wait(lock);
      continue;
    }
    std::shared_ptr<Job> job = s->jobs.front();
    lock.unlock();
    if (drain(*job)) {
      std::lock_guard<std::mutex> done(job->mu);
      job->finished.notify_all();
    }
    lock.lock();
  }
}

}  // namespace recycle
