// bench_wasm.mjs: the WebAssembly kernels against the native decoder, single thread, on the same knot records.
//   build/tests/make_wasm_vectors DIR --bench        (writes the records and the native times: cpu-simd and
//                                                     cpu-ref on 1 thread, medians)
//   node wasm/bench/bench_wasm.mjs DIR build/wasm/gkq_kernels.wasm [--runs N]
// Prints per record the median WASM decode time (payload -> tensor in WebAssembly memory; and with the copy out to
// a Float32Array, what GKQReconstructor returns), the native times and the ratio WASM / native cpu-simd (target
// <= 2.5), and checks the output against the native decoder's, bit for bit.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { GKQKernels, KnotReader, decodeTensor, decodeTensorInWasm } from '../js/gkq_reconstructor.mjs';

const [dir, modulePath, ...rest] = process.argv.slice(2);
if (!dir || !modulePath) {
  console.error('usage: node bench_wasm.mjs VECTORS_DIR gkq_kernels.wasm [--runs N]');
  process.exit(2);
}
const runs = rest[0] === '--runs' ? Math.max(1, Number(rest[1])) : 7;
const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
const kernels = await GKQKernels.load(readFileSync(modulePath));
const knot = await KnotReader.fromBytes(new Uint8Array(readFileSync(join(dir, manifest.knot))), manifest.knot);

const rows = manifest.tensors.filter((t) => t.bench);
if (!rows.length) {
  console.error(`${dir}: no bench records (run make_wasm_vectors with --bench)`);
  process.exit(2);
}
console.log(`# WASM (node ${process.version}, one thread) vs native single-thread on the same records; median of ${runs}`);
console.log('# the machine may be shared with other work: compare the ratios of one run, not absolute times');
console.log(['record'.padEnd(42), 'wasm ms', '+copy ms', 'simd ms', 'ref ms', 'wasm/simd', 'wasm/ref', 'target', 'same bits'].join('  '));
const median = (v) => v.sort((a, b) => a - b)[Math.floor(v.length / 2)];
for (const entry of rows) {
  const t = await knot.readRecord(entry.name);  // inflate once: the decoding is what is compared
  const out = decodeTensor(kernels, t);  // warm-up (and V8's tier-up), and the output to check
  decodeTensorInWasm(kernels, t).free();
  const inWasm = [], withCopy = [];
  for (let i = 0; i < runs; i++) {
    let t0 = performance.now();
    decodeTensorInWasm(kernels, t).free();
    inWasm.push(performance.now() - t0);
    t0 = performance.now();
    decodeTensor(kernels, t);
    withCopy.push(performance.now() - t0);
  }
  const wasm = median(inWasm), copy = median(withCopy);
  const b = readFileSync(join(dir, entry.expected));
  const want = new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  const got = new Uint32Array(out.buffer);
  const same = got.length === want.length && got.every((v, i) => v === want[i]);
  const simd = entry.native_ms?.['cpu-simd 1 thread'], ref = entry.native_ms?.['cpu-ref 1 thread'];
  const ratio = simd ? wasm / simd : NaN;
  console.log([entry.label.padEnd(42), wasm.toFixed(2).padStart(7), copy.toFixed(2).padStart(8), (simd ?? NaN).toFixed(2).padStart(7),
               (ref ?? NaN).toFixed(2).padStart(6), ratio.toFixed(2).padStart(9), (ref ? wasm / ref : NaN).toFixed(2).padStart(8),
               (ratio <= 2.5 ? 'met' : 'MISSED').padStart(6), String(same).padStart(9)].join('  '));
}
console.log('wasm ms: record payload -> tensor in WebAssembly memory; +copy ms: the same plus the copy into a fresh');
console.log('Float32Array that decodeTensor returns; simd / ref ms: native gkq::kernels::decode on one thread');
