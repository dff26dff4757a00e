// How many tiles of one environment are rendered at once. A render holds a database connection for its
// statements and the event loop for its drawing (in turns: store.ts), and every environment shares both:
// without a bound, one environment's burst of cold tiles (a map of a dense network opened after a write)
// took the pool's connections and the loop for seconds while other environments' requests waited (issue 38).
// Past the bound a render waits its turn, first come first served; past the waiting room it is refused with
// 429 and Retry-After, and the map asks again.

import { RateLimitError } from '../../app/errors.ts';

export interface RenderLimits {
  /** renders of one environment under way at once */
  running: number;
  /** renders of one environment waiting for a turn; past that, 429 */
  waiting: number;
  /** the Retry-After of a refused render */
  retryAfterSeconds: number;
}

/** Two at once overlap one render's statements with another's drawing; 64 waiting hold a map's screenful of tiles for several users. */
export const TILE_RENDER_LIMITS: RenderLimits = { running: 2, waiting: 64, retryAfterSeconds: 1 };

export class RenderTurns {
  private readonly environments = new Map<number, { running: number; waiting: (() => void)[] }>();
  private readonly limits: RenderLimits;

  constructor(limits: RenderLimits = TILE_RENDER_LIMITS) {
    this.limits = limits;
  }

  /** `render()` once a turn of the environment is free; a RateLimitError when too many wait already. */
  async run<T>(environmentId: number, render: () => Promise<T>): Promise<T> {
    let environment = this.environments.get(environmentId);
    if (!environment) {
      environment = { running: 0, waiting: [] };
      this.environments.set(environmentId, environment);
    }
    if (environment.running >= this.limits.running) {
      if (environment.waiting.length >= this.limits.waiting) {
        throw new RateLimitError(
          `more than ${this.limits.running + this.limits.waiting} map tiles of this environment are being drawn; ask again shortly`,
          this.limits.retryAfterSeconds,
        );
      }
      // the turn is handed over by the render that ends (running stays counted), so no newcomer overtakes the queue
      await new Promise<void>((resolve) => environment.waiting.push(resolve));
    } else {
      environment.running++;
    }
    try {
      return await render();
    } finally {
      const next = environment.waiting.shift();
      if (next) next();
      else if (--environment.running === 0) this.environments.delete(environmentId);
    }
  }
}
