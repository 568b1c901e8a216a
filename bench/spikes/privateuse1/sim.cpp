// A spike, not part of the course: a PrivateUse1 backend ("simgpu") whose tensors keep host memory and whose ops run
// torch's CPU kernels on aliases of that memory (no copy), with no Python call per op. It measures what a simulated
// GPU below torch's Python layer would cost at least (bench/README.md, "The floor of any tracer built on a mode").
// It keeps no memory figures, no clock and no facts; ops the fallback cannot alias correctly are not its concern.
#include <torch/extension.h>
#include <ATen/EmptyTensor.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/resize_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace {
constexpr auto kSim = c10::DeviceType::PrivateUse1;

struct SimAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? std::malloc(n) : nullptr;
    return {p, p, &std::free, c10::Device(kSim, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &std::free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};
SimAllocator g_alloc;

struct SimGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kSim; }
  c10::Device exchangeDevice(c10::Device) const override { return c10::Device(kSim, 0); }
  c10::Device getDevice() const override { return c10::Device(kSim, 0); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, SimGuard);

struct SimHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(kSim, 0); }
};
SimHooks g_hooks;
struct RegisterHooks { RegisterHooks() { at::RegisterPrivateUse1HooksInterface(&g_hooks); } } g_register_hooks;

void no_delete(void*) {}
void delete_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

// a CPU tensor over t's memory (a resizable storage: a CPU kernel may resize an out= argument; it then gets
// memory of its own, which the fallback copies back)
at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kSim) return t;
  const auto& from = t.storage();
  c10::Storage st(c10::Storage::use_byte_size_t(), from.nbytes(),
                  c10::DataPtr(from.mutable_data(), from.mutable_data(), &no_delete, c10::Device(at::kCPU)),
                  c10::GetAllocator(c10::DeviceType::CPU), /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(st), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

// a simulated tensor over a CPU result's storage, which it keeps alive
at::Tensor sim_wrap(const at::Tensor& cpu) {
  const auto& from = cpu.storage();
  auto* keep = new c10::Storage(from);
  c10::Storage st(c10::Storage::use_byte_size_t(), from.nbytes(),
                  c10::DataPtr(from.mutable_data(), keep, &delete_storage, c10::Device(kSim, 0)), &g_alloc,
                  /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(st), c10::DispatchKeySet{c10::DispatchKey::PrivateUse1, c10::DispatchKey::AutogradPrivateUse1,
                                         c10::DispatchKey::ADInplaceOrView}, cpu.dtype());
  impl->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  return at::Tensor(std::move(impl));
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>,
                               std::optional<at::MemoryFormat> memory_format) {
  return at::detail::empty_generic(size, &g_alloc, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  return at::detail::empty_strided_generic(size, stride, &g_alloc,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  cpu_alias(dst).copy_(cpu_alias(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes());
  return copy_from(self, dst, false);
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<at::MemoryFormat> fmt) {
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), fmt);
}

// every other op: its CPU kernel on aliases of the tensors' memory; results wrapped as PrivateUse1 tensors
void alias_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto n_args = schema.arguments().size();
  const auto start = stack->size() - n_args;
  c10::SmallVector<std::pair<c10::TensorImpl*, at::Tensor>, 8> originals;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> written;  // (alias, original) of out= / in-place args
  for (size_t i = start; i < stack->size(); ++i) {
    auto& iv = (*stack)[i];
    if (iv.isTensor()) {
      const auto& t = iv.toTensor();
      if (t.defined() && t.device().type() == kSim) {
        auto alias = cpu_alias(t);
        originals.emplace_back(alias.unsafeGetTensorImpl(), t);
        const auto* info = schema.arguments()[i - start].alias_info();
        if (info && info->isWrite()) written.emplace_back(alias, t);
        iv = alias;
      }
    } else if (iv.isTensorList()) {
      auto list = iv.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        at::Tensor t = list[j];
        if (t.defined() && t.device().type() == kSim) {
            auto alias = cpu_alias(t);
          originals.emplace_back(alias.unsafeGetTensorImpl(), t);
          list[j] = alias;
        }
      }
    } else if (iv.isDevice() && iv.toDevice().type() == kSim) {
      iv = c10::IValue(c10::Device(at::kCPU));
    }
  }
  op.callBoxed(stack);
  for (auto& [alias, original] : written) {
    if (alias.storage().mutable_data() != original.storage().mutable_data() || alias.sizes() != original.sizes()) {
      at::native::resize_(original, alias.sizes());
      original.unsafeGetTensorImpl()->set_sizes_and_strides(alias.sizes(), alias.strides(), original.storage_offset());
      cpu_alias(original).copy_(alias);
    }
  }
  auto back = [&](const at::Tensor& out) -> at::Tensor {
    if (!out.defined()) return out;
    for (auto& [impl, original] : originals)
      if (impl == out.unsafeGetTensorImpl()) return original;
    return sim_wrap(out);
  };
  const auto n_out = schema.returns().size();
  for (size_t i = stack->size() - n_out; i < stack->size(); ++i) {
    auto& iv = (*stack)[i];
    if (iv.isTensor()) {
      iv = back(iv.toTensor());
    } else if (iv.isTensorList()) {
      auto list = iv.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) list[j] = back(list[j]);
      iv = list;
    }
  }
}

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_alloc);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("resize_", resize_);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&alias_fallback>()); }

// What one hand-off between two threads costs on this machine, as autograd's engine makes one to a device's thread
// and back: microseconds per round trip through a condition variable, the median of `rounds` blocks of 1,000
double condvar_round_trip_us(int rounds) {
  std::mutex mutex;
  std::condition_variable changed;
  int turn = 0;
  const int n = 1000;
  std::thread other([&] {
    for (int i = 0; i < rounds * n; ++i) {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return turn == 1; });
      turn = 0;
      changed.notify_all();
    }
  });
  std::vector<double> blocks;
  for (int r = 0; r < rounds; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      std::unique_lock<std::mutex> lock(mutex);
      turn = 1;
      changed.notify_all();
      changed.wait(lock, [&] { return turn == 0; });
    }
    blocks.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / n);
  }
  other.join();
  std::sort(blocks.begin(), blocks.end());
  return blocks[blocks.size() / 2];
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("condvar_round_trip_us", &condvar_round_trip_us); }
