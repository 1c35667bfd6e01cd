// The host key an sshd presents, read off the SSH handshake and never trusted:
// the connection is refused once the key is seen. Tests that compare guests'
// identities use it.
import ssh2 from 'ssh2';

/** The host key blob the sshd on 127.0.0.1:port presents. */
export function presentedHostKey(port: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    let seen: Buffer | undefined;
    client.on('error', () => (seen ? resolve(seen) : reject(new Error(`no host key from port ${port}`))));
    client.connect({
      host: '127.0.0.1',
      port,
      username: 'root',
      readyTimeout: 60_000,
      hostVerifier: (key: Buffer) => {
        seen = Buffer.from(key);
        // Refused on purpose: the key is all this wanted.
        return false;
      },
    });
  });
}
