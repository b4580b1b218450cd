// GKQ reconstruction in JavaScript (Node 20, browsers, edge workers): reads knot records — from the bytes of a knot
// file or by range requests (trailer, index, record) — checks them as the native reader does (CRC32, descriptor
// against the index, sizes), and decodes them with the WebAssembly-SIMD kernels (wasm/src/gkq_kernels.c) into
// Float32Arrays equal, bit for bit, to the native gkq::decode_tensor. GKQReconstructor keeps the last `cacheSize`
// (default 4) tensors in an LRU cache and counts hits, misses, evictions and reconstructions.
// Layouts: docs/knot-format.md (file, index, records) and docs/codec.md (payloads). No dependencies: zlib streams
// are inflated with the platform's DecompressionStream. Every error is an Error whose message names the knot, the
// record and the field.

// ---- enums (docs/knot-format.md) ----------------------------------------------------------------------------------

export const Method = Object.freeze({ F32: 0, F16: 1, Q8_0: 2, Q4_0: 3, LowRank: 4, LowRankResidual: 5 });
export const Flags = Object.freeze({ Delta: 1, FoldedHeads: 2, RleCoefficients: 4, SigmaQuantized: 8 });
const METHOD_NAMES = ['f32', 'f16', 'q8_0', 'q4_0', 'lowrank', 'lowrank+residual'];
const KNOT_TRAILER_BYTES = 40;
const KNOT_VERSION = 1;

// ---- bytes --------------------------------------------------------------------------------------------------------

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (ISO-HDLC, zlib's crc32()) of bytes. */
export function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

async function inflate(bytes, format) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream(format));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// A bounds-checked little-endian reader whose errors name the label and the offset.
class Reader {
  constructor(bytes, label, base = 0) {
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
    this.label = label;
    this.base = base;  // file offset of bytes[0], for messages
  }
  need(n, what) {
    if (n > this.bytes.length - this.pos)
      throw new Error(`${this.label}: ${what} at offset ${this.base + this.pos} needs ${n} bytes, ` +
                      `${this.bytes.length - this.pos} left (truncated?)`);
  }
  u8(what) { this.need(1, what); return this.view.getUint8(this.pos++); }
  u16(what) { this.need(2, what); const v = this.view.getUint16(this.pos, true); this.pos += 2; return v; }
  u32(what) { this.need(4, what); const v = this.view.getUint32(this.pos, true); this.pos += 4; return v; }
  i32(what) { this.need(4, what); const v = this.view.getInt32(this.pos, true); this.pos += 4; return v; }
  f32(what) { this.need(4, what); const v = this.view.getFloat32(this.pos, true); this.pos += 4; return v; }
  u64(what) {
    this.need(8, what);
    const v = this.view.getBigUint64(this.pos, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER))
      throw new Error(`${this.label}: ${what} at offset ${this.base + this.pos} is ${v}, beyond 2^53`);
    this.pos += 8;
    return Number(v);
  }
  i64(what) {
    this.need(8, what);
    const v = this.view.getBigInt64(this.pos, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER))
      throw new Error(`${this.label}: ${what} at offset ${this.base + this.pos} is ${v}, outside +-2^53`);
    this.pos += 8;
    return Number(v);
  }
  take(n, what) { this.need(n, what); const b = this.bytes.subarray(this.pos, this.pos + n); this.pos += n; return b; }
  magic(text, what) {
    const b = this.take(text.length, what);
    for (let i = 0; i < text.length; i++)
      if (b[i] !== text.charCodeAt(i))
        throw new Error(`${this.label}: ${what} at offset ${this.base + this.pos - text.length} is not '${text.replace('\0', '\\0')}'`);
  }
}

// ---- knot index and records ---------------------------------------------------------------------------------------

function readDescriptor(r) {
  const e = {};
  e.sourceIndex = r.u64('source index');
  e.storedBytes = r.u64('stored payload size');
  e.rawBytes = r.u64('raw payload size');
  e.flags = r.u32('flags');
  e.layer = r.i32('layer');
  e.rank = r.i32('rank');
  e.role = r.u8('role');
  e.method = r.u8('method');
  e.factorBits = r.u8('factor bits');
  e.residualBits = r.u8('residual bits');
  e.compression = r.u8('payload compression');
  const nDims = r.u8('dimension count');
  const nameBytes = r.u16('name length');
  if (nDims > 8) throw new Error(`${r.label}: ${nDims} dimensions, at most 8`);
  if (nameBytes < 1 || nameBytes > 4096) throw new Error(`${r.label}: name length ${nameBytes} outside 1..4096`);
  e.shape = [];
  for (let d = 0; d < nDims; d++) {
    const v = r.i64('dimension');
    if (v <= 0) throw new Error(`${r.label}: dimension ${d} is ${v}, expected > 0`);
    e.shape.push(v);
  }
  e.name = new TextDecoder().decode(r.take(nameBytes, 'name'));
  if (e.role > 12) throw new Error(`${r.label}: tensor '${e.name}': unknown role ${e.role}`);
  if (e.method > 5) throw new Error(`${r.label}: tensor '${e.name}': unknown method ${e.method}`);
  if (e.compression > 1) throw new Error(`${r.label}: tensor '${e.name}': unknown payload compression ${e.compression}`);
  if (e.layer < -1 || e.rank < 0) throw new Error(`${r.label}: tensor '${e.name}': layer ${e.layer} or rank ${e.rank} out of range`);
  if (e.compression === 0 ? e.rawBytes !== e.storedBytes : e.rawBytes > 1032 * e.storedBytes)
    throw new Error(`${r.label}: tensor '${e.name}': raw payload size ${e.rawBytes} does not fit stored size ${e.storedBytes}`);
  return e;
}

/** Parses the last 40 bytes of a knot of fileSize bytes. */
export function parseKnotTrailer(last, fileSize, label) {
  if (fileSize < 80) throw new Error(`${label}: ${fileSize} bytes is too small for a knot file`);
  const r = new Reader(last, label, fileSize - KNOT_TRAILER_BYTES);
  const t = {};
  t.recordsOffset = r.u64('records offset');
  t.indexOffset = r.u64('index offset');
  t.indexBytes = r.u64('index size');
  t.indexCrc = r.u32('index CRC32');
  const version = r.u32('trailer version');
  r.magic('KNOTIDX\0', 'trailer magic (the file is truncated or was not finished)');
  if (version !== KNOT_VERSION) throw new Error(`${label}: knot format version ${version}; this reader reads version ${KNOT_VERSION}`);
  if (!(t.recordsOffset >= 40 && t.recordsOffset <= t.indexOffset && t.indexOffset + t.indexBytes === fileSize - KNOT_TRAILER_BYTES))
    throw new Error(`${label}: trailer offsets (records ${t.recordsOffset}, index ${t.indexOffset} + ${t.indexBytes}) do not tile the ${fileSize}-byte file`);
  return t;
}

/** Parses and checks the index block; returns its entries in record order. */
export function parseKnotIndex(bytes, trailer, label) {
  if (crc32(bytes) !== trailer.indexCrc) throw new Error(`${label}: index CRC32 mismatch`);
  const r = new Reader(bytes, label, trailer.indexOffset);
  r.magic('KIDX', 'index magic');
  const n = r.u64('record count');
  if (n > (bytes.length - 12) / 64) throw new Error(`${label}: index claims ${n} records in ${bytes.length} bytes`);
  const entries = [];
  let next = trailer.recordsOffset;
  for (let i = 0; i < n; i++) {
    const recordOffset = r.u64('record offset');
    const recordBytes = r.u64('record size');
    const crc = r.u32('record CRC32');
    const e = readDescriptor(r);
    Object.assign(e, { recordOffset, recordBytes, crc32: crc, index: i });
    if (recordOffset !== next) throw new Error(`${label}: record ${i} '${e.name}' starts at ${recordOffset}, expected ${next}`);
    next = recordOffset + recordBytes;
    entries.push(e);
  }
  if (next !== trailer.indexOffset) throw new Error(`${label}: the records end at ${next}, the index starts at ${trailer.indexOffset}`);
  if (r.pos !== bytes.length) throw new Error(`${label}: ${bytes.length - r.pos} bytes after the last index entry`);
  return entries;
}

const DESCRIPTOR_FIELDS = ['sourceIndex', 'storedBytes', 'rawBytes', 'flags', 'layer', 'rank', 'role', 'method',
                           'factorBits', 'residualBits', 'compression', 'name'];

/** Checks a record's bytes against its index entry and returns the tensor ({name, shape, method, ..., payload}). */
export async function decodeKnotRecord(entry, bytes, label) {
  const where = `${label}: record ${entry.index} '${entry.name}' (file offset ${entry.recordOffset})`;
  if (bytes.length !== entry.recordBytes) throw new Error(`${where}: ${bytes.length} bytes, the index says ${entry.recordBytes}`);
  const body = bytes.subarray(0, bytes.length - 4);
  const stored = new DataView(bytes.buffer, bytes.byteOffset + bytes.length - 4, 4).getUint32(0, true);
  const actual = crc32(body);
  if (actual !== entry.crc32 || stored !== entry.crc32)
    throw new Error(`${where}: CRC32 mismatch (index 0x${entry.crc32.toString(16)}, record field 0x${stored.toString(16)}, bytes 0x${actual.toString(16)})`);
  const r = new Reader(body, where, entry.recordOffset);
  r.magic('KREC', 'record magic');
  const payloadOffset = r.u32('payload offset');
  const d = readDescriptor(r);
  if (r.pos !== payloadOffset) throw new Error(`${where}: payload offset ${payloadOffset}, the descriptor ends at ${r.pos}`);
  for (const f of DESCRIPTOR_FIELDS)
    if (d[f] !== entry[f]) throw new Error(`${where}: descriptor field ${f} is ${d[f]}, the index says ${entry[f]}`);
  if (d.shape.length !== entry.shape.length || d.shape.some((v, i) => v !== entry.shape[i]))
    throw new Error(`${where}: descriptor shape [${d.shape}] differs from the index [${entry.shape}]`);
  const storedPayload = r.take(d.storedBytes, 'payload');
  if (r.pos !== body.length) throw new Error(`${where}: ${body.length - r.pos} bytes between the payload and the CRC`);
  let payload = storedPayload;
  if (d.compression === 1) {
    try {
      payload = await inflate(storedPayload, 'deflate');
    } catch (err) {
      throw new Error(`${where}: payload does not inflate: ${err.message}`);
    }
  }
  if (payload.length !== d.rawBytes) throw new Error(`${where}: payload inflates to ${payload.length} bytes, expected ${d.rawBytes}`);
  return { name: d.name, role: d.role, layer: d.layer, shape: d.shape, method: d.method, rank: d.rank,
           factorBits: d.factorBits, residualBits: d.residualBits, flags: d.flags, payload };
}

/**
 * A knot's index and records. `readRange(offset, length)` returns a Promise of those bytes (a local buffer, or an
 * HTTP range request); the trailer, the index and each record are read once each, when needed.
 */
export class KnotReader {
  static async open(readRange, fileSize, label = 'knot') {
    const trailer = parseKnotTrailer(await readRange(fileSize - KNOT_TRAILER_BYTES, KNOT_TRAILER_BYTES), fileSize, label);
    const entries = parseKnotIndex(await readRange(trailer.indexOffset, trailer.indexBytes), trailer, label);
    return new KnotReader(readRange, label, entries);
  }

  /** From a whole knot file in memory (.knot, or .knot.gz recognized by its gzip magic). */
  static async fromBytes(bytes, label = 'knot') {
    let b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    if (b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b) b = await inflate(b, 'gzip');
    if (b.length < 8 || new TextDecoder().decode(b.subarray(0, 8)) !== 'GKQKNOT\0') throw new Error(`${label}: not a knot file`);
    return KnotReader.open(async (offset, length) => b.subarray(offset, offset + length), b.length, label);
  }

  constructor(readRange, label, entries) {
    this.readRange = readRange;
    this.label = label;
    this.entries = entries;
    this.byName = new Map(entries.map((e) => [e.name, e]));
  }

  find(name) { return this.byName.get(name); }

  async readRecord(name) {
    const e = this.byName.get(name);
    if (!e) throw new Error(`${this.label}: no tensor named '${name}'`);
    return decodeKnotRecord(e, await this.readRange(e.recordOffset, e.recordBytes), this.label);
  }
}

// ---- the WebAssembly kernels --------------------------------------------------------------------------------------

/** The kernels of gkq_kernels.wasm, with helpers that copy arrays in and out of its memory. */
export class GKQKernels {
  static async load(wasmBytes) {
    const { instance } = await WebAssembly.instantiate(wasmBytes, { env: { emscripten_notify_memory_growth() {} } });
    return new GKQKernels(instance);
  }

  constructor(instance) {
    this.x = instance.exports;
    this.x._initialize();
  }

  alloc(bytes) {
    const p = this.x.gkq_malloc(bytes);
    if (!p) throw new Error(`wasm: out of memory allocating ${bytes} bytes`);
    return p;
  }
  free(p) { this.x.gkq_free(p); }
  u8(p, n) { return new Uint8Array(this.x.memory.buffer, p, n); }
  f32(p, n) { return new Float32Array(this.x.memory.buffer, p, n); }
  put(bytes) {
    const p = this.alloc(bytes.byteLength);
    this.u8(p, bytes.byteLength).set(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    return p;
  }

  // Runs fn(ptrs) with the given arrays copied in and `outFloats` floats allocated; returns a copy of the output.
  withBuffers(inputs, outFloats, fn) {
    const ptrs = [];
    try {
      for (const a of inputs) ptrs.push(this.put(a));
      const out = this.alloc(outFloats * 4);
      ptrs.push(out);
      const rc = fn(...ptrs);
      if (rc !== undefined && rc !== 0) throw new Error('wasm: out of memory in a kernel');
      return this.f32(out, outFloats).slice();
    } finally {
      for (const p of ptrs) this.free(p);
    }
  }

  /** The documents' kernel: 8-bit codes over [-maxVal, maxVal]. */
  dequantizeSimd(q, maxVal) {
    return this.withBuffers([q], q.length, (pq, out) => this.x.gkq_dequantize_simd(pq, out, q.length, maxVal));
  }

  /** The documents' kernel: u (dOut, rank), sigma (rank), vt (rank, dIn) -> (dOut, dIn). */
  matmulReconstruct(u, sigma, vt, dOut, dIn, rank) {
    return this.withBuffers([u, sigma, vt], dOut * dIn,
                            (pu, ps, pv, out) => this.x.gkq_matmul_reconstruct_simd(pu, ps, pv, out, dOut, dIn, rank));
  }

  /** (nVectors, len) factors from codes (see gkq_dequantize_factors). */
  dequantizeFactors(codes, bits, packed, first, nVectors, len, delta, scales) {
    return this.withBuffers([codes, scales], nVectors * len, (pc, ps, out) =>
      this.x.gkq_dequantize_factors(pc, bits, packed ? 1 : 0, first, nVectors, len, delta ? 1 : 0, ps, out));
  }

  /** type 'f16' | 'q8_0' | 'q4_0'. */
  dequantizeBlocks(type, src, n) {
    const code = { f16: 1, q8_0: 8, q4_0: 4 }[type];
    return this.withBuffers([src], n, (p, out) => this.x.gkq_dequantize_blocks(code, p, n, out));
  }
}

// ---- payloads (docs/codec.md) -------------------------------------------------------------------------------------

function rleDecode(data, bits, nSymbols, fail) {
  const out = new Uint8Array(nSymbols);
  const wide = bits === 8;
  if (wide && data.length % 2 !== 0) fail(`run-length stream of ${data.length} bytes is not a whole number of pairs`);
  let o = 0;
  for (let i = 0; i < data.length; i += wide ? 2 : 1) {
    const symbol = wide ? data[i] : data[i] & ((1 << bits) - 1);
    const run = (wide ? data[i + 1] : data[i] >> bits) + 1;
    if (o + run > nSymbols) fail(`run-length stream decodes past ${nSymbols} codes`);
    out.fill(symbol, o, o + run);
    o += run;
  }
  if (o !== nSymbols) fail(`run-length stream ends after ${o} of ${nSymbols} codes`);
  return out;
}

function product(shape) { return shape.reduce((a, b) => a * b, 1); }

/**
 * Decodes a tensor ({name, shape, method, rank, factorBits, residualBits, flags, payload}) to a Float32Array,
 * row-major; checks the payload against the header fields as gkq::decode_tensor does.
 */
export function decodeTensor(kernels, t) {
  const w = decodeTensorInWasm(kernels, t);
  try {
    return w.view().slice();
  } finally {
    w.free();
  }
}

/**
 * The same, leaving the result in the kernels' memory: {n, view(), free()}. view() makes a fresh Float32Array over
 * it (a view made before the memory grows is detached by the growth); free() releases it.
 */
export function decodeTensorInWasm(kernels, t) {
  const label = `tensor '${t.name}' (${METHOD_NAMES[t.method] ?? t.method})`;
  const fail = (why) => { throw new Error(`${label}: ${why}`); };
  const n = product(t.shape);
  const cols = t.shape.length ? t.shape[t.shape.length - 1] : 1;
  const rows = cols > 0 ? n / cols : 0;
  if (!Number.isSafeInteger(n) || n > 2 ** 32) fail(`shape [${t.shape}] is too large for the WebAssembly kernels`);
  const p = t.payload;
  const expectSize = (bytes, what) => { if (p.length !== bytes) fail(`payload is ${p.length} bytes, expected ${bytes} for ${what}`); };
  const shapeText = `shape [${t.shape}]`;
  if (t.method <= Method.Q4_0) {
    if (t.rank || t.factorBits || t.residualBits || t.flags) fail('header fields rank, bits and flags must be 0 for this method');
    if (t.method === Method.F32) {
      expectSize(4 * n, shapeText);
      return resident(kernels, kernels.put(p), n);
    }
    if (t.method === Method.F16) expectSize(2 * n, shapeText);
    else {
      if (cols % 32 !== 0) fail(`row length ${cols} is not a multiple of the 32-element block`);
      expectSize((n / 32) * (t.method === Method.Q8_0 ? 34 : 18), shapeText);
    }
    const src = kernels.put(p);
    try {
      const out = kernels.alloc(4 * n);
      kernels.x.gkq_dequantize_blocks([1, 8, 4][t.method - 1], src, n, out);
      return resident(kernels, out, n);
    } finally {
      kernels.free(src);
    }
  }
  if (t.method !== Method.LowRank && t.method !== Method.LowRankResidual) fail(`unknown method ${t.method}`);
  if (t.shape.length < 2) fail(`a low-rank tensor needs two or more dimensions, ${shapeText}`);
  const bits = t.factorBits, k = t.rank;
  if (![2, 4, 8].includes(bits)) fail(`factor_bits is ${bits}, expected 2, 4 or 8`);
  if (k > Math.min(rows, cols)) fail(`rank ${k} is outside [0, ${Math.min(rows, cols)}]`);
  if (t.flags & ~15) fail(`unknown flag bits 0x${(t.flags & ~15).toString(16)}`);
  const withResidual = t.method === Method.LowRankResidual;
  if (withResidual ? ![4, 8].includes(t.residualBits) : t.residualBits !== 0) fail(`residual_bits is ${t.residualBits}`);
  if (withResidual && cols % 32 !== 0) fail(`row length ${cols} is not a multiple of the 32-element block`);

  const r = new Reader(p, `${label} payload`);
  let sigma;
  if (t.flags & Flags.SigmaQuantized) {
    const max = r.f32('sigma_max');
    const codes = r.take(k, 'sigma codes');
    sigma = Float32Array.from(codes, (c) => Math.fround(Math.fround(max * c) / 255));
  } else {
    sigma = new Float32Array(r.take(4 * k, 'sigma').slice().buffer);
  }
  let foldAxis = -1, nHeads = 1, headScales = null;
  if (t.flags & Flags.FoldedHeads) {
    foldAxis = r.u8('fold axis');
    if (r.u8('fold padding') !== 0 || r.u16('fold padding') !== 0) fail('fold padding is not zero');
    nHeads = r.u32('fold head count');
    const len = foldAxis === 0 ? rows : cols;
    if (foldAxis > 1) fail(`fold axis ${foldAxis} is neither 0 (U) nor 1 (V)`);
    if (nHeads < 2 || len % nHeads !== 0) fail(`fold head count ${nHeads} does not split ${len} into equal heads`);
    headScales = new Float32Array(r.take(4 * nHeads, 'head scales').slice().buffer);
  }
  const uScales = new Float32Array(r.take(4 * k, 'U scales').slice().buffer);
  const vScales = new Float32Array(r.take(4 * k, 'V scales').slice().buffer);
  const uLen = foldAxis === 0 ? rows / nHeads : rows;
  const vLen = foldAxis === 1 ? cols / nHeads : cols;
  const nSymbols = k * (uLen + vLen);
  let codes, packed;
  if (t.flags & Flags.RleCoefficients) {
    const nRle = r.u32('run-length stream size');
    codes = rleDecode(r.take(nRle, 'run-length coefficient codes'), bits, nSymbols, fail);
    packed = false;
  } else {
    const nBytes = Math.ceil((nSymbols * bits) / 8);
    codes = r.take(nBytes, 'factor codes');
    const used = nSymbols % (8 / bits);
    if (used && codes[nBytes - 1] >> (used * bits)) fail('unused bits of the last factor code byte are not zero');
    packed = true;
  }
  const rest = p.length - r.pos;
  const residualBytes = withResidual ? (n / 32) * (t.residualBits === 4 ? 18 : 34) : 0;
  if (rest !== residualBytes) fail(`payload has ${rest} bytes after the low-rank section, expected ${residualBytes}`);
  const residual = p.subarray(r.pos);
  const delta = (t.flags & Flags.Delta) !== 0;

  // One pass through the kernels' memory: codes, scales, factors, output.
  const K = kernels, x = K.x, ptrs = [];
  let out = 0;
  const put = (a) => { const q = K.put(a); ptrs.push(q); return q; };
  const alloc = (bytes) => { const q = K.alloc(bytes); ptrs.push(q); return q; };
  try {
    const pCodes = put(codes);
    const factor = (isU) => {
      const len = isU ? uLen : vLen, heads = foldAxis === (isU ? 0 : 1) ? nHeads : 1;
      const dst = alloc(4 * k * len * heads);
      const base = heads > 1 ? alloc(4 * k * len) : dst;
      x.gkq_dequantize_factors(pCodes, bits, packed ? 1 : 0, isU ? 0 : k * uLen, k, len, delta ? 1 : 0,
                               put(isU ? uScales : vScales), base);
      if (heads > 1) x.gkq_expand_heads(base, k, len, put(headScales), heads, dst);
      return dst;
    };
    const ut = factor(true), vt = factor(false);
    const pSigma = put(sigma), pResidual = withResidual ? put(residual) : 0;
    out = K.alloc(4 * n);
    if (x.gkq_reconstruct_residual(ut, pSigma, vt, out, rows, cols, k, pResidual, withResidual ? t.residualBits : 0) !== 0)
      fail('out of WebAssembly memory');
    const result = resident(K, out, n);
    out = 0;
    return result;
  } finally {
    for (const q of ptrs) K.free(q);
    if (out) K.free(out);
  }
}

function resident(kernels, ptr, n) {
  let live = true;
  return {
    n,
    view() {
      if (!live) throw new Error('the decoded tensor was freed');
      return kernels.f32(ptr, n);
    },
    free() {
      if (live) kernels.free(ptr);
      live = false;
    },
  };
}

// ---- the reconstructor --------------------------------------------------------------------------------------------

/**
 * Reconstructs a knot's tensors on demand through an LRU cache of `cacheSize` (default 4) decoded tensors.
 * stats: hits (served from the cache, including a reconstruction still in flight), misses, evictions,
 * reconstructions (completed decodes).
 */
export class GKQReconstructor {
  constructor(kernels, knot, { cacheSize = 4 } = {}) {
    if (!Number.isInteger(cacheSize) || cacheSize < 1) throw new Error(`cacheSize must be a positive integer, got ${cacheSize}`);
    this.kernels = kernels;
    this.knot = knot;
    this.cacheSize = cacheSize;
    this.cache = new Map();  // name -> Promise of {name, shape, data}; insertion order = recency
    this.stats = { hits: 0, misses: 0, evictions: 0, reconstructions: 0 };
  }

  /** The tensor `name` as {name, shape, data: Float32Array}. */
  async tensor(name) {
    const cached = this.cache.get(name);
    if (cached) {
      this.stats.hits++;
      this.cache.delete(name);
      this.cache.set(name, cached);
      return cached;
    }
    this.stats.misses++;
    const pending = (async () => {
      const t = await this.knot.readRecord(name);
      const data = decodeTensor(this.kernels, t);
      this.stats.reconstructions++;
      return { name, shape: t.shape, data };
    })();
    this.cache.set(name, pending);
    pending.catch(() => { if (this.cache.get(name) === pending) this.cache.delete(name); });
    while (this.cache.size > this.cacheSize) {
      this.cache.delete(this.cache.keys().next().value);
      this.stats.evictions++;
    }
    return pending;
  }

  /** Names in the cache, least recently used first. */
  cachedNames() { return [...this.cache.keys()]; }
}
