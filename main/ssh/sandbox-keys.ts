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
  const client = generateEd25519(`${label}-client`);
  const host = generateEd25519(`${label}-host`);
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

/**
 * ssh2's ed25519 keygen strips leading zero bytes of the public key, so about 1
 * in 256 pairs it makes cannot be parsed again (by ssh2 or by sshd). Such a pair
 * is thrown away and another made, so a sandbox never gets an unusable key.
 */
export function generateEd25519(comment: string, generate = ssh2.utils.generateKeyPairSync): { private: string; public: string } {
  for (let attempt = 0; attempt < 16; attempt++) {
    const pair = generate('ed25519', { comment });
    if (isUsableKey(pair.private) && isUsableKey(pair.public)) return pair;
  }
  throw new Error('could not generate a usable ed25519 key pair');
}

function isUsableKey(text: string): boolean {
  const parsed = ssh2.utils.parseKey(text);
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  return !!key && !(key instanceof Error) && key.getPublicSSH().length === 51; // 4+11 ("ssh-ed25519") + 4+32
}
