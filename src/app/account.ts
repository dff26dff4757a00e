// Who a request acts for: the principal every layer above the kernel may name (the HTTP kit's route
// rights, the features' stores). Loaded and authenticated by src/accounts/; only the shape lives here.

export type EnvironmentType = 'monitoring' | 'connectivity';

export interface EnvironmentRecord {
  id: number;
  hashId: string;
  type: EnvironmentType;
  name: string;
  settings: Record<string, unknown>;
  createdAt: Date;
}

export interface Account {
  id: number;
  hashId: string;
  /** machine: logs in with its assertion; person: signs in to the console with a password (src/accounts/people/) */
  kind: 'machine' | 'person';
  name: string;
  rights: string[];
  /** where the account's mail goes; null when the operator gave it no address */
  email: string | null;
  locale: string | null;
  timezone: string | null;
  phone: string | null;
  company: string | null;
  environment: EnvironmentRecord;
  /** when two-factor authentication was enabled; null when it is off (src/accounts/two-factor/) */
  twoFactorEnabledAt: Date | null;
}
