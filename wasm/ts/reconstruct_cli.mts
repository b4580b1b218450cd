// reconstruct_cli.mjs (compiled from wasm/ts/reconstruct_cli.mts): one knot tensor through the WebAssembly kernels,
// as a child process for native callers. Prints one JSON line:
//   {"tensor", "shape", "n", "runs", "seconds" (median decode, record payload -> tensor in WebAssembly memory),
//    "gb_per_s" (output bytes / seconds), "node", "out" (the .f32 file written, when --out is given)}
// or {"error": "..."} with exit status 1 (2 for bad arguments).
//   node BUILD/wasm/js/reconstruct_cli.mjs --wasm gkq_kernels.wasm --knot model.knot --tensor NAME [--runs N]
//        [--out F.f32]
import { readFileSync, writeFileSync } from 'node:fs';
import { GKQKernels, KnotReader, decodeTensorInWasm } from './gkq_reconstructor.mjs';

interface Options {
  wasm: string;
  knot: string;
  tensor: string;
  runs: number;
  out?: string;
}

function parse(argv: string[]): Options | null {
  const o: Partial<Options> = { runs: 3 };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i], value = argv[i + 1];
    if (value === undefined) return null;
    if (key === '--runs') o.runs = Number(value);
    else if (key === '--wasm' || key === '--knot' || key === '--tensor' || key === '--out')
      o[key.slice(2) as 'wasm' | 'knot' | 'tensor' | 'out'] = value;
    else return null;
    i++;
  }
  return o.wasm && o.knot && o.tensor && Number.isInteger(o.runs) && o.runs! >= 1 ? (o as Options) : null;
}

const o = parse(process.argv.slice(2));
if (!o) {
  const usage = 'usage: reconstruct_cli.mjs --wasm FILE --knot FILE --tensor NAME [--runs N] [--out FILE.f32]';
  console.log(JSON.stringify({ error: usage }));
  process.exit(2);
}
try {
  const kernels = await GKQKernels.load(readFileSync(o.wasm));
  const knot = await KnotReader.fromBytes(readFileSync(o.knot), o.knot);
  const t = await knot.readRecord(o.tensor);
  const first = decodeTensorInWasm(kernels, t);  // warm-up (V8 compiles the hot kernels on their first calls)
  if (o.out) writeFileSync(o.out, first.view());
  first.free();
  const seconds: number[] = [];
  for (let i = 0; i < o.runs; i++) {
    const t0 = performance.now();
    decodeTensorInWasm(kernels, t).free();
    seconds.push((performance.now() - t0) / 1e3);
  }
  seconds.sort((a, b) => a - b);
  const m = seconds.length;
  const median = m % 2 ? seconds[(m - 1) / 2] : (seconds[m / 2 - 1] + seconds[m / 2]) / 2;
  const n = t.shape.reduce((a, b) => a * b, 1);
  console.log(JSON.stringify({ tensor: o.tensor, shape: t.shape, n, runs: o.runs, seconds: median,
                               gb_per_s: (4 * n) / median / 1e9, node: process.version, out: o.out ?? null }));
} catch (err) {
  console.log(JSON.stringify({ error: err instanceof Error ? err.message : String(err) }));
  process.exit(1);
}
