// The supplier's workbench (connectivity environment): its pages, in navigation order.
import type { PageRoute } from '../pages.ts';

export const supplierRoutes: PageRoute[] = [
  { pattern: '/device-types', environment: 'connectivity', nav: { en: 'Device types', nl: 'Apparaattypes' }, load: () => import('./DeviceTypes.tsx') },
  { pattern: '/device-types/:hashId', environment: 'connectivity', load: () => import('./DeviceTypeEditor.tsx') },
  { pattern: '/report-types', environment: 'connectivity', nav: { en: 'Report types', nl: 'Rapporttypes' }, load: () => import('./ReportTypes.tsx') },
  { pattern: '/report-types/:hashId', environment: 'connectivity', load: () => import('./ReportTypeEditor.tsx') },
  { pattern: '/webhooks', environment: 'connectivity', nav: { en: 'Webhooks', nl: 'Webhooks' }, load: () => import('./Webhooks.tsx') },
  { pattern: '/webhooks/:hashId', environment: 'connectivity', load: () => import('./WebhookEditor.tsx') },
  { pattern: '/certificates', environment: 'connectivity', nav: { en: 'Certificates', nl: 'Certificaten' }, load: () => import('./Certificates.tsx') },
  { pattern: '/certificates/:hashId', environment: 'connectivity', load: () => import('./CertificateEditor.tsx') },
  { pattern: '/devices', environment: 'connectivity', nav: { en: 'Devices', nl: 'Apparaten' }, load: () => import('./Devices.tsx') },
  { pattern: '/devices/:hashId', environment: 'connectivity', load: () => import('./Device.tsx') },
  { pattern: '/live', environment: 'connectivity', nav: { en: 'Live log', nl: 'Live log' }, load: () => import('./LiveLog.tsx') },
  { pattern: '/people', environment: 'any', nav: { en: 'People', nl: 'Mensen' }, landingPage: 'users', load: () => import('./People.tsx') },
];
