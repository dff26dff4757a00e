// The supplier's webhooks: a URL third parties post to, and the identifier that names the device each request is for.
import { messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { CodeList } from './code/parts.tsx';

const t = messages({ title: 'Webhooks', url: 'URL' }, { title: 'Webhooks', url: 'URL' });

interface Row {
  webhook: { hashId: string; name: string; createdAt: string };
  url: string;
}

export default function Webhooks(_: PageProps) {
  return (
    <CodeList
      title={t('title')}
      kind="webhookIdentifier"
      base="/supplier-webhook/"
      editorPath="/webhooks"
      rowsOf={(a) => (a.rows as Row[]).map((r) => ({ hashId: r.webhook.hashId, name: r.webhook.name, extra: r.url }))}
      extraColumn={{ title: t('url'), cell: (r) => <code class="url">{r.extra}</code> }}
      addBody={(name, identifier) => ({ name, identifier })}
    />
  );
}
