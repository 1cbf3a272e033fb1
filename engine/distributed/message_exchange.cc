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
                    const std::function<void(int, std::string)>& on) {
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
        bytes_out = {
            torch::from_blob(out.data(), {static_cast<int64_t>(out.size())}, torch::kByte)};
        sends.push_back(group.send(bytes_out, to, tag + 1));
      }
      sent_all = !more;
    }
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
  std::string message;
  while (next(rank, &message)) on(rank, std::move(message));  // round 0: this rank's own
  for (int k = 1; k < world; ++k) {
    exchange_round(*group, tag, (rank + k) % world, (rank - k + world) % world, next, on);
  }
}

}  // namespace recycle
