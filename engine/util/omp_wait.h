// How the tools make OpenMP's waiting threads sleep instead of spin on shared cores.
#pragma once

#include <string>

namespace recycle {

// libgomp's threads spin while they wait for each other (OMP_WAIT_POLICY unset: for a while;
// `active`: for ever). On cores another process keeps busy a spinning thread takes the core its
// neighbour needs: head training beside one busy process ran 2.2x slower than with
// OMP_WAIT_POLICY=passive, while on idle cores passive ran 1.4x slower than spinning
// (docs/performance.md). libgomp reads the variable once, in its own initialiser, so the tools
// choose before it runs: choose_omp_wait_at_load runs from the tool's .preinit_array
// (RECYCLE_CHOOSE_OMP_WAIT_AT_LOAD below), which the dynamic linker calls after it has loaded
// the libraries and before any of them is initialised (LibTorch's initialisers, which register
// its operators, are most of a start). When a task that competes with the tool is runnable
// (competing_tasks() > 0) and neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, it executes the
// same program again with OMP_WAIT_POLICY=PASSIVE added to its environment (the C library's own
// environment is not set up yet, so a variable cannot be added in place): the second start
// loads the libraries again (about 0.03 s here) but initialises them once. A --help, a user's
// setting and idle cores run on as they are, measured or changed in nothing.
// The choice, as the --json reports give it ("omp_wait": {"policy", "why"}).
struct OmpWaitChoice {
  std::string policy;  // "passive", "libgomp's default", or the user's value ("ACTIVE")
  std::string why;     // "1 other task runnable at this priority or higher", "idle cores", ...
};

// What decide_omp_wait makes of a start (the decision itself, apart, for tests).
struct OmpWaitDecision {
  enum Kind {
    kUser,     // OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user: left alone
    kHelp,     // --help or -h: nothing is measured or changed
    kPassive,  // a competing task is runnable: PASSIVE
    kDefault,  // idle cores: libgomp's default
  } kind;
  // OMP_WAIT_POLICY holds a value libgomp refuses (it would print two lines of its own and
  // keep its default): it is removed first, and the decision made as if it were unset.
  bool drop_invalid_policy;
  // The program runs again with the environment changed (kPassive, or a value dropped).
  bool exec_again() const { return kind == kPassive || drop_invalid_policy; }
};

// `policy`, `spincount`: the environment's OMP_WAIT_POLICY and GOMP_SPINCOUNT (null: unset);
// `competing`: a callable giving competing_tasks(), called only when the decision needs it (so
// a --help start, or a user's setting, measures nothing).
template <typename Count>
OmpWaitDecision decide_omp_wait(const char* policy, const char* spincount, bool help,
                                Count competing);

// Whether libgomp takes `value` for OMP_WAIT_POLICY: "active" or "passive" in any case, with
// blanks around it (libgomp prints an error for anything else and keeps its default).
bool omp_wait_policy_is_valid(const char* value);

// How many other runnable tasks (threads) compete with this process for a core now: those at
// this process's nice value or lower (a niced background job yields to the tool and is not
// counted); the median of 5 readings 10 ms apart. Reads /proc/stat's procs_running first and
// scans PROC/*/task/*/stat only when some other task runs. 0 when /proc cannot be read.
// `proc`: the proc filesystem's root (tests give a folder of their own).
int competing_tasks(const char* proc = "/proc");

// Runs from .preinit_array: decides, executes the program again where the environment must
// change (with RECYCLE_OMP_WAIT_CHOICE="POLICY|WHY" added, which the second start takes as its
// choice, as do the workers a launcher starts from it), and keeps the choice for
// omp_wait_choice(). Reads `envp` (getenv does not work yet), uses only the C library. Writes
// one line to stderr when it drops an OMP_WAIT_POLICY that libgomp would refuse.
void choose_omp_wait_at_load(int argc, char** argv, char** envp);

// The choice made at load ("not chosen" where choose_omp_wait_at_load did not run: a program
// other than the tools).
OmpWaitChoice omp_wait_choice();

template <typename Count>
OmpWaitDecision decide_omp_wait(const char* policy, const char* spincount, bool help,
                                Count competing) {
  const bool drop = policy != nullptr && !omp_wait_policy_is_valid(policy);
  if (drop) policy = nullptr;
  if (help) return {OmpWaitDecision::kHelp, drop};
  if (policy != nullptr || spincount != nullptr) return {OmpWaitDecision::kUser, drop};
  return {competing() > 0 ? OmpWaitDecision::kPassive : OmpWaitDecision::kDefault, drop};
}

}  // namespace recycle

// In a tool's main file, at namespace scope: choose the wait policy before libgomp loads.
#define RECYCLE_CHOOSE_OMP_WAIT_AT_LOAD                                                  \
  __attribute__((section(".preinit_array"), used)) static void (*const                  \
      recycle_choose_omp_wait_entry)(int, char**, char**) = &recycle::choose_omp_wait_at_load;
