// Shared by the node tests: the kernels module, the reconstructor compiled from wasm/ts by tsc and the C++-written
// vectors, located by the environment that tests/wasm/run_wasm_tests.sh sets (GKQ_WASM_MODULE, GKQ_WASM_JS,
// GKQ_WASM_VECTORS); a missing one skips the tests that need it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const modulePath = process.env.GKQ_WASM_MODULE;
export const jsDir = process.env.GKQ_WASM_JS;
export const vectorsDir = process.env.GKQ_WASM_VECTORS;
const viaCTest = '(run through CTest: tests/wasm/run_wasm_tests.sh)';
export const noModule = !modulePath ? `GKQ_WASM_MODULE is not set ${viaCTest}`
                      : !jsDir ? `GKQ_WASM_JS is not set ${viaCTest}` : false;
export const noVectors = vectorsDir ? noModule : `GKQ_WASM_VECTORS is not set ${viaCTest}`;

// The compiled reconstructor (BUILD/wasm/js/gkq_reconstructor.mjs), or {} when GKQ_WASM_JS is not set.
export const reconstructorUrl = jsDir ? pathToFileURL(join(jsDir, 'gkq_reconstructor.mjs')).href : null;
export const lib = reconstructorUrl ? await import(reconstructorUrl) : {};

export async function loadKernels() {
  return lib.GKQKernels.load(readFileSync(modulePath));
}

export function manifest() {
  return JSON.parse(readFileSync(join(vectorsDir, 'manifest.json'), 'utf8'));
}

export function knotBytes() {
  return new Uint8Array(readFileSync(join(vectorsDir, 'vectors.knot')));
}

export function expected(entry) {
  const b = readFileSync(join(vectorsDir, entry.expected));
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

// Index of the first element whose bits differ, or -1.
export function firstBitDifference(a, b) {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length), y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return i;
  return -1;
}

// Deterministic pseudo-random numbers (xorshift32).
export function rng(seed) {
  let s = (seed * 2654435761) >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}
