// GKQ edge worker (Cloudflare Workers, ES module format): reconstructs a knot's tensors from knot records in Workers
// KV (layout: kv_knot.ts) with the WebAssembly-SIMD kernels (gkq_kernels.wasm) and the GKQReconstructor LRU cache,
// and answers JSON: shape, SHA-256 of the f32 bytes (little-endian, row-major), cache stats, measured timings.
// Steps 1-3 of the documents' /api/infer flow (request, KV load, WASM reconstruction); no forward pass — the worker
// does not generate text (packaging/edge/README.md).
//   GET  /health                         knot loaded? records, cache stats; 503 when KV is missing
//   GET  /api/tensors                    the knot's records: name, shape, method, rank, stored bytes
//   GET  /api/reconstruct?tensor=NAME    one tensor
//   POST /api/infer  {"tensors":[...]}   several tensors in order (or {"tensor": NAME})
//   GET  /api/tensor?tensor=NAME         debug (DEBUG_ROUTES=true): the raw f32 bytes
// Errors are JSON {error, status}: 400 malformed request, 404 unknown tensor or route, 405 wrong method, 413 body too
// large, 503 KV binding, meta key or record missing, 500 anything else (a corrupt record names its offset).
import kernelsModule from './gkq_kernels.wasm';
import { GKQKernels, GKQReconstructor, KnotReader } from './reconstructor';
import { HttpError, KnotMeta, KvStats, kvRangeReader, readMeta } from './kv_knot';

export interface Env {
    GKQ_WEIGHTS?: KVNamespace;
    GKQ_MODEL_ID?: string;
    KNOT_KEY?: string;
    MAX_CACHE_ENTRIES?: string;
    MAX_TENSORS_PER_REQUEST?: string;
    DEBUG_ROUTES?: string;
}

const METHOD_NAMES = ['f32', 'f16', 'q8_0', 'q4_0', 'lowrank', 'lowrank+residual'];
const MAX_BODY_BYTES = 64 * 1024;

interface Settings {
    modelId: string;
    knotKey: string;
    cacheEntries: number;
    maxTensors: number;
    debugRoutes: boolean;
}

function positiveInt(value: string | undefined, name: string, fallback: number): number {
    if (value === undefined || value === '') return fallback;
    if (!/^[0-9]+$/.test(value) || Number(value) < 1 || Number(value) > 1_000_000)
        throw new HttpError(500, `setting ${name}='${value}' is not a whole number in 1..1000000 (wrangler.toml [vars])`);
    return Number(value);
}

function settings(env: Env): Settings {
    return {
        modelId: env.GKQ_MODEL_ID || 'gkq',
        knotKey: env.KNOT_KEY || 'knot/default',
        cacheEntries: positiveInt(env.MAX_CACHE_ENTRIES, 'MAX_CACHE_ENTRIES', 4),
        maxTensors: positiveInt(env.MAX_TENSORS_PER_REQUEST, 'MAX_TENSORS_PER_REQUEST', 16),
        debugRoutes: env.DEBUG_ROUTES === 'true',
    };
}

// ---- per-isolate state: the kernels, the knot's index and the LRU cache live as long as the isolate ----

interface Loaded {
    key: string;
    meta: KnotMeta;
    knot: KnotReader;
    rec: GKQReconstructor;
    kv: KvStats;
    loadMs: number;
}

let kernelsPromise: Promise<GKQKernels> | null = null;
// SHA-256 of each cached tensor, computed once: a cache hit returns the same Float32Array, so the digest is reused
// (an evicted tensor's entry goes with it).
const digests = new WeakMap<Float32Array, string>();
let loadedPromise: Promise<Loaded> | null = null;
let loadedKey = '';

function kernels(): Promise<GKQKernels> {
    if (!kernelsPromise) {
        // a precompiled WebAssembly.Module: Workers compile WebAssembly at upload, never from bytes at run time
        kernelsPromise = GKQKernels.load(kernelsModule);
        kernelsPromise.catch(() => { kernelsPromise = null; });
    }
    return kernelsPromise;
}

function load(env: Env, s: Settings): Promise<Loaded> {
    const key = `${s.knotKey}#${s.cacheEntries}`;
    if (loadedPromise && loadedKey === key) return loadedPromise;
    loadedKey = key;
    loadedPromise = (async () => {
        const t0 = performance.now();
        const meta = await readMeta(env.GKQ_WEIGHTS, s.knotKey);
        const kv: KvStats = { reads: 1, bytes: 0, ms: performance.now() - t0 };
        const readRange = kvRangeReader(env.GKQ_WEIGHTS!, s.knotKey, meta, kv);
        const knot = await KnotReader.open(readRange, meta.file_bytes, `kv:${s.knotKey}`);
        if (knot.entries.length !== meta.n_records)
            throw new HttpError(500, `kv:${s.knotKey}: the index lists ${knot.entries.length} records, meta says ${meta.n_records}`);
        const rec = new GKQReconstructor(await kernels(), knot, { cacheSize: s.cacheEntries });
        return { key, meta, knot, rec, kv, loadMs: performance.now() - t0 };
    })();
    const mine = loadedPromise;
    mine.catch(() => { if (loadedPromise === mine) loadedPromise = null; });  // retry on the next request
    return mine;
}

// ---- responses ----

function json(status: number, body: unknown): Response {
    return new Response(JSON.stringify(body, null, 1), {
        status,
        headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
    });
}

function hex(buffer: ArrayBuffer): string {
    return [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

function round3(ms: number): number {
    return Math.round(ms * 1000) / 1000;
}

function cacheState(l: Loaded) {
    return { ...l.rec.stats, size: l.rec.cachedNames().length, capacity: l.rec.cacheSize, lru_order: l.rec.cachedNames() };
}

function kvState(l: Loaded) {
    return { reads: l.kv.reads, bytes: l.kv.bytes, wait_ms: round3(l.kv.ms) };
}

function checkName(l: Loaded, name: unknown): string {
    if (typeof name !== 'string' || name.length === 0 || name.length > 4096)
        throw new HttpError(400, `a tensor name is a non-empty string of at most 4096 characters, got ${JSON.stringify(name)?.slice(0, 80)}`);
    if (!l.knot.find(name))
        throw new HttpError(404, `unknown tensor '${name}' in knot '${l.meta.sha256.slice(0, 12)}' ` +
                                 `(${l.knot.entries.length} records; GET /api/tensors lists them)`);
    return name;
}

async function reconstruct(l: Loaded, name: string) {
    // tensor() looks the cache up synchronously, so this is exactly what it counts as a hit or a miss
    const hit = l.rec.cachedNames().includes(name);
    const kvBefore = { reads: l.kv.reads, bytes: l.kv.bytes, ms: l.kv.ms };
    const t0 = performance.now();
    const t = await l.rec.tensor(name);
    const t1 = performance.now();
    const data: Float32Array = t.data;
    let digest = digests.get(data);
    const digestCached = digest !== undefined;
    if (digest === undefined) {
        digest = hex(await crypto.subtle.digest('SHA-256', new Uint8Array(data.buffer, data.byteOffset, data.byteLength)));
        digests.set(data, digest);
    }
    const t2 = performance.now();
    const e = l.knot.find(name)!;  // checkName found it
    return {
        tensor: name,
        shape: t.shape,
        n: data.length,
        dtype: 'f32',
        method: METHOD_NAMES[e.method] ?? String(e.method),
        rank: e.rank,
        stored_bytes: e.recordBytes,
        sha256: digest,
        sha256_cached: digestCached,
        cache: hit ? 'hit' : 'miss',
        // KV figures are deltas of isolate-wide counters: exact for one request at a time.
        kv: { reads: l.kv.reads - kvBefore.reads, bytes: l.kv.bytes - kvBefore.bytes },
        timings_ms: { kv_wait: round3(l.kv.ms - kvBefore.ms), reconstruct_total: round3(t1 - t0), sha256: round3(t2 - t1) },
        data,
    };
}

async function readBody(request: Request): Promise<unknown> {
    const declared = Number(request.headers.get('content-length') ?? '0');
    if (declared > MAX_BODY_BYTES) throw new HttpError(413, `request body of ${declared} bytes, at most ${MAX_BODY_BYTES}`);
    const text = await request.text();
    if (text.length > MAX_BODY_BYTES) throw new HttpError(413, `request body of ${text.length} characters, at most ${MAX_BODY_BYTES}`);
    try {
        return JSON.parse(text);
    } catch (err) {
        throw new HttpError(400, `request body is not JSON: ${(err as Error).message}`);
    }
}

function tensorList(body: unknown, maxTensors: number): unknown[] {
    if (typeof body !== 'object' || body === null || Array.isArray(body))
        throw new HttpError(400, 'request body must be a JSON object {"tensors": [NAME, ...]} or {"tensor": NAME}');
    const b = body as Record<string, unknown>;
    const list = b.tensors !== undefined ? b.tensors : b.tensor !== undefined ? [b.tensor] : undefined;
    if (!Array.isArray(list)) throw new HttpError(400, 'field "tensors" must be an array of tensor names (or give "tensor": NAME)');
    if (list.length === 0) throw new HttpError(400, 'field "tensors" is empty');
    if (list.length > maxTensors)
        throw new HttpError(400, `${list.length} tensors requested, at most ${maxTensors} (MAX_TENSORS_PER_REQUEST)`);
    return list;
}

async function route(request: Request, env: Env, t0: number): Promise<Response> {
    const url = new URL(request.url);
    const s = settings(env);
    const allow = (method: string) => {
        if (request.method !== method) throw new HttpError(405, `${url.pathname} takes ${method}, not ${request.method}`);
    };
    switch (url.pathname) {
    case '/health': {
        allow('GET');
        const l = await load(env, s);
        return json(200, {
            status: 'ok', model: s.modelId, knot: { key: s.knotKey, sha256: l.meta.sha256, bytes: l.meta.file_bytes,
                                                    records: l.knot.entries.length },
            cache: cacheState(l), kv: kvState(l), load_ms: round3(l.loadMs),
        });
    }
    case '/api/tensors': {
        allow('GET');
        const l = await load(env, s);
        return json(200, {
            model: s.modelId,
            tensors: l.knot.entries.map((e: any) => ({ name: e.name, shape: e.shape, method: METHOD_NAMES[e.method],
                                                      rank: e.rank, stored_bytes: e.recordBytes })),
        });
    }
    case '/api/reconstruct':
    case '/api/tensor': {
        allow('GET');
        if (url.pathname === '/api/tensor' && !s.debugRoutes)
            throw new HttpError(404, '/api/tensor is a debug route, off unless DEBUG_ROUTES is "true"');
        const names = url.searchParams.getAll('tensor');
        if (names.length !== 1) throw new HttpError(400, `give exactly one ?tensor=NAME, got ${names.length}`);
        const l = await load(env, s);
        const r = await reconstruct(l, checkName(l, names[0]));
        if (url.pathname === '/api/tensor') {
            return new Response(new Uint8Array(r.data.buffer, r.data.byteOffset, r.data.byteLength), {
                headers: { 'content-type': 'application/octet-stream', 'x-gkq-shape': r.shape.join(','),
                           'x-gkq-sha256': r.sha256, 'x-gkq-cache': r.cache, 'cache-control': 'no-store' },
            });
        }
        const { data: _data, ...result } = r;
        return json(200, { model: s.modelId, ...result, stats: cacheState(l), kv_total: kvState(l),
                           total_ms: round3(performance.now() - t0) });
    }
    case '/api/infer': {
        allow('POST');
        const list = tensorList(await readBody(request), s.maxTensors);
        const l = await load(env, s);
        const names = list.map((n) => checkName(l, n));  // all checked before any work
        const results = [];
        for (const name of names) {
            const { data: _data, ...result } = await reconstruct(l, name);
            results.push(result);
        }
        return json(200, { model: s.modelId, generation: 'not implemented in the worker (weights only)', results,
                           stats: cacheState(l), kv_total: kvState(l), total_ms: round3(performance.now() - t0) });
    }
    default:
        throw new HttpError(404, `no route ${url.pathname} (routes: /health, /api/tensors, /api/reconstruct, /api/infer)`);
    }
}

export default {
    async fetch(request: Request, env: Env): Promise<Response> {
        const t0 = performance.now();
        try {
            return await route(request, env, t0);
        } catch (err) {
            const status = err instanceof HttpError ? err.status : 500;
            return json(status, { error: (err as Error).message ?? String(err), status });
        }
    },
};
