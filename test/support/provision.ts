import { randomBytes } from 'node:crypto';
import type { Queryable } from '../../src/app/db.ts';
import { createEnvironment, createMachineAccount, type EnvironmentType } from '../../src/accounts/store.ts';

export interface RestClient {
  environmentHashId: string;
  request<T = Record<string, string>>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }>;
}

/** A connectivity environment on a running API, logged in over real HTTP. */
export function connectivityClient(db: Queryable, baseUrl: string): Promise<RestClient> {
  return environmentClient(db, baseUrl, 'connectivity', 'provisioned', ['ENVIRONMENT_ADMIN']);
}

/** A new environment of `type` with an account holding `rights`, logged in over real HTTP on a running API. */
export async function environmentClient(db: Queryable, baseUrl: string, type: EnvironmentType, name: string, rights: string[]): Promise<RestClient> {
  const env = await createEnvironment(db, type, name);
  const account = await createMachineAccount(db, env.hashId, rights);
  const login = await fetch(`${baseUrl}/authentication/machine-login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '5' },
    body: JSON.stringify({ assertion: account.assertion }),
  });
  const { jwt } = (await login.json()) as { jwt: string };
  return {
    environmentHashId: env.hashId,
    async request(method, url, body) {
      const res = await fetch(`${baseUrl}${url}`, {
        method,
        headers: {
          'api-version': '5',
          'environment-hash-id': env.hashId,
          authorization: `Bearer ${jwt}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
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
    name: 'provisioned',
    eventHandler,
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [],
    commandTypeHashIds: [],
  });
  if (type.status !== 200) throw new Error(`device type: ${JSON.stringify(type.body)}`);
  const identity = `dev-${randomBytes(6).toString('hex')}`;
  const key = randomBytes(16);
  const device = await api.request('POST', '/device/psk', {
    supplierDeviceIdentifier: identity,
    deviceTypeHashId: type.body.hashId,
    psk: key.toString('hex'),
    pskIdentity: identity,
  });
  if (device.status !== 200) throw new Error(`device: ${JSON.stringify(device.body)}`);
  return { hashId: device.body.hashId, identity, key };
}
