// GKQReconstructor and the knot reader (wasm/ts, compiled by the build) on the records the C++ side wrote at test
// time (tests/wasm/make_wasm_vectors.cpp): every record decodes to exactly the floats of the native
// gkq::decode_tensor; the LRU cache counts hits, misses, evictions and reconstructions; remote-style reads touch only
// trailer, index and record; corrupt and truncated knots are rejected with the record named.
import test from 'node:test';
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { lib, loadKernels, noModule, noVectors, manifest, knotBytes, expected, firstBitDifference } from './helpers.mjs';

const { GKQReconstructor, KnotReader, decodeTensor } = lib;

test('the modules under test are the TypeScript reconstructor, compiled by the build', { skip: noModule }, async () => {
  const { existsSync, statSync, readFileSync } = await import('node:fs');
  const { join, dirname } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  const { jsDir, reconstructorUrl } = await import('./helpers.mjs');
  const tsDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'ts');
  assert.equal(fileURLToPath(reconstructorUrl), join(jsDir, 'gkq_reconstructor.mjs'));
  for (const name of ['gkq_reconstructor', 'reconstruct_cli']) {
    const source = join(tsDir, `${name}.mts`), built = join(jsDir, `${name}.mjs`);
    assert.ok(existsSync(source), `${source} is missing`);
    // tsc emitted it (with its declarations) from the current source: a stale build would test old code
    assert.ok(existsSync(join(jsDir, `${name}.d.mts`)), `${name}.d.mts was not emitted`);
    assert.ok(statSync(built).mtimeMs >= statSync(source).mtimeMs, `${built} is older than ${source}: rebuild gkq_wasm_js`);
  }
  // the public API that packaging/edge imports, with its types
  const declarations = readFileSync(join(jsDir, 'gkq_reconstructor.d.mts'), 'utf8');
  for (const api of ['export declare class GKQKernels', 'export declare class KnotReader', 'export declare class GKQReconstructor',
                     'export declare function decodeTensor(', 'export declare function decodeTensorInWasm(',
                     'readonly stats: ReconstructorStats'])
    assert.ok(declarations.includes(api), `gkq_reconstructor.d.mts lacks '${api}'`);
  assert.deepEqual(Object.keys(lib).sort(), ['Flags', 'GKQKernels', 'GKQReconstructor', 'KnotReader', 'Method', 'crc32',
                                              'decodeKnotRecord', 'decodeTensor', 'decodeTensorInWasm', 'parseKnotIndex',
                                              'parseKnotTrailer']);
  // no hand-written JavaScript copy left beside the sources
  assert.equal(existsSync(join(tsDir, '..', 'js')), false, 'wasm/js/ exists: the reconstructor lives in wasm/ts/');
  // edge workers import the .wasm as a compiled WebAssembly.Module
  const { modulePath } = await import('./helpers.mjs');
  const kernels = await lib.GKQKernels.load(new WebAssembly.Module(readFileSync(modulePath)));
  assert.deepEqual([...kernels.dequantizeSimd(Uint8Array.from([0, 255]), 2)], [-2, 2]);
});

test('every record decodes to the native decoder\'s floats, bit for bit', { skip: noVectors }, async () => {
  const kernels = await loadKernels();
  const knot = await KnotReader.fromBytes(knotBytes(), 'vectors.knot');
  const m = manifest();
  const cases = m.tensors.filter((t) => !t.bench && !t.refused);
  assert.ok(cases.length >= 50, `only ${cases.length} records`);
  const methods = new Set();
  for (const entry of cases) {
    const t = await knot.readRecord(entry.name);
    const got = decodeTensor(kernels, t);
    const want = expected(entry);
    const bad = firstBitDifference(got, want);
    assert.equal(bad, -1, `${entry.label}: element ${bad} is ${got[bad]}, native ${want[bad]}`);
    methods.add(entry.method);
  }
  // every method of the codec is among them
  assert.deepEqual([...methods].sort(), ['f16', 'f32', 'lowrank', 'lowrank+residual', 'q4_0', 'q8_0']);
});

test('LRU cache: default 4 entries; hits, misses, evictions, reconstructions', { skip: noVectors }, async () => {
  const kernels = await loadKernels();
  const knot = await KnotReader.fromBytes(knotBytes(), 'vectors.knot');
  const rec = new GKQReconstructor(kernels, knot);
  assert.equal(rec.cacheSize, 4);
  const [a, b, c, d, e] = ['t0', 't1', 't2', 't3', 't4'];
  for (const name of [a, b, c, d]) await rec.tensor(name);
  assert.deepEqual(rec.stats, { hits: 0, misses: 4, evictions: 0, reconstructions: 4 });
  const again = await rec.tensor(a);  // hit; a becomes the most recent
  assert.equal(again.name, a);
  await rec.tensor(e);  // miss; evicts b, the least recently used
  assert.deepEqual(rec.cachedNames(), [c, d, a, e]);
  await rec.tensor(b);  // miss again; evicts c
  assert.deepEqual(rec.stats, { hits: 1, misses: 6, evictions: 2, reconstructions: 6 });
  assert.deepEqual(rec.cachedNames(), [d, a, e, b]);
  // the cached tensor is the decoded one
  const want = expected(manifest().tensors.find((t) => t.name === a));
  assert.equal(firstBitDifference((await rec.tensor(a)).data, want), -1);
  // concurrent requests for one tensor share one reconstruction
  const small = new GKQReconstructor(kernels, knot, { cacheSize: 1 });
  await Promise.all([small.tensor(c), small.tensor(c), small.tensor(c)]);
  assert.deepEqual(small.stats, { hits: 2, misses: 1, evictions: 0, reconstructions: 1 });
  assert.throws(() => new GKQReconstructor(kernels, knot, { cacheSize: 0 }), /cacheSize must be a positive integer/);
  await assert.rejects(rec.tensor('nope'), /vectors.knot: no tensor named 'nope'/);
  assert.equal(rec.cachedNames().includes('nope'), false);
});

test('range reads: trailer, index, then only the record asked for', { skip: noVectors }, async () => {
  const bytes = knotBytes();
  const reads = [];
  const knot = await KnotReader.open(async (offset, length) => {
    reads.push([offset, length]);
    return bytes.subarray(offset, offset + length);
  }, bytes.length, 'remote');
  assert.equal(reads.length, 2);
  assert.deepEqual(reads[0], [bytes.length - 40, 40]);
  const entry = knot.find('t5');
  await knot.readRecord('t5');
  assert.deepEqual(reads[2], [entry.recordOffset, entry.recordBytes]);
  assert.equal(reads.length, 3);
});

test('a gzipped knot, and a knot at an odd offset of a Buffer, read the same', { skip: noVectors }, async () => {
  const kernels = await loadKernels();
  const knot = await KnotReader.fromBytes(gzipSync(knotBytes()), 'vectors.knot.gz');
  const entry = manifest().tensors.find((t) => t.name === 't7');
  assert.equal(firstBitDifference(decodeTensor(kernels, await knot.readRecord('t7')), expected(entry)), -1);
  // a knot that starts at an odd offset of a Node Buffer (whose slice() is a view, not a copy) reads the same
  const { readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { vectorsDir } = await import('./helpers.mjs');
  const file = readFileSync(join(vectorsDir, 'vectors.knot'));
  const padded = Buffer.concat([Buffer.from([1, 2, 3]), file]);
  const offset = await KnotReader.fromBytes(padded.subarray(3), 'odd.knot');
  for (const e of manifest().tensors.filter((t) => !t.bench && !t.refused))
    assert.equal(firstBitDifference(decodeTensor(kernels, await offset.readRecord(e.name)), expected(e)), -1, e.label);
});

test('corrupt and truncated knots are rejected, naming the record', { skip: noVectors }, async () => {
  const bytes = knotBytes();
  const good = await KnotReader.fromBytes(bytes, 'vectors.knot');
  const entry = good.find('t3');
  const flipped = bytes.slice();
  flipped[entry.recordOffset + entry.recordBytes - 10] ^= 0x40;  // a payload byte
  const bad = await KnotReader.fromBytes(flipped, 'bad.knot');
  await assert.rejects(bad.readRecord('t3'),
                       new RegExp(`^Error: bad.knot: record 3 't3' \\(file offset ${entry.recordOffset}\\): CRC32 mismatch`));
  await assert.rejects(KnotReader.fromBytes(bytes.subarray(0, bytes.length - 1), 'cut.knot'),
                       /cut.knot: trailer magic \(the file is truncated or was not finished\)/);
  await assert.rejects(KnotReader.fromBytes(new Uint8Array(100), 'zero.knot'), /zero.knot: not a knot file/);
});

test('payload errors name the tensor', { skip: noVectors }, async () => {
  const kernels = await loadKernels();
  const knot = await KnotReader.fromBytes(knotBytes(), 'vectors.knot');
  const lowrank = manifest().tensors.find((t) => t.method === 'lowrank+residual' && !t.bench && !t.refused);
  const t = await knot.readRecord(lowrank.name);
  assert.throws(() => decodeTensor(kernels, { ...t, payload: t.payload.subarray(0, t.payload.length - 1) }),
                new RegExp(`tensor '${lowrank.name}' \\(lowrank\\+residual\\): payload has \\d+ bytes after the low-rank section`));
  assert.throws(() => decodeTensor(kernels, { ...t, factorBits: 3 }), /factor_bits is 3, expected 2, 4 or 8/);
});

test('a residual type without a WebAssembly kernel is refused by name, an unknown residual code too', { skip: noVectors }, async () => {
  const kernels = await loadKernels();
  const knot = await KnotReader.fromBytes(knotBytes(), 'vectors.knot');
  const refused = manifest().tensors.filter((t) => t.refused);
  assert.equal(refused.length, 1);
  const t = await knot.readRecord(refused[0].name);
  assert.equal(t.residualBits, 12);  // Q4_K's ggml id
  assert.throws(() => decodeTensor(kernels, t),
                new RegExp(`tensor '${refused[0].name}' \\(lowrank\\+residual\\): a residual of type q4_k has no WebAssembly kernel`));
  assert.throws(() => decodeTensor(kernels, { ...t, residualBits: 99 }), /unknown residual code 99/);
  assert.throws(() => decodeTensor(kernels, { ...t, residualBits: 2 }), /unknown residual code 2/);
});

test('reconstruct_cli.mjs: one tensor as a child process, one JSON line', { skip: noVectors }, async () => {
  const { spawnSync } = await import('node:child_process');
  const { join } = await import('node:path');
  const { readFileSync } = await import('node:fs');
  const { modulePath, vectorsDir, jsDir } = await import('./helpers.mjs');
  const cli = join(jsDir, 'reconstruct_cli.mjs');
  const knot = join(vectorsDir, 'vectors.knot'), out = join(vectorsDir, 'cli.f32');
  const entry = manifest().tensors.find((t) => t.method === 'lowrank+residual' && !t.bench && !t.refused);
  const run = spawnSync(process.execPath, [cli, '--wasm', modulePath, '--knot', knot, '--tensor', entry.name, '--runs', '2',
                                           '--out', out], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  const r = JSON.parse(run.stdout);
  assert.equal(r.tensor, entry.name);
  assert.equal(r.n, entry.n);
  assert.equal(r.runs, 2);
  assert.ok(r.seconds > 0 && Math.abs(r.gb_per_s - (4 * r.n) / r.seconds / 1e9) < 1e-9 * r.gb_per_s);
  const b = readFileSync(out);
  assert.equal(firstBitDifference(new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)), expected(entry)), -1);
  const missing = spawnSync(process.execPath, [cli, '--wasm', modulePath, '--knot', knot, '--tensor', 'nope'], { encoding: 'utf8' });
  assert.equal(missing.status, 1);
  assert.deepEqual(JSON.parse(missing.stdout), { error: `${knot}: no tensor named 'nope'` });
  const usage = spawnSync(process.execPath, [cli, '--knot', knot], { encoding: 'utf8' });
  assert.equal(usage.status, 2);
  assert.match(JSON.parse(usage.stdout).error, /^usage: reconstruct_cli.mjs/);
});
