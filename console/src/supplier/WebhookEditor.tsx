// A webhook's identifier in the editor, tried on a request (POST /supplier-webhook/:hashId/dry-run); its URL shown.
import { useState } from 'preact/hooks';
import type { PageProps } from '../pages.ts';
import { TextInput } from '../ui.tsx';
import { CodePage, IdentifierResult, t, type IdentifierAnswer } from './code/parts.tsx';

/** The request a third party would send, as args.request receives it: a JSON body when it parses, else text. */
function request(method: string, path: string, body: string): Record<string, unknown> {
  let parsed: { type: 'json'; data: unknown } | { type: 'string'; data: string };
  try {
    parsed = { type: 'json', data: JSON.parse(body) };
  } catch {
    parsed = { type: 'string', data: body };
  }
  const [p, q] = path.split('?');
  return {
    url: { protocol: 'https', host: location.hostname, path: p || '/', query: Object.fromEntries(new URLSearchParams(q ?? '')) },
    method: method.toUpperCase(),
    headers: { 'content-type': parsed.type === 'json' ? 'application/json' : 'text/plain' },
    ...(body === '' ? {} : { body: parsed }),
    ip: '203.0.113.10',
    certificate: null,
  };
}

export default function WebhookEditor({ params }: PageProps) {
  const [method, setMethod] = useState('POST');
  const [path, setPath] = useState('/');
  const [body, setBody] = useState('{"deviceId": "device-1"}');
  return (
    <CodePage<IdentifierAnswer>
      kind="webhookIdentifier"
      base="/supplier-webhook/"
      hashId={params.hashId}
      field="identifier"
      listPath="/webhooks"
      load={(a) => ({ name: (a.webhook as { name: string }).name, code: a.identifier as string })}
      info={(a) => (
        <dl class="webhook-url">
          <dt>{t('url')}</dt>
          <dd>
            <code>{a.url as string}</code>
            <br />
            <small class="muted">{t('urlHint')}</small>
          </dd>
        </dl>
      )}
      tryInput={() => ({ request: request(method, path, body) })}
      tryFields={
        <>
          <div class="row">
            <TextInput label={t('method')} value={method} onInput={setMethod} name="method" />
            <TextInput label={t('path')} value={path} onInput={setPath} name="path" />
          </div>
          <div class="field">
            <label for="try-body">{t('requestBody')}</label>
            <textarea id="try-body" class="mono" value={body} spellcheck={false} onInput={(e) => setBody((e.target as HTMLTextAreaElement).value)} />
          </div>
        </>
      }
      result={(a) => <IdentifierResult answer={a} />}
    />
  );
}
