// The customer's view (monitoring environment): its pages, in navigation order.
import type { PageRoute } from '../pages.ts';

export const customerRoutes: PageRoute[] = [
  { pattern: '/map', environment: 'monitoring', nav: { en: 'Map', nl: 'Kaart' }, landingPage: 'map', load: () => import('./MapPage.tsx') },
  { pattern: '/pin-groups/:hashId', environment: 'monitoring', load: () => import('./PinGroup.tsx') },
  { pattern: '/issues', environment: 'monitoring', nav: { en: 'Issues', nl: 'Meldingen' }, landingPage: 'issues', load: () => import('./Issues.tsx') },
  { pattern: '/issues/:hashId', environment: 'monitoring', load: () => import('./Issue.tsx') },
  { pattern: '/claim', environment: 'monitoring', nav: { en: 'Link a device', nl: 'Apparaat koppelen' }, load: () => import('./Claim.tsx') },
  {
    pattern: '/dashboards',
    environment: 'monitoring',
    nav: { en: 'Dashboards', nl: 'Dashboards' },
    landingPage: 'analytics',
    load: () => import('./Dashboards.tsx'),
  },
  { pattern: '/reports', environment: 'monitoring', nav: { en: 'Reports', nl: 'Rapporten' }, load: () => import('./Reports.tsx') },
  { pattern: '/exports', environment: 'monitoring', nav: { en: 'Exports', nl: 'Exports' }, load: () => import('./Exports.tsx') },
  { pattern: '/imports', environment: 'monitoring', nav: { en: 'Import', nl: 'Import' }, load: () => import('./Imports.tsx') },
  { pattern: '/audit', environment: 'monitoring', nav: { en: 'Audit log', nl: 'Auditlog' }, load: () => import('./Audit.tsx') },
  { pattern: '/settings', environment: 'monitoring', nav: { en: 'Settings', nl: 'Instellingen' }, load: () => import('./Settings.tsx') },
];
