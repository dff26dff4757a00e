import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, environmentClient, type RestClient } from '../support/provision.ts';
import { JSON_REPORT_HANDLER, ok } from './linked-device.ts';

// A link, unlink or channel mapping change reaches the workers' device cache before it is answered:
// a report the device sends right after the answer lands on the new pins (or on none), with the
// device's old copy freshly cached. Once with api and worker in one process (the worker forgets at
// once), once apart (two contexts on one queue: the worker hears it through Redis).

const PARSER = `
function handle(args: { payload: string }, exec: Exec) {
  const d = JSON.parse(args.payload) as { t: number; v: number };
  return {
    generatedAt: new Date(d.t),
    measurements: [0, 1].map((channelIndex) => ({ channelIndex, quantityHashId: VOLTAGE, generatedAt: new Date(d.t), orderOfMagnitude: 0, significand: d.v + channelIndex })),
  };
}`;

for (const layout of ['one process', 'api and worker apart'] as const) {
  describe(`link propagation, ${layout}`, () => {
    const contexts: AppContext[] = [];
    const services: RunningService[] = [];
    let gateway: RunningService;
    let db: AppContext['db'];
    let supplier: RestClient;
    let customer: RestClient;
    const device = { identity: `prop-${randomBytes(4).toString('hex')}`, key: randomBytes(16), hashId: '' };
    let clock = Date.parse('2026-11-01T00:00:00Z');

    beforeAll(async () => {
      const apiCtx = await testContext({ SANDBOX_TIMEOUT_MS: '1000' });
      contexts.push(apiCtx);
      db = apiCtx.db;
      const api = await startService(apiCtx, layout === 'one process' ? ['all'] : ['api']);
      services.push(api);
      const base = `http://127.0.0.1:${api.apiPort()}`;
      gateway = api;
      if (layout === 'api and worker apart') {
        const workerCtx = await testContext({ SANDBOX_TIMEOUT_MS: '1000', QUEUE_NAME: apiCtx.config.queueName, MONITORING_CORE_URL: base });
        contexts.push(workerCtx);
        gateway = await startService(workerCtx, ['gateway', 'worker']);
        services.push(gateway);
      }
      supplier = await connectivityClient(db, base);
      customer = await environmentClient(db, base, 'monitoring', 'utility', ['READ', 'STATIC', 'SENSORS']);
      const voltage = ok(await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: 0 })).hashId;
      const reportType = ok(
        await supplier.request<{ hashId: string }>('POST', '/supplier-report-type/', {
          name: 'r',
          fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
          parser: `const VOLTAGE = "${voltage}";\n${PARSER}`,
        }),
      ).hashId;
      const type = ok(
        await supplier.request<{ hashId: string }>('POST', '/device-type/', {
          name: 't',
          eventHandler: `const REPORT_TYPE = "${reportType}";\n${JSON_REPORT_HANDLER}`,
          fieldConfigurations: [],
          pinGroupFieldConfigurations: [],
          channels: [
            { name: 'a', defaultPinName: 'A', pinFieldConfigurations: [] },
            { name: 'b', defaultPinName: 'B', pinFieldConfigurations: [] },
          ],
          commandTypeHashIds: [],
        }),
      ).hashId;
      device.hashId = ok(
        await supplier.request<{ hashId: string }>('POST', '/device/psk', {
          supplierDeviceIdentifier: device.identity,
          deviceTypeHashId: type,
          psk: device.key.toString('hex'),
          pskIdentity: device.identity,
        }),
      ).hashId;
      const token = ok(await supplier.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [device.hashId] }))
        .claimTokens[0].claimToken;
      ok(await customer.request('POST', '/device/claim', { claimTokens: [token] }));
    });

    afterAll(async () => {
      for (const s of services.reverse()) await s.stop();
      for (const c of contexts) await closeContext(c);
    });

    /** One report over HTTPS TLS-PSK; answers where its measurements were stored: per channel, the pin's hashId or null. */
    async function report(): Promise<{ pinGroup: string | null; pins: (string | null)[] }> {
      const t = (clock += 60_000);
      const out = await opensslPsk({
        port: gateway.https!.port(),
        identity: device.identity,
        keyHex: device.key.toString('hex'),
        input: httpRequestText('POST', '/report', JSON.stringify({ t, v: 10 })),
      });
      expect(parseHttpResponse(out.stdout).status).toBe(200);
      const { rows } = await db.query<{ pin_group: string | null; pin: string | null }>(
        `SELECT pg.hash_id AS pin_group, p.hash_id AS pin FROM condition_report r JOIN device d ON d.id = r.device_id JOIN measurement m ON m.report_id = r.id
           LEFT JOIN pin_group pg ON pg.id = r.pin_group_id LEFT JOIN pin p ON p.id = m.pin_id
          WHERE d.hash_id = $1 AND r.generated_at = $2 ORDER BY m.channel_index`,
        [device.hashId, new Date(t)],
      );
      expect(rows).toHaveLength(2);
      return { pinGroup: rows[0].pin_group, pins: rows.map((r) => r.pin) };
    }

    async function pinGroupWithPins(name: string): Promise<{ hashId: string; pins: string[] }> {
      const hashId = ok(
        await customer.request<{ hashId: string }>('POST', '/graph/pin-group', {
          symbolKey: 's',
          geometry: { type: 'Point', coordinates: [6, 53] },
          fields: { id: name },
        }),
      ).hashId;
      const pins: string[] = [];
      for (const pin of ['A', 'B'])
        pins.push(ok(await customer.request<{ pin: { hashId: string } }>('POST', `/graph/pin-group/${hashId}/pin`, { fields: { id: pin } })).pin.hashId);
      return { hashId, pins };
    }

    const link = async (pg: { hashId: string; pins: string[] }) =>
      ok(
        await customer.request('POST', `/device/${device.hashId}/link`, {
          pinGroupHashId: pg.hashId,
          channelMapping: pg.pins.map((pinHashId, channel) => ({ channel, pinHashId })),
        }),
      );

    it('link, then a report at once: on the pins; unlink, then at once: on none; relink elsewhere; a deleted mapped pin takes no more values', async () => {
      const first = await pinGroupWithPins('first');
      const second = await pinGroupWithPins('second');
      // the worker has the device cached, unlinked
      expect(await report()).toEqual({ pinGroup: null, pins: [null, null] });
      await link(first);
      expect(await report()).toEqual({ pinGroup: first.hashId, pins: first.pins });
      expect((await customer.request('POST', `/device/${device.hashId}/unlink`)).status).toBe(204);
      expect(await report()).toEqual({ pinGroup: null, pins: [null, null] });
      await link(second);
      expect(await report()).toEqual({ pinGroup: second.hashId, pins: second.pins });
      // the channel mapping loses channel 1 with its pin
      expect((await customer.request('DELETE', `/graph/pin/${second.pins[1]}`)).status).toBe(204);
      const afterDelete = await report();
      expect(afterDelete).toEqual({ pinGroup: second.hashId, pins: [second.pins[0], null] });
      const { rows } = await db.query<{ pin_id: number | null }>(
        `SELECT m.pin_id FROM measurement m JOIN condition_report r ON r.id = m.report_id JOIN device d ON d.id = r.device_id
          WHERE d.hash_id = $1 AND r.generated_at = $2 AND m.channel_index = 1`,
        [device.hashId, new Date(clock)],
      );
      expect(rows).toEqual([{ pin_id: null }]);
      // the pin group goes, and its link with it
      expect((await customer.request('DELETE', `/graph/pin-group/${second.hashId}`)).status).toBe(204);
      expect(await report()).toEqual({ pinGroup: null, pins: [null, null] });
    });
  });
}
