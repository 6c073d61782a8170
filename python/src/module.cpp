// The extension module sinter._C: its parts (bind.h) and the translation of sinter::Error into the
// Python exception PyTorch raises for the same mistake.
#include <nanobind/nanobind.h>

#include <string>
#include <typeinfo>

#include "bind.h"

namespace sinter::python {
namespace {

// PyTorch raises IndexError for an index out of range, TypeError for an argument of the wrong
// type, ValueError for some bad values, and RuntimeError for the rest; Sinter's messages say which.
PyObject* exception_for(const std::string& what) {
  if (what.find("step must be greater than zero") != std::string::npos) return PyExc_ValueError;
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
  // Tensors that C++ holds at exit (in hooks, or in a module's graph) are not leaks to report.
  nb::set_leak_warnings(false);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const sinter::Error& e) {
      PyErr_SetString(exception_for(e.what()), e.what());
    } catch (const std::bad_cast&) {
      // An argument that nb::cast could not convert inside a binding.
      PyErr_SetString(PyExc_TypeError, "an argument has a type this call does not take");
    }
  });
  bind_types(m);
  bind_tensor(m);
  bind_factories(m);
  bind_nn(m);
  bind_optim(m);
  bind_data(m);
  bind_models(m);
  bind_io(m);
  bind_adapter(m);
  bind_tools(m);
}
