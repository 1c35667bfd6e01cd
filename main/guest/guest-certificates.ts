// The sandbox trusts the certificate authorities this computer trusts. Where the
// network inspects TLS (a company proxy, or this project's CI), registries answer
// with a certificate from a local authority the host's system store holds and the
// guest's does not. Certificates are public: the host's bundle is copied in as the
// guest's own (and kept where Debian's update-ca-certificates will include it), and
// Node and pip, which bring their own stores, are pointed at it.
import fsp from 'node:fs/promises';
import { FactoryError } from '../../common/errors.js';

/** Where the host keeps its system bundle, by platform; SSL_CERT_FILE first when the user set one. */
const HOST_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/cert.pem'];
const MAX_BUNDLE_BYTES = 4 * 1024 * 1024;

export const GUEST_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
export const GUEST_HOST_CERTS = '/usr/local/share/ca-certificates/factory-host.crt';

/** The variables that point tools with their own stores at the guest's bundle. */
export const GUEST_CERT_ENV: Readonly<Record<string, string>> = { NODE_EXTRA_CA_CERTS: GUEST_BUNDLE, PIP_CERT: GUEST_BUNDLE };

/**
 * The host's bundle as PEM certificates only (anything between them is dropped),
 * or undefined when this computer has none at the usual places.
 */
export async function hostCertificateBundle(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  for (const file of [...(env.SSL_CERT_FILE ? [env.SSL_CERT_FILE] : []), ...HOST_BUNDLES]) {
    const st = await fsp.stat(file).catch(() => undefined);
    if (!st?.isFile()) continue;
    if (st.size > MAX_BUNDLE_BYTES) throw new FactoryError('InvalidData', `the certificate bundle ${file} is ${st.size} bytes, over ${MAX_BUNDLE_BYTES}`);
    const certs = (await fsp.readFile(file, 'utf8')).match(/-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+?-----END CERTIFICATE-----/g);
    if (certs?.length) return certs.join('\n') + '\n';
  }
  return undefined;
}
