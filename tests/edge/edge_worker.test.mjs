// The edge worker (packaging/edge) in a local Workers runtime: Miniflare's workerd runs the bundle that
// `wrangler deploy --dry-run` made, with KV filled (in memory, kvPersist off) from the knot that the C++ side wrote
// (tests/wasm/make_wasm_vectors) by packaging/edge/tools/knot_kv.mjs. Every record's reconstruction must be bit for
// bit the native gkq::decode_tensor output (raw bytes and SHA-256); the LRU stats, the KV reads and the error
// statuses are checked exactly. Outbound network is refused. Run by tests/edge/run_edge_tests.sh (CTest test_edge),
// which sets GKQ_EDGE_BUNDLE, GKQ_EDGE_DEPS, GKQ_EDGE_TOOLS and GKQ_WASM_VECTORS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const env = process.env;
for (const v of ['GKQ_EDGE_BUNDLE', 'GKQ_EDGE_DEPS', 'GKQ_EDGE_TOOLS', 'GKQ_WASM_VECTORS'])
  if (!env[v]) throw new Error(`${v} is not set: run through CTest (tests/edge/run_edge_tests.sh)`);
const { Log, LogLevel, Miniflare } = await import(pathToFileURL(createRequire(join(env.GKQ_EDGE_DEPS, 'package.json')).resolve('miniflare')).href);
const { kvEntries } = await import(pathToFileURL(join(env.GKQ_EDGE_TOOLS, 'knot_kv.mjs')).href);

const vectors = env.GKQ_WASM_VECTORS;
const manifest = JSON.parse(readFileSync(join(vectors, 'manifest.json'), 'utf8')).tensors;
const knotBytes = new Uint8Array(readFileSync(join(vectors, 'vectors.knot')));
const PREFIX = 'knot/vectors';
const PART_BYTES = 4096;  // small, so that large records span several KV values
const CACHE_ENTRIES = 2;
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const expectedBytes = (t) => new Uint8Array(readFileSync(join(vectors, t.expected)));

let mf;
const { meta, entries } = kvEntries(knotBytes, { prefix: PREFIX, partBytes: PART_BYTES, label: 'vectors.knot' });
const recordKeys = entries.filter((e) => e.key.includes('/record/')).map((e) => e.key);

before(async () => {
  const bundle = env.GKQ_EDGE_BUNDLE;
  const script = readdirSync(bundle).find((f) => f.endsWith('.js'));
  const common = {
    modules: true,
    scriptPath: join(bundle, script),
    modulesRoot: bundle,  // module names relative to it (the default, the working directory, may need '..')
    modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
    compatibilityDate: '2026-04-01',
    bindings: { GKQ_MODEL_ID: 'vectors', KNOT_KEY: PREFIX, MAX_CACHE_ENTRIES: String(CACHE_ENTRIES), DEBUG_ROUTES: 'true' },
    outboundService: () => { throw new Error('the edge worker test reaches no network'); },
  };
  mf = new Miniflare({
    log: new Log(LogLevel.WARN),  // workerd's own errors, had it failed to start
    cf: false,                    // no request.cf fetched from Cloudflare: a placeholder
    kvPersist: false,
    workers: [
      { ...common, name: 'main', kvNamespaces: { GKQ_WEIGHTS: 'kv-main' } },
      { ...common, name: 'empty', kvNamespaces: { GKQ_WEIGHTS: 'kv-empty' } },
      { ...common, name: 'unbound' },
      { ...common, name: 'damaged', kvNamespaces: { GKQ_WEIGHTS: 'kv-damaged' } },
    ],
  });
  const main = await mf.getKVNamespace('GKQ_WEIGHTS', 'main');
  const damaged = await mf.getKVNamespace('GKQ_WEIGHTS', 'damaged');
  await Promise.all(entries.map(async (e) => {
    await main.put(e.key, e.value);
    if (e.key === recordKeys[0]) return;  // damaged: the first record's first part is missing ...
    const v = e.value.slice();
    if (e.key === recordKeys[recordKeys.length - 1]) v[0] ^= 1;  // ... and the last record's last part has a bit flipped
    await damaged.put(e.key, v);
  }));
});

after(async () => { await mf?.dispose(); });

async function get(worker, path, init) {
  const w = await mf.getWorker(worker);
  const res = await w.fetch(`http://edge.test${path}`, init);
  const type = res.headers.get('content-type') ?? '';
  const body = type.startsWith('application/json') ? await res.json() : new Uint8Array(await res.arrayBuffer());
  return { status: res.status, body, headers: res.headers };
}
const post = (worker, path, body) =>
  get(worker, path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });

test('the KV layout tiles the knot', () => {
  assert.equal(meta.file_bytes, knotBytes.length);
  assert.equal(meta.n_records, manifest.length);
  const total = entries.filter((e) => typeof e.value !== 'string').reduce((s, e) => s + e.value.length, 0);
  assert.equal(total, knotBytes.length);
  assert.ok(recordKeys.some((k) => !k.endsWith('/0')), 'some record spans several KV values');
});

test('the bulk files for `wrangler kv bulk put --remote` hold the same entries, meta last', () => {
  const out = mkdtempSync(join(tmpdir(), 'gkq-edge-bulk-'));
  try {
    execFileSync(process.execPath, [join(env.GKQ_EDGE_TOOLS, 'knot_kv.mjs'), join(vectors, 'vectors.knot'), '--prefix', PREFIX,
                                    '--part-bytes', String(PART_BYTES), '--out', out]);
    const bulk = readdirSync(out).sort().flatMap((f) => JSON.parse(readFileSync(join(out, f), 'utf8')));
    assert.deepEqual(bulk.map((e) => e.key), entries.map((e) => e.key));
    assert.equal(bulk[bulk.length - 1].key, `${PREFIX}/meta`);
    bulk.forEach((e, i) => {
      const want = entries[i].value;
      if (typeof want === 'string') assert.deepEqual([e.value, e.base64], [want, undefined]);
      else assert.deepEqual([Buffer.from(e.value, 'base64').equals(want), e.base64], [true, true], e.key);
    });
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('/health loads the knot from KV', async () => {
  const r = await get('main', '/health');
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.status, 'ok');
  assert.equal(r.body.model, 'vectors');
  assert.deepEqual(r.body.knot, { key: PREFIX, sha256: sha256(knotBytes), bytes: knotBytes.length, records: manifest.length });
  assert.deepEqual(r.body.cache, { hits: 0, misses: 0, evictions: 0, reconstructions: 0, size: 0, capacity: CACHE_ENTRIES, lru_order: [] });
  // meta, then the tail (index + trailer) in parts of PART_BYTES
  const tailBytes = knotBytes.length - meta.index_offset;
  assert.equal(r.body.kv.reads, 1 + Math.ceil(tailBytes / PART_BYTES));
  assert.equal(r.body.kv.bytes, tailBytes);
  console.log(`# health: knot of ${knotBytes.length} bytes, ${manifest.length} records, loaded in ${r.body.load_ms} ms (KV wait ${r.body.kv.wait_ms} ms)`);
});

test('every record reconstructs bit for bit as the native decoder', async () => {
  const list = await get('main', '/api/tensors');
  assert.equal(list.status, 200);
  assert.deepEqual(list.body.tensors.map((t) => t.name), manifest.map((t) => t.name));
  for (const t of manifest.filter((x) => !x.refused)) {
    const want = expectedBytes(t);
    const before = (await get('main', '/health')).body.cache;
    const r = await get('main', `/api/reconstruct?tensor=${encodeURIComponent(t.name)}`);
    assert.equal(r.status, 200, `${t.label}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.n, t.n, t.label);
    assert.equal(r.body.shape.reduce((a, b) => a * b, 1), t.n, t.label);
    assert.equal(r.body.method, t.method, t.label);
    assert.equal(r.body.sha256, sha256(want), `${t.label}: SHA-256 of the worker's floats differs from the native output`);
    assert.equal(r.body.cache, 'miss', t.label);
    const entry = list.body.tensors.find((x) => x.name === t.name);
    assert.deepEqual(r.body.kv, { reads: Math.ceil(entry.stored_bytes / PART_BYTES), bytes: entry.stored_bytes }, t.label);
    assert.equal(r.body.stats.misses, before.misses + 1, t.label);
    assert.equal(r.body.stats.reconstructions, before.reconstructions + 1, t.label);
    for (const k of ['kv_wait', 'reconstruct_total', 'sha256'])
      assert.ok(Number.isFinite(r.body.timings_ms[k]) && r.body.timings_ms[k] >= 0, `${t.label}: timing ${k}`);
    // the raw floats (debug route) right after: a cache hit, same bytes
    const raw = await get('main', `/api/tensor?tensor=${encodeURIComponent(t.name)}`);
    assert.equal(raw.status, 200, t.label);
    assert.equal(raw.headers.get('x-gkq-cache'), 'hit', t.label);
    assert.equal(raw.headers.get('x-gkq-sha256'), r.body.sha256, t.label);
    assert.equal(raw.headers.get('x-gkq-shape'), r.body.shape.join(','), t.label);
    assert.equal(raw.body.length, want.length, t.label);
    const diff = raw.body.findIndex((b, i) => b !== want[i]);
    assert.equal(diff, -1, `${t.label}: byte ${diff} (float ${Math.floor(diff / 4)}) differs from the native output`);
  }
});

test('the LRU cache: misses, hits and evictions as an LRU of MAX_CACHE_ENTRIES predicts', async () => {
  const [a, b, c] = manifest.map((t) => t.name);
  const start = (await get('main', '/health')).body.cache;
  assert.equal(start.size, CACHE_ENTRIES);
  // model the LRU from the worker's own order, then predict each answer
  const lru = [...start.lru_order];
  let hits = 0, misses = 0, evictions = 0;
  const timings = [];
  for (const name of [a, b, a, c, b, b, a]) {
    const at = lru.indexOf(name);
    const hit = at >= 0;
    if (hit) { lru.splice(at, 1); hits++; } else misses++;
    lru.push(name);
    if (lru.length > CACHE_ENTRIES) { lru.shift(); evictions++; }
    const r = await get('main', `/api/reconstruct?tensor=${name}`);
    assert.equal(r.status, 200);
    assert.equal(r.body.cache, hit ? 'hit' : 'miss', `${name}`);
    assert.equal(r.body.sha256, sha256(expectedBytes(manifest.find((t) => t.name === name))), `${name} (${r.body.cache})`);
    assert.equal(r.body.sha256_cached, hit, `${name}: the digest is computed once per reconstruction`);
    if (hit) assert.deepEqual(r.body.kv, { reads: 0, bytes: 0 }, 'a hit reads nothing from KV');
    assert.deepEqual(r.body.stats.lru_order, lru);
    timings.push(`${name} ${r.body.cache} ${r.body.timings_ms.reconstruct_total} ms`);
  }
  const end = (await get('main', '/health')).body.cache;
  assert.deepEqual({ hits: end.hits - start.hits, misses: end.misses - start.misses, evictions: end.evictions - start.evictions,
                     reconstructions: end.reconstructions - start.reconstructions },
                   { hits, misses, evictions, reconstructions: misses });
  assert.deepEqual([hits, misses, evictions], [2, 5, 5]);  // the two cached at the start are neither a, b nor c
  console.log(`# lru sequence (worker clock): ${timings.join(', ')}`);
});

test('POST /api/infer reconstructs a list in order; a repeated name is a hit', async () => {
  const [t0, t1] = manifest.slice(-2);
  const r = await post('main', '/api/infer', { tensors: [t0.name, t1.name, t0.name] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.results.map((x) => x.tensor), [t0.name, t1.name, t0.name]);
  assert.deepEqual(r.body.results.map((x) => x.sha256), [t0, t1, t0].map((t) => sha256(expectedBytes(t))));
  assert.equal(r.body.results[2].cache, 'hit');
  assert.ok(r.body.total_ms >= 0);
  const single = await post('main', '/api/infer', { tensor: t1.name });
  assert.equal(single.status, 200);
  assert.equal(single.body.results[0].sha256, sha256(expectedBytes(t1)));
});

test('request errors: 400, 404, 405, 413', async () => {
  const cases = [
    [get('main', '/api/reconstruct?tensor=no.such.tensor'), 404, "unknown tensor 'no.such.tensor'"],
    [post('main', '/api/infer', { tensors: [manifest[0].name, 'missing.weight'] }), 404, "unknown tensor 'missing.weight'"],
    [get('main', '/api/tensor?tensor=nope'), 404, "unknown tensor 'nope'"],
    [get('main', '/api/nothing'), 404, 'no route /api/nothing'],
    [get('main', '/api/reconstruct'), 400, 'give exactly one ?tensor=NAME, got 0'],
    [get('main', '/api/reconstruct?tensor=a&tensor=b'), 400, 'give exactly one ?tensor=NAME, got 2'],
    [post('main', '/api/infer', '{"tensors": ['), 400, 'request body is not JSON'],
    [post('main', '/api/infer', [1]), 400, 'request body must be a JSON object'],
    [post('main', '/api/infer', { tensors: 't0' }), 400, 'field "tensors" must be an array'],
    [post('main', '/api/infer', { tensors: [] }), 400, 'field "tensors" is empty'],
    [post('main', '/api/infer', { tensors: [7] }), 400, 'a tensor name is a non-empty string'],
    [post('main', '/api/infer', { tensors: Array(17).fill('t0') }), 400, '17 tensors requested, at most 16'],
    [post('main', '/api/infer', { tensors: ['x'.repeat(70000)] }), 413, 'at most 65536'],
    [get('main', '/api/infer'), 405, '/api/infer takes POST, not GET'],
    [post('main', '/health', {}), 405, '/health takes GET, not POST'],
  ];
  for (const [pending, status, text] of cases) {
    const r = await pending;
    assert.equal(r.status, status, JSON.stringify(r.body));
    assert.equal(r.body.status, status);
    assert.ok(r.body.error.includes(text), `'${r.body.error}' should contain '${text}'`);
  }
});

test('missing KV: 503 naming the binding or the key', async () => {
  for (const path of ['/health', '/api/reconstruct?tensor=t0']) {
    const empty = await get('empty', path);
    assert.equal(empty.status, 503);
    assert.equal(empty.body.error, `KV key '${PREFIX}/meta' is missing: no knot uploaded under prefix '${PREFIX}' (tools/knot_kv.mjs)`);
    const unbound = await get('unbound', path);
    assert.equal(unbound.status, 503);
    assert.ok(unbound.body.error.startsWith('the KV namespace binding GKQ_WEIGHTS is not configured'), unbound.body.error);
  }
});

test('a missing record part is a 503, a corrupted one a 500 naming the record', async () => {
  const first = manifest[0], last = manifest[manifest.length - 1];
  const missing = await get('damaged', `/api/reconstruct?tensor=${first.name}`);
  assert.equal(missing.status, 503);
  assert.equal(missing.body.error, `KV key '${recordKeys[0]}' is missing (incomplete upload?)`);
  const corrupt = await get('damaged', `/api/reconstruct?tensor=${last.name}`);
  assert.equal(corrupt.status, 500);
  assert.match(corrupt.body.error, new RegExp(`^kv:${PREFIX}: record ${manifest.length - 1} '${last.name}' \\(file offset \\d+\\): CRC32 mismatch`));
  const health = await get('damaged', '/health');
  assert.equal(health.body.cache.misses, 2);
  assert.equal(health.body.cache.size, 0, 'failed reconstructions are not cached');
  const other = await get('damaged', `/api/reconstruct?tensor=${manifest[1].name}`);
  assert.equal(other.status, 200);
  assert.equal(other.body.sha256, sha256(expectedBytes(manifest[1])));
});

// Last: a failed reconstruction leaves the cache smaller, which the LRU test above does not expect.
test('a residual type the WebAssembly kernels do not implement is refused by name (500), not cached', async () => {
  const refused = manifest.filter((x) => x.refused);
  assert.equal(refused.length, 1);
  for (const t of refused) {
    const r = await get('main', `/api/reconstruct?tensor=${encodeURIComponent(t.name)}`);
    assert.equal(r.status, 500, t.label);
    assert.match(r.body.error, new RegExp(`tensor '${t.name}' \\(lowrank\\+residual\\): a residual of type q4_k has no WebAssembly kernel`));
    const again = await get('main', `/api/reconstruct?tensor=${encodeURIComponent(t.name)}`);
    assert.equal(again.status, 500, `${t.label}: nothing was cached`);
  }
});
