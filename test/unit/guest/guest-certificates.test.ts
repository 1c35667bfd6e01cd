// The host's certificate bundle as the sandbox gets it: PEM certificates only,
// whatever else the file holds, from SSL_CERT_FILE when the user set one; an
// oversized file is refused by name rather than copied into every sandbox.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostCertificateBundle } from '../../../main/guest/guest-certificates.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
const file = (content: string | Buffer) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'certs-'));
  dirs.push(dir);
  const f = path.join(dir, 'bundle.pem');
  fs.writeFileSync(f, content);
  return f;
};
const cert = (body: string) => `-----BEGIN CERTIFICATE-----\n${body}\n-----END CERTIFICATE-----`;

describe('the host certificate bundle for the sandbox', () => {
  it('keeps the certificates and drops everything between them', async () => {
    const f = file(`# comment\n${cert('QUJD')}\n$(touch /tmp/x)\n-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n${cert('REVG')}\n`);
    expect(await hostCertificateBundle({ SSL_CERT_FILE: f })).toBe(`${cert('QUJD')}\n${cert('REVG')}\n`);
  });

  it('refuses a bundle over 4 MiB, naming it', async () => {
    const f = file(Buffer.alloc(4 * 1024 * 1024 + 1, 65));
    await expect(hostCertificateBundle({ SSL_CERT_FILE: f })).rejects.toThrow(/bundle\.pem is 4194305 bytes, over 4194304/);
  });

  it('falls back to the system bundle when SSL_CERT_FILE holds no certificate', async () => {
    const f = file('nothing here\n');
    const bundle = await hostCertificateBundle({ SSL_CERT_FILE: f });
    // This machine has a Debian system bundle.
    expect(bundle?.startsWith('-----BEGIN CERTIFICATE-----')).toBe(fs.existsSync('/etc/ssl/certs/ca-certificates.crt'));
  });
});
