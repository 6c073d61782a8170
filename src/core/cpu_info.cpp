// sinter::cpu_description (sinter/core/parallel.h): the CPU's model and the instruction sets its
// kernels choose among, from /proc/cpuinfo.
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "sinter/core/parallel.h"

namespace sinter {

std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model.empty()) model = value;
    if (key == "flags" && flags.empty()) flags = value;
  }
  if (model.empty()) model = "an unknown CPU";
  std::set<std::string> has;
  std::istringstream words(flags);
  for (std::string w; words >> w;) has.insert(w);
  std::string isas;
  for (const char* isa : {"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                          "amx_tile", "amx_int8", "amx_bf16"}) {
    if (has.count(isa) != 0) isas += (isas.empty() ? "" : " ") + std::string(isa);
  }
  return model + " (" + (isas.empty() ? "no AVX2" : isas) + ")";
}

}  // namespace sinter
