// A `.wasm` import in a Worker is a compiled WebAssembly.Module (wrangler's CompiledWasm rule): Workers compile
// WebAssembly only at upload, never from bytes at run time.
declare module '*.wasm' {
    const module: WebAssembly.Module;
    export default module;
}

// wasm/ts/gkq_reconstructor.mts is runtime-neutral: GKQKernels.load also takes bytes (Node, browsers). Workers' types
// omit that overload because Workers forbid it at run time; the worker only ever passes the imported Module, so the
// overload is declared here just for the type check of the shared module.
declare namespace WebAssembly {
    interface WebAssemblyInstantiatedSource {
        instance: Instance;
        module: Module;
    }
    function instantiate(bytes: BufferSource, imports?: Imports): Promise<WebAssemblyInstantiatedSource>;
}
