// The fast per-request series expose exactly what plain prom-client metrics expose after
// the same updates (label orders, label value types, reset, remove, zero, children).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Histogram, Registry } from 'prom-client';
import { FastCounter, FastHistogram } from './metrics';

function pair() {
  const fastReg = new Registry();
  const plainReg = new Registry();
  const cfg = { name: 'reqs_total', help: 'h', labelNames: ['route', 'method', 'status'] as const };
  const hcfg = { name: 'dur_seconds', help: 'h', labelNames: ['route', 'method'] as const, buckets: [0.001, 0.01, 0.1, 1] };
  return {
    fast: { reg: fastReg, c: new FastCounter({ ...cfg, registers: [fastReg] }), h: new FastHistogram({ ...hcfg, registers: [fastReg] }) },
    plain: { reg: plainReg, c: new Counter({ ...cfg, registers: [plainReg] }), h: new Histogram({ ...hcfg, registers: [plainReg] }) },
  };
}

test('fast counter and histogram expose what prom-client exposes, through reset, remove and zero', async () => {
  const { fast, plain } = pair();
  const statuses = ['202', '400', '503'];
  const values = [0.0005, 0.001, 0.004, 0.05, 0.7, 3, 0.01];
  for (const m of [fast, plain]) {
    for (let i = 0; i < 500; i++) {
      const route = i % 3 ? '/track' : '/event';
      m.c.inc({ route, method: 'POST', status: statuses[i % 3]! });
      m.h.observe({ route, method: 'POST' }, values[i % values.length]!);
      if (i % 50 === 0) m.c.inc({ status: statuses[i % 3]!, method: 'POST', route }, 2); // other key order, explicit value
      if (i % 70 === 0) m.h.observe({ method: 'POST', route }, 0.002);
      if (i % 90 === 0) m.c.labels('/x', 'GET', '200').inc();
      if (i % 90 === 0) m.h.labels('/x', 'GET').observe(0.02);
    }
  }
  assert.equal(await fast.reg.metrics(), await plain.reg.metrics());
  for (const m of [fast, plain]) {
    m.c.remove({ route: '/event', method: 'POST', status: '202' });
    m.h.remove({ route: '/event', method: 'POST' });
    for (let i = 0; i < 20; i++) {
      m.c.inc({ route: '/event', method: 'POST', status: '202' });
      m.h.observe({ route: '/event', method: 'POST' }, 0.003);
    }
    m.h.zero({ route: '/track', method: 'POST' });
    m.h.observe({ route: '/track', method: 'POST' }, 0.2);
  }
  assert.equal(await fast.reg.metrics(), await plain.reg.metrics());
  for (const m of [fast, plain]) {
    m.c.reset();
    m.h.reset();
    m.c.inc({ route: '/track', method: 'POST', status: '202' });
    m.c.inc({ route: '/track', method: 'POST', status: '202' });
    m.h.observe({ route: '/track', method: 'POST' }, 0.004);
    m.h.observe({ route: '/track', method: 'POST' }, 0.004);
  }
  assert.equal(await fast.reg.metrics(), await plain.reg.metrics());
  assert.deepEqual(await fast.reg.getMetricsAsJSON(), await plain.reg.getMetricsAsJSON());
});

test('fast metrics refuse what prom-client refuses', () => {
  const { fast, plain } = pair();
  for (const m of [fast, plain]) {
    m.c.inc({ route: '/track', method: 'POST', status: '202' });
    m.h.observe({ route: '/track', method: 'POST' }, 0.1);
  }
  for (const m of [fast, plain]) {
    assert.throws(() => m.c.inc({ route: '/track', method: 'POST', status: '202', extra: 'x' } as never), /not included/);
    assert.throws(() => m.h.observe({ route: '/track', method: 'POST' }, Number.NaN), /not a valid number/);
    assert.throws(() => m.c.inc({ route: '/track', method: 'POST', status: '202' }, -1), /decrease/);
  }
});
