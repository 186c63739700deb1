// What identifies the code generator of this process, for the kernel object cache.
//
// Why not a hand-bumped "codegen version" constant: the kernels are shaped by
// compiler/codegen, CpuTable, VectorMath and the O3 set-up here, edited by several
// people; a forgotten bump would make a later build link stale objects — wrong
// results, or kernels built for another packed layout. Why not a hash of the emitted
// IR: it is exact, but needs IR emission on every warm start, which the cache exists
// to skip. The GNU build ID of the binary holding the code generator changes with any
// change to that code (or anything else linked with it), costs nothing to read, and
// LLVM's shared library has one too. So a rebuild of nnc starts with a cold cache
// once — the price of never being stale.
//
// codeFingerprint() = "nnc:<build-id of the ELF object holding the codegen>
//                      llvm:<LLVM's runtime version>:<build-id of the object holding LLVM>"
// with a fallback of path, size and mtime for an object without a build ID. Computed
// once per process.
#pragma once
#include <string>

namespace nnc::runtime {

const std::string& codeFingerprint();

} // namespace nnc::runtime
