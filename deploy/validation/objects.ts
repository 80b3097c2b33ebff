// Rendered Kubernetes objects: the YAML stream `kubectl kustomize` prints, parsed into plain
// objects, and how findings name them.

import { parseAllDocuments } from 'yaml';

export type KObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
};

export class YamlError extends Error {
  override name = 'YamlError';
}

export function objectId(o: { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } }): string {
  const ns = o.metadata?.namespace ? `${String(o.metadata.namespace)}/` : '';
  return `${String(o.kind)}/${ns}${String(o.metadata?.name)}`;
}

/** Parses a multi-document YAML text into plain objects, skipping empty documents. */
export function parseYamlDocuments(text: string, source: string): unknown[] {
  const docs = parseAllDocuments(text, { merge: true, prettyErrors: true });
  if (!Array.isArray(docs)) throw new YamlError(`${source}: not a YAML stream`);
  const out: unknown[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      throw new YamlError(`${source}: YAML error: ${doc.errors.map((e) => e.message).join('; ')}`);
    }
    const value: unknown = doc.toJS({ maxAliasCount: 1000 });
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}
