// What a page is to the shell: a hash path, the environment type it belongs to, its place in the navigation,
// and its code, loaded when first opened (the editor and the map stay out of the first load).
import type { ComponentType } from 'preact';

export interface PageProps {
  /** the named parts of the path (`/device-types/:hashId` → { hashId }) */
  params: Record<string, string>;
  /** the query after `?` in the hash */
  query: URLSearchParams;
}

export interface PageRoute {
  pattern: string;
  environment: 'connectivity' | 'monitoring' | 'any';
  /** shown in the navigation when set: the label in each locale */
  nav?: { en: string; nl: string };
  /** the value of the environment's `defaultLandingPage` this page answers to (monitoring) */
  landingPage?: string;
  load: () => Promise<{ default: ComponentType<PageProps> }>;
}
