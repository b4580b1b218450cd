// Lays a knot out as Workers KV entries (layout gkq-edge-knot/1, read by src/kv_knot.ts — keep the two in step):
//   P/meta, P/head/<part>, P/record/<offset>/<part> per record, P/tail/<part> (index + trailer).
// CLI: node tools/knot_kv.mjs KNOT --prefix P [--part-bytes N] --out DIR
//   writes DIR/bulk-000.json, ... in the format of `wrangler kv bulk put --remote` (values base64), each under 64 MiB
//   of base64, and prints the upload commands. A .knot.gz is inflated first (the worker reads the inflated layout).
// CLI: node tools/knot_kv.mjs KNOT --prefix P [--part-bytes N] --local [--state DIR]
//   (run in packaging/edge) puts the entries straight into `wrangler dev`'s local KV (DIR: .wrangler/state by
//   default; the namespace id of wrangler.toml) through the pinned miniflare: wrangler 4.86's `kv bulk put --local` re-reads
//   base64 values as UTF-8 and corrupts binary values (workers-sdk PR #15192, fixed in later versions).
// As a module: kvEntries(bytes, {prefix, partBytes}) -> {meta, entries: [{key, value: Uint8Array|string}]}.
// Only the trailer and the index are parsed here (offsets and sizes); the worker's KnotReader checks every CRC32.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';

export const KV_LAYOUT_FORMAT = 'gkq-edge-knot/1';
export const KV_VALUE_LIMIT = 25 * 1024 * 1024;
export const DEFAULT_PART_BYTES = 24 * 1024 * 1024;

function u64(view, pos, what, label) {
  const v = view.getBigUint64(pos, true);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`${label}: ${what} at offset ${pos} is ${v}, beyond 2^53`);
  return Number(v);
}

/** Record offsets and sizes of a whole knot in memory: {recordsOffset, indexOffset, records: [{offset, bytes}]}. */
export function knotPieces(bytes, label = 'knot') {
  const n = bytes.length;
  if (n < 80 || new TextDecoder().decode(bytes.subarray(0, 8)) !== 'GKQKNOT\0') throw new Error(`${label}: not a knot file`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const t = n - 40;
  if (new TextDecoder().decode(bytes.subarray(t + 32, t + 40)) !== 'KNOTIDX\0')
    throw new Error(`${label}: no trailer magic at offset ${t + 32} (truncated or unfinished knot)`);
  const recordsOffset = u64(view, t, 'records offset', label);
  const indexOffset = u64(view, t + 8, 'index offset', label);
  const indexBytes = u64(view, t + 16, 'index size', label);
  if (!(recordsOffset >= 40 && recordsOffset <= indexOffset && indexOffset + indexBytes === t))
    throw new Error(`${label}: trailer offsets (records ${recordsOffset}, index ${indexOffset} + ${indexBytes}) do not tile the ${n}-byte file`);
  if (new TextDecoder().decode(bytes.subarray(indexOffset, indexOffset + 4)) !== 'KIDX')
    throw new Error(`${label}: no index magic at offset ${indexOffset}`);
  const count = u64(view, indexOffset + 4, 'record count', label);
  if (count > indexBytes / 64) throw new Error(`${label}: index claims ${count} records in ${indexBytes} bytes`);
  const records = [];
  let pos = indexOffset + 12, next = recordsOffset;
  for (let i = 0; i < count; i++) {
    // entry: record offset u64, record size u64, CRC u32, descriptor (44 fixed bytes, dims i64 x n, name)
    if (pos + 20 + 44 > t) throw new Error(`${label}: index entry ${i} at offset ${pos} runs past the index`);
    const offset = u64(view, pos, 'record offset', label), size = u64(view, pos + 8, 'record size', label);
    const nDims = view.getUint8(pos + 20 + 41), nameBytes = view.getUint16(pos + 20 + 42, true);
    if (offset !== next) throw new Error(`${label}: record ${i} starts at ${offset}, expected ${next}`);
    records.push({ offset, bytes: size });
    next = offset + size;
    pos += 20 + 44 + 8 * nDims + nameBytes;
  }
  if (next !== indexOffset || pos !== t) throw new Error(`${label}: the index does not tile records ${recordsOffset}..${indexOffset}`);
  return { recordsOffset, indexOffset, records };
}

/** The KV entries of a knot's bytes (inflated first when gzip). */
export function kvEntries(input, { prefix, partBytes = DEFAULT_PART_BYTES, label = 'knot' }) {
  if (!prefix || prefix.endsWith('/')) throw new Error(`prefix '${prefix}' must be non-empty and not end with '/'`);
  if (!Number.isSafeInteger(partBytes) || partBytes < 1 || partBytes > KV_VALUE_LIMIT)
    throw new Error(`part size ${partBytes} outside 1..${KV_VALUE_LIMIT} (a KV value is at most 25 MiB)`);
  // plain Uint8Array views, not node Buffers (which miniflare's KV proxy does not serialize)
  let bytes = ArrayBuffer.isView(input) ? new Uint8Array(input.buffer, input.byteOffset, input.byteLength) : new Uint8Array(input);
  if (bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b) {
    const inflated = gunzipSync(bytes);
    bytes = new Uint8Array(inflated.buffer, inflated.byteOffset, inflated.byteLength);
  }
  const { recordsOffset, indexOffset, records } = knotPieces(bytes, label);
  const entries = [];
  const piece = (name, start, end) => {
    for (let p = 0, o = start; p === 0 || o < end; p++, o += partBytes)
      entries.push({ key: `${prefix}/${name}/${p}`, value: bytes.subarray(o, Math.min(end, o + partBytes)) });
  };
  piece('head', 0, recordsOffset);
  for (const r of records) piece(`record/${r.offset}`, r.offset, r.offset + r.bytes);
  piece('tail', indexOffset, bytes.length);
  const meta = { format: KV_LAYOUT_FORMAT, file_bytes: bytes.length, records_offset: recordsOffset,
                 index_offset: indexOffset, part_bytes: partBytes, n_records: records.length,
                 sha256: createHash('sha256').update(bytes).digest('hex') };
  entries.push({ key: `${prefix}/meta`, value: JSON.stringify(meta) });
  return { meta, entries };
}

// wrangler dev's local KV: Miniflare with the same persist root and namespace id as `wrangler dev` uses.
async function putLocal(entries, stateDir) {
  const toml = readFileSync('wrangler.toml', 'utf8');
  const id = /\[\[kv_namespaces\]\][^[]*?\bid\s*=\s*"([^"]+)"/.exec(toml)?.[1];
  if (!id) throw new Error('wrangler.toml: no [[kv_namespaces]] id (run in packaging/edge)');
  const { Miniflare } = await import(pathToFileURL(createRequire(join(process.cwd(), 'package.json')).resolve('miniflare')).href);
  const mf = new Miniflare({ modules: true, script: 'export default { fetch() { return new Response(null); } };',
                             defaultPersistRoot: join(stateDir, 'v3'), kvNamespaces: { GKQ_WEIGHTS: id }, cf: false });
  try {
    const kv = await mf.getKVNamespace('GKQ_WEIGHTS');
    for (const e of entries) await kv.put(e.key, e.value);  // meta last
  } finally {
    await mf.dispose();
  }
  return id;
}

async function main(argv) {
  const args = { partBytes: DEFAULT_PART_BYTES };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--prefix') args.prefix = argv[++i];
    else if (argv[i] === '--part-bytes') args.partBytes = Number(argv[++i]);
    else if (argv[i] === '--out') args.out = argv[++i];
    else if (argv[i] === '--local') args.local = true;
    else if (argv[i] === '--state') args.state = argv[++i];
    else rest.push(argv[i]);
  }
  if (rest.length !== 1 || !args.prefix || !args.out === !args.local) {
    console.error('usage: node tools/knot_kv.mjs KNOT --prefix P [--part-bytes N] (--out DIR | --local [--state DIR])');
    return 2;
  }
  const { meta, entries } = kvEntries(readFileSync(rest[0]), { prefix: args.prefix, partBytes: args.partBytes, label: rest[0] });
  if (args.local) {
    const state = args.state ?? '.wrangler/state';
    const id = await putLocal(entries, state);
    console.log(`${rest[0]}: ${meta.n_records} records -> ${entries.length} KV entries under '${args.prefix}' in the local ` +
                `namespace ${id} of ${state}; sha256 ${meta.sha256}`);
    console.log(`then: npx wrangler dev --var KNOT_KEY:${args.prefix}`);
    return 0;
  }
  mkdirSync(args.out, { recursive: true });
  const files = [];
  let batch = [], batchBytes = 0;
  const flush = () => {
    if (!batch.length) return;
    const file = join(args.out, `bulk-${String(files.length).padStart(3, '0')}.json`);
    writeFileSync(file, JSON.stringify(batch));
    files.push(file);
    batch = [];
    batchBytes = 0;
  };
  // the meta key goes last, in the last file: a reader never sees a meta whose records are not uploaded yet
  for (const e of entries) {
    const value = typeof e.value === 'string' ? e.value : Buffer.from(e.value.buffer, e.value.byteOffset, e.value.byteLength).toString('base64');
    if (batchBytes + value.length > 64 * 1024 * 1024 || batch.length >= 5000) flush();
    batch.push(typeof e.value === 'string' ? { key: e.key, value } : { key: e.key, value, base64: true });
    batchBytes += value.length;
  }
  flush();
  console.log(`${rest[0]}: ${meta.file_bytes} bytes, ${meta.n_records} records -> ${entries.length} KV entries under '${args.prefix}' ` +
              `in ${files.length} file(s); sha256 ${meta.sha256}`);
  console.log('upload, in this order (meta last):');
  for (const f of files) console.log(`  npx wrangler kv bulk put ${f} --binding GKQ_WEIGHTS --remote`);
  console.log(`then set KNOT_KEY = "${args.prefix}" in wrangler.toml [vars] and \`npx wrangler deploy\``);
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
    console.error(`knot_kv: ${err.message}`);
    process.exit(1);
  });
}
