// Built against an installed Sinter by the PackageConsumer test: the umbrella header compiles, the
// library links with its dependencies, and a small op gives the right answer.
#include <sinter/sinter.h>

int main() {
  auto t = sinter::ones({2, 3});
  return t.sum().item<float>() == 6.0f ? 0 : 1;
}
