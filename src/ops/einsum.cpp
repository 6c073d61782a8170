// einsum: an equation parsed into one label per dim of each operand, then the operands contracted
// pairwise as batched matmuls (Note [einsum as matmuls]); every step is a differentiable op.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "internal/autocast_impl.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

// Note [einsum as matmuls]
// Each operand is first brought to one common layout of F dims: the ellipsis's dims (E of them,
// right-aligned as broadcasting aligns them), then every letter of the equation in label order.
// A repeated letter in one term becomes a diagonal (a view), the dims are permuted into that
// order, and a letter the operand lacks is a dim of size 1. Then the operands are multiplied left
// to right. A dim not in the output is summed as soon as no later operand has it with a size
// other than 1: in one operand alone it is summed there; in both operands of a product it is the
// product's contracted dim. Each product is one batched matmul, (B, M, K) @ (B, K, N), where B
// is the dims both operands have and keep, M the kept dims of the left one, N those of the right
// one and K the contracted ones, permuted and reshaped there and back into the common layout.
// No loop ever runs over index tuples, and the gradient is that of permute, reshape, sum,
// diagonal and matmul.

namespace {

// Labels: 'A'..'Z' are 0..25 and 'a'..'z' 26..51, the order of an implicit output.
constexpr int kLetters = 52;

// One term of the equation: its letters in order and where "..." stands among them (-1: none).
struct Term {
  std::vector<int> labels;
  int ellipsis = -1;
};

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

char label_char(int l) { return static_cast<char>(l < 26 ? 'A' + l : 'a' + (l - 26)); }

Term parse_term(const std::string& eq, const std::string& text) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      SINTER_CHECK(text.compare(i, 3, "...") == 0, "einsum: equation \"", eq,
                   "\": '.' must come as \"...\" (in term \"", text, "\")");
      SINTER_CHECK(t.ellipsis < 0, "einsum: equation \"", eq, "\": term \"", text,
                   "\" has more than one \"...\"");
      t.ellipsis = static_cast<int>(t.labels.size());
      i += 2;
    } else if (c >= 'A' && c <= 'Z') {
      t.labels.push_back(c - 'A');
    } else if (c >= 'a' && c <= 'z') {
      t.labels.push_back(26 + (c - 'a'));
    } else {
      SINTER_CHECK(false, "einsum: equation \"", eq, "\": invalid character '", c,
                   "' (labels are letters a-z and A-Z)");
    }
  }
  return t;
}

Equation parse(const std::string& eq_in, size_t n_operands) {
  std::string eq;
  for (char c : eq_in) {
    if (c != ' ') eq.push_back(c);
  }
  Equation e;
  const size_t arrow = eq.find("->");
  e.explicit_output = arrow != std::string::npos;
  const std::string lhs = eq.substr(0, arrow);
  SINTER_CHECK(!e.explicit_output || eq.find("->", arrow + 2) == std::string::npos,
               "einsum: equation \"", eq_in, "\" has more than one \"->\"");
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    e.inputs.push_back(parse_term(eq_in, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  SINTER_CHECK(e.inputs.size() == n_operands, "einsum: equation \"", eq_in, "\" has ",
               e.inputs.size(), " input terms, but ", n_operands, " operands were given");
  std::vector<int> count(kLetters, 0);
  bool any_ellipsis = false;
  for (const Term& t : e.inputs) {
    for (int l : t.labels) ++count[l];
    any_ellipsis = any_ellipsis || t.ellipsis >= 0;
  }
  if (e.explicit_output) {
    e.output = parse_term(eq_in, eq.substr(arrow + 2));
    std::vector<bool> seen(kLetters, false);
    for (int l : e.output.labels) {
      SINTER_CHECK(count[l] > 0, "einsum: equation \"", eq_in, "\": output label '", label_char(l),
                   "' does not occur in any input term");
      SINTER_CHECK(!seen[l], "einsum: equation \"", eq_in, "\": output label '", label_char(l),
                   "' occurs more than once");
      seen[l] = true;
    }
  } else {
    if (any_ellipsis) e.output.ellipsis = 0;
    for (int l = 0; l < kLetters; ++l) {
      if (count[l] == 1) e.output.labels.push_back(l);
    }
  }
  return e;
}

// The operands in the common layout of Note [einsum as matmuls]: `pos` maps a label to its dim.
struct Layout {
  int64_t ellipsis_dims = 0;
  std::vector<int64_t> pos = std::vector<int64_t>(kLetters, -1);
  int64_t dims = 0;
};

Layout make_layout(const std::string& eq, const Equation& e, const std::vector<Tensor>& ops) {
  Layout lay;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Term& t = e.inputs[i];
    const int64_t letters = static_cast<int64_t>(t.labels.size());
    if (t.ellipsis >= 0) {
      SINTER_CHECK(ops[i].dim() >= letters, "einsum: equation \"", eq, "\": operand ", i, " has ",
                   ops[i].dim(), " dims, fewer than the ", letters, " letters of its term");
      lay.ellipsis_dims = std::max(lay.ellipsis_dims, ops[i].dim() - letters);
    } else {
      SINTER_CHECK(ops[i].dim() == letters, "einsum: equation \"", eq, "\": operand ", i, " has ",
                   ops[i].dim(), " dims, but its term has ", letters, " letters (and no \"...\")");
    }
  }
  std::vector<bool> used(kLetters, false);
  for (const Term& t : e.inputs) {
    for (int l : t.labels) used[l] = true;
  }
  lay.dims = lay.ellipsis_dims;
  for (int l = 0; l < kLetters; ++l) {
    if (used[l]) lay.pos[l] = lay.dims++;
  }
  return lay;
}

// Operand i in the common layout: diagonals of repeated letters, dims permuted into layout order,
// size-1 dims for the labels it lacks.
Tensor align(const std::string& eq, const Term& t, const Layout& lay, const Tensor& op, size_t i) {
  const int64_t letters = static_cast<int64_t>(t.labels.size());
  const int64_t ell = t.ellipsis >= 0 ? op.dim() - letters : 0;
  std::vector<int64_t> at;  // the layout dim of each of op's dims
  std::vector<int> label;   // its letter (-1 for an ellipsis dim)
  for (int64_t k = 0; k < letters; ++k) {
    if (k == t.ellipsis) {
      for (int64_t j = 0; j < ell; ++j) {
        at.push_back(lay.ellipsis_dims - ell + j);
        label.push_back(-1);
      }
    }
    at.push_back(lay.pos[t.labels[k]]);
    label.push_back(t.labels[k]);
  }
  if (t.ellipsis == letters) {
    for (int64_t j = 0; j < ell; ++j) {
      at.push_back(lay.ellipsis_dims - ell + j);
      label.push_back(-1);
    }
  }
  Tensor x = op;
  // A letter repeated in the term: the diagonal of its two dims, appended as the last dim.
  for (bool again = true; again;) {
    again = false;
    for (size_t d1 = 0; d1 < at.size() && !again; ++d1) {
      for (size_t d2 = d1 + 1; d2 < at.size() && !again; ++d2) {
        if (at[d1] != at[d2]) continue;
        SINTER_CHECK(x.size(d1) == x.size(d2), "einsum: equation \"", eq, "\": label '",
                     label_char(label[d1]), "' repeats in operand ", i, " with sizes ", x.size(d1),
                     " and ", x.size(d2), " (shape ", shape_str(op.shape()), ")");
        x = diagonal(x, 0, static_cast<int64_t>(d1), static_cast<int64_t>(d2));
        const int64_t p = at[d1];
        const int l = label[d1];
        at.erase(at.begin() + static_cast<int64_t>(d2));
        at.erase(at.begin() + static_cast<int64_t>(d1));
        label.erase(label.begin() + static_cast<int64_t>(d2));
        label.erase(label.begin() + static_cast<int64_t>(d1));
        at.push_back(p);
        label.push_back(l);
        again = true;
      }
    }
  }
  std::vector<int64_t> order(at.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return at[a] < at[b]; });
  x = x.permute(order);
  Shape full(static_cast<size_t>(lay.dims), 1);
  for (size_t k = 0; k < order.size(); ++k) full[at[order[k]]] = x.size(static_cast<int64_t>(k));
  return x.reshape(full);
}

// left and right multiplied in the common layout, the dims in `summed` contracted (keeping size 1).
Tensor contract(const Tensor& left_in, const Tensor& right_in, const std::vector<bool>& summed) {
  Tensor left = left_in, right = right_in;
  std::vector<int64_t> lro, lo, ro, sum_lr, rest, left_only_sums, right_only_sums;
  const int64_t f = left.dim();
  for (int64_t d = 0; d < f; ++d) {
    const bool sl = left.size(d) != 1, sr = right.size(d) != 1;
    if (summed[d] && sl && sr) {
      sum_lr.push_back(d);
    } else if (summed[d]) {
      if (sl) left_only_sums.push_back(d);
      if (sr) right_only_sums.push_back(d);
      rest.push_back(d);
    } else if (sl && sr) {
      lro.push_back(d);
    } else if (sl) {
      lo.push_back(d);
    } else if (sr) {
      ro.push_back(d);
    } else {
      rest.push_back(d);
    }
  }
  if (!left_only_sums.empty()) left = left.sum(left_only_sums, true);
  if (!right_only_sums.empty()) right = right.sum(right_only_sums, true);
  auto concat = [](std::initializer_list<const std::vector<int64_t>*> parts) {
    std::vector<int64_t> out;
    for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
  };
  // A dim's size in the product: the operand's that is not 1 (a 0 too).
  auto size = [&](int64_t d) { return left.size(d) == 1 ? right.size(d) : left.size(d); };
  auto prod = [&](const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= size(d);
    return n;
  };
  const int64_t b = prod(lro), m = prod(lo), k = prod(sum_lr), n = prod(ro);
  const Tensor l3 = left.permute(concat({&lro, &lo, &sum_lr, &ro, &rest})).reshape({b, m, k});
  const Tensor r3 = right.permute(concat({&lro, &sum_lr, &ro, &lo, &rest})).reshape({b, k, n});
  const std::vector<int64_t> order = concat({&lro, &lo, &ro, &sum_lr, &rest});
  Shape shape;
  for (int64_t d : order) shape.push_back(summed[d] ? 1 : size(d));
  std::vector<int64_t> inverse(order.size());
  for (size_t j = 0; j < order.size(); ++j) inverse[order[j]] = static_cast<int64_t>(j);
  return matmul(l3, r3).reshape(shape).permute(inverse);
}

// Each layout dim's size across the aligned operands x: equal, or 1 to broadcast.
void check_sizes(const std::string& eq, const Layout& lay, const std::vector<Tensor>& x,
                 const std::vector<Tensor>& operands) {
  auto name = [&](int64_t d) {
    if (d < lay.ellipsis_dims) return std::string("the dims of \"...\"");
    const auto l = std::find(lay.pos.begin(), lay.pos.end(), d) - lay.pos.begin();
    return std::string("label '") + label_char(static_cast<int>(l)) + "'";
  };
  for (int64_t d = 0; d < lay.dims; ++d) {
    int64_t size = 1;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i].size(d) == 1) continue;
      if (size == 1) size = x[i].size(d);
      SINTER_CHECK(x[i].size(d) == size, "einsum: equation \"", eq, "\": sizes ", size, " and ",
                   x[i].size(d), " of ", name(d), " do not broadcast (operand ", i, " has shape ",
                   shape_str(operands[i].shape()), ")");
    }
  }
}

// The product in the layout (its summed dims of size 1) as the output: its dims in the output's
// order, the others dropped.
Tensor to_output(const Tensor& result, const Term& output, const Layout& lay) {
  std::vector<int64_t> order;
  Shape shape;
  auto put = [&](int64_t d) {
    order.push_back(d);
    shape.push_back(result.size(d));
  };
  for (size_t k = 0; k <= output.labels.size(); ++k) {
    if (static_cast<int>(k) == output.ellipsis) {
      for (int64_t d = 0; d < lay.ellipsis_dims; ++d) put(d);
    }
    if (k < output.labels.size()) put(lay.pos[output.labels[k]]);
  }
  for (int64_t d = 0; d < lay.dims; ++d) {
    if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  }
  return result.permute(order).reshape(shape);
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  SINTER_PROFILE_OP("einsum", operands);
  SINTER_CHECK(!operands.empty(), "einsum: equation \"", equation, "\" needs at least one operand");
  for (size_t i = 0; i < operands.size(); ++i) {
    SINTER_CHECK(operands[i].defined(), "einsum: operand ", i, " is undefined");
  }
  SINTER_AUTOCAST(einsum, operands[0], einsum(equation, [&] {
                    std::vector<Tensor> c;
                    for (const Tensor& t : operands) c.push_back(cast(t));
                    return c;
                  }()));
  for (size_t i = 0; i < operands.size(); ++i) {
    SINTER_CHECK(
        operands[i].dtype() == operands[0].dtype() && operands[i].device() == operands[0].device(),
        "einsum: operand ", i, " is ", operands[i].dtype(), " on ", operands[i].device(),
        ", operand 0 ", operands[0].dtype(), " on ", operands[0].device());
  }
  SINTER_CHECK(is_floating(operands[0].dtype()), "einsum: expected floating operands, got dtype ",
               operands[0].dtype());
  const Equation e = parse(equation, operands.size());
  const Layout lay = make_layout(equation, e, operands);
  std::vector<Tensor> x;
  for (size_t i = 0; i < operands.size(); ++i) {
    x.push_back(align(equation, e.inputs[i], lay, operands[i], i));
  }
  check_sizes(equation, lay, x, operands);
  // The ellipsis's dims are kept when the output has "...", summed when it does not.
  std::vector<bool> in_output(static_cast<size_t>(lay.dims), false);
  for (int64_t d = 0; d < lay.ellipsis_dims; ++d) in_output[d] = e.output.ellipsis >= 0;
  for (int l : e.output.labels) in_output[lay.pos[l]] = true;
  // The dims that can be summed once operand i is in: not output dims, and 1 in every later one.
  auto summable = [&](size_t i) {
    std::vector<bool> s(static_cast<size_t>(lay.dims));
    for (int64_t d = 0; d < lay.dims; ++d) {
      bool later = false;
      for (size_t j = i + 1; j < x.size(); ++j) later = later || x[j].size(d) != 1;
      s[d] = !in_output[d] && !later;
    }
    return s;
  };
  Tensor result = x[0];
  {
    std::vector<int64_t> dims;
    const std::vector<bool> s = summable(0);
    for (int64_t d = 0; d < lay.dims; ++d) {
      if (s[d] && result.size(d) != 1) dims.push_back(d);
    }
    if (!dims.empty()) result = result.sum(dims, true);
  }
  for (size_t i = 1; i < x.size(); ++i) result = contract(result, x[i], summable(i));
  return to_output(result, e.output, lay);
}

}  // namespace sinter
