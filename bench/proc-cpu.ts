// CPU of the machine's processes from /proc, for the benches that split where an event's CPU
// goes: one process by pid, PostgreSQL's whole server (the postmaster, its reaped children and
// its live children), and long-lived services by their command name (nats-server, redis-server).
import { readdirSync, readFileSync } from 'node:fs';
import { TICK_US } from './e2e';

export function statOf(pid: number | string): { ppid: number; comm: string; self: number; children: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const comm = s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), comm, self: Number(f[11]) + Number(f[12]), children: Number(f[13]) + Number(f[14]) };
  } catch {
    return null; // gone
  }
}

const pids = (): string[] => readdirSync('/proc').filter((e) => e.charCodeAt(0) <= 57);

/** Seconds of CPU of the whole PostgreSQL server: the postmaster, its reaped children and its live children. */
export function serverCpuS(postmaster: number): number {
  const pm = statOf(postmaster);
  if (!pm) throw new Error(`postmaster ${postmaster} is gone`);
  let ticks = pm.self + pm.children;
  for (const e of pids()) {
    const s = statOf(e);
    if (s && s.ppid === postmaster) ticks += s.self;
  }
  return (ticks * TICK_US) / 1e6;
}

/** Seconds of CPU of every live process whose command name is `comm` (its own, not its children's). */
export function commCpuS(comm: string): number {
  let ticks = 0;
  for (const e of pids()) {
    const s = statOf(e);
    if (s && s.comm === comm) ticks += s.self;
  }
  return (ticks * TICK_US) / 1e6;
}

/** The PostgreSQL postmaster: a `postgres` process whose parent is not one. */
export function findPostmaster(): number | null {
  for (const e of pids()) {
    const s = statOf(e);
    if (s && s.comm === 'postgres' && statOf(s.ppid)?.comm !== 'postgres') return Number(e);
  }
  return null;
}

/** CPU ticks of each thread of a process (by thread id), from /proc/<pid>/task. */
export function threadTicks(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    const s = statOf(`${pid}/task/${tid}`);
    if (s) out.set(Number(tid), s.self);
  }
  return out;
}
