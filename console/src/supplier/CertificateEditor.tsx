// A certificate's identifier in the editor, tried on a device certificate's subjects
// (POST /supplier-certificate/:hashId/dry-run); the certificate itself shown for download.
import { useState } from 'preact/hooks';
import type { PageProps } from '../pages.ts';
import { TextInput } from '../ui.tsx';
import { CodePage, IdentifierResult, t, type IdentifierAnswer } from './code/parts.tsx';

const attribute = (key: string, value: string) => ({ key: { encoding: 'utf8', value: key }, value: { encoding: 'utf8', value } });

export default function CertificateEditor({ params }: PageProps) {
  const [cn, setCn] = useState('device-1');
  const [org, setOrg] = useState('');
  const [serial, setSerial] = useState('');
  const subjects = () => [
    [...(cn ? [attribute('CN', cn)] : []), ...(org ? [attribute('O', org)] : []), ...(serial ? [attribute('serialNumber', serial)] : [])],
  ];
  return (
    <CodePage<IdentifierAnswer>
      kind="certificateIdentifier"
      base="/supplier-certificate/"
      hashId={params.hashId}
      field="identifier"
      listPath="/certificates"
      load={(a) => ({ name: (a.certificate as { name: string }).name, code: a.identifier as string })}
      info={(a) => {
        const pem = (a.certificate as { certificate?: string }).certificate;
        return pem ? (
          <details>
            <summary>{t('certificate')}</summary>
            <pre class="mono">{pem}</pre>
          </details>
        ) : null;
      }}
      tryInput={() => ({ certificate: { subjects: subjects() } })}
      tryFields={
        <>
          <TextInput label={t('cn')} value={cn} onInput={setCn} name="cn" />
          <TextInput label={t('org')} value={org} onInput={setOrg} name="o" />
          <TextInput label={t('serial')} value={serial} onInput={setSerial} name="serialNumber" />
        </>
      }
      result={(a) => <IdentifierResult answer={a} />}
    />
  );
}
