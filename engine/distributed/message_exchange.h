// exchange_messages: every rank of a process group sends a stream of byte messages to every rank
// (itself included) and receives theirs, point to point over the group (Gloo's send/recv), with
// no file and no store between them. What recycle-reshard moves records with
// (engine/jobs/reshard_job.cc).
//
// The ranks meet in rounds k = 0..world-1: in round k a rank sends to rank + k and receives from
// rank - k (mod world), so every pair meets once in each direction and no rank waits on a rank
// that waits on it (each posts its send before it waits for its receive). A rank's messages to
// itself go without the network, one between each two steps of the other rounds (so that a rank
// with much to hand itself keeps no peer waiting longer than a message) and the rest after them.
// A message is a header (its size, and whether another follows) then its bytes; messages from
// one rank arrive in the order they were sent.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <functional>
#include <string>

namespace c10d {
class ProcessGroup;
}

namespace recycle {

// `next(to, &message)`: the next message for rank `to`, false when there is none left (called
// until it returns false, once per round). `on(from, message)`: a message received from rank
// `from`, in order. Every rank of `group` must call it, with the same `tag` (messages use tag
// and tag + 1). Throws what the group throws (a rank that stopped: its timeout).
void exchange_messages(const c10::intrusive_ptr<c10d::ProcessGroup>& group, int tag,
                       const std::function<bool(int to, std::string* message)>& next,
                       const std::function<void(int from, std::string message)>& on);

}  // namespace recycle
