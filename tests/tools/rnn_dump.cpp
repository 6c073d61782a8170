// The recurrent layers' side of tests/scripts/check_rnn_torch.py. `write DIR`: an LSTM (two
// layers, bidirectional, proj_size, batch_first) and a GRU (two layers, bidirectional), each with
// its state dict, an input and Sinter's output, h_n (and c_n) in DIR/<name>.safetensors. `read
// DIR`: the state dicts and inputs torch wrote (DIR/torch_<name>.safetensors) loaded strictly
// into the same layers, their results in DIR/sinter_from_torch_<name>.safetensors.
#include <sinter/sinter.h>

#include <cstdio>
#include <memory>
#include <string>

namespace st = sinter;

namespace {

std::shared_ptr<st::nn::RNNBase> layer(const std::string& name) {
  if (name == "lstm") {
    return std::make_shared<st::nn::LSTM>(
        5, 7,
        st::nn::RNNOptions{
            .num_layers = 2, .batch_first = true, .bidirectional = true, .proj_size = 3});
  }
  return std::make_shared<st::nn::GRU>(4, 6,
                                       st::nn::RNNOptions{.num_layers = 2, .bidirectional = true});
}

// The layer's results on `x` under the names the script compares.
st::StateDict results(st::nn::RNNBase& m, const st::Tensor& x) {
  st::NoGradGuard ng;
  const st::nn::RNNOutput r = m.run(x);
  st::StateDict out{{"output", r.output}, {"h", r.h}};
  if (r.c.defined()) out["c"] = r.c;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: rnn_dump write|read DIR\n");
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  try {
    for (const std::string name : {"lstm", "gru"}) {
      auto m = layer(name);
      if (mode == "write") {
        st::manual_seed(name == "lstm" ? 11 : 12);
        m->reset_parameters();
        const st::Tensor x = name == "lstm" ? st::randn({3, 4, 5}) : st::randn({4, 3, 4});
        st::StateDict all = m->state_dict();
        all["input"] = x;
        for (const auto& [k, v] : results(*m, x)) all["result." + k] = v;
        st::save(all, dir + "/" + name + ".safetensors");
      } else {
        st::StateDict theirs = st::load(dir + "/torch_" + name + ".safetensors");
        const st::Tensor x = theirs.at("input");
        theirs.erase("input");
        m->load_state_dict(theirs, /*strict=*/true);
        st::save(results(*m, x), dir + "/sinter_from_torch_" + name + ".safetensors");
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rnn_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
