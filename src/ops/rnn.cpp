// The recurrent cells: the fused pointwise steps of LSTM and GRU (src/kern/rnn.h, Note [rnn cell
// steps]) with their backward, and PyTorch's cell functions built from two linears and a step.
#include "kern/rnn.h"

#include <tuple>

#include "internal/autocast_impl.h"
#include "internal/autograd_impl.h"
#include "internal/dispatch.h"
#include "internal/ops_impl.h"
#include "internal/profile_op.h"
#include "sinter/ops.h"

namespace sinter {

namespace {

// The checks of a step's operands: each (B, units * hidden) of one floating dtype on one device,
// with `units` gate blocks for the gate tensors and one for the states.
void check_step(const char* op, const std::vector<std::pair<const Tensor*, int64_t>>& operands,
                int64_t batch, int64_t hidden) {
  const Tensor& first = *operands[0].first;
  SINTER_CHECK(is_floating(first.dtype()), op, ": expected floating tensors, got dtype ",
               first.dtype());
  for (const auto& [t, units] : operands) {
    check_defined(op, *t);
    SINTER_CHECK(t->dim() == 2 && t->size(0) == batch && t->size(1) == units * hidden, op,
                 ": expected an operand of shape [", batch, ", ", units * hidden, "], got ",
                 shape_str(t->shape()));
    SINTER_CHECK(t->dtype() == first.dtype() && t->device() == first.device(), op,
                 ": operands of dtypes ", first.dtype(), " and ", t->dtype(), " on ",
                 first.device(), " and ", t->device());
  }
}

// The checks of a cell's arguments (x (B, I) or (I), h (B, H) or (H), weights (G H, I) and
// (G H, H), biases (G H) or undefined); returns H.
int64_t check_cell(const char* op, const Tensor& x, const Tensor& h, const Tensor& w_ih,
                   const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, int64_t gates) {
  for (const Tensor* t : {&x, &h, &w_ih, &w_hh}) check_defined(op, *t);
  SINTER_CHECK(x.dim() == 1 || x.dim() == 2, op, ": input must be (B, I) or (I), got shape ",
               shape_str(x.shape()));
  SINTER_CHECK(h.dim() == x.dim() && (x.dim() == 1 || h.size(0) == x.size(0)), op, ": state ",
               shape_str(h.shape()), " does not match input ", shape_str(x.shape()));
  const int64_t hidden = h.size(h.dim() - 1), in = x.size(x.dim() - 1);
  SINTER_CHECK(w_ih.dim() == 2 && w_ih.size(0) == gates * hidden && w_ih.size(1) == in, op,
               ": weight_ih must be [", gates * hidden, ", ", in, "], got ",
               shape_str(w_ih.shape()));
  SINTER_CHECK(w_hh.dim() == 2 && w_hh.size(0) == gates * hidden && w_hh.size(1) == hidden, op,
               ": weight_hh must be [", gates * hidden, ", ", hidden, "], got ",
               shape_str(w_hh.shape()));
  for (const Tensor* b : {&b_ih, &b_hh}) {
    SINTER_CHECK(!b->defined() || (b->dim() == 1 && b->size(0) == gates * hidden), op,
                 ": biases must be [", gates * hidden, "], got ", shape_str(b->shape()));
  }
  return hidden;
}

}  // namespace

std::tuple<Tensor, Tensor> lstm_cell_step(const Tensor& gates, const Tensor& c) {
  SINTER_PROFILE_OP("lstm_cell_step", gates, c);
  SINTER_AUTOCAST(lstm_cell_step, gates, lstm_cell_step(cast(gates), cast(c)));
  const char* op = "lstm_cell_step";
  check_defined(op, gates);
  check_defined(op, c);
  SINTER_CHECK(c.dim() == 2, op, ": the cell state must be (B, H), got shape ",
               shape_str(c.shape()));
  const int64_t batch = c.size(0), hidden = c.size(1);
  check_step(op, {{&gates, 4}, {&c, 1}}, batch, hidden);
  const TensorOptions o{.dtype = c.dtype(), .device = c.device()};
  Tensor h = empty({batch, hidden}, o), c_next = empty({batch, hidden}, o);
  Tensor g, cp;
  {
    NoGradGuard ng;
    g = gates.contiguous();
    cp = c.contiguous();
  }
  SINTER_DISPATCH(c.device(), lstm_cell, c.dtype(), batch, hidden, g.data_ptr(), cp.data_ptr(),
                  h.data_ptr(), c_next.data_ptr());
  if (needs_grad({&gates, &c})) {
    SavedTensor sg(g, op), sc(cp, op);
    record(op, {&h, &c_next}, {gates, c}, [sg, sc, batch, hidden](const Grads& gr) {
      const Tensor g = sg.get(), cp = sc.get();
      const TensorOptions o{.dtype = cp.dtype(), .device = cp.device()};
      const Tensor dh = gr[0].defined() ? gr[0].contiguous() : zeros({batch, hidden}, o);
      const Tensor dc = gr[1].defined() ? gr[1].contiguous() : zeros({batch, hidden}, o);
      Tensor dgates = empty({batch, 4 * hidden}, o), dcp = empty({batch, hidden}, o);
      SINTER_DISPATCH(cp.device(), lstm_cell_backward, cp.dtype(), batch, hidden, g.data_ptr(),
                      cp.data_ptr(), dh.data_ptr(), dc.data_ptr(), dgates.data_ptr(),
                      dcp.data_ptr());
      return Grads{dgates, dcp};
    });
  }
  return {h, c_next};
}

Tensor gru_cell_step(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  SINTER_PROFILE_OP("gru_cell_step", gi, gh, h);
  SINTER_AUTOCAST(gru_cell_step, gi, gru_cell_step(cast(gi), cast(gh), cast(h)));
  const char* op = "gru_cell_step";
  for (const Tensor* t : {&gi, &gh, &h}) check_defined(op, *t);
  SINTER_CHECK(h.dim() == 2, op, ": the state must be (B, H), got shape ", shape_str(h.shape()));
  const int64_t batch = h.size(0), hidden = h.size(1);
  check_step(op, {{&gi, 3}, {&gh, 3}, {&h, 1}}, batch, hidden);
  const TensorOptions o{.dtype = h.dtype(), .device = h.device()};
  Tensor out = empty({batch, hidden}, o);
  Tensor x, s, hp;
  {
    NoGradGuard ng;
    x = gi.contiguous();
    s = gh.contiguous();
    hp = h.contiguous();
  }
  SINTER_DISPATCH(h.device(), gru_cell, h.dtype(), batch, hidden, x.data_ptr(), s.data_ptr(),
                  hp.data_ptr(), out.data_ptr());
  if (needs_grad({&gi, &gh, &h})) {
    SavedTensor sx(x, op), ss(s, op), sh(hp, op);
    record(op, {&out}, {gi, gh, h}, [sx, ss, sh, batch, hidden](const Grads& gr) {
      const Tensor x = sx.get(), s = ss.get(), hp = sh.get(), dh = gr[0].contiguous();
      const TensorOptions o{.dtype = hp.dtype(), .device = hp.device()};
      Tensor dgi = empty({batch, 3 * hidden}, o), dgh = empty({batch, 3 * hidden}, o);
      Tensor dhp = empty({batch, hidden}, o);
      SINTER_DISPATCH(hp.device(), gru_cell_backward, hp.dtype(), batch, hidden, x.data_ptr(),
                      s.data_ptr(), hp.data_ptr(), dh.data_ptr(), dgi.data_ptr(), dgh.data_ptr(),
                      dhp.data_ptr());
      return Grads{dgi, dgh, dhp};
    });
  }
  return out;
}

std::tuple<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                     const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                     const Tensor& b_hh) {
  SINTER_AUTOCAST(
      lstm_cell, x,
      lstm_cell(cast(x), cast(h), cast(c), cast(w_ih), cast(w_hh), cast(b_ih), cast(b_hh)));
  check_cell("lstm_cell", x, h, w_ih, w_hh, b_ih, b_hh, 4);
  check_defined("lstm_cell", c);
  SINTER_CHECK(c.shape() == h.shape(), "lstm_cell: cell state ", shape_str(c.shape()),
               " differs from the hidden state ", shape_str(h.shape()));
  if (x.dim() == 1) {
    auto [h1, c1] =
        lstm_cell(x.unsqueeze(0), h.unsqueeze(0), c.unsqueeze(0), w_ih, w_hh, b_ih, b_hh);
    return {h1.squeeze(0), c1.squeeze(0)};
  }
  return lstm_cell_step(add(linear(x, w_ih, b_ih), linear(h, w_hh, b_hh)), c);
}

Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih, const Tensor& b_hh) {
  SINTER_AUTOCAST(gru_cell, x,
                  gru_cell(cast(x), cast(h), cast(w_ih), cast(w_hh), cast(b_ih), cast(b_hh)));
  check_cell("gru_cell", x, h, w_ih, w_hh, b_ih, b_hh, 3);
  if (x.dim() == 1) {
    return gru_cell(x.unsqueeze(0), h.unsqueeze(0), w_ih, w_hh, b_ih, b_hh).squeeze(0);
  }
  return gru_cell_step(linear(x, w_ih, b_ih), linear(h, w_hh, b_hh), h);
}

Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  SINTER_AUTOCAST(rnn_tanh_cell, x,
                  rnn_tanh_cell(cast(x), cast(h), cast(w_ih), cast(w_hh), cast(b_ih), cast(b_hh)));
  check_cell("rnn_tanh_cell", x, h, w_ih, w_hh, b_ih, b_hh, 1);
  return tanh(add(linear(x, w_ih, b_ih), linear(h, w_hh, b_hh)));
}

Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  SINTER_AUTOCAST(rnn_relu_cell, x,
                  rnn_relu_cell(cast(x), cast(h), cast(w_ih), cast(w_hh), cast(b_ih), cast(b_hh)));
  check_cell("rnn_relu_cell", x, h, w_ih, w_hh, b_ih, b_hh, 1);
  return relu(add(linear(x, w_ih, b_ih), linear(h, w_hh, b_hh)));
}

}  // namespace sinter
