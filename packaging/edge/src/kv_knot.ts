// A knot stored in Workers KV, one record per key, read back through KnotReader's readRange(offset, length).
// Layout "gkq-edge-knot/1", written by tools/knot_kv.mjs (keep the two in step), under a key prefix P:
//   P/meta                   JSON: format, file_bytes, records_offset, index_offset, part_bytes, n_records, sha256
//   P/head/<part>            bytes [0, records_offset): file header + header block (config, tokenizer; unused here)
//   P/record/<offset>/<part> the record at that file offset, exactly its index-entry size
//   P/tail/<part>            bytes [index_offset, file_bytes): index + trailer
// A piece longer than part_bytes (KV values are at most 25 MiB) is split into parts 0, 1, ... of part_bytes bytes.
// KnotReader asks for the trailer and the index (both in the tail, read once) and then for whole records, so every
// request maps onto one piece; anything else is an error. KnotReader checks the CRC32s, so a wrong or stale value
// is caught there. A knot under a prefix is immutable: upload a new knot under a new prefix (KV is eventually
// consistent; a reader must never mix two uploads).

export const KV_LAYOUT_FORMAT = 'gkq-edge-knot/1';
export const KV_VALUE_LIMIT = 25 * 1024 * 1024;

export interface KnotMeta {
    format: string;
    file_bytes: number;
    records_offset: number;
    index_offset: number;
    part_bytes: number;
    n_records: number;
    sha256: string;
}

/** An error that the worker answers with `status` and a JSON body {error}. */
export class HttpError extends Error {
    constructor(readonly status: number, message: string) {
        super(message);
    }
}

/** Counters of the KV reads (totals over the isolate's life). */
export interface KvStats {
    reads: number;
    bytes: number;
    ms: number;
}

function checkedMeta(value: unknown, key: string): KnotMeta {
    const m = value as Record<string, unknown>;
    const bad = (why: string): never => {
        throw new HttpError(503, `KV key '${key}': ${why}`);
    };
    if (typeof m !== 'object' || m === null) bad('not a JSON object');
    if (m.format !== KV_LAYOUT_FORMAT) bad(`format is ${JSON.stringify(m.format)}, expected '${KV_LAYOUT_FORMAT}'`);
    for (const f of ['file_bytes', 'records_offset', 'index_offset', 'part_bytes', 'n_records']) {
        const v = m[f];
        if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) bad(`field ${f} is ${JSON.stringify(v)}`);
    }
    const meta = m as unknown as KnotMeta;
    if (meta.part_bytes < 1 || meta.part_bytes > KV_VALUE_LIMIT) bad(`part_bytes ${meta.part_bytes} outside 1..${KV_VALUE_LIMIT}`);
    if (!(meta.records_offset >= 40 && meta.records_offset <= meta.index_offset && meta.index_offset + 40 <= meta.file_bytes))
        bad(`offsets (records ${meta.records_offset}, index ${meta.index_offset}) do not fit a ${meta.file_bytes}-byte knot`);
    if (typeof meta.sha256 !== 'string') bad('field sha256 is missing');
    return meta;
}

/** Reads P/meta; a missing binding or key is a 503 (the knot is not uploaded), as is a malformed one. */
export async function readMeta(kv: KVNamespace | undefined, prefix: string): Promise<KnotMeta> {
    if (!kv) throw new HttpError(503, 'the KV namespace binding GKQ_WEIGHTS is not configured (wrangler.toml kv_namespaces)');
    const key = `${prefix}/meta`;
    const text = await kv.get(key, 'text');
    if (text === null)
        throw new HttpError(503, `KV key '${key}' is missing: no knot uploaded under prefix '${prefix}' (tools/knot_kv.mjs)`);
    let parsed: unknown;
    try {
        parsed = JSON.parse(text);
    } catch (err) {
        throw new HttpError(503, `KV key '${key}': not JSON (${(err as Error).message})`);
    }
    return checkedMeta(parsed, key);
}

/** readRange(offset, length) over the layout above, counting reads, bytes and the time spent waiting on KV. */
export function kvRangeReader(kv: KVNamespace, prefix: string, meta: KnotMeta, stats: KvStats) {
    const piece = async (name: string, length: number): Promise<Uint8Array> => {
        const nParts = Math.max(1, Math.ceil(length / meta.part_bytes));
        const t0 = performance.now();
        const parts = await Promise.all(Array.from({ length: nParts }, (_, p) => kv.get(`${prefix}/${name}/${p}`, 'arrayBuffer')));
        stats.ms += performance.now() - t0;
        stats.reads += nParts;
        const out = new Uint8Array(length);
        parts.forEach((buffer, p) => {
            const key = `${prefix}/${name}/${p}`;
            if (buffer === null) throw new HttpError(503, `KV key '${key}' is missing (incomplete upload?)`);
            const want = Math.min(meta.part_bytes, length - p * meta.part_bytes);
            if (buffer.byteLength !== want) throw new HttpError(500, `KV key '${key}': ${buffer.byteLength} bytes, expected ${want}`);
            out.set(new Uint8Array(buffer), p * meta.part_bytes);
            stats.bytes += buffer.byteLength;
        });
        return out;
    };
    let tail: Promise<Uint8Array> | null = null;
    return async (offset: number, length: number): Promise<Uint8Array> => {
        if (offset >= meta.index_offset) {
            if (!tail) {
                tail = piece('tail', meta.file_bytes - meta.index_offset);
                tail.catch(() => { tail = null; });
            }
            const bytes = await tail;
            const start = offset - meta.index_offset;
            if (start + length > bytes.length)
                throw new HttpError(500, `knot '${prefix}': range ${offset}+${length} runs past the ${meta.file_bytes}-byte file`);
            return bytes.subarray(start, start + length);
        }
        if (offset < meta.records_offset)
            throw new HttpError(500, `knot '${prefix}': range ${offset}+${length} is in the header, which the worker does not read`);
        return piece(`record/${offset}`, length);
    };
}
