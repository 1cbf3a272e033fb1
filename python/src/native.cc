// recycle._native: the pybind11 module under the Python package `recycle` (python/recycle/).
// It binds include/recycle/ and nothing else: SplitReader, CacheLoader and KeyedReader (reader.h),
// CacheWriter and tensors_fingerprint (writer.h), inspect and verify (cache.h), predict
// (predict.h). Tensors cross
// as torch.Tensor without copies (torch's own caster, <torch/extension.h>).
//
// No C++ exception reaches the interpreter as a crash: pybind11 turns every one thrown below a
// binding into a Python exception, the library's kinds into these (errors.h):
//   StaleCacheError -> recycle.StaleCacheError (a RuntimeError)
//   CorruptRecordError -> recycle.CorruptRecordError (a RuntimeError)
//   InvalidArgument, std::invalid_argument (CodecRangeError too) -> ValueError
//   std::out_of_range -> IndexError; anything else -> RuntimeError, with the library's message.
// The GIL is released while the engine reads, decodes, keys and writes.
#include <torch/extension.h>

#include <string>
#include <vector>

#include "recycle/cache.h"
#include "recycle/errors.h"
#include "recycle/predict.h"
#include "recycle/reader.h"
#include "recycle/writer.h"

namespace py = pybind11;

namespace {

using Tensors = std::vector<at::Tensor>;

std::vector<int64_t> positions_of(const at::Tensor& positions) {
  const at::Tensor p = positions.to(at::kCPU, at::kLong).contiguous().view(-1);
  const int64_t* d = p.data_ptr<int64_t>();
  return std::vector<int64_t>(d, d + p.numel());
}

struct WriterHolder {
  std::unique_ptr<recycle::CacheWriter> w;
  recycle::CacheWriter& get() {
    if (!w) throw std::logic_error("the cache writer is closed");
    return *w;
  }
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "recycle's engine (the package recycle wraps it; see docs/python.md)";
  py::register_exception<recycle::StaleCacheError>(m, "StaleCacheError", PyExc_RuntimeError);
  py::register_exception<recycle::CorruptRecordError>(m, "CorruptRecordError", PyExc_RuntimeError);

  m.def(
      "inspect",
      [](const std::string& dir, bool verify) {
        recycle::InspectReport r;
        {
          py::gil_scoped_release release;
          r = recycle::inspect_cache(dir, verify);
        }
        return r.to_json();
      },
      py::arg("path"), py::arg("verify") = false,
      "recycle-inspect --json's object, as a JSON string");

  m.def(
      "predict",
      [](const std::string& cache, const std::string& head, const std::string& weights,
         const std::string& data, const std::string& split, const std::string& classes,
         int64_t limit, const std::string& transform, const std::string& out, int64_t top_k,
         bool write_back, int64_t batch, int threads) {
        recycle::PredictOptions o;
        o.cache_dir = cache;
        o.head = head;
        o.weights = weights;
        o.data.spec = data;
        o.data.split = split;
        o.data.classes = classes;
        o.data.limit = limit;
        o.data.transform = transform;
        o.out = out;
        o.top_k = top_k;
        o.write_back = write_back;
        o.batch = batch;
        o.threads = threads;
        o.progress = false;
        recycle::PredictReport r;
        {
          py::gil_scoped_release release;
          r = recycle::run_predict(o);
        }
        return r.to_json();
      },
      py::arg("path"), py::arg("head"), py::arg("weights"), py::arg("data"), py::arg("split"),
      py::arg("classes"), py::arg("limit"), py::arg("transform"), py::arg("out"),
      py::arg("top_k"), py::arg("write_back"), py::arg("batch"), py::arg("threads"),
      "recycle-predict --json's object, as a JSON string (run_predict, recycle/predict.h)");

  py::class_<recycle::SplitReader>(m, "SplitReader")
      .def(py::init([](const std::string& dir, const std::string& split, bool allow_partial,
                       int64_t block_cache_mb) {
             recycle::ReaderOptions o;
             o.cache_dir = dir;
             o.split = split;
             o.allow_partial = allow_partial;
             o.block_cache_mb = block_cache_mb;
             py::gil_scoped_release release;
             return std::make_unique<recycle::SplitReader>(o);
           }),
           py::arg("path"), py::arg("split"), py::arg("allow_partial"), py::arg("block_cache_mb"))
      .def("__len__", &recycle::SplitReader::size)
      .def("tensor_names", &recycle::SplitReader::tensor_names)
      .def("manifest_json", &recycle::SplitReader::manifest_json)
      .def("complete", &recycle::SplitReader::complete)
      .def("labels",
           [](const recycle::SplitReader& r) {
             const std::vector<int64_t>& l = r.labels();
             return torch::tensor(l, torch::kInt64);
           })
      .def(
          "read",
          [](recycle::SplitReader& r, const at::Tensor& positions) {
            const std::vector<int64_t> p = positions_of(positions);
            Tensors tensors;
            at::Tensor labels;
            {
              py::gil_scoped_release release;
              r.read(p.data(), static_cast<int64_t>(p.size()), &tensors, &labels);
            }
            return py::make_tuple(tensors, labels);
          },
          py::arg("positions"));

  py::class_<recycle::CacheLoader>(m, "CacheLoader")
      .def(py::init([](const std::string& dir, const std::string& split, bool allow_partial,
                       int64_t block_cache_mb, int64_t batch_size, bool shuffle, uint64_t seed,
                       int rank, int world_size, bool drop_last, int64_t prefetch,
                       bool pin_memory, const std::string& device) {
             recycle::LoaderOptions o;
             o.reader.cache_dir = dir;
             o.reader.split = split;
             o.reader.allow_partial = allow_partial;
             o.reader.block_cache_mb = block_cache_mb;
             o.batch_size = batch_size;
             o.shuffle = shuffle;
             o.seed = seed;
             o.rank = rank;
             o.world_size = world_size;
             o.drop_last = drop_last;
             o.prefetch = prefetch;
             o.pin_memory = pin_memory;
             o.device = device;
             py::gil_scoped_release release;
             return std::make_unique<recycle::CacheLoader>(o);
           }),
           py::arg("path"), py::arg("split"), py::arg("allow_partial"), py::arg("block_cache_mb"),
           py::arg("batch_size"), py::arg("shuffle"), py::arg("seed"), py::arg("rank"),
           py::arg("world_size"), py::arg("drop_last"), py::arg("prefetch"),
           py::arg("pin_memory") = false, py::arg("device") = "cpu")
      .def("__len__", &recycle::CacheLoader::batches)
      .def("size", &recycle::CacheLoader::size)
      .def("samples_per_rank", &recycle::CacheLoader::samples_per_rank)
      .def("tensor_names", &recycle::CacheLoader::tensor_names)
      .def("manifest_json", &recycle::CacheLoader::manifest_json)
      .def("start_epoch", &recycle::CacheLoader::start_epoch, py::arg("epoch"),
           py::call_guard<py::gil_scoped_release>())
      .def("next", [](recycle::CacheLoader& l) -> py::object {
        Tensors tensors;
        at::Tensor labels;
        bool more;
        {
          py::gil_scoped_release release;
          more = l.next(&tensors, &labels);
        }
        if (!more) return py::none();
        return py::make_tuple(tensors, labels);
      });

  py::class_<recycle::KeyedReader>(m, "KeyedReader")
      .def(py::init([](const std::string& dir, int64_t block_cache_mb) {
             py::gil_scoped_release release;
             return std::make_unique<recycle::KeyedReader>(dir, block_cache_mb);
           }),
           py::arg("path"), py::arg("block_cache_mb"))
      .def("tensor_names", &recycle::KeyedReader::tensor_names)
      .def("manifest_json", &recycle::KeyedReader::manifest_json)
      .def(
          "lookup",
          [](recycle::KeyedReader& r, const at::Tensor& inputs) {
            Tensors tensors;
            at::Tensor hits;
            {
              py::gil_scoped_release release;
              r.lookup(inputs, &tensors, &hits);
            }
            return py::make_tuple(tensors, hits);
          },
          py::arg("inputs"));

  py::class_<recycle::WriterTensor>(m, "WriterTensor")
      .def(py::init([](const std::string& name, const std::string& dtype,
                       const std::vector<int64_t>& shape) {
             return recycle::WriterTensor{name, dtype, shape};
           }),
           py::arg("name"), py::arg("dtype"), py::arg("shape"));

  // The writer behind a holder whose close() drops it at once (releasing the cache's writer
  // lock), whatever still refers to the Python object (a traceback, say).
  py::class_<WriterHolder>(m, "CacheWriter")
      .def(py::init([](const std::string& dir, const std::string& split, const std::string& data,
                       int64_t samples, const std::vector<std::string>& class_names,
                       const std::string& model, const std::string& fingerprint,
                       const std::string& split_at, const std::string& keyer,
                       const std::string& codec, const std::string& preprocess,
                       const std::vector<int64_t>& input_shape,
                       const std::vector<recycle::WriterTensor>& layout,
                       const std::string& compression, bool rebuild, double flush_seconds,
                       const std::string& engine_model, const std::string& engine_weights,
                       const std::string& engine_split_at) {
             recycle::WriterOptions o;
             o.cache_dir = dir;
             o.split = split;
             o.data = data;
             o.samples = samples;
             o.class_names = class_names;
             o.model = model;
             o.fingerprint = fingerprint;
             o.split_at = split_at;
             o.keyer = keyer;
             o.codec = codec;
             o.preprocess = preprocess;
             o.input_shape = input_shape;
             o.layout = layout;
             o.compression = compression;
             o.rebuild = rebuild;
             o.flush_seconds = flush_seconds;
             o.engine_model = engine_model;
             o.engine_weights = engine_weights;
             o.engine_split_at = engine_split_at;
             py::gil_scoped_release release;
             auto h = std::make_unique<WriterHolder>();
             h->w = std::make_unique<recycle::CacheWriter>(o);
             return h;
           }),
           py::arg("path"), py::arg("split"), py::arg("data"), py::arg("samples"),
           py::arg("class_names"), py::arg("model"), py::arg("fingerprint"), py::arg("split_at"),
           py::arg("keyer"), py::arg("codec"), py::arg("preprocess"), py::arg("input_shape"),
           py::arg("layout"), py::arg("compression"), py::arg("rebuild"), py::arg("flush_seconds"),
           py::arg("engine_model"), py::arg("engine_weights"), py::arg("engine_split_at"))
      .def(
          "add_chunk",
          [](WriterHolder& h, const at::Tensor& inputs, const at::Tensor& labels) {
            py::gil_scoped_release release;
            return h.get().add_chunk(inputs, labels);
          },
          py::arg("inputs"), py::arg("labels"))
      .def(
          "write_chunk",
          [](WriterHolder& h, const Tensors& outputs) {
            py::gil_scoped_release release;
            h.get().write_chunk(outputs);
          },
          py::arg("outputs"))
      .def("finish",
           [](WriterHolder& h) {
             py::gil_scoped_release release;
             return h.get().finish().to_json();
           })
      .def("position", [](WriterHolder& h) { return h.get().position(); })
      .def("unchanged_so_far", [](WriterHolder& h) { return h.get().unchanged_so_far(); })
      .def("close", [](WriterHolder& h) {
        py::gil_scoped_release release;
        h.w.reset();
      });

  m.def("tensors_fingerprint", &recycle::tensors_fingerprint, py::arg("names"), py::arg("tensors"),
        "XXH3-128 hex of named tensors, as the engine fingerprints a module");
}
