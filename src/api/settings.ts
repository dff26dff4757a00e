// The REST API's settings: request bodies and queries, the audit log of changes made through it, and the base map the
// console it serves may draw. Declared once: `Config`'s fields and the table in docs/configuration.md come from these
// declarations.
import type { Settings, SettingsOf } from '../app/settings.ts';

export const API_SETTINGS = {
  jsonMaxDepth: {
    kind: 'int',
    env: 'JSON_MAX_DEPTH',
    default: 32,
    min: 2,
    max: 1000,
    description:
      "deepest nesting of arrays and objects in a REST request body or query (device `fields`, a field configuration's `defaultValue`, ...); deeper is a `400 parameter_error` naming the field. Strings and member names with a NUL character or a lone UTF-16 surrogate are refused the same way",
  },
  auditLog: {
    kind: 'onOff',
    env: 'AUDIT_LOG',
    default: true,
    description:
      "`on` or `off`: every change an account makes through the API is written to the audit log (`settings` find-log) in the change's own transaction; `off` writes no log (for measuring its cost)",
  },
  mapStyleUrl: {
    kind: 'url',
    env: 'MAP_STYLE_URL',
    default: null,
    defaultText: 'unset → no base map',
    description:
      "an `http(s)` URL of a [MapLibre style](https://maplibre.org/maplibre-style-spec/) the console's map draws under the environment's pin groups and edges. Without it no request leaves the service for a tile server; with it, the style's origin is added to the console's Content-Security-Policy (`connect-src`, `img-src`)",
  },
} as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof API_SETTINGS> {}
}
