// engine/models/device_streams.h: streams and events through c10's device-generic interface.
#include "engine/models/device_streams.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/version.h>

#include <thread>

namespace recycle {

c10::Stream current_stream(const c10::Device& device) {
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device);
}

c10::Stream side_stream(const c10::Device& device) {
  if (device.is_cpu()) return current_stream(device);
  return c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device);
}

StreamScope::StreamScope(const c10::Stream& stream)
    : previous_(stream), active_(stream.device_type() != c10::DeviceType::CPU) {
  if (active_) previous_ = c10::impl::VirtualGuardImpl(stream.device_type()).exchangeStream(stream);
}

StreamScope::~StreamScope() {
  if (active_) c10::impl::VirtualGuardImpl(previous_.device_type()).exchangeStream(previous_);
}

DeviceEvent::DeviceEvent(const c10::Device& device, bool timing) {
  if (device.is_cpu()) return;
  event_ = std::make_unique<c10::Event>(
      device.type(), timing ? c10::EventFlag::BACKEND_DEFAULT : c10::EventFlag::PYTORCH_DEFAULT);
}

void DeviceEvent::record(const c10::Stream& stream) {
  if (event_) event_->record(stream);
}

void DeviceEvent::block(const c10::Stream& stream) const {
  if (event_) event_->block(stream);
}

void DeviceEvent::synchronize() const {
  if (!event_) return;
#if TORCH_VERSION_MAJOR >= 2
  event_->synchronize();
#else
  while (!event_->query()) std::this_thread::yield();
#endif
}

bool DeviceEvent::done() const { return !event_ || event_->query(); }

double DeviceEvent::seconds_since(const DeviceEvent& start) const {
#if TORCH_VERSION_MAJOR >= 2
  if (event_ && start.event_) return start.event_->elapsedTime(*event_) / 1000.0;
#else
  (void)start;
#endif
  return -1;
}

void keep_until_done(const at::Tensor& t, const c10::Stream& stream) {
  if (!t.defined() || t.device().is_cpu()) return;
  c10::impl::VirtualGuardImpl(stream.device_type())
      .recordDataPtrOnStream(t.storage().data_ptr(), stream);
}

}  // namespace recycle
