// Polling for what happens after an answer (a worker that stores or evaluates once the device has it).

/** Asks `read` every `intervalMs` until `done` holds of its answer; throws naming `what` after `timeoutMs`. */
export async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, what: string, timeoutMs = 20_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Waits until `cond` holds, looking every `intervalMs`; throws after `ms`. For state the test holds in memory. */
export async function waitFor(cond: () => boolean, ms = 5000, intervalMs = 20): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
