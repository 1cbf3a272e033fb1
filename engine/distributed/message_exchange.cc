#include "engine/distributed/message_exchange.h"

#include <torch/torch.h>

#include <vector>

#include "engine/distributed/process_group.h"

namespace recycle {

namespace {

// One round with two other ranks (or one, twice): this rank's messages to `to` while those of
// `from` come in.
void exchange_round(c10d::ProcessGroup& group, int tag, int to, int from,
                    const std::function<bool(int, std::string*)>& next,
                    const std::function<void(int, std::string)>& on,
                    const std::function<void()>& own_step) {
  bool sent_all = false, got_all = false;
  while (!sent_all || !got_all) {
    std::string out;
    std::vector<c10::intrusive_ptr<c10d::Work>> sends;
    std::vector<torch::Tensor> head_out, bytes_out;
    if (!sent_all) {
      const bool more = next(to, &out);
      head_out = {torch::tensor({static_cast<int64_t>(out.size()), int64_t{more}}, torch::kLong)};
      sends.push_back(group.send(head_out, to, tag));
      if (more && !out.empty()) {
        // A tensor of its own bytes: a send still in flight when this rank stops (a throw
        // below) reads memory it owns, not a string already freed.
        bytes_out = {
            torch::from_blob(out.data(), {static_cast<int64_t>(out.size())}, torch::kByte).clone()};
        sends.push_back(group.send(bytes_out, to, tag + 1));
      }
      sent_all = !more;
    }
    own_step();  // while the peers' messages travel
    if (!got_all) {
      std::vector<torch::Tensor> head_in{torch::empty({2}, torch::kLong)};
      group.recv(head_in, from, tag)->wait();
      const int64_t size = head_in[0][0].item<int64_t>();
      if (head_in[0][1].item<int64_t>() == 0) {
        got_all = true;
      } else {
        std::string message(static_cast<size_t>(size), '\0');
        if (size > 0) {
          std::vector<torch::Tensor> bytes_in{
              torch::from_blob(message.data(), {size}, torch::kByte)};
          group.recv(bytes_in, from, tag + 1)->wait();
        }
        on(from, std::move(message));
      }
    }
    for (const auto& w : sends) w->wait();
  }
}

}  // namespace

void exchange_messages(const c10::intrusive_ptr<c10d::ProcessGroup>& group, int tag,
                       const std::function<bool(int, std::string*)>& next,
                       const std::function<void(int, std::string)>& on) {
  const int rank = group->getRank();
  const int world = group->getSize();
  // This rank's own messages, one a step of the other rounds and the rest after them: a rank
  // with much to hand itself keeps its peers waiting no longer than a message.
  bool own_left = true;
  const std::function<void()> own_step = [&] {
    std::string message;
    if (!own_left) return;
    if (next(rank, &message)) {
      on(rank, std::move(message));
    } else {
      own_left = false;
    }
  };
  for (int k = 1; k < world; ++k) {
    exchange_round(*group, tag, (rank + k) % world, (rank - k + world) % world, next, on, own_step);
  }
  while (own_left) own_step();
}

}  // namespace recycle
