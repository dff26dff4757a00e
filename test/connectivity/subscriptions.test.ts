import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import { ensureCertificates } from '../../src/pki/files.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { opensslCsr, tempDir } from '../pki/support.ts';
import { addDeviceType, deviceTypeBody, expectParameterError, findAll, PARSER, type ErrorBody } from './fixtures.ts';

let api: TestApi;
beforeAll(async () => {
  // supplier certificates are signed by a device CA of this file's own
  const ctx = await testContext({ CERTS_DIR: tempDir() });
  await ensureCertificates(ctx.config);
  api = await startTestApi(ctx);
});
afterAll(async () => {
  await api.close();
  await closeContext(api.ctx);
});

interface Subscription {
  hashId: string;
  objectType: string;
  objectHashId: string;
  lastNotification: string | null;
  alertsSinceLastNotification: number;
  createdAt: string;
}
interface Row {
  objectName: string;
  subscription: Subscription;
  supplier: { hashId: string; name: string };
}

const ok = <T>(r: { status: number; body: T }): T => {
  if (r.status !== 200) throw new Error(`expected 200, got ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body;
};

const reportType = async (c: ApiClient) =>
  ok(
    await c.request<{ hashId: string }>('POST', '/supplier-report-type/', {
      name: 'Temperature',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      parser: PARSER,
    }),
  ).hashId;
const IDENTIFIER = 'function handle(args: { request: WebRequest }) { return { deviceTypeHashId: "x", deviceIdentifier: "y" }; }';
const webhook = async (c: ApiClient) =>
  ok(await c.request<{ hashId: string }>('POST', '/supplier-webhook/', { name: 'The Things Stack', identifier: IDENTIFIER })).hashId;
async function certificate(c: ApiClient): Promise<string> {
  const { csrPem } = await opensslCsr(tempDir(), 'subscribed', '/O=Acme/CN=Acme sensors CA');
  const identifier = 'function handle(args: { certificate: Certificate }) { return { deviceTypeHashId: "x", deviceIdentifier: "y" }; }';
  return ok(await c.request<{ hashId: string }>('POST', '/supplier-certificate/', { csr: csrPem, identifier })).hashId;
}

const deviceTypeGet = (c: ApiClient, hashId: string) => c.request<{ subscriptionHashId?: string }>('GET', `/device-type/${hashId}`);

describe('subscriptions to alerts on supplier objects', () => {
  it('device type add subscribes its creator: get and subscription find answer that subscription', async () => {
    const c = await api.login('connectivity');
    const added = ok(await c.request<{ hashId: string; subscriptionHashId: string }>('POST', '/device-type/', deviceTypeBody({ name: 'Rectifier' })));
    expect((await deviceTypeGet(c, added.hashId)).body.subscriptionHashId).toBe(added.subscriptionHashId);
    const rows = await findAll<Row>(c, '/subscription/');
    expect(rows).toEqual([
      {
        objectName: 'Rectifier',
        subscription: {
          hashId: added.subscriptionHashId,
          objectType: 'deviceType',
          objectHashId: added.hashId,
          lastNotification: null,
          alertsSinceLastNotification: 0,
          createdAt: expect.any(String),
        },
        supplier: { hashId: c.environmentHashId, name: 'test connectivity', enforceTwoFactorAuthentication: false, theme: null, createdAt: expect.any(String) },
      },
    ]);
  });

  it('delete ends the subscription: the device type get no longer carries subscriptionHashId', async () => {
    const c = await api.login('connectivity');
    const type = await addDeviceType(c);
    const subscriptionHashId = (await deviceTypeGet(c, type)).body.subscriptionHashId;
    expect(subscriptionHashId).toEqual(expect.any(String));
    expect((await c.request('DELETE', `/subscription/${subscriptionHashId}`)).status).toBe(204);
    expect('subscriptionHashId' in (await deviceTypeGet(c, type)).body).toBe(false);
    expect(await findAll(c, '/subscription/')).toEqual([]);
    expect((await c.request<ErrorBody>('DELETE', `/subscription/${subscriptionHashId}`)).body.key).toBe('not_found_error');
  });

  it('subscribes to each kind of object; subscribing again answers the same subscription', async () => {
    const c = await api.login('connectivity');
    const type = await addDeviceType(c);
    await c.request('DELETE', `/subscription/${(await deviceTypeGet(c, type)).body.subscriptionHashId}`);
    const objects = { deviceType: type, supplierReportType: await reportType(c), supplierWebhook: await webhook(c), supplierCertificate: await certificate(c) };
    const hashIds: Record<string, string> = {};
    for (const [objectType, objectHashId] of Object.entries(objects)) {
      hashIds[objectType] = ok(await c.request<{ hashId: string }>('POST', '/subscription/', { objectType, objectHashId })).hashId;
      expect(ok(await c.request<{ hashId: string }>('POST', '/subscription/', { objectType, objectHashId })).hashId).toBe(hashIds[objectType]);
    }
    const rows = await findAll<Row>(c, '/subscription/?sortBy=objectType&descending=false');
    expect(rows.map((r) => [r.subscription.objectType, r.subscription.objectHashId, r.subscription.hashId, r.objectName])).toEqual([
      ['deviceType', type, hashIds.deviceType, 'Cathodic protection device'],
      ['supplierCertificate', objects.supplierCertificate, hashIds.supplierCertificate, 'Acme sensors CA'],
      ['supplierReportType', objects.supplierReportType, hashIds.supplierReportType, 'Temperature'],
      ['supplierWebhook', objects.supplierWebhook, hashIds.supplierWebhook, 'The Things Stack'],
    ]);
    expect((await deviceTypeGet(c, type)).body.subscriptionHashId).toBe(hashIds.deviceType);
  });

  it('subscribes another user of the environment (a person, who never logs in) by userHashId', async () => {
    const c = await api.login('connectivity');
    const person = ok(
      await c.request<{ hashId: string }>('POST', '/user/', { name: 'On call', email: 'oncall@example.com', rights: ['ENVIRONMENT_ADMIN'] }),
    ).hashId;
    const hook = await webhook(c);
    const { hashId } = ok(
      await c.request<{ hashId: string }>('POST', '/subscription/', { objectType: 'supplierWebhook', objectHashId: hook, userHashId: person }),
    );
    expect((await findAll<Row>(c, `/subscription/?userHashId=${person}`)).map((r) => r.subscription.hashId)).toEqual([hashId]);
    expect((await findAll<Row>(c, '/subscription/')).map((r) => r.subscription.hashId)).not.toContain(hashId);
    // removing the person removes what was sent to them
    expect((await c.request('DELETE', `/user/${person}`)).status).toBe(204);
    expect((await c.request('DELETE', `/subscription/${hashId}`)).status).toBe(404);
  });

  it('no longer lists a subscription whose object was deleted', async () => {
    const c = await api.login('connectivity');
    const type = await addDeviceType(c);
    expect(await findAll(c, '/subscription/')).toHaveLength(1);
    expect((await c.request('DELETE', `/device-type/${type}`)).status).toBe(204);
    expect(await findAll(c, '/subscription/')).toEqual([]);
  });

  it('answers bad input with a parameter_error naming the field', async () => {
    const c = await api.login('connectivity');
    const hook = await webhook(c);
    expectParameterError(await c.request('POST', '/subscription/', { objectType: 'device', objectHashId: hook }), 'objectType');
    expectParameterError(await c.request('POST', '/subscription/', { objectType: 'deviceType', objectHashId: hook }), 'objectHashId');
    expectParameterError(await c.request('POST', '/subscription/', { objectType: 'supplierWebhook' }), 'objectHashId');
    expectParameterError(await c.request('POST', '/subscription/', { objectType: 'supplierWebhook', objectHashId: hook, userHashId: 'nobody' }), 'userHashId');
    expectParameterError(await c.request('GET', '/subscription/?sortBy=name'), 'sortBy');
    expect(await findAll(c, '/subscription/')).toEqual([]);
  });

  it("keeps tenants apart: another environment cannot subscribe to, list or delete these objects' subscriptions", async () => {
    const a = await api.login('connectivity');
    const b = await api.login('connectivity');
    const type = await addDeviceType(a);
    const subscriptionHashId = (await deviceTypeGet(a, type)).body.subscriptionHashId;
    expectParameterError(await b.request('POST', '/subscription/', { objectType: 'deviceType', objectHashId: type }), 'objectHashId');
    expect(await findAll(b, '/subscription/')).toEqual([]);
    expect(await findAll(b, `/subscription/?supplierHashId=${a.environmentHashId}`)).toEqual([]);
    const person = ok(
      await a.request<{ hashId: string }>('POST', '/user/', { name: 'A person', email: 'a-person@example.com', rights: ['ENVIRONMENT_ADMIN'] }),
    ).hashId;
    expectParameterError(
      await b.request('POST', '/subscription/', { objectType: 'supplierWebhook', objectHashId: await webhook(b), userHashId: person }),
      'userHashId',
    );
    expectParameterError(await b.request('GET', `/subscription/?userHashId=${person}`), 'userHashId');
    expect((await b.request<ErrorBody>('DELETE', `/subscription/${subscriptionHashId}`)).body.key).toBe('not_found_error');
    expect((await b.request<ErrorBody>('GET', `/device-type/${type}`)).status).toBe(404);
    expect((await findAll<Row>(a, '/subscription/')).map((r) => r.subscription.hashId)).toEqual([subscriptionHashId]);
  });

  it("a monitoring account finds none and cannot add (the SDK's rights: add is a connectivity ENVIRONMENT_ADMIN operation)", async () => {
    const m = await api.login('monitoring');
    expect((await m.request('GET', '/subscription/')).body).toEqual({ nextPageOffset: null, rows: [] });
    expect((await m.request<ErrorBody>('POST', '/subscription/', { objectType: 'deviceType', objectHashId: 'abc' })).body.key).toBe('right_error');
  });
});
