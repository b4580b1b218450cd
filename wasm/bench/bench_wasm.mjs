// bench_wasm.mjs: the WebAssembly kernels against the native decoder, single thread, on the same knot records.
//   build/tests/make_wasm_vectors DIR --bench        (writes the records and the native times: cpu-simd and
//                                                     cpu-ref on 1 thread, medians)
//   node wasm/bench/bench_wasm.mjs DIR build/wasm/gkq_kernels.wasm [--runs N]
//                                                    (the reconstructor: build/wasm/js/, compiled from wasm/ts)
// Prints per record the median WASM decode time (payload -> tensor in WebAssembly memory; and with the copy out to
// a Float32Array, what GKQReconstructor returns), the native times and the ratio WASM / native cpu-simd (target
// <= 2.5; wall and CPU time, medians), and checks the output against the native decoder's, bit for bit.
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dir, modulePath, ...rest] = process.argv.slice(2);
if (!dir || !modulePath) {
  console.error('usage: node bench_wasm.mjs VECTORS_DIR gkq_kernels.wasm [--runs N]');
  process.exit(2);
}
const runs = rest[0] === '--runs' ? Math.max(1, Number(rest[1])) : 7;
const { GKQKernels, KnotReader, decodeTensor, decodeTensorInWasm } =
  await import(pathToFileURL(join(dirname(modulePath), 'js', 'gkq_reconstructor.mjs')).href);
const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
const kernels = await GKQKernels.load(readFileSync(modulePath));
const knot = await KnotReader.fromBytes(new Uint8Array(readFileSync(join(dir, manifest.knot))), manifest.knot);

const rows = manifest.tensors.filter((t) => t.bench);
if (!rows.length) {
  console.error(`${dir}: no bench records (run make_wasm_vectors with --bench)`);
  process.exit(2);
}
console.log(`# WASM (node ${process.version}, one thread) vs native single-thread on the same records; median of ${runs}`);
console.log(`# load average ${loadavg().map((v) => v.toFixed(2)).join(' ')} on ${cpus().length} cores: on a shared machine wall ` +
            'times include waiting for a core, CPU times do not; the target is judged on the CPU-time ratio');
console.log(['record'.padEnd(42), 'wasm ms', '+copy ms', 'simd ms', 'ref ms', 'wasm cpu', 'simd cpu', 'wasm/simd',
             'cpu ratio', 'target', 'same bits'].join('  '));
const median = (v) => v.sort((a, b) => a - b)[Math.floor(v.length / 2)];
const cpuMs = (since) => { const u = process.cpuUsage(since); return (u.user + u.system) / 1e3; };
for (const entry of rows) {
  const t = await knot.readRecord(entry.name);  // inflate once: the decoding is what is compared
  const out = decodeTensor(kernels, t);  // warm-up (and V8's tier-up), and the output to check
  decodeTensorInWasm(kernels, t).free();
  const inWasm = [], inWasmCpu = [], withCopy = [];
  // the decodes first, then the copies: a copy's 4 * n-byte Float32Array is garbage that V8's collector threads
  // (in the process CPU time) would clear while a later decode is being timed
  for (let i = 0; i < runs; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    decodeTensorInWasm(kernels, t).free();
    inWasm.push(performance.now() - t0);
    inWasmCpu.push(cpuMs(c0));
  }
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    decodeTensor(kernels, t);
    withCopy.push(performance.now() - t0);
  }
  const wasm = median(inWasm), wasmCpu = median(inWasmCpu), copy = median(withCopy);
  const b = readFileSync(join(dir, entry.expected));
  const want = new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  const got = new Uint32Array(out.buffer);
  const same = got.length === want.length && got.every((v, i) => v === want[i]);
  const simd = entry.native_ms?.['cpu-simd 1 thread'], ref = entry.native_ms?.['cpu-ref 1 thread'];
  const simdCpu = entry.native_cpu_ms?.['cpu-simd 1 thread'];
  const ratio = simd ? wasm / simd : NaN, cpuRatio = simdCpu ? wasmCpu / simdCpu : NaN;
  const judged = Number.isNaN(cpuRatio) ? ratio : cpuRatio;
  const fmt = (v, w) => (v ?? NaN).toFixed(2).padStart(w);
  console.log([entry.label.padEnd(42), fmt(wasm, 7), fmt(copy, 8), fmt(simd, 7), fmt(ref, 6), fmt(wasmCpu, 8),
               fmt(simdCpu, 8), fmt(ratio, 9), fmt(cpuRatio, 9), (judged <= 2.5 ? 'met' : 'MISSED').padStart(6),
               String(same).padStart(9)].join('  '));
}
console.log('wasm ms: record payload -> tensor in WebAssembly memory; +copy ms: the same plus the copy into a fresh');
console.log('Float32Array that decodeTensor returns; simd / ref ms: native gkq::kernels::decode on one thread;');
console.log('cpu: process CPU time of the same runs (medians); target: WASM <= 2.5x native cpu-simd');
