// A spike, not part of the course: a device backend whose tensors keep host memory and whose ops run torch's CPU
// kernels on aliases of that memory (no copy), with no Python call per op. It measures what a simulated GPU below
// torch's Python layer would cost at least (bench/README.md, "The floor of any tracer built on a mode" and "Below
// Python, second pass"). Built as PrivateUse1 ("simgpu"), or with -DSIM_CUDA under torch's own CUDA keys. It keeps
// a minimal size and clock (Model), off until set_profile, and no facts; ops the fallback cannot alias correctly
// are not its concern.
#include <torch/extension.h>
#include <pybind11/stl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/resize_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <mutex>
#include <thread>

// Built twice: as PrivateUse1 (named "simgpu" from Python), and with -DSIM_CUDA under torch's own CUDA keys, which a
// CPU-only build of torch leaves empty, so that tensors are "cuda" to torch itself (their device, reprs, errors).
#ifdef SIM_CUDA
#define SIM_KEY CUDA
#define SIM_AUTOGRAD_KEY AutogradCUDA
#else
#define SIM_KEY PrivateUse1
#define SIM_AUTOGRAD_KEY AutogradPrivateUse1
#endif

namespace {
constexpr auto kSim = c10::DeviceType::SIM_KEY;
// Whether a tensor has been made on the device. Until one has, the guard reports no device: autograd's engine starts
// on its first backward, and makes a thread per device the guards then report; having made one, it refuses
// backwards in any later fork. So a process that warms up on the CPU before forking (the course's fork server)
// starts the engine with no device thread, and its forks may run backwards on the device.
bool g_device_used = false;

// The simulated card's size and clock, at the least they could cost below Python (the course's own are in Python:
// app/harness/machine/allocator.py and clock.py): bytes held on the device against its capacity, rounded as torch's
// caching allocator rounds them, and per op a roofline kernel on one stream plus the host's launch. Off until
// set_profile hands over the machine profile's figures. Not modeled: the caching allocator's blocks and reserve,
// streams but one, copies over the host link, the host's waits at a sync (.item()), the Python
// around an op; a view the fallback returns counts again. (Backward kernels are charged as any op: they come here.)
struct Model {
  bool on = false;
  double flops_per_s = 0, bytes_per_s = 0, kernel_floor_s = 0, launch_s = 0;
  int64_t capacity = 0, allocated = 0, peak = 0, kernels = 0;
  double host_s = 0, stream_end_s = 0;
} g_model;
// c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize, the multiple every request rounds up to
constexpr int64_t kMinBlockSize = 512;

int64_t hold(int64_t n) {
  if (!g_model.on) return 0;
  n = (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
  TORCH_CHECK_WITH(OutOfMemoryError, g_model.allocated + n <= g_model.capacity,
                   "(the spike's words) the simulated device is out of memory: tried to allocate ", n, " bytes with ",
                   g_model.allocated, " of ", g_model.capacity, " held");
  g_model.allocated += n;
  g_model.peak = std::max(g_model.peak, g_model.allocated);
  return n;
}

struct Held { void* data; int64_t n; };
void free_held(void* ctx) {
  auto* held = static_cast<Held*>(ctx);
  g_model.allocated -= held->n;
  std::free(held->data);
  delete held;
}

struct SimAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    g_device_used = true;
    const int64_t counted = hold(static_cast<int64_t>(n));
    void* p = n ? std::malloc(n) : nullptr;
    return {p, new Held{p, counted}, &free_held, c10::Device(kSim, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }  // the context is not the data
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
  c10::DeviceIndex deviceCount() const noexcept override { return g_device_used ? 1 : 0; }
  // events and streams have nothing to wait for (autograd's engine records one between streams it thinks differ)
  void record(void** event, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {
    *event = reinterpret_cast<void*>(1);
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void synchronizeEvent(void*) const override {}
  void synchronizeStream(const c10::Stream&) const override {}
};
C10_REGISTER_GUARD_IMPL(SIM_KEY, SimGuard);

// the device's hooks: the same answers under PrivateUse1's interface or CUDA's
template <class Interface>
struct SimHooks : Interface {
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
#ifndef SIM_CUDA
SimHooks<at::PrivateUse1HooksInterface> g_hooks;
struct RegisterHooks { RegisterHooks() { at::RegisterPrivateUse1HooksInterface(&g_hooks); } } g_register_hooks;
#else
// CUDA's hooks, under the name torch looks for: autograd's engine asks them (through at::getAccelerator) whether CUDA
// is built, and then for its streams. torch creates them once, on first use, which `import torch` makes: so this
// library must be loaded before torch's Python module is (ctypes.CDLL, RTLD_GLOBAL), or torch keeps its "not built".
struct CUDAHooks final : SimHooks<at::CUDAHooksInterface> {
  explicit CUDAHooks(at::CUDAHooksArgs) {}
};
}  // namespace
namespace at { REGISTER_CUDA_HOOKS(CUDAHooks); }
namespace {
#endif

void no_delete(void*) {}
struct Kept { c10::Storage storage; int64_t n; };  // a CPU kernel's result, and the bytes the model counted for it
void delete_kept(void* ctx) {
  auto* kept = static_cast<Kept*>(ctx);
  g_model.allocated -= kept->n;
  delete kept;
}

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
  g_device_used = true;
  const auto& from = cpu.storage();
  auto* keep = new Kept{from, 0};
  try {
    keep->n = hold(static_cast<int64_t>(from.nbytes()));
  } catch (...) {
    delete keep;
    throw;
  }
  c10::Storage st(c10::Storage::use_byte_size_t(), from.nbytes(),
                  c10::DataPtr(from.mutable_data(), keep, &delete_kept, c10::Device(kSim, 0)), &g_alloc,
                  /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(st), c10::DispatchKeySet{c10::DispatchKey::SIM_KEY, c10::DispatchKey::SIM_AUTOGRAD_KEY,
                                         c10::DispatchKey::ADInplaceOrView}, cpu.dtype());
  impl->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  return at::Tensor(std::move(impl));
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>,
                               std::optional<at::MemoryFormat> memory_format) {
  return at::detail::empty_generic(size, &g_alloc, c10::DispatchKeySet(c10::DispatchKey::SIM_KEY),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  return at::detail::empty_strided_generic(size, stride, &g_alloc,
                                           c10::DispatchKeySet(c10::DispatchKey::SIM_KEY),
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

// CUDA's copy_ is the composite one, which would look for a CUDA copy kernel a CPU-only build lacks
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool) {
  cpu_alias(self).copy_(cpu_alias(src));
  return self;
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<at::MemoryFormat> fmt) {
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), fmt);
}

int64_t bytes_of(const at::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

// FLOPs of the products (torch/utils/flop_counter.py's mm_flop, addmm_flop, bmm_flop, baddbmm_flop: 2 * m * k * n,
// per batch), from the op's first two matrices (after the bias where there is one)
int64_t product_flops(const std::string& name, const c10::SmallVector<at::Tensor, 8>& ins) {
  const bool with_bias = name == "aten::addmm" || name == "aten::baddbmm";
  if (!(with_bias || name == "aten::mm" || name == "aten::bmm")) return 0;
  const size_t first = with_bias ? 1 : 0;
  if (ins.size() < first + 2) return 0;
  const auto& a = ins[first];
  const auto& b = ins[first + 1];
  if (a.dim() == 2 && b.dim() == 2) return 2 * a.size(0) * a.size(1) * b.size(1);
  if (a.dim() == 3 && b.dim() == 3) return 2 * a.size(0) * a.size(1) * a.size(2) * b.size(2);
  return 0;
}

// one op on the device: its kernel (the longer of its FLOPs at peak and its bytes at bandwidth, never under the
// floor) queued on the stream behind the last, the host's launch paid (clock.py's DeviceClock.op, in short)
void charge(const c10::OperatorHandle& op, const c10::SmallVector<at::Tensor, 8>& ins, const torch::jit::Stack& stack,
            size_t n_out) {
  int64_t nbytes = 0;
  for (const auto& t : ins) nbytes += bytes_of(t);
  for (size_t i = stack.size() - n_out; i < stack.size(); ++i)
    if (stack[i].isTensor()) nbytes += bytes_of(stack[i].toTensor());
  const double flops = static_cast<double>(product_flops(op.schema().name(), ins));
  const double seconds = g_model.kernel_floor_s + std::max(flops / g_model.flops_per_s,
                                                           static_cast<double>(nbytes) / g_model.bytes_per_s);
  g_model.stream_end_s = std::max(g_model.stream_end_s, g_model.host_s) + seconds;
  g_model.host_s += g_model.launch_s;
  ++g_model.kernels;
}

// every other op: its CPU kernel on aliases of the tensors' memory; results wrapped as PrivateUse1 tensors
void alias_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto n_args = schema.arguments().size();
  const auto start = stack->size() - n_args;
  c10::SmallVector<std::pair<c10::TensorImpl*, at::Tensor>, 8> originals;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> written;  // (alias, original) of out= / in-place args
  c10::SmallVector<at::Tensor, 8> device_ins;  // the op's tensors on the device, in order (for the model)
  for (size_t i = start; i < stack->size(); ++i) {
    auto& iv = (*stack)[i];
    if (iv.isTensor()) {
      const auto& t = iv.toTensor();
      if (t.defined() && t.device().type() == kSim) {
        auto alias = cpu_alias(t);
        originals.emplace_back(alias.unsafeGetTensorImpl(), t);
        if (g_model.on) device_ins.push_back(t);
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
  if (g_model.on) charge(op, device_ins, *stack, n_out);
}

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::SIM_KEY, &g_alloc);

TORCH_LIBRARY_IMPL(aten, SIM_KEY, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("resize_", resize_);
#ifdef SIM_CUDA
  m.impl("copy_", copy_);
#endif
}

TORCH_LIBRARY_IMPL(_, SIM_KEY, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&alias_fallback>()); }

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

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("condvar_round_trip_us", &condvar_round_trip_us);
  // the model's figures (effective: the profile's peak and bandwidth times clock.py's efficiencies), and on
  m.def("set_profile", [](double flops_per_s, double bytes_per_s, int64_t capacity, double kernel_floor_s,
                          double launch_s) {
    g_model.flops_per_s = flops_per_s;
    g_model.bytes_per_s = bytes_per_s;
    g_model.capacity = capacity;
    g_model.kernel_floor_s = kernel_floor_s;
    g_model.launch_s = launch_s;
    g_model.peak = g_model.allocated;  // a new run's figures (what is held stays held)
    g_model.kernels = 0;
    g_model.host_s = g_model.stream_end_s = 0;
    g_model.on = true;
  });
  m.def("model_off", [] { g_model.on = false; });
  m.def("model_state", [] {
    return std::map<std::string, double>{{"allocated", double(g_model.allocated)}, {"peak", double(g_model.peak)},
                                         {"kernels", double(g_model.kernels)}, {"host_s", g_model.host_s},
                                         {"stream_end_s", g_model.stream_end_s}};
  });
}
