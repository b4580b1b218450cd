// The few Node APIs that reconstruct_cli.mts uses, declared here so that the build needs no @types/node (an npm
// package): the library module (gkq_reconstructor.mts) stays runtime-neutral and never sees these.
declare module 'node:fs' {
  export function readFileSync(path: string): Uint8Array;
  export function writeFileSync(path: string, data: ArrayBufferView): void;
}

declare const process: {
  readonly argv: string[];
  readonly version: string;
  exit(code?: number): never;
};
