// nnc — compile a neural-network description (.nn, docs/LANGUAGE.md) into kernels for
// this CPU and run it from C++. The whole public API is this header (C++17; no LLVM,
// ANTLR or IR types). Link `nnc::nnc` (CMake: find_package(nnc CONFIG)).
//
//   #include <nnc/nnc.h>
//
//   nnc::Options opts;
//   opts.batch = 4;
//   nnc::Model m = nnc::Model::fromFile("digits.nn", opts);  // throws nnc::Error
//   m.loadWeights("digits.safetensors");
//   std::vector<float> x(m.inputElements()), y(m.outputElements());
//   m.run(x.data(), y.data());                               // from any number of threads
//   nnc::Report r = m.report();                              // what the model owns and costs
//
// Threads: run() may be called on one Model from many threads at once; each call uses
// its own activation memory (reused from call to call) and the model's thread pool,
// whose parallel sections take turns. Compiling models on several threads at once is
// safe. loadWeights/randomWeights install the weights when no run() of the same Model
// is in progress, and runs wait while they do: a run sees one set of weights. A run takes
// runStackBytes() of stack (64 KiB and the kernels' frames, a few KiB: their buffers
// are not on the stack); a thread with less left has its run() done on a thread of
// nnc's own.
// The library never prints: diagnostics come back in nnc::Error, and the program's and
// the kernel cache's warnings go to Options::onWarning.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(_WIN32)
#define NNC_API
#else
#define NNC_API __attribute__((visibility("default")))
#endif

namespace nnc {

// How to compile a model.
struct Options {
  std::string model;                  // the model to compile when the file has several ("" = its only one)
  int64_t batch = 0;                  // the batch size (0 = the program's own, normally 1)
  int threads = 0;                    // threads for run(): 0 = one per CPU, else 1 to 256
  std::string dtype;                  // storage dtype of every layer: "f32", "f16", "bf16", "i8", "i4" ("" = f32)
  bool quantPerTensor = false;        // i8 weights: one scale per tensor (default: per output channel)
  int64_t quantGroup = 32;            // i4 weights: one scale per this many weights along K
  // f32 weights of dense layers, attention and MLPs read where they lie (the mapped
  // weights file) instead of packed: nothing copied at load (CLI --weights-in-place).
  bool weightsInPlace = false;
  // "bf16" / "i8": the GEMMs whose weights are stored in that dtype multiply activations
  // rounded to it (vdpbf16ps / vpdpbusd; the default dtype becomes it); "" = f32.
  std::string activations;
  std::map<std::string, int64_t> set; // model parameters, as `--set NAME=VALUE`
  // DecoderModel: how the KV cache stores keys and values, "f32", "f16", "bf16" or "i8"
  // (a scale per head vector) ("" = f32), as `--kv-dtype`. Model has no cache.
  std::string kvDtype;
  // Where compiled kernels are cached between processes: unset = from the environment
  // (NNC_CACHE, NNC_CACHE_DIR, XDG_CACHE_HOME, HOME), "" = no disk cache.
  std::optional<std::string> kernelCacheDir;
  std::function<void(const std::string &message)> onWarning; // the program's and the kernel cache's warnings
  // The most memory loading the weights and running may take, in bytes: over it,
  // loadWeights and randomWeights throw Error with the bill per part and the largest
  // layer before allocating anything (Model::memoryBill). 0 = the memory this machine
  // has available (/proc/meminfo's MemAvailable); a negative value turns the check off.
  int64_t maxMemory = 0;
  // Model, on fewer threads than CPUs: loadWeights and randomWeights return once the
  // weights are read and checked, and the CPUs `threads` leaves free pack them while the
  // first runs run, layer by layer (as the CLI's --run and --generate do). A weight its
  // dtype cannot hold is then the Error of the run that reaches it, not of loadWeights.
  // DecoderModel packs first.
  bool weightsWhileRunning = false;
  // Subnormal f32 values (magnitude < 2^-126): run() and the decoders flush them to zero
  // (FTZ and DAZ), as TensorFlow and XLA do, since every instruction that meets one costs
  // a microcode assist of some hundred cycles; true computes with them (IEEE gradual
  // underflow, as PyTorch by default; CLI --denormals keep). Either way a run computes with
  // every floating-point exception masked and rounding to nearest even, whatever the
  // calling thread's mode, and gives the caller its mode back (docs/api.md, "Floating-point mode").
  bool keepDenormals = false;
};

// A problem located in the program (file, 1-based line and column; 0 when none).
struct Diagnostic {
  enum class Severity { Error, Warning, Note };
  Severity severity = Severity::Error;
  std::string file;
  int line = 0, column = 0;
  std::string message;
};

// Every failure: a bad program, weights or input (with what was expected and found),
// or a model that cannot run yet. diagnostics() holds the program's located errors
// and warnings when the failure is in the program.
class NNC_API Error : public std::runtime_error {
public:
  explicit Error(const std::string &message, std::vector<Diagnostic> diagnostics = {});
  const std::vector<Diagnostic> &diagnostics() const { return diagnostics_; }

private:
  std::vector<Diagnostic> diagnostics_;
};

struct LayerReport {
  std::string name;                  // full path: "fc1", "layers.3.attention"
  std::string op;                    // layer kind: "dense"
  std::vector<int64_t> outputShape;  // batch axis included
  int64_t params = 0;
  int64_t macs = 0;                  // whole batch
};

// The report's figures (docs/lowering.md, README): counts for the whole batch.
struct Report {
  std::string model;
  int64_t batch = 1;
  int64_t params = 0;               // all parameters, biases included
  int64_t weights = 0;              // parameters that are not biases
  int64_t macs = 0;
  int64_t flops = 0;                // 2 × macs
  int64_t weight_bytes_stored = 0;  // as the model's dtypes store them
  int64_t activation_peak_bytes = 0; // as written: each layer's output freed after its last reader
  int64_t runtime_arena_bytes = 0;   // as nnc runs it: the activation memory of one run() call
  std::vector<LayerReport> layers;  // in execution order
};

// What a run needs, summed from the compiled program before any of it is allocated
// (the CLI's --max-memory bill): an upper bound, each part counted as if all lived at once.
struct MemoryBill {
  struct Part {
    std::string what;  // "weights as f32", "packed GEMM panels", "activation arena", ...
    int64_t bytes = 0; // saturates at INT64_MAX
  };
  std::vector<Part> parts;
  int64_t total = 0;             // saturates at INT64_MAX
  std::string largestLayer;      // the layer with the most weight bytes
  int64_t largestLayerBytes = 0; // its weights as f32
  std::string largestLayerWhere; // "dense, line 2"
};

// Renames the tensors of a weights file before they are matched to the model: one rule
// `FROM -> TO` per line, `*` matching one or more characters, every rule applied in
// order to the result of the ones before (docs/cli.md, --weight-map). Immutable and
// cheap to copy. A default-constructed map renames nothing.
class NNC_API WeightMap {
public:
  WeightMap();
  // Copies share the rules, and a move copies too: a moved-from map is still the map it was.
  WeightMap(const WeightMap &) = default;
  WeightMap(WeightMap &&other) noexcept : impl_(other.impl_) {}
  WeightMap &operator=(const WeightMap &) = default;
  WeightMap &operator=(WeightMap &&other) noexcept {
    impl_ = other.impl_;
    return *this;
  }
  static WeightMap fromFile(const std::string &path); // throws Error: "FILE:LINE:COL: ..." per mistake
  static WeightMap fromText(const std::string &text, const std::string &name = "<weight map>");
  // The name after every rule (the names joined by ", " when a rule splits the tensor,
  // "" when one drops it); throws Error when the rules make a name more than 256 bytes
  // longer than tensorName, or split a part again (docs/cli.md, "Weight maps").
  std::string apply(const std::string &tensorName) const;
  size_t size() const; // the number of rules

private:
  friend class Model;
  friend class DecoderModel;
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

class NNC_API Model {
public:
  static Model fromFile(const std::string &path, const Options &options = {});
  static Model fromSource(const std::string &text, const Options &options = {});
  Model(Model &&) noexcept;
  Model &operator=(Model &&) noexcept;
  ~Model();

  // Weights by PyTorch name and layout (.safetensors; F32, F16, BF16 converted): from a
  // file, or from bytes the host owns (copied). randomWeights: PyTorch's default
  // initialisation from a seed (the CLI's --random-weights).
  // With a WeightMap, the file's tensor names are renamed first. Each of these checks
  // the memory bill against Options::maxMemory before allocating anything.
  void loadWeights(const std::string &safetensorsPath);
  void loadWeights(const void *safetensorsBytes, size_t size);
  void loadWeights(const std::string &safetensorsPath, const WeightMap &map);
  void loadWeights(const void *safetensorsBytes, size_t size, const WeightMap &map);
  void randomWeights(uint64_t seed);

  std::vector<int64_t> inputShape() const;  // batch axis included
  std::vector<int64_t> outputShape() const;
  int64_t inputElements() const;            // whole batch
  int64_t outputElements() const;
  bool tokenInput() const;                  // the input is token ids (i32)

  // in: inputElements() values, out: outputElements() floats (row-major, PyTorch's
  // shapes). Throws Error before the weights are loaded, for the wrong input kind, or
  // when a layer cannot run yet.
  void run(const float *in, float *out) const;
  void run(const int32_t *tokens, float *out) const;
  // The stack one run() takes, in bytes: its deepest kernel's frames (as compiled for
  // this CPU) and 64 KiB for the rest. A call from a thread with less left runs on a
  // thread of nnc's own instead, which costs tens of µs a call; a host that calls
  // from threads it makes can give them this much. Throws Error as run() does when a
  // layer cannot run yet.
  size_t runStackBytes() const;

  Report report() const;
  // The memory loading weights and one run take, as the CLI's --max-memory sums it; the
  // weight file part is 0 here (loadWeights adds the file's size: it reads it whole), and
  // the input and output are the host's buffers of one call.
  MemoryBill memoryBill() const;

private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// How Decoder::generate picks each next id (the CLI's --temperature, --top-k, --seed,
// --top-p) and when it ends (--stop): temperature 0 is greedy (the argmax); above 0, a
// draw from softmax(logits / temperature) over the topK largest logits (0 = all), narrowed
// to their nucleus when topP < 1 (the fewest most probable ids whose probabilities sum to
// at least topP, in (0, 1]; transformers' top_p), from a generator seeded with `seed`, so
// the same seed gives the same ids (and the same ids as `nnc --generate`). A batch row
// ends at the first of the `stop` ids it produces (e.g. the end-of-sequence id; each in
// [0, vocab())), and its later positions repeat that id; generate returns early once
// every row has ended.
struct Sampling {
  double temperature = 0;
  int64_t topK = 0;
  uint64_t seed = 0;
  double topP = 1; // after seed, so that {temperature, topK, seed} initialisers keep their meaning
  std::vector<int32_t> stop = {};
};

class Decoder;

// A causal language model compiled for incremental decoding (docs/api.md, class
// DecoderModel): token ids i32[seq] in, logits [seq, vocab] out; the context is its
// `seq` (Options::set["seq"]). It owns the kernels and the weights; each Decoder made
// by newDecoder() is one independent sequence (its own KV cache) over them. Copies share
// the same compiled model. loadWeights/randomWeights wait for the Decoders' calls in
// progress; a Decoder whose KV cache holds positions then throws until reset().
class NNC_API DecoderModel {
public:
  static DecoderModel fromFile(const std::string &path, const Options &options = {});
  static DecoderModel fromSource(const std::string &text, const Options &options = {});

  // As Model's: PyTorch names and layouts, optionally renamed by a WeightMap; the memory
  // bill (the model at its whole context) is checked against Options::maxMemory first.
  void loadWeights(const std::string &safetensorsPath);
  void loadWeights(const void *safetensorsBytes, size_t size);
  void loadWeights(const std::string &safetensorsPath, const WeightMap &map);
  void loadWeights(const void *safetensorsBytes, size_t size, const WeightMap &map);
  void randomWeights(uint64_t seed);

  int64_t context() const; // positions a sequence may hold: prompt and generated ids
  int64_t vocab() const;   // logits per batch row
  int64_t batch() const;   // sequences decoded side by side by each Decoder

  // A new sequence with an empty KV cache. Decoders of one model may run on different
  // threads at once; one Decoder is used by one thread at a time.
  Decoder newDecoder() const;

private:
  friend class Decoder;
  struct Impl;
  DecoderModel() = default;
  std::shared_ptr<Impl> impl_;
};

// One sequence (batch() of them side by side) over a DecoderModel: its KV cache and its
// activation memory. Move-only; it keeps its model alive.
class NNC_API Decoder {
public:
  Decoder(Decoder &&) noexcept;
  Decoder &operator=(Decoder &&) noexcept;
  ~Decoder();

  // Appends `length` positions per batch row (tokens: batch() × length ids, row-major)
  // after the past() ones (a fresh or reset Decoder: from position 0) and returns the
  // logits of the last one, batch() × vocab(). Any length from 1 to context() - past().
  const std::vector<float> &prefill(const int32_t *tokens, size_t length);
  // Appends one id per batch row; returns the next logits, batch() × vocab().
  const std::vector<float> &decode(const int32_t *ids);
  // prefill(prompt, length), then n - 1 decode steps, each fed the id picked from the
  // logits before; returns the n new ids per batch row, batch() × n (fewer columns when
  // every row met a Sampling::stop id first: size() / batch() of them). As the CLI, the
  // prompt and n must fit: past() + length + n <= context(), checked before any work.
  std::vector<int32_t> generate(const int32_t *prompt, size_t length, int64_t n, const Sampling &sampling = {});
  void reset(); // forgets the cache: the next prefill starts at position 0

  const std::vector<float> &logits() const; // the last call's logits (empty before one)
  int64_t past() const;                     // positions in the cache
  int64_t context() const;
  int64_t vocab() const;
  int64_t batch() const;

private:
  friend class DecoderModel;
  struct Impl;
  explicit Decoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace nnc
