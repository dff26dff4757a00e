// Polling for what happens after an answer (a worker that stores or evaluates once the device has it).

/** Asks `read` every 100 ms until `done` holds of its answer; throws naming `what` after `timeoutMs`. */
export async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
