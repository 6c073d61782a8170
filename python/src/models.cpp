// The language models from Python: sinter.models.GPT and Llama (configs as keyword arguments,
// forward, generate, the KV cache), and sinter.datasets.TextCorpus (byte-level text, its windows as
// datasets for the DataLoader, and the unigram and bigram baselines a model should beat).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bind.h"

namespace sinter::python {
namespace {

using nn::models::GenerateOptions;

GenerateOptions generate_options(double temperature, int64_t top_k, bool use_cache) {
  return {.temperature = temperature, .top_k = top_k, .use_cache = use_cache};
}

// What GPT and Llama share: forward(idx, cache=None), generate and context_length.
template <class M>
void def_language_model(nb::class_<M, nn::Module>& cls) {
  cls.def(
         "forward",
         [](M& model, const Tensor& idx, nn::KVCache* cache) {
           return cache ? model.forward(idx, *cache) : model.forward(idx);
         },
         nb::arg("idx"), nb::arg("cache").none() = nb::none())
      .def(
          "generate",
          [](M& model, const Tensor& prompt, int64_t n, double temperature, int64_t top_k,
             bool use_cache) {
            return model.generate(prompt, n, generate_options(temperature, top_k, use_cache));
          },
          nb::arg("prompt"), nb::arg("max_new_tokens"), nb::arg("temperature") = 1.0,
          nb::arg("top_k") = 0, nb::arg("use_cache") = true)
      .def_prop_ro("context_length", [](const M& model) { return model.config.context_length; });
}

void bind_gpt(nb::module_& m) {
  using nn::models::GPT;
  nb::class_<nn::KVCache>(m, "KVCache", "Keys and values of the positions fed so far.")
      .def(nb::init<int64_t, int64_t>(), nb::arg("n_layer"), nb::arg("capacity"))
      .def_prop_ro("length", &nn::KVCache::length)
      .def_prop_ro("capacity", &nn::KVCache::capacity);
  auto gpt = nb::class_<GPT, nn::Module>(m, "GPT",
                                         "A GPT-2 style decoder over token ids (B, T) -> logits.");
  gpt.def(
      "__init__",
      [](GPT* self, int64_t vocab, int64_t context, int64_t layers, int64_t heads, int64_t width,
         double dropout, bool bias, bool tie, bool checkpoint) {
        new (self) GPT({.vocab_size = vocab,
                        .context_length = context,
                        .n_layer = layers,
                        .n_head = heads,
                        .n_embd = width,
                        .dropout = dropout,
                        .bias = bias,
                        .tie_weights = tie,
                        .checkpoint_blocks = checkpoint});
      },
      nb::arg("vocab_size") = 256, nb::arg("context_length") = 256, nb::arg("n_layer") = 4,
      nb::arg("n_head") = 4, nb::arg("n_embd") = 128, nb::arg("dropout") = 0.0,
      nb::arg("bias") = true, nb::arg("tie_weights") = true, nb::arg("checkpoint_blocks") = false);
  def_language_model(gpt);
}

void bind_llama(nb::module_& m) {
  using nn::models::Llama;
  auto llama = nb::class_<Llama, nn::Module>(m, "Llama",
                                             "A Llama decoder (RMSNorm, rotary positions, "
                                             "grouped-query attention, SwiGLU) over token ids "
                                             "(B, T) -> logits.");
  llama.def(
      "__init__",
      [](Llama* self, int64_t vocab, int64_t context, int64_t layers, int64_t heads,
         std::optional<int64_t> kv_heads, int64_t width, int64_t hidden, double rope_base,
         double norm_eps, bool tie, bool checkpoint) {
        new (self) Llama({.vocab_size = vocab,
                          .context_length = context,
                          .n_layer = layers,
                          .n_head = heads,
                          .n_kv_head = kv_heads.value_or(heads),
                          .n_embd = width,
                          .mlp_hidden = hidden,
                          .rope_base = rope_base,
                          .norm_eps = norm_eps,
                          .tie_weights = tie,
                          .checkpoint_layers = checkpoint});
      },
      nb::arg("vocab_size") = 256, nb::arg("context_length") = 256, nb::arg("n_layer") = 4,
      nb::arg("n_head") = 4, nb::arg("n_kv_head") = nb::none(), nb::arg("n_embd") = 128,
      nb::arg("mlp_hidden") = 0, nb::arg("rope_base") = 10000.0, nb::arg("norm_eps") = 1e-5,
      nb::arg("tie_weights") = false, nb::arg("checkpoint_layers") = false);
  def_language_model(llama);
}

void bind_text(nb::module_& m) {
  nb::class_<data::TextWindows, data::Dataset>(
      m, "TextWindows", "Windows of T + 1 bytes of one split: (input, target) i64 of shape (T).")
      .def_prop_ro("context", &data::TextWindows::context)
      .def_prop_ro("num_bytes", &data::TextWindows::num_bytes);
  nb::class_<data::TextCorpus>(m, "TextCorpus",
                               "Byte-level text from files and folders, split into training and "
                               "validation windows (Note [text split], Note [text windows]).")
      .def(
          "__init__",
          [](data::TextCorpus* self, std::optional<std::vector<std::string>> paths, int64_t context,
             double val_fraction, uint64_t seed, int64_t train_windows, int64_t val_windows) {
            new (self) data::TextCorpus(
                paths.value_or(std::vector<std::string>{data::default_text_corpus()}),
                {.context = context,
                 .val_fraction = val_fraction,
                 .seed = seed,
                 .train_windows = train_windows,
                 .val_windows = val_windows});
          },
          nb::arg("paths") = nb::none(), nb::arg("context") = 256, nb::arg("val_fraction") = 0.1,
          nb::arg("seed") = 0, nb::arg("train_windows") = 0, nb::arg("val_windows") = 0)
      .def_prop_ro("train", &data::TextCorpus::train)
      .def_prop_ro("val", &data::TextCorpus::val)
      .def_prop_ro("num_bytes",
                   [](const data::TextCorpus& c) { return static_cast<int64_t>(c.bytes().size()); })
      .def_prop_ro("files", &data::TextCorpus::files)
      .def(
          "byte_baselines",
          [](const data::TextCorpus& c, double alpha) {
            const data::ByteBaselines b = data::byte_baselines(c, alpha);
            nb::dict d;
            d["unigram"] = b.unigram;
            d["bigram"] = b.bigram;
            return d;
          },
          nb::arg("alpha") = 0.5,
          "Cross-entropies (nats per byte) of the validation text under unigram and bigram byte "
          "models of the training text.");
  m.def("default_text_corpus", &data::default_text_corpus);
}

}  // namespace

void bind_models(nb::module_& root) {
  nb::module_ models = nb::borrow<nb::module_>(root.attr("models"));
  bind_gpt(models);
  bind_llama(models);
  nb::module_ data_module = nb::borrow<nb::module_>(root.attr("data"));
  bind_text(data_module);
}

}  // namespace sinter::python
