// The user flow graph over hand-made paths: a session's path, the top entries and their colours,
// the top destinations, the link threshold, merged and single last nodes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildFlowGraph, FLOW_COLORS, flowPathOf } from './flow-graph';

test('flowPathOf: after cuts at the first repeated name, before keeps its window, between ends on the end event', () => {
  assert.deepEqual(flowPathOf(['a', 'b', 'a', 'c'], 'after'), ['a', 'b']);
  assert.equal(flowPathOf(['a'], 'after'), null);
  assert.deepEqual(flowPathOf(['b', 'a', 'b', 's'], 'before'), ['b', 'a', 'b', 's']);
  assert.equal(flowPathOf(['s'], 'before'), null);
  assert.deepEqual(flowPathOf(['s', 'x', 'e', 'y'], 'between', 'e'), ['s', 'x', 'e']);
  assert.equal(flowPathOf(['s', 'x'], 'between', 'e'), null);
  assert.equal(flowPathOf(['s', 'x', 's', 'e'], 'between', 'e'), null); // cut at the second s
});

test('buildFlowGraph: the three most frequent entries (ties by name), each its colour, inherited downstream', () => {
  const g = buildFlowGraph([
    { names: ['a', 'x'], sessions: 5 },
    { names: ['c', 'y'], sessions: 3 },
    { names: ['b', 'x'], sessions: 3 },
    { names: ['d', 'x'], sessions: 1 }, // fourth entry: not shown, not counted
  ], 5);
  // 11 sessions start on a shown entry; x gets 5 + 3.
  assert.deepEqual(g.nodes, [
    { id: 'a::step1', label: 'a', nodeColor: FLOW_COLORS[0], percentage: 45.45, value: 5, step: 1 },
    { id: 'b::step1', label: 'b', nodeColor: FLOW_COLORS[1], percentage: 27.27, value: 3, step: 1 },
    { id: 'c::step1', label: 'c', nodeColor: FLOW_COLORS[2], percentage: 27.27, value: 3, step: 1 },
    { id: 'x::step2', label: 'x', nodeColor: FLOW_COLORS[0], percentage: 72.73, value: 8, step: 2 },
    { id: 'y::step2', label: 'y', nodeColor: FLOW_COLORS[2], percentage: 27.27, value: 3, step: 2 },
  ]);
  assert.deepEqual(g.links, [
    { source: 'a::step1', target: 'x::step2', value: 5 },
    { source: 'b::step1', target: 'x::step2', value: 3 },
    { source: 'c::step1', target: 'y::step2', value: 3 },
  ]);
});

test('buildFlowGraph: three destinations per node; links under 0.25% of the sessions dropped', () => {
  const top = buildFlowGraph([
    { names: ['a', 'b'], sessions: 4 },
    { names: ['a', 'c'], sessions: 3 },
    { names: ['a', 'd'], sessions: 2 },
    { names: ['a', 'e'], sessions: 1 },
  ], 5);
  assert.deepEqual(top.links.map((l) => [l.target, l.value]), [['b::step2', 4], ['c::step2', 3], ['d::step2', 2]]);
  // 401 sessions: a link needs ceil(401 * 0.25 / 100) = 2.
  const thin = buildFlowGraph([{ names: ['a', 'b'], sessions: 400 }, { names: ['a', 'c'], sessions: 1 }], 5);
  assert.deepEqual(thin.nodes.map((n) => n.id), ['a::step1', 'b::step2']);
  assert.deepEqual(thin.links, [{ source: 'a::step1', target: 'b::step2', value: 400 }]);
});

test('buildFlowGraph: last nodes of one event merge; a single last node stays; steps bound the depth', () => {
  const g = buildFlowGraph([{ names: ['s', 'x', 'e'], sessions: 2 }, { names: ['s', 'e'], sessions: 1 }, { names: ['s', 'y'], sessions: 1 }], 5);
  assert.deepEqual(g.nodes.map((n) => [n.id, n.value, n.step]), [['s::step1', 4, 1], ['x::step2', 2, 2], ['y::step2', 1, 2], ['e::final', 3, 3]]);
  assert.deepEqual(g.links, [
    { source: 's::step1', target: 'x::step2', value: 2 },
    { source: 's::step1', target: 'e::final', value: 1 },
    { source: 's::step1', target: 'y::step2', value: 1 },
    { source: 'x::step2', target: 'e::final', value: 2 },
  ]);
  const short = buildFlowGraph([{ names: ['s', 'x', 'e'], sessions: 2 }], 2);
  assert.deepEqual(short.nodes.map((n) => n.id), ['s::step1', 'x::step2']);
  assert.deepEqual(buildFlowGraph([], 5), { nodes: [], links: [] });
});
