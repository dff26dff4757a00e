import { randomBytes } from 'node:crypto';
import type { Queryable } from '../../src/app/db.ts';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';

export interface RestClient {
  environmentHashId: string;
  request<T = Record<string, string>>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }>;
}

/** A connectivity environment on a running API, logged in over real HTTP. */
export async function connectivityClient(db: Queryable, baseUrl: string): Promise<RestClient> {
  const env = await createEnvironment(db, 'connectivity', 'provisioned');
  const account = await createMachineAccount(db, env.hashId, ['ENVIRONMENT_ADMIN']);
  const login = await fetch(`${baseUrl}/authentication/machine-login`, { method: 'POST', headers: { 'content-type': 'application/json', 'api-version': '5' }, body: JSON.stringify({ assertion: account.assertion }) });
  const { jwt } = (await login.json()) as { jwt: string };
  return {
    environmentHashId: env.hashId,
    async request(method, url, body) {
      const res = await fetch(`${baseUrl}${url}`, {
        method,
        headers: { 'api-version': '5', 'environment-hash-id': env.hashId, authorization: `Bearer ${jwt}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    },
  };
}

/** A device type with `eventHandler` and one PSK device of it; returns the device's credentials. */
export async function pskDevice(api: RestClient, eventHandler: string): Promise<{ hashId: string; identity: string; key: Buffer }> {
  const type = await api.request('POST', '/device-type/', {
    name: 'provisioned', eventHandler, fieldConfigurations: [], pinGroupFieldConfigurations: [], channels: [], commandTypeHashIds: [],
  });
  if (type.status !== 200) throw new Error(`device type: ${JSON.stringify(type.body)}`);
  const identity = `dev-${randomBytes(6).toString('hex')}`;
  const key = randomBytes(16);
  const device = await api.request('POST', '/device/psk', { supplierDeviceIdentifier: identity, deviceTypeHashId: type.body.hashId, psk: key.toString('hex'), pskIdentity: identity });
  if (device.status !== 200) throw new Error(`device: ${JSON.stringify(device.body)}`);
  return { hashId: device.body.hashId, identity, key };
}
