// The extension module sinter._C: its parts (bind.h) and the translation of sinter::Error into the
// Python exception PyTorch raises for the same mistake.
#include <nanobind/nanobind.h>

#include <string>

#include "bind.h"

namespace sinter::python {
namespace {

// PyTorch raises IndexError for an index out of range, TypeError for an argument of the wrong
// type, ValueError for some bad values, and RuntimeError for the rest; Sinter's messages say which.
PyObject* exception_for(const std::string& what) {
  if (what.find("out of range") != std::string::npos ||
      what.find("out of bounds") != std::string::npos ||
      what.find("too many indices") != std::string::npos) {
    return PyExc_IndexError;
  }
  return PyExc_RuntimeError;
}

}  // namespace
}  // namespace sinter::python

NB_MODULE(_C, m) {
  using namespace sinter::python;
  m.doc() = "Sinter's C++ library, bound by nanobind; import sinter, not this module.";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const sinter::Error& e) {
      PyErr_SetString(exception_for(e.what()), e.what());
    }
  });
  bind_types(m);
  bind_tensor(m);
  bind_factories(m);
}
