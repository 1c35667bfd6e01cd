// What a stored credential may say about where and how it is sent: a header that
// frames or routes the request is refused, whatever its case.
import { describe, expect, it } from 'vitest';
import { CredentialTarget } from '../../../common/credentials.js';

const base = { upstream: 'https://api.example.com' };

describe('a custom credential header', () => {
  it.each(['Content-Length', 'transfer-encoding', 'CONNECTION', 'Host', 'TE', 'Upgrade', 'Expect'])('refuses %s, naming why', (header) => {
    const r = CredentialTarget.safeParse({ ...base, header });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toMatch(/frames or routes the request/);
  });

  it.each(['x-api-key', 'Authorization', 'X-Search-Key'])('accepts %s', (header) => {
    expect(CredentialTarget.safeParse({ ...base, header }).success).toBe(true);
  });
});
