// The one place that says where the edge worker takes the GKQ reconstructor from (KnotReader, GKQKernels,
// GKQReconstructor): the TypeScript source wasm/ts/gkq_reconstructor.mts (wasm/README.md), bundled into the worker
// by wrangler's esbuild and type-checked with it by tsc (the '.mjs' specifier names the '.mts' source, as
// TypeScript's module resolution wants). Move it, and only this line changes.
export { GKQKernels, GKQReconstructor, KnotReader, Method } from '../../../wasm/ts/gkq_reconstructor.mjs';
export type { IndexEntry } from '../../../wasm/ts/gkq_reconstructor.mjs';
