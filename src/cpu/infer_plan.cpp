// The inference plans' programs (Note [cpu inference plan] in src/cpu/infer_plan_dnnl.cpp): their
// values' shapes, in every build.
#include "cpu/infer_plan.h"

#include "sinter/core/error.h"

namespace sinter::cpu::plan {

// The value shapes of p (index 0 the input), checked against each layer's geometry.
std::vector<Shape3> value_shapes(const Program& p) {
  std::vector<Shape3> v = {{p.c, p.h, p.w}};
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const Layer& l = p.layers[i];
    SINTER_CHECK(
        l.input >= 0 && l.input <= static_cast<int>(i) && l.residual <= static_cast<int>(i),
        "inference plan: layer ", i, " reads a value not yet made");
    const Shape3 in = v[l.input];
    const kern::Conv2dGeom& g = l.g;
    switch (l.op) {
      case Op::Conv:
      case Op::MaxPool:
        SINTER_CHECK(in.c == g.c_in && in.h == g.h && in.w == g.w, "inference plan: layer ", i,
                     " expects (", g.c_in, ", ", g.h, ", ", g.w, "), gets (", in.c, ", ", in.h,
                     ", ", in.w, ")");
        v.push_back({g.c_out, g.h_out, g.w_out});
        break;
      case Op::GlobalAvgPool:
        v.push_back({in.c, 1, 1});
        break;
      case Op::Linear:
        SINTER_CHECK(numel(in) == l.in, "inference plan: layer ", i, " expects ", l.in,
                     " features, gets ", numel(in));
        v.push_back({l.out, 1, 1});
        break;
    }
    if (l.residual >= 0) {
      const Shape3 r = v[l.residual], o = v.back();
      SINTER_CHECK(l.op == Op::Conv && r.c == o.c && r.h == o.h && r.w == o.w,
                   "inference plan: layer ", i, "'s residual does not match its output");
    }
  }
  return v;
}

Shape3 output_shape(const Program& p) { return value_shapes(p).back(); }

}  // namespace sinter::cpu::plan
