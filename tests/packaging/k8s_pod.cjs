// Reads a Deployment and the ConfigMaps it uses and prints, as JSON, what a kubelet would run for its pod: each
// container's image, command, args, environment (envFrom ConfigMaps, then env), volume mounts, security context
// (the pod's, overridden by the container's), resource limits, probes (httpGet path and the port resolved through
// the container's named ports), preStop command, and the pod's grace period and annotations. Used by
// test_container_engine.sh to start the image the way the manifests say. Anything the test could not honour
// (valueFrom, a probe that is not httpGet, a port name no container port has) is an error naming the field.
// usage: NODE_PATH=/usr/share/nodejs node k8s_pod.cjs DEPLOYMENT.yaml CONFIGMAPS.yaml...   (Debian's node-yaml)
"use strict";
const fs = require("node:fs");
const YAML = require("yaml");

function fail(msg) {
    process.stderr.write(`k8s_pod: ${msg}\n`);
    process.exit(1);
}

const [deploymentFile, ...configFiles] = process.argv.slice(2);
if (!deploymentFile) fail("usage: k8s_pod.cjs DEPLOYMENT.yaml CONFIGMAPS.yaml...");
const docs = (file) => YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length) fail(`${file}: ${d.errors[0].message}`);
    return d.toJS();
});
const deployment = docs(deploymentFile).find((d) => d && d.kind === "Deployment");
if (!deployment) fail(`${deploymentFile}: no Deployment`);
const configMaps = new Map();
for (const f of configFiles)
    for (const d of docs(f)) if (d && d.kind === "ConfigMap") configMaps.set(d.metadata.name, d.data || {});

const pod = deployment.spec.template;
const spec = pod.spec;
const volumes = new Map((spec.volumes || []).map((v) => [v.name, v]));

function container(c, where) {
    const env = {};
    for (const from of c.envFrom || []) {
        if (!from.configMapRef) fail(`${where}.envFrom: only configMapRef is handled`);
        const data = configMaps.get(from.configMapRef.name);
        if (!data) fail(`${where}.envFrom: ConfigMap '${from.configMapRef.name}' is in none of ${configFiles}`);
        Object.assign(env, data);
    }
    for (const e of c.env || []) {
        if (e.valueFrom) fail(`${where}.env.${e.name}: valueFrom is not handled`);
        env[e.name] = String(e.value ?? "");
    }
    const ports = {};
    for (const p of c.ports || []) if (p.name) ports[p.name] = p.containerPort;
    const probes = {};
    for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        const p = c[kind];
        if (!p) continue;
        if (!p.httpGet) fail(`${where}.${kind}: only httpGet probes are handled`);
        let port = p.httpGet.port;
        if (typeof port === "string") {
            if (!(port in ports)) fail(`${where}.${kind}.httpGet.port: '${port}' names no port of the container`);
            port = ports[port];
        }
        probes[kind] = {
            path: p.httpGet.path, port, scheme: p.httpGet.scheme || "HTTP", periodSeconds: p.periodSeconds ?? 10,
            timeoutSeconds: p.timeoutSeconds ?? 1, failureThreshold: p.failureThreshold ?? 3,
        };
    }
    const mounts = (c.volumeMounts || []).map((m) => {
        const v = volumes.get(m.name);
        if (!v) fail(`${where}.volumeMounts.${m.name}: no such volume in the pod`);
        const type = ["emptyDir", "configMap", "secret", "persistentVolumeClaim"].find((t) => t in v) || "other";
        return {
            name: m.name, mountPath: m.mountPath, readOnly: !!m.readOnly, type,
            optional: type === "configMap" ? !!v.configMap.optional : false,
        };
    });
    const preStop = c.lifecycle?.preStop;
    if (preStop && !preStop.exec) fail(`${where}.lifecycle.preStop: only exec is handled`);
    return {
        name: c.name, image: c.image, command: c.command || null, args: c.args || null, env, ports, probes, mounts,
        securityContext: { ...(spec.securityContext || {}), ...(c.securityContext || {}) },
        limits: c.resources?.limits || {}, preStop: preStop ? preStop.exec.command : null,
    };
}

process.stdout.write(JSON.stringify({
    grace: spec.terminationGracePeriodSeconds ?? 30,
    annotations: pod.metadata?.annotations || {},
    init: (spec.initContainers || []).map((c, i) => container(c, `initContainers[${i}]`)),
    main: (spec.containers || []).map((c, i) => container(c, `containers[${i}]`)),
}, null, 1) + "\n");
