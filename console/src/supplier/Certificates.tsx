// The supplier's certificates: an intermediate CA the service signs from a CSR, and the identifier that names the
// device a client certificate chained to it is for.
import { useState } from 'preact/hooks';
import { formatDate, messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { CodeList, t as common } from './code/parts.tsx';

const t = messages({ title: 'Certificates' }, { title: 'Certificaten' });

interface Row {
  certificate: { hashId: string; name: string; createdAt: string };
}

export default function Certificates(_: PageProps) {
  const [csr, setCsr] = useState('');
  return (
    <CodeList
      title={t('title')}
      kind="certificateIdentifier"
      base="/supplier-certificate/"
      editorPath="/certificates"
      rowsOf={(a) => (a.rows as Row[]).map((r) => ({ hashId: r.certificate.hashId, name: r.certificate.name, extra: r.certificate.createdAt }))}
      extraColumn={{ title: common('created'), cell: (r) => formatDate(r.extra as string) }}
      extraFields={
        <div class="field">
          <label for="csr">{common('csr')}</label>
          <textarea
            id="csr"
            class="mono"
            value={csr}
            required
            spellcheck={false}
            placeholder="-----BEGIN CERTIFICATE REQUEST-----"
            onInput={(e) => setCsr((e.target as HTMLTextAreaElement).value)}
          />
        </div>
      }
      addBody={(name, identifier) => ({ ...(name ? { name } : {}), csr, identifier })}
    />
  );
}
