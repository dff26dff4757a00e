import { messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { PageTitle } from '../ui.tsx';

const t = messages({ title: 'Map' }, { title: 'Kaart' });

export default function MapPage(_: PageProps) {
  return <section><PageTitle>{t('title')}</PageTitle></section>;
}
