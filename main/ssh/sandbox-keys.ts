// Fresh SSH trust for each sandbox: a client key pair (the host logs in with
// it) and the guest's host key pair (the host pins its public half before the
// guest boots). Both are handed to the guest through QEMU fw_cfg; no user
// credential ever goes that way.
import ssh2 from 'ssh2';

export interface SandboxKeys {
  /** OpenSSH private key the host authenticates with. */
  clientPrivateKey: string;
  /** authorized_keys line for the guest. */
  clientPublicKey: string;
  /** OpenSSH private key sshd in the guest serves. */
  hostPrivateKey: string;
  /** "ssh-ed25519 AAAA..." the host pins. */
  hostPublicKey: string;
}

export function generateSandboxKeys(label = 'factory-sandbox'): SandboxKeys {
  const client = ssh2.utils.generateKeyPairSync('ed25519', { comment: `${label}-client` });
  const host = ssh2.utils.generateKeyPairSync('ed25519', { comment: `${label}-host` });
  return {
    clientPrivateKey: client.private,
    clientPublicKey: client.public.trim() + '\n',
    hostPrivateKey: host.private,
    hostPublicKey: host.public.trim(),
  };
}

/** The SSH wire blob of a public key ("ssh-ed25519 AAAA..." form), which ssh2's hostVerifier receives. */
export function publicKeyBlob(publicKey: string): Buffer {
  const parsed = ssh2.utils.parseKey(publicKey);
  if (parsed instanceof Error) throw new Error(`not a public key: ${parsed.message}`);
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!key) throw new Error('not a public key');
  return key.getPublicSSH();
}
