// Validates Kubernetes manifests against the OpenAPI schemas bundled in the pinned kubernetes-models package
// (ajv-compiled validators: types, required fields, enums, formats), plus a strict pass that rejects fields the
// schema does not declare (kubectl's --validate=strict; the bundled validators allow unknown fields). A
// Kustomization is checked for its keys and that every file it names exists; a strategic-merge patch named by one
// is merged into its target (lists of named objects merged by name) and the result validated.
// usage: node validate.mjs FILE.yaml...        exit 0 when every document is valid, 1 otherwise (each error printed)
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";

const require = createRequire(import.meta.url);
const modelsDir = path.dirname(require.resolve("kubernetes-models/package.json"));
const machineryDir = path.dirname(require.resolve("@kubernetes-models/apimachinery/package.json"));
let errors = 0;
const error = (msg) => {
    console.log(`error: ${msg}`);
    errors++;
};

// "apps/v1" + "Deployment" -> kubernetes-models/apps/v1/Deployment(.js|.d.ts); core "v1" -> kubernetes-models/v1/.
function modelPath(apiVersion, kind) {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
    return path.join(modelsDir, ...(group ? [group, version] : [version]), kind);
}

// The declared fields of the first interface in a .d.ts: name -> {file, kind: "object"|"array"|"map"|"leaf"}.
const fieldCache = new Map();
function fieldsOf(dts) {
    if (fieldCache.has(dts)) return fieldCache.get(dts);
    const text = fs.readFileSync(dts, "utf8");
    const imports = new Map();
    for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
        const spec = m[2].replace(/\.js$/, "");
        const base = spec.startsWith(".") ? path.resolve(path.dirname(dts), spec)
            : spec.startsWith("@kubernetes-models/apimachinery/") ? path.join(machineryDir, spec.slice(32))
            : null;
        if (base) imports.set(m[1], base + ".d.ts");
    }
    const body = text.match(/export interface \w+(?: extends [\w, ]+)? \{\n([\s\S]*?)\n\}/);
    let fields = null;
    if (body) {
        fields = new Map();
        const lines = body[1].split("\n").filter((l) => !/^\s*(\/\*\*|\*)/.test(l));
        for (let i = 0; i < lines.length; i++) {
            const m = lines[i].match(/^    "([^"]+)"\??: (.*)$/);
            if (!m) continue;
            let type = m[2];
            let shape = "leaf";
            if (type === "{") {  // { [key: string]: T; }
                type = (lines[i + 1] || "").trim().replace(/^\[key: string\]: /, "").replace(/;$/, "");
                shape = "map";
            }
            const arr = type.match(/^Array<(\w+)>;?$/);
            const name = (arr ? arr[1] : type).replace(/;$/, "");
            const file = imports.get(name);
            fields.set(m[1], file ? { file, shape: arr ? "array" : shape === "map" ? "map" : "object" } : { shape: "leaf" });
        }
    }
    fieldCache.set(dts, fields);
    return fields;
}

function strict(data, dts, where) {
    if (data === null || typeof data !== "object" || Array.isArray(data)) return;
    const fields = fieldsOf(dts);
    if (!fields) return;  // a type alias (Quantity, IntOrString, RawExtension...): no declared fields
    for (const [key, value] of Object.entries(data)) {
        const f = fields.get(key);
        if (!f) {
            error(`${where}: unknown field "${key}"`);
            continue;
        }
        if (f.shape === "object") strict(value, f.file, `${where}.${key}`);
        else if (f.shape === "array" && Array.isArray(value)) value.forEach((v, i) => strict(v, f.file, `${where}.${key}[${i}]`));
        else if (f.shape === "map" && value && typeof value === "object")
            for (const [k, v] of Object.entries(value)) strict(v, f.file, `${where}.${key}.${k}`);
    }
}

async function validateObject(obj, where) {
    if (!obj || typeof obj !== "object" || !obj.apiVersion || !obj.kind) {
        error(`${where}: not a Kubernetes object (apiVersion and kind are required)`);
        return;
    }
    const base = modelPath(obj.apiVersion, obj.kind);
    if (!fs.existsSync(base + ".js")) {
        error(`${where}: unknown apiVersion/kind ${obj.apiVersion} ${obj.kind}`);
        return;
    }
    const mod = await import(base + ".js");
    const Model = mod[obj.kind];
    try {
        new Model(obj).validate();
    } catch (e) {
        error(`${where}: ${obj.kind} ${obj.metadata?.name ?? "?"}: ${e.message}`);
    }
    strict(obj, base + ".d.ts", `${where} ${obj.kind}`);
    if (!obj.metadata?.name) error(`${where}: ${obj.kind} without metadata.name`);
}

// Strategic merge, as far as these manifests need it: maps merge, lists of objects with "name" merge by name.
function merge(target, patch) {
    if (Array.isArray(target) && Array.isArray(patch) && patch.every((p) => p && p.name !== undefined)) {
        const out = target.map((t) => ({ ...t }));
        for (const p of patch) {
            const i = out.findIndex((t) => t.name === p.name);
            if (i >= 0) out[i] = merge(out[i], p);
            else out.push(p);
        }
        return out;
    }
    if (target && patch && typeof target === "object" && typeof patch === "object" && !Array.isArray(patch)) {
        const out = { ...target };
        for (const [k, v] of Object.entries(patch)) out[k] = k in target ? merge(target[k], v) : v;
        return out;
    }
    return patch;
}

function readDocs(file) {
    const docs = parseAllDocuments(fs.readFileSync(file, "utf8"));
    const out = [];
    docs.forEach((d, i) => {
        if (d.errors.length) error(`${file} document ${i + 1}: YAML: ${d.errors[0].message}`);
        else if (d.contents !== null) out.push(d.toJS());
    });
    return out;
}

let n_objects = 0;
for (const file of process.argv.slice(2)) {
    const docs = readDocs(file);
    for (const [i, doc] of docs.entries()) {
        const where = `${file}${docs.length > 1 ? ` document ${i + 1}` : ""}`;
        if (doc?.kind === "Kustomization") {
            const known = new Set(["apiVersion", "kind", "resources", "patches"]);
            for (const k of Object.keys(doc)) if (!known.has(k)) error(`${where}: unknown Kustomization field "${k}"`);
            const dir = path.dirname(file);
            const bases = [];
            for (const r of doc.resources ?? []) {
                const p = path.join(dir, r);
                if (!fs.existsSync(p)) error(`${where}: resource ${r} not found`);
                else bases.push(...readDocs(p));
            }
            for (const patch of doc.patches ?? []) {
                const p = path.join(dir, patch.path ?? "");
                if (!patch.path || !fs.existsSync(p)) {
                    error(`${where}: patch ${patch.path} not found`);
                    continue;
                }
                for (const pd of readDocs(p)) {
                    const target = bases.find((b) => b.kind === pd.kind && b.metadata?.name === pd.metadata?.name);
                    if (!target) error(`${where}: patch ${patch.path} matches no resource (${pd.kind} ${pd.metadata?.name})`);
                    else {
                        await validateObject(merge(target, pd), `${p} merged into ${pd.kind} ${pd.metadata?.name}`);
                        n_objects++;
                    }
                }
            }
            continue;
        }
        await validateObject(doc, where);
        n_objects++;
    }
}
const version = JSON.parse(fs.readFileSync(path.join(modelsDir, "package.json"), "utf8")).version;
console.log(`${n_objects} object(s) checked against kubernetes-models ${version}: ${errors} error(s)`);
process.exit(errors ? 1 : 0);
