import { describe, expect, it } from 'vitest';
import { Slots } from '../../src/pipeline/slots.ts';

describe('Slots', () => {
  it('admits `limit` holders, queues the rest in order, and a double release frees one slot only', async () => {
    const slots = new Slots(2);
    const a = await slots.acquire();
    const b = await slots.acquire();
    const order: string[] = [];
    const c = slots.acquire().then((r) => { order.push('c'); return r; });
    const d = slots.acquire().then((r) => { order.push('d'); return r; });
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    expect(slots.waiting).toBe(2);
    a();
    a();
    const releaseC = await c;
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['c']);
    expect(slots.inUse).toBe(2);
    b();
    (await d)();
    releaseC();
    expect(slots.inUse).toBe(0);
    expect(slots.waiting).toBe(0);
  });
});
