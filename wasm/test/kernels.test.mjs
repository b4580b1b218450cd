// The WebAssembly kernels against scalar JavaScript oracles written from docs/codec.md with f32 rounding after every
// operation (Math.fround: a double result rounded to f32 equals the f32 operation for +, -, *, /), so the SIMD
// kernels must match them bit for bit, at odd sizes.
import test from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels, noModule, firstBitDifference, rng } from './helpers.mjs';

const f = Math.fround;

function f16ToF32(h) {
  const sign = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

function randomFloats(n, seed, scale = 1) {
  const r = rng(seed);
  return Float32Array.from({ length: n }, () => f((r() * 2 - 1) * scale));
}

function randomBytes(n, seed) {
  const r = rng(seed);
  return Uint8Array.from({ length: n }, () => Math.floor(r() * 256));
}

test('gkq_dequantize_simd: 8-bit codes over [-max, max]', { skip: noModule }, async () => {
  const k = await loadKernels();
  for (const n of [0, 1, 15, 16, 17, 100, 4099]) {
    const q = randomBytes(n, n + 1);
    const maxVal = f(0.37 + n / 1000);
    const step = f(maxVal / 255);
    const want = Float32Array.from(q, (c) => f((2 * c - 255) * step));
    const got = k.dequantizeSimd(q, maxVal);
    assert.equal(firstBitDifference(got, want), -1, `n ${n}`);
  }
  // the ends of the range are exactly -max and max
  const ends = k.dequantizeSimd(Uint8Array.from([0, 255]), 3);
  assert.deepEqual([...ends], [-3, 3]);
});

test('gkq_matmul_reconstruct_simd: u (d_out, rank) diag(sigma) vt, summed in rank order', { skip: noModule }, async () => {
  const k = await loadKernels();
  // [9, 2100, 40]: V^T is packed in two column blocks (64 Ki floats / rank 40 = 1632 columns), plus 4 scalar tail columns
  const shapes = [[1, 1, 1], [3, 5, 2], [4, 8, 3], [5, 9, 0], [13, 37, 7], [64, 96, 17], [7, 130, 64], [9, 2100, 40]];
  for (const [dOut, dIn, rank] of shapes) {
    const u = randomFloats(dOut * rank, dOut), vt = randomFloats(rank * dIn, dIn), sigma = randomFloats(rank, 3, 10).map(Math.abs);
    const want = new Float32Array(dOut * dIn);
    for (let i = 0; i < dOut; i++)
      for (let j = 0; j < dIn; j++) {
        let acc = 0;
        for (let r = 0; r < rank; r++) acc = f(acc + f(f(sigma[r] * u[i * rank + r]) * vt[r * dIn + j]));
        want[i * dIn + j] = acc;
      }
    const got = k.matmulReconstruct(u, sigma, vt, dOut, dIn, rank);
    assert.equal(firstBitDifference(got, want), -1, `${dOut} x ${dIn} rank ${rank}`);
  }
});

test('gkq_reconstruct_residual: Q4_0 / Q8_0 residual added per block, across packed column blocks', { skip: noModule }, async () => {
  const k = await loadKernels();
  // rank 40: V^T is packed in blocks of 1632 columns (64 Ki floats / 40, a multiple of 32), so 2112 columns are two
  // blocks and the residual is added in each; 5 rows leave a partial row tile
  for (const [rows, cols, rank] of [[5, 2112, 40], [4, 64, 3], [9, 96, 0]])
    for (const bits of [4, 8]) {
      const ut = randomFloats(rank * rows, rows + bits), vt = randomFloats(rank * cols, cols), sigma = randomFloats(rank, 7, 4);
      const n = rows * cols, blockBytes = bits === 4 ? 18 : 34;
      const res = randomBytes((n / 32) * blockBytes, n + bits);
      const r = rng(bits);
      const scales = [];
      for (let b = 0; b < n / 32; b++) {  // finite f16 scales
        const h = (Math.floor(r() * 30) << 10) | Math.floor(r() * 1024) | (r() < 0.5 ? 0x8000 : 0);
        res[b * blockBytes] = h & 0xff;
        res[b * blockBytes + 1] = h >> 8;
        scales.push(f(f16ToF32(h)));
      }
      const q = (e) => {
        const b = Math.floor(e / 32), j = e % 32, blk = b * blockBytes + 2;
        if (bits === 8) return (res[blk + j] << 24) >> 24;
        return (j < 16 ? res[blk + j] & 15 : res[blk + j - 16] >> 4) - 8;
      };
      const want = new Float32Array(n);
      for (let i = 0; i < rows; i++)
        for (let j = 0; j < cols; j++) {
          let acc = 0;
          for (let t = 0; t < rank; t++) acc = f(acc + f(f(sigma[t] * ut[t * rows + i]) * vt[t * cols + j]));
          const e = i * cols + j;
          want[e] = f(acc + f(q(e) * scales[Math.floor(e / 32)]));
        }
      const got = k.withBuffers([ut, sigma, vt, res], n, (pu, ps, pv, pr, out) =>
        k.x.gkq_reconstruct_residual(pu, ps, pv, out, rows, cols, rank, pr, bits));
      assert.equal(firstBitDifference(got, want), -1, `${rows} x ${cols} rank ${rank} + Q${bits}_0`);
    }
});

test('gkq_dequantize_factors: 2/4/8-bit, packed or one per byte, delta, any start', { skip: noModule }, async () => {
  const k = await loadKernels();
  for (const bits of [2, 4, 8])
    for (const packed of [true, false])
      for (const delta of [false, true])
        for (const [len, nVectors, first] of [[1, 1, 0], [7, 3, 1], [33, 2, 3], [100, 3, 5], [4097, 2, 1], [5000, 1, 0]]) {
          const top = (1 << bits) - 1;
          const codes = randomBytes(20000, bits * 7 + len);
          if (!packed) for (let i = 0; i < codes.length; i++) codes[i] &= top;
          const scales = Float32Array.from({ length: nVectors }, (_, v) => f(0.25 + v));
          const perByte = 8 / bits;
          const code = (i) => (packed ? (codes[Math.floor(i / perByte)] >> ((i % perByte) * bits)) & top : codes[i]);
          const want = new Float32Array(nVectors * len);
          for (let v = 0; v < nVectors; v++) {
            const step = f(scales[v] / top);
            let c = 0;
            for (let i = 0; i < len; i++) {
              const s = code(first + v * len + i);
              c = delta ? (c + s) & top : s;
              want[v * len + i] = f((2 * c - top) * step);
            }
          }
          const got = k.dequantizeFactors(codes, bits, packed, first, nVectors, len, delta, scales);
          assert.equal(firstBitDifference(got, want), -1, `${bits}-bit packed ${packed} delta ${delta} len ${len} first ${first}`);
        }
});

test('gkq_block_elements, gkq_block_bytes: llama.cpp Q8_0 and Q4_0 blocks', { skip: noModule }, async () => {
  const k = await loadKernels();
  assert.deepEqual(k.block('q8_0'), { elements: 32, bytes: 34 });
  assert.deepEqual(k.block('q4_0'), { elements: 32, bytes: 18 });
  assert.equal(k.x.gkq_block_bytes(1), 0);  // f16 values are not blocks
});

test('gkq_dequantize_blocks: f16 values, Q8_0 and Q4_0 blocks', { skip: noModule }, async () => {
  const k = await loadKernels();
  for (const blocks of [1, 3, 33]) {
    const n = 32 * blocks;
    const r = rng(blocks);
    const half = () => (Math.floor(r() * 30) << 10) | Math.floor(r() * 1024) | (r() < 0.5 ? 0x8000 : 0);  // finite
    // Q8_0: f16 d, 32 int8
    const q8 = new Uint8Array(34 * blocks);
    const want8 = new Float32Array(n);
    for (let b = 0; b < blocks; b++) {
      const h = half();
      q8[34 * b] = h & 0xff;
      q8[34 * b + 1] = h >> 8;
      const d = f(f16ToF32(h));
      for (let j = 0; j < 32; j++) {
        const q = Math.floor(r() * 256) - 128;
        q8[34 * b + 2 + j] = q & 0xff;
        want8[32 * b + j] = f(q * d);
      }
    }
    assert.equal(firstBitDifference(k.dequantizeBlocks('q8_0', q8, n), want8), -1, `q8_0 x ${blocks}`);
    // Q4_0: f16 d, 16 bytes: low nibbles elements 0-15, high nibbles 16-31, value (q - 8) * d
    const q4 = new Uint8Array(18 * blocks);
    const want4 = new Float32Array(n);
    for (let b = 0; b < blocks; b++) {
      const h = half();
      q4[18 * b] = h & 0xff;
      q4[18 * b + 1] = h >> 8;
      const d = f(f16ToF32(h));
      for (let j = 0; j < 16; j++) {
        const byte = Math.floor(r() * 256);
        q4[18 * b + 2 + j] = byte;
        want4[32 * b + j] = f(((byte & 15) - 8) * d);
        want4[32 * b + j + 16] = f(((byte >> 4) - 8) * d);
      }
    }
    assert.equal(firstBitDifference(k.dequantizeBlocks('q4_0', q4, n), want4), -1, `q4_0 x ${blocks}`);
    // f16, including subnormals, infinities and signed zeros
    const halves = Uint16Array.from({ length: n + 3 }, (_, i) => (i < 4 ? [0x0001, 0x83ff, 0x7c00, 0x8000][i] : half()));
    const wantH = Float32Array.from(halves, f16ToF32);
    assert.equal(firstBitDifference(k.dequantizeBlocks('f16', new Uint8Array(halves.buffer), n + 3), wantH), -1, 'f16');
  }
});
