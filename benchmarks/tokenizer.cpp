// The byte-level BPE tokenizer on the CPU (one thread, wall clock): training to 4096 tokens on the
// fortunes corpus (data::default_text_corpus(), about 2.5 MB), and encoding the whole corpus with
// the result against the `tokenizers` package encoding it with the same tokenizer.json
// (benchmarks/hf_tokenizer_time.py, run by this program in the same run; the row is skipped
// without python3 and the package). The encoding is checked first: the same token count as the
// package's, and decoding gives the corpus back.
#include "sinter/data/tokenizer.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "sinter/data/text.h"

namespace sinter {
namespace {

constexpr int64_t kVocab = 4096;

std::string corpus_text() {
  const data::TextCorpus corpus({data::default_text_corpus()}, {.context = 8});
  return {corpus.bytes().begin(), corpus.bytes().end()};
}

// The package's median ms and token count for encoding `text_path` with `json_path` (ms < 0 where
// it cannot run), and what it said.
struct Reference {
  double ms = -1;
  int64_t tokens = -1;
  std::string said;
};

Reference time_reference(const std::string& json_path, const std::string& text_path) {
  const std::string cmd = "python3 " SINTER_SOURCE_DIR "/benchmarks/hf_tokenizer_time.py '" +
                          json_path + "' '" + text_path + "' 5 2>&1";
  Reference r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) r.said += buf;
  const int status = pclose(pipe);
  if (status != 0) return r;
  double ms = 0;
  long long tokens = 0;
  if (std::sscanf(r.said.c_str(), "{\"ms\": %lf, \"tokens\": %lld", &ms, &tokens) == 2) {
    r.ms = ms;
    r.tokens = tokens;
  }
  return r;
}

void bench_train(benchmark::State& state) {
  const std::string text = corpus_text();
  std::vector<double> ms;
  int64_t merges = 0;
  for (auto _ : state) {
    const double t = bench::wall_ms(
        1, [&] { merges = data::BpeTokenizer::train(text, {.vocab_size = kVocab}).num_merges(); });
    ms.push_back(t);
    state.SetIterationTime(t * 1e-3);
  }
  state.counters["merges"] = static_cast<double>(merges);
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
  bench::report("ms", bench::median(ms), "", NAN, NAN);
}

void bench_encode(benchmark::State& state) {
  const std::string text = corpus_text();
  const data::BpeTokenizer bpe = data::BpeTokenizer::train(text, {.vocab_size = kVocab});
  std::vector<int32_t> ids = bpe.encode(text);
  if (bench::failed(state,
                    "check: ", bpe.decode(ids) == text ? "" : "decode(encode(corpus)) differs")) {
    return;
  }
  const auto dir = std::filesystem::temp_directory_path() / "sinter_bench_tokenizer";
  std::filesystem::create_directories(dir);
  const std::string json_path = (dir / "tokenizer.json").string();
  const std::string text_path = (dir / "corpus.txt").string();
  bpe.save(json_path);
  std::ofstream(text_path, std::ios::binary) << text;
  const Reference ref = time_reference(json_path, text_path);
  if (ref.ms >= 0 && ref.tokens != static_cast<int64_t>(ids.size())) {
    bench::fail(state, "tokenizers gives " + std::to_string(ref.tokens) + " tokens, Sinter " +
                           std::to_string(ids.size()));
    return;
  }
  std::vector<double> ms;
  for (auto _ : state) {
    const double t = bench::wall_ms(1, [&] { ids = bpe.encode(text); });
    ms.push_back(t);
    state.SetIterationTime(t * 1e-3);
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  const double ours = mb / (bench::median(ms) * 1e-3);
  state.counters["MB/s"] = ours;
  state.counters["tokens"] = static_cast<double>(ids.size());
  if (ref.ms < 0) {
    std::printf("tokenizers reference not run: %s\n", ref.said.c_str());
    bench::report("MB/s", ours, "", NAN, NAN);
    return;
  }
  const double theirs = mb / (ref.ms * 1e-3);
  state.counters["tokenizers_MB/s"] = theirs;
  bench::report("MB/s", ours, "tokenizers", theirs, ours / theirs);
}

void register_all() {
  const std::string vocab = std::to_string(kVocab);
  for (const auto& entry : {std::pair{"tokenizer/train/" + vocab, &bench_train},
                            std::pair{"tokenizer/encode/" + vocab, &bench_encode}}) {
    const std::string name = entry.first;
    void (*const fn)(benchmark::State&) = entry.second;
    benchmark::RegisterBenchmark(name.c_str(),
                                 [name, fn](benchmark::State& state) {
                                   bench::begin(name);
                                   bench::guarded(state, [&] { fn(state); });
                                   (void)bench::save_summary();
                                 })
        ->Iterations(bench::iterations(5))
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

// Training and a round trip on a small text.
void smoke() {
  bench::smoke_guarded("tokenizer/round_trip", []() -> std::string {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "the cat sat on the mat " + std::to_string(i) + "\n";
    const data::BpeTokenizer bpe = data::BpeTokenizer::train(text, {.vocab_size = 300});
    const std::vector<int32_t> ids = bpe.encode(text);
    if (bpe.decode(ids) != text) return "decode(encode(text)) differs";
    return ids.size() < text.size() / 2 ? "" : "the merges do not shorten the text";
  });
}

}  // namespace
}  // namespace sinter

int main(int argc, char** argv) {
  return sinter::bench::bench_main("bench_tokenizer", argc, argv, sinter::smoke,
                                   sinter::register_all);
}
