// The exports of an lm run (export.h): their checks before training and the files after.
#include "lm/export.h"

#include <sinter/gguf.h>
#include <sinter/nn/pretrained.h>
#include <sinter/sinter.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "training.h"

namespace example::lm {

void check_exports(const Args& args, const RunConfig& c) {
  check_export_onnx(args.export_onnx);
  if (!args.export_hf.empty()) {
    fs::path hf = fs::absolute(args.export_hf);
    if (!hf.has_filename()) hf = hf.parent_path();  // "out/hf/"
    require(!fs::exists(hf) || fs::is_directory(hf),
            "--export-hf: " + args.export_hf + " is a file, not a folder");
    require(fs::is_directory(hf.parent_path()), "--export-hf: the folder " +
                                                    hf.parent_path().string() + " of " +
                                                    args.export_hf + " does not exist");
  }
  if (!args.export_gguf.empty()) {
    require(c.model == "llama", "--export-gguf writes a Llama; this run trains --model " + c.model +
                                    " (use --model llama)");
    check_output_file("--export-gguf", args.export_gguf);
  }
}

void write_exports(const Args& args, const RunConfig& c, st::nn::Module& model,
                   const st::data::BpeTokenizer& tokenizer, st::Device dev) {
  export_weights(args.export_weights, model, c.model);
  if (!args.export_hf.empty()) {
    st::nn::models::save_pretrained(model, args.export_hf, {.tokenizer = &tokenizer});
    std::printf("hugging face: %s (AutoModelForCausalLM.from_pretrained loads it)\n",
                args.export_hf.c_str());
  }
  // Any batch and any length up to the context: the example's (1, context) dims are symbolic.
  export_onnx(args.export_onnx, model,
              st::zeros({1, c.context}, {.dtype = st::DType::i64, .device = dev}), true);
  if (!args.export_gguf.empty()) {
    const st::gguf::ExportSummary s =
        st::gguf::export_model(model, tokenizer, args.export_gguf,
                               {.type = st::gguf::parse_type(args.gguf_type), .name = "lm"});
    std::printf("gguf: %s (%s, %lld tensors, %.1f MB)\n", args.export_gguf.c_str(),
                args.gguf_type.c_str(), static_cast<long long>(s.tensors),
                static_cast<double>(s.bytes) / 1e6);
  }
}

}  // namespace example::lm
