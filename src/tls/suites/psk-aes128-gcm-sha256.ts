/** TLS_PSK_WITH_AES_128_GCM_SHA256 (0x00A8), RFC 5487 / RFC 5288: AES-128-GCM with a 16-byte tag. */
import { AeadProtection } from './aead.ts';
import type { CipherSuite } from './types.ts';

export const TLS_PSK_WITH_AES_128_GCM_SHA256: CipherSuite = {
  id: 0x00a8,
  name: 'TLS_PSK_WITH_AES_128_GCM_SHA256',
  macKeyLength: 0,
  encKeyLength: 16,
  fixedIvLength: 4,
  maxOverhead: 8 + 16,
  createProtection: (_macKey, encKey, fixedIv) => new AeadProtection('aes-128-gcm', 16, encKey, fixedIv),
};
