// Being built (issue 39/40): this page's engineer replaces this file.
import type { PageProps } from '../pages.ts';
import { PageTitle } from '../ui.tsx';

export default function DeviceTypeEditor(_: PageProps) {
  return <section><PageTitle>DeviceTypeEditor</PageTitle></section>;
}
