// A bounded map for hot-path caches of pure functions: two generations of plain Maps
// instead of an LRU list. A hit in the current generation is one Map lookup; a hit in the
// previous one moves the entry forward; when the current generation is full it becomes
// the previous one and the oldest generation is dropped. At most `max` entries are held.
export class GenerationalCache<K, V> {
  private cur = new Map<K, V>();
  private old = new Map<K, V>();
  private readonly half: number;

  constructor(max: number) {
    if (!(max >= 2)) throw new Error('GenerationalCache needs max >= 2');
    this.half = Math.floor(max / 2);
  }

  get(key: K): V | undefined {
    const v = this.cur.get(key);
    if (v !== undefined) return v;
    const o = this.old.get(key);
    if (o !== undefined) this.set(key, o);
    return o;
  }

  set(key: K, value: V): void {
    if (!this.cur.has(key) && this.cur.size >= this.half) {
      this.old = this.cur;
      this.cur = new Map();
    }
    this.cur.set(key, value);
  }

  get size(): number {
    let n = this.cur.size;
    for (const k of this.old.keys()) if (!this.cur.has(k)) n++;
    return n;
  }
}
