// Unknown-field detection for Kubernetes objects ("strict" validation, what
// kubeconform -strict and the API server's fieldValidation=Strict do).
//
// The JSON-schema validators of kubernetes-models accept unknown properties
// (the Kubernetes OpenAPI does not forbid them), so a misspelt `readinesProbe`
// would pass. Here every object becomes a TypeScript object literal typed with
// the official API types from `kubernetes-types`, and the TypeScript compiler's
// excess-property check reports any field the API does not define. Only those
// diagnostics are used: type mismatches are left to the schema validation, and
// every scalar is written as `_` (declared `any`) so that no type error can hide
// an unknown field next to it. A field that TypeScript reports is removed and
// the check runs again, until nothing new is reported.

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export interface UnknownField {
  /** index of the object in the input list */
  index: number;
  /** JSON path inside the object, e.g. spec.template.spec.containers[0].readinesProbe */
  path: string;
  message: string;
}

const require = createRequire(import.meta.url);

// kubernetes-types folder for an API group.
function typesModule(apiVersion: string): string | undefined {
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? 'core' : apiVersion.slice(0, slash);
  const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
  const folder = group === 'core' ? 'core' : group === 'internal.apiserver.k8s.io' ? 'apiserverinternal' : group.split('.')[0];
  if (!folder) return undefined;
  try {
    require.resolve(`kubernetes-types/${folder}/${version}.d.ts`);
    return `kubernetes-types/${folder}/${version}`;
  } catch {
    return undefined;
  }
}

// A minimal standard library: the API types need arrays and nothing else, and
// skipping lib.*.d.ts keeps the check well under a second.
const MINI_LIB = `
interface Array<T> { length: number; [n: number]: T; }
interface ReadonlyArray<T> { readonly length: number; readonly [n: number]: T; }
interface Boolean {} interface Function {} interface CallableFunction {} interface NewableFunction {}
interface IArguments {} interface Number {} interface Object {} interface RegExp {} interface String {}
`;

const EXCESS_PROPERTY_CODES = new Set([2353, 2561]);

/**
 * Returns the fields of `objects` that their API type does not define. Objects
 * whose apiVersion has no kubernetes-types module are returned in `untyped`.
 */
export function findUnknownFields(objects: readonly { apiVersion?: unknown; kind?: unknown }[]): {
  unknown: UnknownField[];
  untyped: number[];
} {
  const work = objects.map((o) => structuredClone(o) as unknown);
  const all: UnknownField[] = [];
  const seen = new Set<string>();
  let untyped: number[] = [];
  for (let round = 0; round < 25; round++) {
    const r = checkOnce(work as { apiVersion?: unknown; kind?: unknown }[]);
    untyped = r.untyped;
    const fresh = r.unknown.filter((u) => !seen.has(`${u.index}:${u.path}`));
    if (fresh.length === 0) break;
    for (const u of fresh) {
      seen.add(`${u.index}:${u.path}`);
      all.push(u);
      removePath(work[u.index], u.path);
    }
  }
  all.sort((a, b) => a.index - b.index || a.path.localeCompare(b.path));
  return { unknown: all, untyped };
}

function removePath(root: unknown, p: string): void {
  const segs = p.split('.').flatMap((seg) => {
    const m = /^(.*?)((?:\[\d+\])*)$/.exec(seg);
    const out: (string | number)[] = [m?.[1] ?? seg];
    for (const idx of (m?.[2] ?? '').matchAll(/\[(\d+)\]/g)) out.push(Number(idx[1]));
    return out;
  });
  let cur: unknown = root;
  for (const seg of segs.slice(0, -1)) {
    if (cur === null || typeof cur !== 'object') return;
    cur = (cur as Record<string | number, unknown>)[seg];
  }
  const last = segs[segs.length - 1];
  if (cur !== null && typeof cur === 'object' && last !== undefined) delete (cur as Record<string | number, unknown>)[last];
}

// Object and array structure kept, every scalar replaced by `_` (any).
function literal(v: unknown, indent: string): string {
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]';
    return `[\n${v.map((x) => `${indent} ${literal(x, `${indent} `)}`).join(',\n')}\n${indent}]`;
  }
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v);
    if (entries.length === 0) return '{}';
    return `{\n${entries.map(([k, x]) => `${indent} ${JSON.stringify(k)}: ${literal(x, `${indent} `)}`).join(',\n')}\n${indent}}`;
  }
  return '_';
}

function checkOnce(objects: readonly { apiVersion?: unknown; kind?: unknown }[]): {
  unknown: UnknownField[];
  untyped: number[];
} {
  const baseDir = path.dirname(fileURLToPath(import.meta.url));
  const virtualFile = path.join(baseDir, '__strict_fields_check__.ts');
  const libFile = path.join(baseDir, '__strict_fields_lib__.d.ts');

  const imports: string[] = [];
  const decls: string[] = [];
  const lineOfIndex: number[] = [];
  const untyped: number[] = [];
  const moduleAlias = new Map<string, string>();
  objects.forEach((o, i) => {
    const mod = typeof o.apiVersion === 'string' ? typesModule(o.apiVersion) : undefined;
    if (!mod || typeof o.kind !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(o.kind)) {
      untyped.push(i);
      return;
    }
    let alias = moduleAlias.get(mod);
    if (!alias) {
      alias = `M${moduleAlias.size}`;
      moduleAlias.set(mod, alias);
      imports.push(`import type * as ${alias} from '${mod}';`);
    }
    const { apiVersion, kind, ...rest } = o as Record<string, unknown>;
    void apiVersion;
    void kind;
    decls.push(`export const o${i}: ${alias}.${o.kind} = ${literal(rest, '')};`);
    lineOfIndex.push(i);
  });
  const source = `${imports.join('\n')}\ndeclare const _: any;\n${decls.join('\n')}\n`;

  const options: ts.CompilerOptions = {
    noLib: true,
    noEmit: true,
    strict: true,
    skipLibCheck: true,
    types: [],
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    target: ts.ScriptTarget.ES2022,
  };
  const host = ts.createCompilerHost(options, true);
  const origGetSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
    if (path.resolve(fileName) === virtualFile) return ts.createSourceFile(fileName, source, languageVersion, true);
    if (path.resolve(fileName) === libFile) return ts.createSourceFile(fileName, MINI_LIB, languageVersion, true);
    return origGetSourceFile(fileName, languageVersion, onError, shouldCreate);
  };
  const origFileExists = host.fileExists.bind(host);
  host.fileExists = (f) => path.resolve(f) === virtualFile || path.resolve(f) === libFile || origFileExists(f);
  const origReadFile = host.readFile.bind(host);
  host.readFile = (f) => (path.resolve(f) === virtualFile ? source : path.resolve(f) === libFile ? MINI_LIB : origReadFile(f));

  const program = ts.createProgram({ rootNames: [libFile, virtualFile], options, host });
  const sf = program.getSourceFile(virtualFile);
  if (!sf) throw new Error('strict-fields: virtual source file missing');

  const unknown: UnknownField[] = [];
  const diagnostics = [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)];
  for (const d of diagnostics) {
    if (d.code === 2307) {
      throw new Error(`strict-fields: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')} (is kubernetes-types installed?)`);
    }
    if (!EXCESS_PROPERTY_CODES.has(d.code) || d.start === undefined) continue;
    const located = locate(sf, d.start);
    if (!located) continue;
    unknown.push({
      index: located.index,
      path: located.path,
      message: ts.flattenDiagnosticMessageText(d.messageText, ' ').replace(/'"([^"]+)"'/g, "'$1'"),
    });
  }
  return { unknown, untyped };
}

// Finds the declaration `o<N>` and the JSON path of the property at `pos`.
function locate(sf: ts.SourceFile, pos: number): { index: number; path: string } | undefined {
  let found: { index: number; path: string } | undefined;
  const visit = (node: ts.Node, index: number | undefined, segs: string[]): void => {
    if (pos < node.getStart(sf) || pos >= node.getEnd()) return;
    let nextIndex = index;
    let nextSegs = segs;
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && /^o\d+$/.test(node.name.text)) {
      nextIndex = Number(node.name.text.slice(1));
      nextSegs = [];
    } else if (ts.isPropertyAssignment(node) && (ts.isStringLiteral(node.name) || ts.isIdentifier(node.name))) {
      nextSegs = [...segs, node.name.text];
    } else if (node.parent && ts.isArrayLiteralExpression(node.parent) && index !== undefined) {
      const i = node.parent.elements.indexOf(node as ts.Expression);
      if (i >= 0 && segs.length > 0) nextSegs = [...segs.slice(0, -1), `${segs[segs.length - 1]}[${i}]`];
    }
    if (nextIndex !== undefined) found = { index: nextIndex, path: nextSegs.join('.') };
    ts.forEachChild(node, (c) => visit(c, nextIndex, nextSegs));
  };
  visit(sf, undefined, []);
  return found;
}
