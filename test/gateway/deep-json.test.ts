import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { MAX_JSON_DEPTH, typedBody } from '../../src/sandbox/web-request.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient, pskDevice } from '../support/provision.ts';
import { pskHttpRequest } from '../support/psk-client.ts';

// A device body of JSON nested deeper than anything the service copies, stores and answers with recursion can take.

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

describe('JSON nesting of a device request body', () => {
  it('up to MAX_JSON_DEPTH levels is JSON; deeper is handed over as the text it is', () => {
    expect(typedBody(Buffer.from(nested(MAX_JSON_DEPTH)), 'application/json')?.type).toBe('json');
    expect(typedBody(Buffer.from(`{"a":${nested(MAX_JSON_DEPTH - 1)}}`), 'application/json')?.type).toBe('json');
    expect(typedBody(Buffer.from(nested(MAX_JSON_DEPTH + 1)), 'application/json')).toEqual({ type: 'string', data: nested(MAX_JSON_DEPTH + 1) });
    // brackets inside strings do not nest
    expect(typedBody(Buffer.from(JSON.stringify({ s: '['.repeat(1000), t: '\\"[' })), 'application/json')?.type).toBe('json');
  });

  describe('at the running service', () => {
    let ctx: AppContext;
    let service: RunningService;
    beforeAll(async () => {
      ctx = await testContext();
      service = await startService(ctx, ['all']);
    });
    afterAll(async () => {
      await service.stop();
      await closeContext(ctx);
    });

    it('a body nested 32,000 levels deep is run once, as text, and answered 200', async () => {
      const api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
      const device = await pskDevice(
        api,
        `function handle(args: Arguments, exec: Exec) {
        if (args.event.type !== 'incomingRequest') return;
        const body = args.event.webRequest.body;
        return { statusCode: 200, body: { type: 'json', data: { type: body.type, length: String(body.data).length } } };
      }`,
      );
      const body = nested(32_000);
      const answer = await pskHttpRequest({ port: service.https!.port(), identity: device.identity, key: device.key, path: '/deep', body });
      expect(answer?.status).toBe(200);
      expect(JSON.parse(answer!.body)).toEqual({ type: 'string', length: body.length });
      const { rows } = await ctx.db.query<{ n: number; failed: number }>(
        'SELECT count(*)::int AS n, count(*) FILTER (WHERE a.failed)::int AS failed FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1',
        [device.hashId],
      );
      expect(rows[0]).toEqual({ n: 1, failed: 0 });
    });
  });
});
