import { describe, expect, it } from 'vitest';
import { KeyedSlots, Slots } from '../../src/pipeline/slots.ts';

describe('Slots', () => {
  it('admits `limit` holders, queues the rest in order, and a double release frees one slot only', async () => {
    const slots = new Slots(2);
    const a = await slots.acquire();
    const b = await slots.acquire();
    const order: string[] = [];
    const c = slots.acquire().then((r) => {
      order.push('c');
      return r;
    });
    const d = slots.acquire().then((r) => {
      order.push('d');
      return r;
    });
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

describe('KeyedSlots', () => {
  it("limits each key on its own: a key whose slots are full does not hold up another's, and an idle key is forgotten", async () => {
    const slots = new KeyedSlots(1);
    const a1 = await slots.acquire('a');
    let a2Granted = false;
    const a2 = slots.acquire('a').then((r) => {
      a2Granted = true;
      return r;
    });
    const b1 = await slots.acquire('b');
    await new Promise((r) => setImmediate(r));
    expect(a2Granted).toBe(false);
    expect([slots.inUse('a'), slots.inUse('b')]).toEqual([1, 1]);
    a1();
    (await a2)();
    b1();
    expect([slots.inUse('a'), slots.inUse('b')]).toEqual([0, 0]);
  });
});
