// Validate Kubernetes manifests offline: node tests/k8s/validate.mjs FILE.yaml...
//
// Two checks per document, against the schemas bundled in kubernetes-models (npm, v5):
//  1. the package's own validator (types, enums, required fields, formats);
//  2. a strict walk over the field names: every key must be a property of the schema at that
//     place, so a misspelt or misplaced field fails too (the package's validator lets unknown
//     names through). The property lists come from the package's TypeScript declarations.
// A PerconaXtraDBCluster (no schema here) is checked where it embeds core types: the probes.
// Prints one line per problem and exits 1 when there is any, 0 otherwise.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import YAML from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const modelsDir = path.dirname(require.resolve("kubernetes-models/package.json"));
const machineryDir = path.dirname(require.resolve("@kubernetes-models/apimachinery/package.json"));

// interface name -> { prop: type text }, from every .d.ts of the two packages
const interfaces = new Map();
function scan(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && e.name !== "node_modules") scan(p);
    else if (e.name.endsWith(".d.ts")) {
      parseDecl(p);
    }
  }
}
// parseDecl(file): its interfaces, under their long names (IIoK8sApiAppsV1DeploymentSpec: unique
// across API versions) and, for the top-level kinds, under the file's path.
function parseDecl(file) {
  const text = fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  const local = new Map();
  for (const m of text.matchAll(/export interface (\w+)(?: extends ([\w, ]+))? \{([\s\S]*?)\n\}/g)) {
    const props = properties(m[3]);
    if (m[2] && m[2].includes("TypeMeta")) props.apiVersion ??= "string", props.kind ??= "string";
    local.set(m[1], props);
  }
  for (const m of text.matchAll(/export type \{([^}]*)\}/g))
    for (const a of m[1].matchAll(/(\w+) as (\w+)/g)) if (local.has(a[1])) interfaces.set(a[2], local.get(a[1]));
  byFile.set(file, local);
}
// properties(body): { name: type text } of an interface body; types may span lines ({ [key: string]: X; }).
function properties(body) {
  const props = {};
  const re = /"([^"]+)"\??:\s*/g;
  let m;
  while ((m = re.exec(body))) {
    let i = re.lastIndex, depth = 0;
    while (i < body.length && !(body[i] === ";" && depth === 0)) {
      if ("{<(".includes(body[i])) depth++;
      else if ("}>)".includes(body[i])) depth--;
      i++;
    }
    props[m[1]] = body.slice(re.lastIndex, i).replace(/\s+/g, " ").replace(/; \}$/, " }").trim();
    re.lastIndex = i + 1;
  }
  return props;
}
const byFile = new Map();
scan(modelsDir);
scan(machineryDir);
const lookup = (t) => interfaces.get(t);

const problems = [];

// strict(value, typeText, where): unknown keys below `where` go to problems.
function strict(value, type, where) {
  if (value === null || value === undefined) return;
  type = type.trim();
  let m;
  if ((m = type.match(/^Array<(.+)>$/)) || (m = type.match(/^(\w+)\[\]$/))) {
    if (Array.isArray(value)) value.forEach((v, i) => strict(v, m[1], `${where}[${i}]`));
    return;
  }
  if ((m = type.match(/^\{\s*\[key: string\]: (.+?);?\s*\}$/))) {
    if (typeof value === "object") for (const [k, v] of Object.entries(value)) strict(v, m[1], `${where}.${k}`);
    return;
  }
  const props = lookup(type);
  if (!props || typeof value !== "object" || Array.isArray(value)) return;  // a leaf type
  for (const [k, v] of Object.entries(value)) {
    if (!(k in props)) problems.push(`${where}: unknown field "${k}" (${type.replace(/^II?o?K8s/, "")})`);
    else strict(v, props[k], `${where}.${k}`);
  }
}

async function modelClass(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const dir = group === "" ? path.join(modelsDir, version) : path.join(modelsDir, group, version);
  const file = path.join(dir, `${kind}.js`);
  if (!fs.existsSync(file)) return null;
  return { Cls: (await import(file))[kind], fields: (byFile.get(file.replace(/\.js$/, ".d.ts")) || new Map()).get(`I${kind}`) };
}

for (const file of process.argv.slice(2)) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  for (const d of docs) {
    if (d.errors.length) { problems.push(`${file}: YAML: ${d.errors[0].message}`); continue; }
    const obj = d.toJSON();
    if (!obj) continue;
    const where = `${file}: ${obj.kind}/${obj.metadata && obj.metadata.name}`;
    if (obj.apiVersion && obj.apiVersion.startsWith("pxc.percona.com/")) {
      const pxc = (obj.spec || {}).pxc || {};
      for (const k of ["livenessProbes", "readinessProbes"])
        if (pxc[k]) strict(pxc[k], "IIoK8sApiCoreV1Probe", `${where}.spec.pxc.${k}`);
      continue;
    }
    const model = await modelClass(obj.apiVersion || "", obj.kind || "");
    if (!model) { problems.push(`${where}: no schema for ${obj.apiVersion} ${obj.kind}`); continue; }
    try {
      new model.Cls(obj).validate();
    } catch (e) {
      problems.push(`${where}: ${e.message.split("\n").join("; ")}`);
    }
    if (!model.fields) { problems.push(`${where}: no field list for ${obj.kind}`); continue; }
    interfaces.set(`top:${obj.apiVersion}/${obj.kind}`, model.fields);
    strict(obj, `top:${obj.apiVersion}/${obj.kind}`, where);
  }
}
for (const p of problems) console.log(p);
process.exit(problems.length ? 1 : 0);
