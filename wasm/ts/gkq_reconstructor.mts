// GKQ reconstruction in TypeScript, compiled to an ES2022 module (Node 20, browsers, edge workers): reads knot
// records — from the bytes of a knot file or by range requests (trailer, index, record) — checks them as the native
// reader does (CRC32, descriptor against the index, sizes), and decodes them with the WebAssembly-SIMD kernels
// (wasm/src/gkq_kernels.c) into Float32Arrays equal, bit for bit, to the native gkq::decode_tensor.
// GKQReconstructor keeps the last `cacheSize` (default 4) tensors in an LRU cache and counts hits, misses, evictions
// and reconstructions.
// Layouts: docs/knot-format.md (file, index, records) and docs/codec.md (payloads). Runtime-neutral: no Node or npm
// types; zlib streams are inflated with the platform's DecompressionStream. Every error is an Error whose message
// names the knot, the record and the field.

// ---- enums (docs/knot-format.md) ----------------------------------------------------------------------------------

export const Method = Object.freeze({ F32: 0, F16: 1, Q8_0: 2, Q4_0: 3, LowRank: 4, LowRankResidual: 5 } as const);
export const Flags = Object.freeze({ Delta: 1, FoldedHeads: 2, RleCoefficients: 4, SigmaQuantized: 8 } as const);
const METHOD_NAMES = ['f32', 'f16', 'q8_0', 'q4_0', 'lowrank', 'lowrank+residual'];
// A lowrank+residual record's residual code names its blocks' type: 4 Q4_0 (the bits per code it was first written
// with), otherwise the type's ggml id, whose names these are in ggml's order (docs/knot-format.md).
const GGML_TYPE_NAMES = ['f32', 'f16', 'q4_0', 'q4_1', '', '', 'q5_0', 'q5_1', 'q8_0', 'q8_1', 'q2_k', 'q3_k', 'q4_k',
                         'q5_k', 'q6_k', 'q8_k', 'iq2_xxs', 'iq2_xs', 'iq3_xxs', 'iq1_s', 'iq4_nl'];
const RESIDUAL_TYPES = ['q4_0', 'q8_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'];
/** The residual type a residual code names (what gkq writes), or undefined for a code no type has. */
function residualTypeName(code: number): string | undefined {
  const name = code === 4 ? 'q4_0' : code === 2 ? undefined : GGML_TYPE_NAMES[code];
  return name !== undefined && RESIDUAL_TYPES.includes(name) ? name : undefined;
}
const KNOT_TRAILER_BYTES = 40;
const KNOT_VERSION = 1;

/** Reads `length` bytes at file offset `offset` (a local buffer, or an HTTP range request). */
export type ReadRange = (offset: number, length: number) => Promise<Uint8Array>;

/** A record descriptor, as the index and the record both store it. */
export interface Descriptor {
  sourceIndex: number;
  storedBytes: number;
  rawBytes: number;
  flags: number;
  layer: number;
  rank: number;
  role: number;
  method: number;
  factorBits: number;
  /** The residual code (the descriptor's residual byte): 4 Q4_0, 8 Q8_0, or another block type's ggml id. */
  residualBits: number;
  compression: number;
  shape: number[];
  name: string;
}

/** An index entry: the descriptor plus where the record lies. */
export interface IndexEntry extends Descriptor {
  recordOffset: number;
  recordBytes: number;
  crc32: number;
  index: number;
}

export interface KnotTrailer {
  recordsOffset: number;
  indexOffset: number;
  indexBytes: number;
  indexCrc: number;
}

/** A record's tensor: the header fields and the (inflated) payload, as decodeTensor takes it. */
export interface EncodedTensor {
  name: string;
  role?: number;
  layer?: number;
  shape: number[];
  method: number;
  rank: number;
  factorBits: number;
  /** The residual code (see Descriptor). */
  residualBits: number;
  flags: number;
  payload: Uint8Array;
}

/** A decoded tensor: row-major float32 of `shape`. */
export interface DecodedTensor {
  name: string;
  shape: number[];
  data: Float32Array;
}

export interface ReconstructorStats {
  hits: number;
  misses: number;
  evictions: number;
  reconstructions: number;
}

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
export function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// TypeScript 4.8's DOM library does not declare DecompressionStream (Node 18+, browsers and workers have it).
type DecompressionStreamCtor = new (format: 'gzip' | 'deflate') => TransformStream<Uint8Array, Uint8Array>;

async function inflate(bytes: Uint8Array, format: 'gzip' | 'deflate'): Promise<Uint8Array> {
  const global = globalThis as unknown as { DecompressionStream?: DecompressionStreamCtor };
  const Decompression = global.DecompressionStream;
  if (!Decompression) throw new Error('this runtime has no DecompressionStream');
  const stream = new Blob([bytes]).stream().pipeThrough(new Decompression(format));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// A bounds-checked little-endian reader whose errors name the label and the offset.
class Reader {
  readonly view: DataView;
  pos = 0;

  constructor(readonly bytes: Uint8Array, readonly label: string, readonly base = 0 /* file offset of bytes[0] */) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  need(n: number, what: string): void {
    if (n > this.bytes.length - this.pos)
      throw new Error(`${this.label}: ${what} at offset ${this.base + this.pos} needs ${n} bytes, ` +
                      `${this.bytes.length - this.pos} left (truncated?)`);
  }
  u8(what: string): number { this.need(1, what); return this.view.getUint8(this.pos++); }
  u16(what: string): number {
    this.need(2, what);
    const v = this.view.getUint16(this.pos, true);
    this.pos += 2;
    return v;
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  i32(what: string): number {
    this.need(4, what);
    const v = this.view.getInt32(this.pos, true);
    this.pos += 4;
    return v;
  }
  f32(what: string): number {
    this.need(4, what);
    const v = this.view.getFloat32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64(what: string): number {
    this.need(8, what);
    const v = this.view.getBigUint64(this.pos, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER))
      throw new Error(`${this.label}: ${what} at offset ${this.base + this.pos} is ${v}, beyond 2^53`);
    this.pos += 8;
    return Number(v);
  }
  i64(what: string): number {
    this.need(8, what);
    const v = this.view.getBigInt64(this.pos, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER))
      throw new Error(`${this.label}: ${what} at offset ${this.base + this.pos} is ${v}, outside +-2^53`);
    this.pos += 8;
    return Number(v);
  }
  take(n: number, what: string): Uint8Array {
    this.need(n, what);
    const b = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  magic(text: string, what: string): void {
    const b = this.take(text.length, what);
    for (let i = 0; i < text.length; i++)
      if (b[i] !== text.charCodeAt(i))
        throw new Error(`${this.label}: ${what} at offset ${this.base + this.pos - text.length} is not ` +
                        `'${text.replace('\0', '\\0')}'`);
  }
}

// Float32 values of little-endian bytes, copied (the bytes need not be 4-byte aligned). new Uint8Array(view) copies
// where view.slice() may not: Node's Buffer (a Uint8Array) returns a view from slice().
function floatsOf(bytes: Uint8Array): Float32Array {
  return new Float32Array(new Uint8Array(bytes).buffer);
}

// ---- knot index and records ---------------------------------------------------------------------------------------

function readDescriptor(r: Reader): Descriptor {
  const sourceIndex = r.u64('source index');
  const storedBytes = r.u64('stored payload size');
  const rawBytes = r.u64('raw payload size');
  const flags = r.u32('flags');
  const layer = r.i32('layer');
  const rank = r.i32('rank');
  const role = r.u8('role');
  const method = r.u8('method');
  const factorBits = r.u8('factor bits');
  const residualBits = r.u8('residual bits');
  const compression = r.u8('payload compression');
  const nDims = r.u8('dimension count');
  const nameBytes = r.u16('name length');
  if (nDims > 8) throw new Error(`${r.label}: ${nDims} dimensions, at most 8`);
  if (nameBytes < 1 || nameBytes > 4096) throw new Error(`${r.label}: name length ${nameBytes} outside 1..4096`);
  const shape: number[] = [];
  for (let d = 0; d < nDims; d++) {
    const v = r.i64('dimension');
    if (v <= 0) throw new Error(`${r.label}: dimension ${d} is ${v}, expected > 0`);
    shape.push(v);
  }
  const name = new TextDecoder().decode(r.take(nameBytes, 'name'));
  if (role > 12) throw new Error(`${r.label}: tensor '${name}': unknown role ${role}`);
  if (method > 5) throw new Error(`${r.label}: tensor '${name}': unknown method ${method}`);
  if (method === Method.LowRankResidual && residualTypeName(residualBits) === undefined)
    throw new Error(`${r.label}: tensor '${name}': unknown residual code ${residualBits}`);
  if (compression > 1) throw new Error(`${r.label}: tensor '${name}': unknown payload compression ${compression}`);
  if (layer < -1 || rank < 0)
    throw new Error(`${r.label}: tensor '${name}': layer ${layer} or rank ${rank} out of range`);
  if (compression === 0 ? rawBytes !== storedBytes : rawBytes > 1032 * storedBytes)
    throw new Error(`${r.label}: tensor '${name}': raw payload size ${rawBytes} does not fit stored size ` +
                    `${storedBytes}`);
  return { sourceIndex, storedBytes, rawBytes, flags, layer, rank, role, method, factorBits, residualBits, compression,
           shape, name };
}

/** Parses the last 40 bytes of a knot of fileSize bytes. */
export function parseKnotTrailer(last: Uint8Array, fileSize: number, label: string): KnotTrailer {
  if (fileSize < 80) throw new Error(`${label}: ${fileSize} bytes is too small for a knot file`);
  const r = new Reader(last, label, fileSize - KNOT_TRAILER_BYTES);
  const t: KnotTrailer = {
    recordsOffset: r.u64('records offset'),
    indexOffset: r.u64('index offset'),
    indexBytes: r.u64('index size'),
    indexCrc: r.u32('index CRC32'),
  };
  const version = r.u32('trailer version');
  r.magic('KNOTIDX\0', 'trailer magic (the file is truncated or was not finished)');
  if (version !== KNOT_VERSION)
    throw new Error(`${label}: knot format version ${version}; this reader reads version ${KNOT_VERSION}`);
  if (!(t.recordsOffset >= 40 && t.recordsOffset <= t.indexOffset &&
        t.indexOffset + t.indexBytes === fileSize - KNOT_TRAILER_BYTES))
    throw new Error(`${label}: trailer offsets (records ${t.recordsOffset}, index ${t.indexOffset} + ` +
                    `${t.indexBytes}) do not tile the ${fileSize}-byte file`);
  return t;
}

/** Parses and checks the index block; returns its entries in record order. */
export function parseKnotIndex(bytes: Uint8Array, trailer: KnotTrailer, label: string): IndexEntry[] {
  if (crc32(bytes) !== trailer.indexCrc) throw new Error(`${label}: index CRC32 mismatch`);
  const r = new Reader(bytes, label, trailer.indexOffset);
  r.magic('KIDX', 'index magic');
  const n = r.u64('record count');
  if (n > (bytes.length - 12) / 64) throw new Error(`${label}: index claims ${n} records in ${bytes.length} bytes`);
  const entries: IndexEntry[] = [];
  let next = trailer.recordsOffset;
  for (let i = 0; i < n; i++) {
    const recordOffset = r.u64('record offset');
    const recordBytes = r.u64('record size');
    const crc = r.u32('record CRC32');
    const e: IndexEntry = { ...readDescriptor(r), recordOffset, recordBytes, crc32: crc, index: i };
    if (recordOffset !== next)
      throw new Error(`${label}: record ${i} '${e.name}' starts at ${recordOffset}, expected ${next}`);
    next = recordOffset + recordBytes;
    entries.push(e);
  }
  if (next !== trailer.indexOffset)
    throw new Error(`${label}: the records end at ${next}, the index starts at ${trailer.indexOffset}`);
  if (r.pos !== bytes.length) throw new Error(`${label}: ${bytes.length - r.pos} bytes after the last index entry`);
  return entries;
}

const DESCRIPTOR_FIELDS = ['sourceIndex', 'storedBytes', 'rawBytes', 'flags', 'layer', 'rank', 'role', 'method',
                           'factorBits', 'residualBits', 'compression', 'name'] as const;

/** Checks a record's bytes against its index entry and returns the tensor ({name, shape, method, ..., payload}). */
export async function decodeKnotRecord(entry: IndexEntry, bytes: Uint8Array, label: string): Promise<EncodedTensor> {
  const where = `${label}: record ${entry.index} '${entry.name}' (file offset ${entry.recordOffset})`;
  if (bytes.length !== entry.recordBytes)
    throw new Error(`${where}: ${bytes.length} bytes, the index says ${entry.recordBytes}`);
  const body = bytes.subarray(0, bytes.length - 4);
  const stored = new DataView(bytes.buffer, bytes.byteOffset + bytes.length - 4, 4).getUint32(0, true);
  const actual = crc32(body);
  if (actual !== entry.crc32 || stored !== entry.crc32)
    throw new Error(`${where}: CRC32 mismatch (index 0x${entry.crc32.toString(16)}, record field ` +
                    `0x${stored.toString(16)}, bytes 0x${actual.toString(16)})`);
  const r = new Reader(body, where, entry.recordOffset);
  r.magic('KREC', 'record magic');
  const payloadOffset = r.u32('payload offset');
  const d = readDescriptor(r);
  if (r.pos !== payloadOffset)
    throw new Error(`${where}: payload offset ${payloadOffset}, the descriptor ends at ${r.pos}`);
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
      throw new Error(`${where}: payload does not inflate: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (payload.length !== d.rawBytes)
    throw new Error(`${where}: payload inflates to ${payload.length} bytes, expected ${d.rawBytes}`);
  return { name: d.name, role: d.role, layer: d.layer, shape: d.shape, method: d.method, rank: d.rank,
           factorBits: d.factorBits, residualBits: d.residualBits, flags: d.flags, payload };
}

/**
 * A knot's index and records. `readRange(offset, length)` returns a Promise of those bytes (a local buffer, or an
 * HTTP range request); the trailer, the index and each record are read once each, when needed.
 */
export class KnotReader {
  readonly byName: Map<string, IndexEntry>;

  static async open(readRange: ReadRange, fileSize: number, label = 'knot'): Promise<KnotReader> {
    const last = await readRange(fileSize - KNOT_TRAILER_BYTES, KNOT_TRAILER_BYTES);
    const trailer = parseKnotTrailer(last, fileSize, label);
    const entries = parseKnotIndex(await readRange(trailer.indexOffset, trailer.indexBytes), trailer, label);
    return new KnotReader(readRange, label, entries);
  }

  /** From a whole knot file in memory (.knot, or .knot.gz recognized by its gzip magic). */
  static async fromBytes(bytes: Uint8Array | ArrayBuffer, label = 'knot'): Promise<KnotReader> {
    let b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    if (b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b) b = await inflate(b, 'gzip');
    if (b.length < 8 || new TextDecoder().decode(b.subarray(0, 8)) !== 'GKQKNOT\0')
      throw new Error(`${label}: not a knot file`);
    const whole = b;
    return KnotReader.open(async (offset, length) => whole.subarray(offset, offset + length), whole.length, label);
  }

  constructor(readonly readRange: ReadRange, readonly label: string, readonly entries: IndexEntry[]) {
    this.byName = new Map(entries.map((e) => [e.name, e]));
  }

  find(name: string): IndexEntry | undefined { return this.byName.get(name); }

  async readRecord(name: string): Promise<EncodedTensor> {
    const e = this.byName.get(name);
    if (!e) throw new Error(`${this.label}: no tensor named '${name}'`);
    return decodeKnotRecord(e, await this.readRange(e.recordOffset, e.recordBytes), this.label);
  }
}

// ---- the WebAssembly kernels --------------------------------------------------------------------------------------

/** The exports of gkq_kernels.wasm (wasm/src/gkq_kernels.c); pointers and sizes are byte offsets / counts (u32). */
export interface KernelExports {
  memory: WebAssembly.Memory;
  _initialize(): void;
  gkq_malloc(bytes: number): number;
  gkq_free(p: number): void;
  gkq_dequantize_simd(q: number, out: number, n: number, maxVal: number): void;
  gkq_matmul_reconstruct_simd(u: number, sigma: number, vt: number, out: number, dOut: number, dIn: number,
                              rank: number): number;
  gkq_dequantize_factors(codes: number, bits: number, packed: number, first: number, nVectors: number, len: number,
                         delta: number, scales: number, out: number): void;
  gkq_expand_heads(base: number, k: number, len: number, headScales: number, nHeads: number, out: number): void;
  gkq_dequantize_blocks(type: number, src: number, n: number, out: number): void;
  gkq_reconstruct_residual(ut: number, sigma: number, vt: number, out: number, dOut: number, dIn: number, rank: number,
                           residual: number, residualBits: number): number;
  gkq_block_elements(type: number): number;
  gkq_block_bytes(type: number): number;
}

type Bytes = ArrayBufferView;

/** The kernels of gkq_kernels.wasm, with helpers that copy arrays in and out of its memory. */
export class GKQKernels {
  readonly x: KernelExports;

  /** Instantiates the module from its bytes (or an already compiled WebAssembly.Module, as edge workers import it). */
  static async load(wasm: BufferSource | WebAssembly.Module): Promise<GKQKernels> {
    const imports = { env: { emscripten_notify_memory_growth() {} } };
    const instance = wasm instanceof WebAssembly.Module
      ? await WebAssembly.instantiate(wasm, imports)
      : (await WebAssembly.instantiate(wasm, imports)).instance;
    return new GKQKernels(instance);
  }

  constructor(instance: WebAssembly.Instance) {
    this.x = instance.exports as unknown as KernelExports;
    this.x._initialize();
  }

  alloc(bytes: number): number {
    const p = this.x.gkq_malloc(bytes);
    if (!p) throw new Error(`wasm: out of memory allocating ${bytes} bytes`);
    return p;
  }
  free(p: number): void { this.x.gkq_free(p); }
  u8(p: number, n: number): Uint8Array { return new Uint8Array(this.x.memory.buffer, p, n); }
  f32(p: number, n: number): Float32Array { return new Float32Array(this.x.memory.buffer, p, n); }
  put(bytes: Bytes): number {
    const p = this.alloc(bytes.byteLength);
    this.u8(p, bytes.byteLength).set(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    return p;
  }

  // Runs fn(ptrs) with the given arrays copied in and `outFloats` floats allocated; returns a copy of the output.
  withBuffers(inputs: Bytes[], outFloats: number, fn: (...ptrs: number[]) => number | void): Float32Array {
    const ptrs: number[] = [];
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
  dequantizeSimd(q: Uint8Array, maxVal: number): Float32Array {
    return this.withBuffers([q], q.length, (pq, out) => this.x.gkq_dequantize_simd(pq, out, q.length, maxVal));
  }

  /** The documents' kernel: u (dOut, rank), sigma (rank), vt (rank, dIn) -> (dOut, dIn). */
  matmulReconstruct(u: Float32Array, sigma: Float32Array, vt: Float32Array, dOut: number, dIn: number,
                    rank: number): Float32Array {
    return this.withBuffers([u, sigma, vt], dOut * dIn,
                            (pu, ps, pv, out) => this.x.gkq_matmul_reconstruct_simd(pu, ps, pv, out, dOut, dIn, rank));
  }

  /** (nVectors, len) factors from codes (see gkq_dequantize_factors). */
  dequantizeFactors(codes: Uint8Array, bits: number, packed: boolean, first: number, nVectors: number, len: number,
                    delta: boolean, scales: Float32Array): Float32Array {
    return this.withBuffers([codes, scales], nVectors * len, (pc, ps, out) =>
      this.x.gkq_dequantize_factors(pc, bits, packed ? 1 : 0, first, nVectors, len, delta ? 1 : 0, ps, out));
  }

  /**
   * A Q8_0 or Q4_0 block as the module was built with it (the type table's core/include/gkq/block_layout.h): values
   * per block and bytes per block.
   */
  block(type: 'q8_0' | 'q4_0'): { elements: number; bytes: number } {
    const code = type === 'q8_0' ? 8 : 4;
    return { elements: this.x.gkq_block_elements(code), bytes: this.x.gkq_block_bytes(code) };
  }

  /** n values of f16, Q8_0 or Q4_0 blocks. */
  dequantizeBlocks(type: 'f16' | 'q8_0' | 'q4_0', src: Uint8Array, n: number): Float32Array {
    const code = { f16: 1, q8_0: 8, q4_0: 4 }[type];
    return this.withBuffers([src], n, (p, out) => this.x.gkq_dequantize_blocks(code, p, n, out));
  }
}

// ---- payloads (docs/codec.md) -------------------------------------------------------------------------------------

function rleDecode(data: Uint8Array, bits: number, nSymbols: number, fail: (why: string) => never): Uint8Array {
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

function product(shape: readonly number[]): number { return shape.reduce((a, b) => a * b, 1); }

/**
 * A decoded tensor left in the kernels' memory. view() makes a fresh Float32Array over it (a view made before the
 * memory grows is detached by the growth); free() releases it.
 */
export interface ResidentTensor {
  readonly n: number;
  view(): Float32Array;
  free(): void;
}

/**
 * Decodes a tensor ({name, shape, method, rank, factorBits, residualBits, flags, payload}) to a Float32Array,
 * row-major; checks the payload against the header fields as gkq::decode_tensor does.
 */
export function decodeTensor(kernels: GKQKernels, t: EncodedTensor): Float32Array {
  const w = decodeTensorInWasm(kernels, t);
  try {
    return w.view().slice();
  } finally {
    w.free();
  }
}

/** The same, leaving the result in the kernels' memory (no copy out). */
export function decodeTensorInWasm(kernels: GKQKernels, t: EncodedTensor): ResidentTensor {
  const label = `tensor '${t.name}' (${METHOD_NAMES[t.method] ?? t.method})`;
  const fail = (why: string): never => { throw new Error(`${label}: ${why}`); };
  const n = product(t.shape);
  const cols = t.shape.length ? t.shape[t.shape.length - 1] : 1;
  const rows = cols > 0 ? n / cols : 0;
  if (!Number.isSafeInteger(n) || n > 2 ** 32) fail(`shape [${t.shape}] is too large for the WebAssembly kernels`);
  const p = t.payload;
  const expectSize = (bytes: number, what: string) => {
    if (p.length !== bytes) fail(`payload is ${p.length} bytes, expected ${bytes} for ${what}`);
  };
  const shapeText = `shape [${t.shape}]`;
  if (t.method <= Method.Q4_0) {
    if (t.rank || t.factorBits || t.residualBits || t.flags)
      fail('header fields rank, bits and flags must be 0 for this method');
    if (t.method === Method.F32) {
      expectSize(4 * n, shapeText);
      return resident(kernels, kernels.put(p), n);
    }
    if (t.method === Method.F16) expectSize(2 * n, shapeText);
    else {
      const block = kernels.block(t.method === Method.Q8_0 ? 'q8_0' : 'q4_0');
      if (cols % block.elements !== 0) fail(`row length ${cols} is not a multiple of the ${block.elements}-element block`);
      expectSize((n / block.elements) * block.bytes, shapeText);
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
  if (!withResidual && t.residualBits !== 0) fail(`residual code is ${t.residualBits}, expected 0 for this method`);
  const residualType = withResidual ? residualTypeName(t.residualBits) : undefined;
  if (withResidual && residualType === undefined) fail(`unknown residual code ${t.residualBits}`);
  // the kernels add Q4_0 and Q8_0 residual blocks; the other block types decode natively only
  if (withResidual && residualType !== 'q4_0' && residualType !== 'q8_0')
    fail(`a residual of type ${residualType} has no WebAssembly kernel (q4_0 and q8_0 do; gkq decodes it natively)`);
  const residualBlock = kernels.block(residualType === 'q4_0' ? 'q4_0' : 'q8_0');
  if (withResidual && cols % residualBlock.elements !== 0)
    fail(`row length ${cols} is not a multiple of the ${residualBlock.elements}-element block`);

  const r = new Reader(p, `${label} payload`);
  let sigma: Float32Array;
  if (t.flags & Flags.SigmaQuantized) {
    const max = r.f32('sigma_max');
    const codes = r.take(k, 'sigma codes');
    sigma = Float32Array.from(codes, (c) => Math.fround(Math.fround(max * c) / 255));
  } else {
    sigma = floatsOf(r.take(4 * k, 'sigma'));
  }
  let foldAxis = -1, nHeads = 1;
  let headScales: Float32Array | null = null;
  if (t.flags & Flags.FoldedHeads) {
    foldAxis = r.u8('fold axis');
    if (r.u8('fold padding') !== 0 || r.u16('fold padding') !== 0) fail('fold padding is not zero');
    nHeads = r.u32('fold head count');
    const len = foldAxis === 0 ? rows : cols;
    if (foldAxis > 1) fail(`fold axis ${foldAxis} is neither 0 (U) nor 1 (V)`);
    if (nHeads < 2 || len % nHeads !== 0) fail(`fold head count ${nHeads} does not split ${len} into equal heads`);
    headScales = floatsOf(r.take(4 * nHeads, 'head scales'));
  }
  const uScales = floatsOf(r.take(4 * k, 'U scales'));
  const vScales = floatsOf(r.take(4 * k, 'V scales'));
  const uLen = foldAxis === 0 ? rows / nHeads : rows;
  const vLen = foldAxis === 1 ? cols / nHeads : cols;
  const nSymbols = k * (uLen + vLen);
  let codes: Uint8Array, packed: boolean;
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
  const residualBytes = withResidual ? (n / residualBlock.elements) * residualBlock.bytes : 0;
  if (rest !== residualBytes) fail(`payload has ${rest} bytes after the low-rank section, expected ${residualBytes}`);
  const residual = p.subarray(r.pos);
  const delta = (t.flags & Flags.Delta) !== 0;

  // One pass through the kernels' memory: codes, scales, factors, output.
  const K = kernels, x = K.x, ptrs: number[] = [];
  let out = 0;
  const put = (a: Bytes) => { const q = K.put(a); ptrs.push(q); return q; };
  const alloc = (bytes: number) => { const q = K.alloc(bytes); ptrs.push(q); return q; };
  try {
    const pCodes = put(codes);
    const factor = (isU: boolean) => {
      const len = isU ? uLen : vLen, heads = foldAxis === (isU ? 0 : 1) ? nHeads : 1;
      const dst = alloc(4 * k * len * heads);
      const base = heads > 1 ? alloc(4 * k * len) : dst;
      x.gkq_dequantize_factors(pCodes, bits, packed ? 1 : 0, isU ? 0 : k * uLen, k, len, delta ? 1 : 0,
                               put(isU ? uScales : vScales), base);
      if (heads > 1 && headScales) x.gkq_expand_heads(base, k, len, put(headScales), heads, dst);
      return dst;
    };
    const ut = factor(true), vt = factor(false);
    const pSigma = put(sigma), pResidual = withResidual ? put(residual) : 0;
    out = K.alloc(4 * n);
    const residualBits = withResidual ? t.residualBits : 0;
    if (x.gkq_reconstruct_residual(ut, pSigma, vt, out, rows, cols, k, pResidual, residualBits) !== 0)
      fail('out of WebAssembly memory');
    const result = resident(K, out, n);
    out = 0;
    return result;
  } finally {
    for (const q of ptrs) K.free(q);
    if (out) K.free(out);
  }
}

function resident(kernels: GKQKernels, ptr: number, n: number): ResidentTensor {
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

/** Reads one knot record's tensor by name: a KnotReader, or anything with the same readRecord. */
export interface RecordSource {
  readRecord(name: string): Promise<EncodedTensor>;
}

export interface ReconstructorOptions {
  /** Decoded tensors kept (least recently used evicted first); default 4. */
  cacheSize?: number;
}

/**
 * Reconstructs a knot's tensors on demand through an LRU cache of `cacheSize` (default 4) decoded tensors.
 * stats: hits (served from the cache, including a reconstruction still in flight), misses, evictions,
 * reconstructions (completed decodes).
 */
export class GKQReconstructor {
  readonly cacheSize: number;
  readonly stats: ReconstructorStats = { hits: 0, misses: 0, evictions: 0, reconstructions: 0 };
  // name -> Promise of the decoded tensor; Map insertion order = recency (least recent first)
  private readonly cache = new Map<string, Promise<DecodedTensor>>();

  constructor(readonly kernels: GKQKernels, readonly knot: RecordSource, { cacheSize = 4 }: ReconstructorOptions = {}) {
    if (!Number.isInteger(cacheSize) || cacheSize < 1)
      throw new Error(`cacheSize must be a positive integer, got ${cacheSize}`);
    this.cacheSize = cacheSize;
  }

  /** The tensor `name` as {name, shape, data: Float32Array}. */
  tensor(name: string): Promise<DecodedTensor> {
    const cached = this.cache.get(name);
    if (cached) {
      this.stats.hits++;
      this.cache.delete(name);
      this.cache.set(name, cached);
      return cached;
    }
    this.stats.misses++;
    const pending = (async (): Promise<DecodedTensor> => {
      const t = await this.knot.readRecord(name);
      const data = decodeTensor(this.kernels, t);
      this.stats.reconstructions++;
      return { name, shape: t.shape, data };
    })();
    this.cache.set(name, pending);
    pending.catch(() => { if (this.cache.get(name) === pending) this.cache.delete(name); });
    for (const oldest of this.cache.keys()) {
      if (this.cache.size <= this.cacheSize) break;
      this.cache.delete(oldest);
      this.stats.evictions++;
    }
    return pending;
  }

  /** Names in the cache, least recently used first. */
  cachedNames(): string[] { return [...this.cache.keys()]; }
}
