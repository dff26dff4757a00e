// Being built (issue 39/40): this page's engineer replaces this file.
import type { PageProps } from '../pages.ts';
import { PageTitle } from '../ui.tsx';

export default function WebhookEditor(_: PageProps) {
  return <section><PageTitle>WebhookEditor</PageTitle></section>;
}
