// What the public API's files (api/) share: exceptions turned into nnc::Error, the
// CLI's compile options from nnc::Options, and the memory limit check (docs/api.md).
#pragma once
#include <fmt/format.h>

#include <thread>

#include "compiler/driver/Driver.h"
#include "compiler/support/Diagnostics.h"
#include "nnc/nnc.h"
#include "runtime/io/WeightMap.h"
#include "runtime/jit/JitEngine.h"
#include "runtime/model/MemoryBill.h"

namespace nnc {

struct WeightMap::Impl {
  runtime::WeightMap map;
};

namespace internal {

inline std::vector<Diagnostic> located(const std::vector<SourceDiagnostic> &in, const std::string &file) {
  std::vector<Diagnostic> out;
  for (const auto &d : in) {
    Diagnostic::Severity s = d.severity == Severity::Error     ? Diagnostic::Severity::Error
                             : d.severity == Severity::Warning ? Diagnostic::Severity::Warning
                                                               : Diagnostic::Severity::Note;
    out.push_back({s, file, int(d.range.begin.line), int(d.range.begin.col), d.message});
    for (const auto &n : d.notes)
      out.push_back({Diagnostic::Severity::Note, file, int(n.range.begin.line), int(n.range.begin.col), n.message});
  }
  return out;
}

// "file:3:5: error: unknown layer 'desne'", one line per diagnostic.
inline std::string describe(const std::vector<Diagnostic> &ds) {
  std::string s;
  for (const auto &d : ds) {
    const char *sev = d.severity == Diagnostic::Severity::Error     ? "error"
                      : d.severity == Diagnostic::Severity::Warning ? "warning"
                                                                    : "note";
    // One without a position (about the whole file) as "file: error: ..." (not file:0:0), as the CLI.
    const std::string where = d.line > 0 ? fmt::format("{}:{}:{}", d.file, d.line, d.column) : d.file;
    s += fmt::format("\n{}: {}: {}", where, sev, d.message);
  }
  return s;
}

// The implementation of a public object, or an Error when the object was moved from
// (docs/api.md, "Lifetime": it may only be destroyed or assigned to), not a null
// pointer followed.
template <typename Pointer> const Pointer &live(const Pointer &impl, const char *type) {
  if (!impl)
    throw Error(fmt::format("this {0} was moved from: a moved-from {0} may only be destroyed or assigned to", type));
  return impl;
}

// Runs `fn`, turning every exception into nnc::Error (the header's promise): located
// diagnostics for the program's errors, the message for the others.
template <typename Fn> auto translated(Fn fn, const std::string &file = "") -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error &) {
    throw;
  } catch (const driver::CompileError &e) {
    std::vector<Diagnostic> ds = located(e.diagnostics(), file);
    const std::string message = clipMessage(e.what() + describe(ds)); // before ds is moved from
    throw Error(message, std::move(ds));
  } catch (const UserError &e) { // bounded as the CLI prints them (docs/errors.md)
    throw Error(clipMessage(e.what()));
  } catch (const UsageError &e) {
    throw Error(clipMessage(e.what()));
  } catch (const std::bad_alloc &) {
    throw Error("out of memory");
  } catch (const std::exception &e) {
    throw Error(clipMessage(fmt::format("internal error (a bug in nnc; please report it with the input): {}", e.what())));
  }
}

// Options::threads: 0 = one per CPU, else 1 to driver::kMaxThreads, as the CLI's --threads.
inline int threadsOf(const Options &o) {
  if (o.threads < 0 || o.threads > driver::kMaxThreads)
    throw UsageError(fmt::format("Options::threads must be 0 (one per CPU) or 1 to {}, found {}", driver::kMaxThreads,
                                 o.threads));
  return o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
}

inline runtime::Denormals denormalsOf(const Options &o) {
  return o.keepDenormals ? runtime::Denormals::Keep : runtime::Denormals::Flush;
}

// Weights given as bytes (Model and DecoderModel::loadWeights): not null, and a size a
// memory bill holds (2^63 or more read as a negative size).
inline void checkWeightBytes(const char *who, const void *bytes, size_t size) {
  if (!bytes && size > 0) throw UserError(fmt::format("{}::loadWeights: the bytes are a null pointer", who));
  if (size > size_t(INT64_MAX))
    throw UserError(fmt::format("{}::loadWeights: {} bytes is more than any weights file", who, size));
}

// Options as the driver takes them (the CLI's --model, --set, --batch, --dtype, --quant).
inline driver::CompileOptions compileOptions(const Options &o) {
  threadsOf(o); // a bad thread count is said before any compiling
  driver::CompileOptions co;
  co.model = o.model;
  co.sets = o.set;
  co.quant.perTensor = o.quantPerTensor;
  co.quant.weightsInPlace = o.weightsInPlace;
  if (o.quantGroup < 1 || o.quantGroup > driver::kMaxQuantGroup) // as --quant-group
    throw UserError(
        fmt::format("Options::quantGroup: expected 1 to {}, found {}", driver::kMaxQuantGroup, o.quantGroup));
  co.quant.group = o.quantGroup;
  if (o.batch) { // as the CLI's --batch N with --set batch=M: two values, one silently lost
    if (auto given = o.set.find("batch"); given != o.set.end() && given->second != o.batch)
      throw UserError(fmt::format("Options::batch is {} and Options::set[\"batch\"] is {}: give one of them",
                                  o.batch, given->second));
    co.sets["batch"] = o.batch;
  }
  if (!o.dtype.empty()) {
    co.dtype = parseDType(o.dtype);
    if (!co.dtype || *co.dtype == DType::I32)
      throw UserError(fmt::format("Options::dtype: expected f32, f16, bf16, i8 or i4, found '{}'", clipped(o.dtype)));
  }
  if (!o.activations.empty()) { // as --activations (docs/cli.md)
    const auto a = parseDType(o.activations);
    if (!a || (*a != DType::F32 && *a != DType::BF16 && *a != DType::I8))
      throw UserError(fmt::format("Options::activations: expected f32, bf16 or i8, found '{}'", clipped(o.activations)));
    if (*a != DType::F32 && co.dtype && !activationsMultiply(*a, *co.dtype))
      throw UserError(fmt::format("Options::activations {0} multiplies {0}{2} weights, and Options::dtype is {1}",
                                  dtypeName(*a), dtypeName(*co.dtype), *a == DType::I8 ? " or i4" : ""));
    co.quant.activations = *a;
    if (*a != DType::F32 && !co.dtype) co.dtype = *a;
  }
  if (!o.kvDtype.empty()) {
    const std::optional<DType> kv = parseKvCacheDType(o.kvDtype);
    if (!kv)
      throw UserError(fmt::format("Options::kvDtype: expected f32, f16, bf16 or i8, found '{}'", clipped(o.kvDtype)));
    co.kvType = *kv;
  }
  return co;
}

// Options::onWarning as the library calls it: an exception the host's callback throws
// ends the call as an Error that says so (it read as an internal error of nnc's).
inline std::function<void(const std::string &)> hostWarnings(const Options &o) {
  if (!o.onWarning) return {};
  return [f = o.onWarning](const std::string &message) {
    try {
      f(message);
    } catch (const std::exception &e) {
      throw UserError(fmt::format("Options::onWarning threw on the warning \"{}\": {}", message, e.what()));
    } catch (...) {
      throw UserError(fmt::format("Options::onWarning threw on the warning \"{}\"", message));
    }
  };
}

// The program's warnings (two dense layers with nothing between them, ...) for
// Options::onWarning, one "file:line:col: warning: ..." each with its notes; errors
// come back in the Error the compile throws.
inline driver::DiagnosticSink programWarnings(const Options &o) {
  auto warn = hostWarnings(o);
  if (!warn) return {};
  return [warn](const DiagnosticEngine &d) {
    const std::string file = d.file() ? d.file()->path() : std::string("<source>");
    for (const SourceDiagnostic &w : d.diagnostics()) {
      if (w.severity != Severity::Warning) continue;
      std::string text = fmt::format("{}:{}:{}: warning: {}", file, w.range.begin.line, w.range.begin.col, w.message);
      for (const auto &n : w.notes)
        text += fmt::format("\n{}:{}:{}: note: {}", file, n.range.begin.line, n.range.begin.col, n.message);
      warn(text);
    }
  };
}

inline runtime::KernelCacheOptions kernelCache(const Options &o) {
  runtime::KernelCacheOptions cache = o.kernelCacheDir ? runtime::KernelCacheOptions{*o.kernelCacheDir, {}}
                                                       : runtime::KernelCacheOptions::fromEnvironment();
  cache.onWarning = hostWarnings(o);
  return cache;
}


// Options::maxMemory against a bill, before anything is allocated (docs/api.md).
inline void checkMemoryLimit(const Options &o, const lower::KernelProgram &p, const runtime::MemoryBill &bill) {
  if (o.maxMemory < 0) return;
  const int64_t limit = o.maxMemory ? o.maxMemory : runtime::availableMemoryBytes();
  if (limit <= 0) return; // the machine does not say
  runtime::checkMemoryBill(bill, p.model, p.batch, limit,
                           o.maxMemory ? "the limit given (Options::maxMemory)" : "the memory this machine has available");
}

} // namespace internal
} // namespace nnc
