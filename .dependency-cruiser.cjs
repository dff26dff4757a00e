// The layers of src/ (docs/architecture.md draws them), enforced by `npm run lint` and the test command.
// Every top-level folder has a place in LAYERS; a module may import its own folder and the folders before its own,
// never one after it. The composition root (the files directly in src/) may import anything and is imported by nothing.
// Type-only imports count: a type names the module it comes from as much as a value does.

/** lowest first */
const LAYERS = [
  // the kernel: configuration, logging, database and Redis clients, errors, the change bus, the clock
  'app',
  // protocol libraries: they know nothing of ours but the kernel's types (rule below), each only the ones before it
  'sandbox', 'pki', 'tls', 'dtls', 'coap',
  // the HTTP kit every route file uses: schemas, typed routes, paging, route rights, error mapping
  'http',
  // catalogue and features, each only the ones before it
  'mail', 'catalogue', 'accounts', 'audit', 'connectivity', 'monitoring', 'notifications',
  // runtimes: the worker's pipeline, the device listeners (which queue into the pipeline), the REST API
  'pipeline', 'gateway', 'api',
];
const PROTOCOL = ['sandbox', 'pki', 'tls', 'dtls', 'coap'];

const folder = (names) => `^src/(${names.join('|')})/`;

const layerRules = LAYERS.map((name, i) => ({
  name: `layer-${name}`,
  comment: `src/${name}/ may import only ${i === 0 ? 'itself' : `itself and ${LAYERS.slice(0, i).join(', ')}`} (the layers, docs/architecture.md)`,
  severity: 'error',
  from: { path: folder([name]) },
  to: { path: [...(i < LAYERS.length - 1 ? [folder(LAYERS.slice(i + 1))] : []), '^src/[^/]+\\.ts$'] },
}));

module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'protocol-kernel-types-only',
      comment: 'a protocol library takes only types from the kernel: what it needs at run time is handed to it',
      severity: 'error',
      from: { path: folder(PROTOCOL) },
      to: { path: folder(['app']), dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'unplaced-folder',
      comment: 'every folder of src/ has its place in LAYERS (.dependency-cruiser.cjs)',
      severity: 'error',
      from: { path: '^src/[^/]+/', pathNot: folder(LAYERS) },
      to: {},
    },
    {
      name: 'no-circular',
      comment: 'no two modules import each other, directly or around a loop',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist)/' },
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
    moduleSystems: ['es6'],
  },
};
