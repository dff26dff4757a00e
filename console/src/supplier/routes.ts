// The supplier's workbench (connectivity environment): its pages, in navigation order.
import type { PageRoute } from '../pages.ts';

export const supplierRoutes: PageRoute[] = [
  { pattern: '/device-types', environment: 'connectivity', nav: { en: 'Device types', nl: 'Apparaattypes' }, load: () => import('./DeviceTypes.tsx') },
];
