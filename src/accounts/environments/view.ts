// An environment as the Environment model shows it, with the default of every setting it has not set. Read by
// accounts (login, environment routes) and by monitoring (field configurations, map layers of the graph's objects).
import type { EnvironmentRecord } from '../../app/account.ts';
import type { FieldConfiguration } from '../../app/fields.ts';

export const GRAPH_KINDS = ['pinGroups', 'edges', 'grids', 'nodes', 'pins'] as const;
export type GraphKind = (typeof GRAPH_KINDS)[number];
export type GraphFieldConfigurations = Record<GraphKind, FieldConfiguration[]>;

/** What a new environment starts with; every member of the Environment model has its default here. */
export const ENVIRONMENT_DEFAULTS = {
  mapLayers: [{ name: 'Default', key: 'default', style: null, namedStyle: 'default' }],
  fieldConfigurations: Object.fromEntries(GRAPH_KINDS.map((k) => [k, [{ key: 'id', name: 'Name', type: 'string' }]])) as unknown as GraphFieldConfigurations,
  locale: 'en',
  defaultGraphRange: '1 month',
  measurementsExpirationDays: 3650,
  enforceTwoFactorAuthentication: false,
  theme: null,
  expiresAt: null,
};

type Settings = Record<string, unknown>;
const setting = <K extends keyof typeof ENVIRONMENT_DEFAULTS>(s: Settings, key: K) => (s[key] ?? ENVIRONMENT_DEFAULTS[key]) as (typeof ENVIRONMENT_DEFAULTS)[K];

/** The environment as the Environment model shows it. */
export function environmentView(env: EnvironmentRecord) {
  const s = env.settings;
  return {
    hashId: env.hashId,
    type: env.type,
    name: env.name,
    mapLayers: setting(s, 'mapLayers'),
    boundingBox: (s.boundingBox as unknown) ?? null,
    fieldConfigurations: setting(s, 'fieldConfigurations'),
    locale: setting(s, 'locale'),
    defaultGraphRange: setting(s, 'defaultGraphRange'),
    measurementsExpirationDays: setting(s, 'measurementsExpirationDays'),
    enforceTwoFactorAuthentication: setting(s, 'enforceTwoFactorAuthentication'),
    theme: setting(s, 'theme'),
    expiresAt: setting(s, 'expiresAt'),
    createdAt: env.createdAt.toISOString(),
  };
}

export function fieldConfigurationsOf(env: EnvironmentRecord): GraphFieldConfigurations {
  return setting(env.settings, 'fieldConfigurations');
}

export function mapLayerKeys(env: EnvironmentRecord): string[] {
  return setting(env.settings, 'mapLayers').map((l) => (l as { key: string }).key);
}
