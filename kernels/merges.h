// The mergeable states of the row and channel reductions, readable by a host compiler: batch
// norm's Welford (count, mean, M2) with Chan's pairwise combine (kernels/norm.cu), and softmax's
// online (maximum, sum of exp) (kernels/softmax.cu). The kernels merge them in whatever tree the
// lanes, warps, blocks and splits make; the CPU suite merges the same functions in random trees
// and checks them against two-pass references, special values included (tests/test_merges.cpp).
#pragma once

#include <cmath>

#include "kern/scalar_ops.h"

namespace sinter::cudak {

// Note [batch norm Welford]
// The statistics take one read of x. Each thread keeps (count, mean, M2) and folds in one vector at
// a time (its exact mean and M2 first), threads, blocks and split channels meet with Chan's
// pairwise combine; no sum of squares cancels.
template <class A>
struct Welford {
  A n, mean, m2;
};

template <class A>
SINTER_HD inline Welford<A> welford_combine(Welford<A> a, Welford<A> b) {
  if (b.n == A(0)) return a;
  if (a.n == A(0)) return b;
  const A n = a.n + b.n, d = b.mean - a.mean, f = b.n / n;
  return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

// The state of kV values: their exact mean and M2.
template <int kV, class A>
SINTER_HD inline Welford<A> welford_of(const A (&v)[kV]) {
  A s = 0;
  for (int j = 0; j < kV; ++j) s += v[j];
  const A mu = s / A(kV);
  A q = 0;
  for (int j = 0; j < kV; ++j) q += (v[j] - mu) * (v[j] - mu);
  return {A(kV), mu, q};
}

// The online softmax state: the running maximum m and the sum s of exp(x - m) so far. NaN never
// becomes m but always reaches s, which then stays NaN. As in the CPU reference's two passes, a
// +inf maximum makes s NaN (its own term is exp(inf - inf)), and so does a row of only -inf
// (finish_max_sum), whose terms are all exp(-inf + inf).
template <typename A>
struct MaxSum {
  A m;
  A s;
};

template <typename A>
SINTER_HD inline MaxSum<A> max_sum_identity() {
  return {-static_cast<A>(INFINITY), A(0)};
}

template <typename A>
SINTER_HD inline void max_sum_add(MaxSum<A>& st, A x) {
  if (x > st.m) {
    st.s = st.s * kern::Math<A>::exp(st.m - x) +
           (x == static_cast<A>(INFINITY) ? static_cast<A>(NAN) : A(1));
    st.m = x;
  } else if (st.m != -static_cast<A>(INFINITY) || x != x) {
    st.s += kern::Math<A>::exp(x - st.m);
  }
}

template <typename A>
SINTER_HD inline MaxSum<A> finish_max_sum(MaxSum<A> st) {
  if (st.m == -static_cast<A>(INFINITY)) st.s = static_cast<A>(NAN);
  return st;
}

struct CombineMaxSum {
  template <typename A>
  SINTER_HD MaxSum<A> operator()(MaxSum<A> a, MaxSum<A> b) const {
    const A m = a.m > b.m ? a.m : b.m;
    if (m == -static_cast<A>(INFINITY)) return {m, a.s + b.s};  // keeps a NaN in either
    return {m, a.s * kern::Math<A>::exp(a.m - m) + b.s * kern::Math<A>::exp(b.m - m)};
  }
};

}  // namespace sinter::cudak
