/** TLS_PSK_WITH_AES_128_CCM_8 (0xC0A8), RFC 6655: AES-128-CCM with an 8-byte tag. */
import { AeadProtection } from './aead.ts';
import type { CipherSuite } from './types.ts';

export const TLS_PSK_WITH_AES_128_CCM_8: CipherSuite = {
  id: 0xc0a8,
  name: 'TLS_PSK_WITH_AES_128_CCM_8',
  macKeyLength: 0,
  encKeyLength: 16,
  fixedIvLength: 4,
  maxOverhead: 8 + 8,
  createProtection: (_macKey, encKey, fixedIv) => new AeadProtection('aes-128-ccm', 8, encKey, fixedIv),
};
