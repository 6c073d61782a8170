// The README's API tour is the code of examples/tour.cpp (which the build compiles and quickstart
// runs); this test keeps the two texts identical.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The lines strictly between the marker lines, with their common leading indent removed.
std::string between(const std::string& text, const std::string& begin, const std::string& end) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.find(end) != std::string::npos) break;
    if (inside) lines.push_back(line);
    if (line.find(begin) != std::string::npos) inside = true;
  }
  size_t indent = std::string::npos;
  for (const std::string& l : lines) {
    const size_t first = l.find_first_not_of(' ');
    if (first != std::string::npos) indent = std::min(indent, first);
  }
  std::string out;
  for (const std::string& l : lines) out += (l.size() >= indent ? l.substr(indent) : l) + "\n";
  return out;
}

TEST(Readme, TourIsTheCompiledExample) {
  // The environment names the source tree where the binary runs elsewhere (the GPU bundle).
  const char* env = std::getenv("SINTER_SOURCE_DIR");
  const std::string root = env && *env ? env : SINTER_SOURCE_DIR;
  const std::string example =
      between(read_file(root + "/examples/tour.cpp"), "// tour-begin", "// tour-end");
  const std::string readme =
      between(read_file(root + "/README.md"), "<!-- tour-begin -->", "<!-- tour-end -->");
  ASSERT_FALSE(example.empty());
  // The README wraps the code in a ```cpp fence.
  EXPECT_EQ(readme, "```cpp\n" + example + "```\n");
}

}  // namespace
