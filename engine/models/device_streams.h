// Streams and events of a device, through c10's device-generic interface (no CUDA headers, so
// it builds against Debian's CPU-only LibTorch too): the side stream a GPU's copies go on, so
// that they overlap the work on the current stream, and the events that order the two. On the
// CPU each of these does nothing: its work is done when the call that asked for it returns.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <memory>

namespace recycle {

// The stream the calling thread's work on `device` goes to (CPU: the CPU's one stream).
c10::Stream current_stream(const c10::Device& device);
// A stream of LibTorch's pool for `device`, other than the default stream (CUDA): copies queued
// there run beside the current stream's kernels. CPU: current_stream.
c10::Stream side_stream(const c10::Device& device);

// While it lives, the calling thread's current stream for the stream's device is `stream`
// (nothing for a CPU stream); the previous one comes back when it goes.
class StreamScope {
 public:
  explicit StreamScope(const c10::Stream& stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  c10::Stream previous_;
  bool active_ = false;
};

// An event on a device's streams. For a CPU device it holds nothing and every call returns
// at once (done() is true). Not thread safe; movable.
class DeviceEvent {
 public:
  // `timing`: seconds_since may be asked of it (CUDA events that record their time).
  explicit DeviceEvent(const c10::Device& device, bool timing = false);
  // Marks the point `stream` has reached: the event is done when the work queued before it is.
  void record(const c10::Stream& stream);
  // `stream`'s work queued after this call waits for the event (not the host).
  void block(const c10::Stream& stream) const;
  // The host waits for the event.
  void synchronize() const;
  bool done() const;
  // Seconds from `start`'s record to this one's, both done and both made with `timing`;
  // negative where LibTorch cannot tell (a CPU device, LibTorch 1.13).
  double seconds_since(const DeviceEvent& start) const;

 private:
  std::unique_ptr<c10::Event> event_;  // a GPU's only
};

// Tells the device's caching allocator that `t`'s memory is read by the work queued on
// `stream` so far, so that it is not handed out again before that work is done (PyTorch's
// Tensor.record_stream). Needed for a tensor made on one stream and used on another. Nothing
// for a CPU tensor.
void keep_until_done(const at::Tensor& t, const c10::Stream& stream);

}  // namespace recycle
