// ONNX export in a build without the ONNX library (SINTER_ONNX off or libonnx-dev missing): the
// functions exist and say so.
#include "sinter/onnx.h"

namespace sinter::onnx {

namespace {
[[noreturn]] void unavailable() {
  SINTER_THROW(
      "onnx::export_model: Sinter was built without ONNX (on Debian: apt-get install "
      "libonnx-dev libprotobuf-dev, then rebuild)");
}
}  // namespace

bool is_available() { return false; }

std::string export_to_string(nn::Module&, const Tensor&, const ExportOptions&, ExportSummary*) {
  unavailable();
}

ExportSummary export_model(nn::Module&, const Tensor&, const std::string&, const ExportOptions&) {
  unavailable();
}

}  // namespace sinter::onnx
