// How a device gets in and who may take it: its credentials as its last request showed them (a PSK identity or a
// client certificate; a key is never shown, the service keeps it sealed), a claim token for a customer, and the
// firmware of its device type with what its last answer offered.
import { useState } from 'preact/hooks';
import { api } from '../../api.ts';
import { formatDate, formatNumber, messages } from '../../i18n.ts';
import { Empty, ErrorBox, Loading, useAsync } from '../../ui.tsx';
import { Ago, Json } from '../parts.tsx';
import type { ActivityDetail, Firmware } from './types.ts';

const t = messages(
  {
    noRequest: 'The device has not contacted the service yet: its credentials show here after its first request.',
    psk: 'Pre-shared key (TLS-PSK / DTLS-PSK)',
    identity: 'PSK identity',
    keyNote: 'The key itself is kept sealed and is never shown; to change it, add the device again with a new key.',
    certificate: 'Client certificate',
    certNote: 'Devices with a certificate are identified by the identifier code of one of your certificates (Certificates page).',
    lastRequest: 'Last request',
    unknown: 'The last request carried neither a PSK identity nor a client certificate (a webhook identified it).',
    claimIntro: 'A customer claims this device into their monitoring environment with a claim token. A new token makes the older ones stop working.',
    claim: 'Make a claim token',
    token: 'Claim token',
    claimedBy: 'Claimed by {name}: it cannot get a new claim token while claimed.',
    firmwareIntro: 'Images of this device type. Your event handler offers one with exec.offerFirmware; the device downloads it on the port it came in on.',
    version: 'Version',
    size: 'Size',
    sha: 'SHA-256',
    added: 'Added',
    offered: 'Offered in the last answer',
    notOffered: 'The last answer offered no firmware.',
    installed: 'The version a device runs is what it reports; keep it in a device field from your handler to see it here under Fields.',
    caption: 'Firmware of this device type',
    bytes: '{n} bytes',
  },
  {
    noRequest: 'Het apparaat heeft de service nog niet benaderd: de inloggegevens verschijnen hier na het eerste verzoek.',
    psk: 'Pre-shared key (TLS-PSK / DTLS-PSK)',
    identity: 'PSK-identiteit',
    keyNote: 'De sleutel zelf blijft verzegeld en wordt nooit getoond; voeg het apparaat opnieuw toe met een nieuwe sleutel om hem te wijzigen.',
    certificate: 'Clientcertificaat',
    certNote: 'Apparaten met een certificaat worden herkend door de identificatiecode van een van je certificaten (pagina Certificaten).',
    lastRequest: 'Laatste verzoek',
    unknown: 'Het laatste verzoek had geen PSK-identiteit en geen clientcertificaat (een webhook herkende het).',
    claimIntro: 'Een klant claimt dit apparaat in zijn monitoringomgeving met een claimtoken. Een nieuw token maakt de oudere ongeldig.',
    claim: 'Claimtoken maken',
    token: 'Claimtoken',
    claimedBy: 'Geclaimd door {name}: zolang het geclaimd is, krijgt het geen nieuw claimtoken.',
    firmwareIntro:
      'Images van dit apparaattype. Je event handler biedt er een aan met exec.offerFirmware; het apparaat downloadt het via de poort waarop het binnenkwam.',
    version: 'Versie',
    size: 'Grootte',
    sha: 'SHA-256',
    added: 'Toegevoegd',
    offered: 'Aangeboden in het laatste antwoord',
    notOffered: 'Het laatste antwoord bood geen firmware aan.',
    installed: 'De versie die een apparaat draait is wat het zelf meldt; bewaar die vanuit je handler in een apparaatveld om hem hier onder Velden te zien.',
    caption: 'Firmware van dit apparaattype',
    bytes: '{n} bytes',
  },
);

export function Credentials({ last }: { last: ActivityDetail | null }) {
  const request = last?.activity.triggerData.request?.request;
  if (!last || !request) return <p class="muted">{t('noRequest')}</p>;
  return (
    <div>
      {request.pskIdentityHint ? (
        <dl>
          <dt>{t('psk')}</dt>
          <dd>
            {t('identity')}: <code>{request.pskIdentityHint}</code>
          </dd>
        </dl>
      ) : request.certificate ? (
        <>
          <p>
            <strong>{t('certificate')}</strong>
          </p>
          <Json value={request.certificate} />
          <p class="muted small">{t('certNote')}</p>
        </>
      ) : (
        <p>{t('unknown')}</p>
      )}
      {request.pskIdentityHint && <p class="muted small">{t('keyNote')}</p>}
      <p class="small">
        {t('lastRequest')}: <Ago iso={last.activity.createdAt} /> ({formatDate(last.activity.createdAt)})
      </p>
    </div>
  );
}

export function ClaimToken({ deviceHashId, claimedBy }: { deviceHashId: string; claimedBy: string | null }) {
  const [token, setToken] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const make = async () => {
    setBusy(true);
    setError(null);
    try {
      const answer = await api<{ claimTokens: { deviceHashId: string; claimToken: string }[] }>('POST', '/device/claim-tokens', {
        body: { deviceHashIds: [deviceHashId] },
      });
      setToken(answer.claimTokens[0]?.claimToken ?? null);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div>
      <p>{t('claimIntro')}</p>
      {claimedBy && <p class="warn">{t('claimedBy', { name: claimedBy })}</p>}
      <button type="button" onClick={make} disabled={busy}>
        {t('claim')}
      </button>
      <ErrorBox error={error} />
      {token && (
        <p role="status">
          {t('token')}:{' '}
          <code class="token" data-testid="claim-token">
            {token}
          </code>
        </p>
      )}
    </div>
  );
}

/** The `version=` of an x-firmware answer header (`/firmware/<hashId>; sha256=…; size=…; version=…`). */
function offeredVersion(header: string | undefined): string | null {
  if (!header) return null;
  const m = /version=([^;]*)/.exec(header);
  return m ? decodeURIComponent(m[1]) : header;
}

export function FirmwarePart({ deviceTypeHashId, last }: { deviceTypeHashId: string; last: ActivityDetail | null }) {
  const { data, error, loading, reload } = useAsync(
    (signal) =>
      api<{ rows: { firmware: Firmware }[] }>('GET', '/firmware/', {
        signal,
        query: { deviceTypeHashId, rowsPerPage: 100, sortBy: 'createdAt', descending: true },
      }),
    [deviceTypeHashId],
  );
  const headers = last?.activity.triggerData.request?.response?.headers ?? {};
  const offered = offeredVersion(headers['x-firmware']);
  return (
    <div>
      <p class="muted small">{t('firmwareIntro')}</p>
      {last && (
        <p>
          {offered ? (
            <>
              {t('offered')}: <strong>{offered}</strong>
            </>
          ) : (
            t('notOffered')
          )}
        </p>
      )}
      <ErrorBox error={error} onRetry={reload} />
      {loading && !data && <Loading />}
      {data &&
        (data.rows.length === 0 ? (
          <Empty />
        ) : (
          <table>
            <caption class="sr-only">{t('caption')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('version')}</th>
                <th scope="col">{t('size')}</th>
                <th scope="col">{t('sha')}</th>
                <th scope="col">{t('added')}</th>
              </tr>
            </thead>
            <tbody>
              {data.rows.map(({ firmware: f }) => (
                <tr key={f.hashId}>
                  <td>
                    {f.version}
                    {offered === f.version && (
                      <>
                        {' '}
                        <span class="badge ok">{t('offered')}</span>
                      </>
                    )}
                  </td>
                  <td>{t('bytes', { n: formatNumber(f.size) })}</td>
                  <td>
                    <code class="small">{f.sha256.slice(0, 16)}…</code>
                  </td>
                  <td>
                    <Ago iso={f.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
      <p class="muted small">{t('installed')}</p>
    </div>
  );
}
