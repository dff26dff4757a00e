/** Cipher-suite table in server preference order. */
import { TLS_PSK_WITH_AES_128_CCM_8 } from './psk-aes128-ccm8.ts';
import { TLS_PSK_WITH_AES_128_GCM_SHA256 } from './psk-aes128-gcm-sha256.ts';
import { TLS_PSK_WITH_AES_128_CBC_SHA256 } from './psk-aes128-cbc-sha256.ts';
import type { CipherSuite } from './types.ts';

export type { CipherSuite, RecordProtection } from './types.ts';
export { keyBlockLength } from './types.ts';
export { TLS_PSK_WITH_AES_128_CCM_8, TLS_PSK_WITH_AES_128_GCM_SHA256, TLS_PSK_WITH_AES_128_CBC_SHA256 };

export const CIPHER_SUITES: readonly CipherSuite[] = [TLS_PSK_WITH_AES_128_CCM_8, TLS_PSK_WITH_AES_128_GCM_SHA256, TLS_PSK_WITH_AES_128_CBC_SHA256];

export function cipherSuiteByName(name: string): CipherSuite | undefined {
  return CIPHER_SUITES.find((s) => s.name === name);
}

export function cipherSuiteById(id: number): CipherSuite | undefined {
  return CIPHER_SUITES.find((s) => s.id === id);
}
