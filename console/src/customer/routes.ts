// The customer's view (monitoring environment): its pages, in navigation order.
import type { PageRoute } from '../pages.ts';

export const customerRoutes: PageRoute[] = [
  { pattern: '/map', environment: 'monitoring', nav: { en: 'Map', nl: 'Kaart' }, landingPage: 'map', load: () => import('./MapPage.tsx') },
];
