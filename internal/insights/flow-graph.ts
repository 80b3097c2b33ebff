// The user flow graph (OpenPanel's sankey, its buildSankeyFromTransitions): from the sessions'
// paths of event names, the top entry events, then step by step the top destinations of each
// node, as nodes and links. Plain functions over plain data; user-flow.ts reads the paths.
// docs/insights-decisions.md ("User flow") says where this differs from OpenPanel.

/** OpenPanel's chart colours (`chartColors[].main`), given to the entry nodes in turn and inherited downstream. */
export const FLOW_COLORS = [
  '#2563EB', '#ff7557', '#7fe1d8', '#f8bc3c', '#b3596e', '#72bef4', '#ffb27a',
  '#0f7ea0', '#3ba974', '#febbb2', '#cb80dc', '#5cb7af', '#7856ff',
] as const;
/** Entry events shown (OpenPanel: 3). */
export const TOP_ENTRIES = 3;
/** Destinations followed from each node at each step (OpenPanel: 3). */
export const TOP_DESTINATIONS_PER_NODE = 3;
/** Links carrying less than this share of the shown sessions (percent) are dropped (OpenPanel: 0.25). */
export const MIN_LINK_PERCENT = 0.25;

export type FlowMode = 'after' | 'before' | 'between';

export interface FlowNode {
  id: string;
  label: string;
  nodeColor: string;
  /** Share of the shown sessions (those starting on a top entry event), percent, 2 decimals. */
  percentage: number;
  value: number;
  step: number;
}

export interface FlowLink {
  source: string;
  target: string;
  value: number;
}

/** A distinct sequence of event names and how many sessions followed it. */
export interface FlowPath {
  names: string[];
  sessions: number;
}

/** Byte order of strings (as the database's COLLATE "C"), for ties. */
const byteOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The names up to (not including) the first one seen before in the list. */
function untilRepeat(names: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const n of names) {
    if (seen.has(n)) break;
    seen.add(n);
    out.push(n);
  }
  return out;
}

/**
 * The path a session contributes, from its window of deduplicated event names (user-flow.ts:
 * `after` and `between`: from the first start event on, at most `steps` names; `before`: the at
 * most `steps` names ending with the first start event), or null when it contributes none (fewer
 * than two names; `between`: no end event after the start).
 */
export function flowPathOf(window: readonly string[], mode: FlowMode, endEvent?: string): string[] | null {
  let path: string[];
  if (mode === 'before') path = [...window];
  else {
    path = untilRepeat(window);
    if (mode === 'between') {
      const end = endEvent === undefined ? -1 : path.indexOf(endEvent, 1);
      if (end < 1) return null;
      path = path.slice(0, end + 1);
    }
  }
  return path.length >= 2 ? path : null;
}

const nodeId = (event: string, step: number) => `${event}::step${step}`;

interface Transition {
  source: string;
  target: string;
  step: number;
  value: number;
}

/**
 * The graph of `paths` over at most `steps` steps: the TOP_ENTRIES most frequent first events
 * (ties by name), then from each node its TOP_DESTINATIONS_PER_NODE most frequent next events
 * (ties by name); links under MIN_LINK_PERCENT of the shown sessions dropped; last nodes of the
 * same event merged into one `<event>::final` node.
 */
export function buildFlowGraph(paths: readonly FlowPath[], steps: number): { nodes: FlowNode[]; links: FlowLink[] } {
  const entryCounts = new Map<string, number>();
  for (const p of paths) entryCounts.set(p.names[0]!, (entryCounts.get(p.names[0]!) ?? 0) + p.sessions);
  const topEntries = [...entryCounts.entries()]
    .sort((a, b) => b[1] - a[1] || byteOrder(a[0], b[0]))
    .slice(0, TOP_ENTRIES);
  if (topEntries.length === 0) return { nodes: [], links: [] };
  const totalSessions = topEntries.reduce((sum, [, n]) => sum + n, 0);
  const shownEntries = new Set(topEntries.map(([e]) => e));

  // (step, source, target) -> sessions, over the paths that start on a shown entry.
  const transitionMap = new Map<string, Transition>();
  for (const p of paths) {
    if (!shownEntries.has(p.names[0]!)) continue;
    for (let i = 1; i < p.names.length; i++) {
      const key = JSON.stringify([i, p.names[i - 1], p.names[i]]);
      const t = transitionMap.get(key);
      if (t) t.value += p.sessions;
      else transitionMap.set(key, { source: p.names[i - 1]!, target: p.names[i]!, step: i, value: p.sessions });
    }
  }
  if (transitionMap.size === 0) return { nodes: [], links: [] };
  const byStep = new Map<number, Transition[]>();
  for (const t of transitionMap.values()) byStep.set(t.step, [...(byStep.get(t.step) ?? []), t]);

  const nodes = new Map<string, { event: string; value: number; step: number; color: string }>();
  const links: FlowLink[] = [];
  let active = new Map<string, string>(); // event -> node id at the current step
  topEntries.forEach(([event, count], i) => {
    nodes.set(nodeId(event, 1), { event, value: count, step: 1, color: FLOW_COLORS[i % FLOW_COLORS.length]! });
    active.set(event, nodeId(event, 1));
  });
  for (let step = 1; step < steps && active.size > 0; step++) {
    const next = new Map<string, string>();
    for (const [source, sourceId] of active) {
      const top = (byStep.get(step) ?? [])
        .filter((t) => t.source === source && t.target !== source)
        .sort((a, b) => b.value - a.value || byteOrder(a.target, b.target))
        .slice(0, TOP_DESTINATIONS_PER_NODE);
      for (const t of top) {
        const targetId = nodeId(t.target, step + 1);
        links.push({ source: sourceId, target: targetId, value: t.value });
        const existing = nodes.get(targetId);
        if (existing) existing.value += t.value;
        else nodes.set(targetId, { event: t.target, value: t.value, step: step + 1, color: nodes.get(sourceId)!.color });
        next.set(t.target, targetId);
      }
    }
    active = next;
  }

  const minLinkValue = Math.ceil((totalSessions * MIN_LINK_PERCENT) / 100);
  const kept = links.filter((l) => l.value >= minLinkValue);
  const referenced = new Set(kept.flatMap((l) => [l.source, l.target]));
  const incoming = new Map<string, number>();
  for (const l of kept) incoming.set(l.target, (incoming.get(l.target) ?? 0) + l.value);
  for (const [id, n] of nodes) if (n.step === 1 && !kept.some((l) => l.source === id)) referenced.delete(id);

  const percent = (value: number) => Math.round((value * 10000) / totalSessions) / 100;
  const order = (a: FlowNode, b: FlowNode) => a.step - b.step || b.value - a.value || byteOrder(a.label, b.label) || byteOrder(a.id, b.id);
  const shown: FlowNode[] = [...nodes.entries()]
    .filter(([id]) => referenced.has(id))
    .map(([id, n]) => {
      const value = n.step === 1 ? n.value : incoming.get(id) || n.value;
      return { id, label: n.event, nodeColor: n.color, percentage: percent(value), value, step: n.step };
    })
    .sort(order);

  // Last nodes (no outgoing link) of the same event become one node at the latest of their steps.
  const hasOutgoing = new Set(kept.map((l) => l.source));
  const lastByEvent = new Map<string, FlowNode[]>();
  for (const n of shown) if (!hasOutgoing.has(n.id)) lastByEvent.set(n.label, [...(lastByEvent.get(n.label) ?? []), n]);
  const remap = new Map<string, string>();
  const merged: FlowNode[] = [];
  for (const [event, group] of lastByEvent) {
    if (group.length < 2) continue;
    const value = group.reduce((sum, n) => sum + n.value, 0);
    const id = `${event}::final`;
    merged.push({ id, label: event, nodeColor: group[0]!.nodeColor, percentage: percent(value), value, step: Math.max(...group.map((n) => n.step)) });
    for (const n of group) remap.set(n.id, id);
  }
  const finalNodes = [...shown.filter((n) => !remap.has(n.id)), ...merged].sort(order);

  const linkValues = new Map<string, FlowLink>();
  for (const l of kept) {
    const source = remap.get(l.source) ?? l.source;
    const target = remap.get(l.target) ?? l.target;
    const key = JSON.stringify([source, target]);
    const existing = linkValues.get(key);
    if (existing) existing.value += l.value;
    else linkValues.set(key, { source, target, value: l.value });
  }
  const ids = new Set(finalNodes.map((n) => n.id));
  return { nodes: finalNodes, links: [...linkValues.values()].filter((l) => ids.has(l.source) && ids.has(l.target)) };
}
