// recycle._native: the pybind11 module under the Python package `recycle` (python/recycle/).
// It binds include/recycle/ and nothing else: SplitReader, CacheLoader and KeyedReader (reader.h),
// CacheWriter and tensors_fingerprint (writer.h), inspect and verify (cache.h), predict
// (predict.h), and the option structs they take (ReaderOptions, LoaderOptions, WriterOptions,
// PredictOptions, DatasetOptions), which the package fills field by field; and the rules the
// package shares with the tools: class_id_problem and MAX_CLASS_ID (writer.h), and
// usable_device_name (reader.h). Tensors cross as
// torch.Tensor without copies (torch's own caster, <torch/extension.h>).
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
#include <tuple>
#include <vector>

#include "recycle/build.h"
#include "recycle/cache.h"
#include "recycle/errors.h"
#include "recycle/keys_digest.h"
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

// A KeyedReader lookup (of tensors, texts or named samples), the GIL released: (tensors, hits).
template <typename Inputs>
py::tuple looked_up(recycle::KeyedReader& r,
                    void (recycle::KeyedReader::*lookup)(const Inputs&, Tensors*, at::Tensor*),
                    const Inputs& inputs) {
  Tensors tensors;
  at::Tensor hits;
  {
    py::gil_scoped_release release;
    (r.*lookup)(inputs, &tensors, &hits);
  }
  return py::make_tuple(tensors, hits);
}

// A key pass's shards_of_* (writer.h), the GIL released: (each row's shard, the rows' keys as
// bytes, 16 each).
template <typename Inputs>
py::tuple row_shards(recycle::RowShards (*of)(const std::string&, const Inputs&, int64_t, int64_t),
                     const std::string& keyer, const Inputs& inputs, int64_t first, int64_t count) {
  recycle::RowShards r;
  {
    py::gil_scoped_release release;
    r = of(keyer, inputs, first, count);
  }
  return py::make_tuple(r.shards, py::bytes(r.keys));
}

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

  // The option structs themselves (recycle/*.h), field for field under the same names: the
  // package fills them from its keyword arguments (recycle/options.py), and the library's
  // validate() names the field that is wrong.
  py::class_<recycle::DatasetOptions>(m, "DatasetOptions")
      .def(py::init<>())
      .def_readwrite("spec", &recycle::DatasetOptions::spec)
      .def_readwrite("split", &recycle::DatasetOptions::split)
      .def_readwrite("classes", &recycle::DatasetOptions::classes)
      .def_readwrite("limit", &recycle::DatasetOptions::limit)
      .def_readwrite("transform", &recycle::DatasetOptions::transform);
  py::class_<recycle::PredictOptions>(m, "PredictOptions")
      .def(py::init<>())
      .def_readwrite("cache_dir", &recycle::PredictOptions::cache_dir)
      .def_readwrite("head", &recycle::PredictOptions::head)
      .def_readwrite("weights", &recycle::PredictOptions::weights)
      .def_readwrite("data", &recycle::PredictOptions::data)
      .def_readwrite("out", &recycle::PredictOptions::out)
      .def_readwrite("top_k", &recycle::PredictOptions::top_k)
      .def_readwrite("write_back", &recycle::PredictOptions::write_back)
      .def_readwrite("batch", &recycle::PredictOptions::batch)
      .def_readwrite("threads", &recycle::PredictOptions::threads);
  py::class_<recycle::ReaderOptions>(m, "ReaderOptions")
      .def(py::init<>())
      .def_readwrite("cache_dir", &recycle::ReaderOptions::cache_dir)
      .def_readwrite("split", &recycle::ReaderOptions::split)
      .def_readwrite("allow_partial", &recycle::ReaderOptions::allow_partial)
      .def_readwrite("block_cache_mb", &recycle::ReaderOptions::block_cache_mb);
  py::class_<recycle::LoaderOptions>(m, "LoaderOptions")
      .def(py::init<>())
      .def_readwrite("reader", &recycle::LoaderOptions::reader)
      .def_readwrite("batch_size", &recycle::LoaderOptions::batch_size)
      .def_readwrite("shuffle", &recycle::LoaderOptions::shuffle)
      .def_readwrite("seed", &recycle::LoaderOptions::seed)
      .def_readwrite("epoch_samples", &recycle::LoaderOptions::epoch_samples)
      .def_readwrite("rank", &recycle::LoaderOptions::rank)
      .def_readwrite("world_size", &recycle::LoaderOptions::world_size)
      .def_readwrite("drop_last", &recycle::LoaderOptions::drop_last)
      .def_readwrite("prefetch", &recycle::LoaderOptions::prefetch)
      .def_readwrite("group_by_length", &recycle::LoaderOptions::group_by_length)
      .def_readwrite("pin_memory", &recycle::LoaderOptions::pin_memory)
      .def_readwrite("device", &recycle::LoaderOptions::device);
  py::class_<recycle::WriterTensor>(m, "WriterTensor")
      .def(py::init([](const std::string& name, const std::string& dtype,
                       const std::vector<int64_t>& shape) {
             return recycle::WriterTensor{name, recycle::parse_writer_dtype(name, dtype), shape};
           }),
           py::arg("name"), py::arg("dtype"), py::arg("shape"));
  py::class_<recycle::WriterOptions>(m, "WriterOptions")
      .def(py::init<>())
      .def_readwrite("cache_dir", &recycle::WriterOptions::cache_dir)
      .def_readwrite("split", &recycle::WriterOptions::split)
      .def_readwrite("data", &recycle::WriterOptions::data)
      .def_readwrite("samples", &recycle::WriterOptions::samples)
      .def_property(  // (index, count, the whole split's samples); count 0: the whole split
          "shard",
          [](const recycle::WriterOptions& o) {
            return py::make_tuple(o.shard.index, o.shard.count, o.shard.split_samples);
          },
          [](recycle::WriterOptions& o, const std::tuple<int64_t, int64_t, int64_t>& s) {
            o.shard.index = std::get<0>(s);
            o.shard.count = std::get<1>(s);
            o.shard.split_samples = std::get<2>(s);
          })
      .def_readwrite("class_names", &recycle::WriterOptions::class_names)
      .def_readwrite("model", &recycle::WriterOptions::model)
      .def_readwrite("fingerprint", &recycle::WriterOptions::fingerprint)
      .def_readwrite("split_at", &recycle::WriterOptions::split_at)
      .def_readwrite("keyer", &recycle::WriterOptions::keyer)
      .def_property(
          "codec", [](const recycle::WriterOptions& o) { return recycle::codec_name(o.codec); },
          [](recycle::WriterOptions& o, const std::string& name) {
            o.codec = recycle::parse_writer_codec(name);
          })
      .def_readwrite("preprocess", &recycle::WriterOptions::preprocess)
      .def_readwrite("input_shape", &recycle::WriterOptions::input_shape)
      .def_readwrite("layout", &recycle::WriterOptions::layout)
      .def_property(
          "compression",
          [](const recycle::WriterOptions& o) { return recycle::compression_name(o.compression); },
          [](recycle::WriterOptions& o, const std::string& name) {
            o.compression = recycle::parse_writer_compression(name);
          })
      .def_readwrite("rebuild", &recycle::WriterOptions::rebuild)
      .def_readwrite("flush_seconds", &recycle::WriterOptions::flush_seconds)
      .def_readwrite("engine_model", &recycle::WriterOptions::engine_model)
      .def_readwrite("engine_weights", &recycle::WriterOptions::engine_weights)
      .def_readwrite("engine_split_at", &recycle::WriterOptions::engine_split_at);

  m.def(
      "predict",
      [](recycle::PredictOptions o) {
        o.progress = false;
        recycle::PredictReport r;
        {
          py::gil_scoped_release release;
          r = recycle::run_predict(o);
        }
        return r.to_json();
      },
      py::arg("options"),
      "recycle-predict --json's object, as a JSON string (run_predict, recycle/predict.h)");

  py::class_<recycle::SplitReader>(m, "SplitReader")
      .def(py::init([](const recycle::ReaderOptions& o) {
             py::gil_scoped_release release;
             return std::make_unique<recycle::SplitReader>(o);
           }),
           py::arg("options"))
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
      .def(py::init([](const recycle::LoaderOptions& o) {
             py::gil_scoped_release release;
             return std::make_unique<recycle::CacheLoader>(o);
           }),
           py::arg("options"))
      .def("__len__", &recycle::CacheLoader::batches)
      .def("size", &recycle::CacheLoader::size)
      .def("samples_per_rank", &recycle::CacheLoader::samples_per_rank)
      .def("tensor_names", &recycle::CacheLoader::tensor_names)
      .def("manifest_json", &recycle::CacheLoader::manifest_json)
      .def("start_epoch", &recycle::CacheLoader::start_epoch, py::arg("epoch"),
           py::arg("first_batch") = 0, py::call_guard<py::gil_scoped_release>())
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
            return looked_up(r, &recycle::KeyedReader::lookup, inputs);
          },
          py::arg("inputs"))
      .def(
          "lookup_texts",
          [](recycle::KeyedReader& r, const std::vector<std::string>& texts) {
            return looked_up(r, &recycle::KeyedReader::lookup_texts, texts);
          },
          py::arg("texts"))
      .def(
          "lookup_named",
          [](recycle::KeyedReader& r, const std::vector<recycle::NamedTensors>& samples) {
            return looked_up(r, &recycle::KeyedReader::lookup_named, samples);
          },
          py::arg("samples"));

  // The writer behind a holder whose close() drops it at once (releasing the cache's writer
  // lock), whatever still refers to the Python object (a traceback, say).
  py::class_<WriterHolder>(m, "CacheWriter")
      .def(py::init([](const recycle::WriterOptions& o) {
             py::gil_scoped_release release;
             auto h = std::make_unique<WriterHolder>();
             h->w = std::make_unique<recycle::CacheWriter>(o);
             return h;
           }),
           py::arg("options"))
      .def(
          "add_chunk",
          [](WriterHolder& h, const at::Tensor& inputs, const at::Tensor& labels) {
            py::gil_scoped_release release;
            return h.get().add_chunk(inputs, labels);
          },
          py::arg("inputs"), py::arg("labels"))
      .def(
          "add_text_chunk",
          [](WriterHolder& h, const std::vector<std::string>& texts, const at::Tensor& labels) {
            py::gil_scoped_release release;
            return h.get().add_text_chunk(texts, labels);
          },
          py::arg("texts"), py::arg("labels"))
      .def(
          "add_named_chunk",
          [](WriterHolder& h, const std::vector<recycle::NamedTensors>& samples,
             const at::Tensor& labels) {
            py::gil_scoped_release release;
            return h.get().add_named_chunk(samples, labels);
          },
          py::arg("samples"), py::arg("labels"))
      .def(
          "write_chunk",
          [](WriterHolder& h, const Tensors& outputs, const std::vector<int64_t>& lengths) {
            py::gil_scoped_release release;
            h.get().write_chunk(outputs, lengths);
          },
          py::arg("outputs"), py::arg("lengths") = std::vector<int64_t>{})
      .def("finish",
           [](WriterHolder& h) {
             py::gil_scoped_release release;
             return h.get().finish().to_json();
           })
      .def("skip_other_shards", [](WriterHolder& h, int64_t n) { h.get().skip_other_shards(n); },
           py::arg("n"))
      .def("position", [](WriterHolder& h) { return h.get().position(); })
      .def("unchanged_so_far", [](WriterHolder& h) { return h.get().unchanged_so_far(); })
      .def("close", [](WriterHolder& h) {
        py::gil_scoped_release release;
        h.w.reset();
      });

  m.def(
      "shards_of_rows",
      [](const std::string& keyer, const at::Tensor& inputs, int64_t first, int64_t count) {
        return row_shards(&recycle::shards_of_rows, keyer, inputs, first, count);
      },
      py::arg("keyer"), py::arg("inputs"), py::arg("first"), py::arg("shard_count"),
      "(each row's shard of shard_count, the rows' keys as bytes, 16 each) as a sharded "
      "CacheWriter keys rows at split positions first, first + 1, ...");
  m.def(
      "shards_of_texts",
      [](const std::string& keyer, const std::vector<std::string>& texts, int64_t first,
         int64_t count) {
        return row_shards(&recycle::shards_of_texts, keyer, texts, first, count);
      },
      py::arg("keyer"), py::arg("texts"), py::arg("first"), py::arg("shard_count"),
      "shards_of_rows for a chunk of texts");
  m.def(
      "shards_of_named",
      [](const std::string& keyer, const std::vector<recycle::NamedTensors>& samples, int64_t first,
         int64_t count) {
        return row_shards(&recycle::shards_of_named, keyer, samples, first, count);
      },
      py::arg("keyer"), py::arg("samples"), py::arg("first"), py::arg("shard_count"),
      "shards_of_rows for a chunk of samples of named tensors");

  py::class_<recycle::KeysDigest>(
      m, "KeysDigest",
      "the digest ranks compare to agree on their data (recycle/keys_digest.h): XXH3-128 over "
      "each sample's key and label, in order")
      .def(py::init<>())
      .def(
          "add",
          [](recycle::KeysDigest& d, const py::bytes& keys, const std::vector<int64_t>& labels) {
            const std::string bytes = keys;
            d.add(bytes, labels.data(), labels.size());
          },
          py::arg("keys"), py::arg("labels"),
          "the next samples: their keys (bytes, 16 each, as shards_of_* give them) and labels")
      .def("hexdigest", &recycle::KeysDigest::hex, "32 hex digits");
  m.def("merged_shard_reports", &recycle::merged_shard_reports, py::arg("reports"),
        py::arg("own"),
        "a sharded build's report (JSON) from its shards' in rank order, shard own's with every "
        "shard's counts added up, as recycle-build --sharded reports it");
  m.def("sharded_key_positions", &recycle::sharded_key_positions, py::arg("samples"),
        py::arg("part"), py::arg("parts"),
        "the positions a rank of a sharded build keys, ascending: its part (p % parts == part) "
        "and up to 64 spot checks of the other parts', as recycle-build --sharded's ranks");
  m.def("cache_location", &recycle::cache_location, py::arg("dir"),
        "where a cache directory is, as a text equal for two paths of one directory on one "
        "machine (host, device and inode of it or its nearest existing ancestor, the rest)");

  // The engine's rules, so that the package checks what the tools check, in their words.
  m.attr("MAX_CLASS_ID") = recycle::kMaxClassId;
  m.def("class_id_problem", &recycle::class_id_problem, py::arg("label"), py::arg("sample"),
        "\"\" for a class id (0 to MAX_CLASS_ID), else the reason naming the label and its sample");
  m.def("usable_device_name", &recycle::usable_device_name, py::arg("name"),
        py::arg("option") = "device",
        "name when this process can use it (cpu, cuda, cuda:N), else ValueError naming option");

  m.def("check_rebuild", &recycle::check_rebuild, py::arg("path"),
        "ValueError with one line unless rebuild=True may delete the cache at path whole (a "
        "cache, holding nothing else); nothing is deleted");
  m.def("head_identity_of_cache", &recycle::head_identity_of_cache_dir, py::arg("cache_dir"),
        "the identity JSON a head trained from the cache carries (recycle.export(..., cache=))");
  m.def("tensors_fingerprint", &recycle::tensors_fingerprint, py::arg("names"), py::arg("tensors"),
        "XXH3-128 hex of named tensors, as the engine fingerprints a module");
}
