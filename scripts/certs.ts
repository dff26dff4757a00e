// `npm run certs`: creates in CERTS_DIR what is missing of the development device CA, the server
// certificate of the TLS and DTLS device ports (localhost, 127.0.0.1, ::1 and PUBLIC_HOST) and an
// example device certificate. Idempotent: files that still fit are left alone.
import path from 'node:path';
import { loadConfig } from '../src/settings.ts';
import { CERT_FILES, ensureCertificates, serverHosts } from '../src/pki/files.ts';
import { parseCli } from './cli.ts';

parseCli(
  {},
  {
    usage: `usage: npm run certs   (or: node scripts/certs.ts)
Creates in CERTS_DIR (default ./certs) what is missing of the development device CA, the server certificate of the
TLS and DTLS device ports (localhost, 127.0.0.1, ::1 and PUBLIC_HOST) and an example device certificate. Files that
still fit are left alone. Settings come from the environment, as for the service (docs/configuration.md).`,
  },
);
const config = loadConfig();
const written = await ensureCertificates(config);
const where = path.relative(process.cwd(), config.certsDir) || '.';
if (written.length === 0) {
  console.log(`${where}: certificates present and valid (server names: ${serverHosts(config).join(', ')})`);
} else {
  console.log(`${where}: wrote ${written.join(', ')} (server names: ${serverHosts(config).join(', ')})`);
  console.log(
    `try: curl --cacert ${path.join(where, CERT_FILES.caCert)} --cert ${path.join(where, CERT_FILES.deviceCert)} --key ${path.join(where, CERT_FILES.deviceKey)} https://localhost:${config.httpsDevicePort}/`,
  );
}
