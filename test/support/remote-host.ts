// A stand-in for a remote sandbox host on this machine: libvirt's daemons
// (started without systemd, reused when already running) and an OpenSSH server
// on 127.0.0.1 with its own host key, config and authorized_keys in a temp
// folder. Tests reach libvirt only through that SSH server, never through the
// local socket. Installs nothing: scripts/ensure-system.sh does (for `test`).
//
// Two things make this machine look like a Debian KVM host to libvirt:
// - /dev/kvm here opens but runs no guest. libvirtd runs in its own mount
//   namespace where /dev/kvm is a device node nobody may open: its QEMU user
//   finds KVM unusable and its probe finds no KVM, so the cached capabilities
//   stay valid. Anything its QEMU user can open there (/dev/null, say) makes
//   libvirt see KVM "usable" but probe none, and probe QEMU again on every
//   capabilities call (4 s each, 20 s and more per domain).
// - guestfwd runs a command per guest connection, which libvirt's default
//   QEMU seccomp filter (spawn=deny) kills; the namespace sees a qemu.conf
//   with `seccomp_sandbox = 0`, the setting a real host needs too.
// The system's own files are not changed.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync, chmodSync, rmSync, symlinkSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import ssh2 from 'ssh2';
import { inject } from 'vitest';
import { LibvirtSandboxDriver } from '../../main/remote/libvirt-sandbox-driver.js';
import { SshHost, type SshHostTarget } from '../../main/remote/ssh-host.js';
import type { SandboxHostSetting } from '../../main/state/settings.js';
import { takeLock } from '../../main/vm/file-lock.js';

const run = promisify(execFile);

export interface RemoteHostRig {
  port: number;
  username: 'root';
  /** The client's private key (OpenSSH PEM) and the file it is in. */
  privateKey: string;
  keyFile: string;
  /** The stand-in host's key: "SHA256:..." as ssh-keygen -l prints it, and the public line. */
  hostKeyFingerprint: string;
  hostPublicKey: string;
  /** A folder on the "remote" host for the driver's images and sandboxes. */
  storageDir: string;
  /** The rig as a sandbox host of Settings (pinned key, key file, software emulation). */
  hostSetting(capacity: number): SandboxHostSetting;
  /** The rig as an SshHost target with its key pinned. */
  sshTarget(): SshHostTarget;
  /** One SSH connection to the rig, made again once it closes; stop() ends it. */
  connect(): Promise<SshHost>;
  /** The app's sandbox driver for the rig, over that connection. */
  sandboxDriver(): LibvirtSandboxDriver;
  /** Runs a command on the host as the test (through SSH, never the local libvirt socket). */
  exec(command: string): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Ends the SSH server's child processes (every open connection) but keeps it listening. */
  dropConnections(): Promise<void>;
  stop(): Promise<void>;
}

async function pids(name: string): Promise<number[]> {
  const r = await run('pgrep', ['-x', name]).catch(() => ({ stdout: '' }));
  return r.stdout.split('\n').filter(Boolean).map(Number);
}

/** virtlogd and libvirtd as daemons, once per machine (a running pair is reused). */
export async function ensureLibvirtd(): Promise<void> {
  if (!existsSync('/usr/sbin/libvirtd')) throw new Error('libvirtd is not installed: run `bash scripts/ensure-system.sh test` as root');
  // Two remote test files may start at once: one of them starts the pair, the other waits and reuses it.
  const lock = path.join(os.tmpdir(), 'factory-libvirt-rig.lock');
  for (let i = 0; !(await takeLock(lock)); i++) {
    if (i >= 600) throw new Error(`another test run has held ${lock} for a minute`);
    await new Promise((r) => setTimeout(r, 100));
  }
  try {
    await startLibvirtd();
  } finally {
    rmSync(lock, { force: true });
  }
}

async function startLibvirtd(): Promise<void> {
  if ((await pids('virtlogd')).length === 0) await run('virtlogd', ['-d']);
  if ((await pids('libvirtd')).length > 0) return;
  // One folder per machine, as the daemon is, kept while it runs: libvirt carries /dev's mounts
  // into each QEMU's own /dev by their source's name, and a removed no-KVM node fails every
  // domain ("Unable to move /dev/kvm mount").
  const dir = path.join(os.tmpdir(), 'factory-libvirt-rig');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { mode: 0o700 });
  const conf = path.join(dir, 'qemu.conf');
  writeFileSync(conf, `${readFileSync('/etc/libvirt/qemu.conf', 'utf8')}\nseccomp_sandbox = 0\n`);
  const binds = [`mount --bind ${conf} /etc/libvirt/qemu.conf`];
  if (existsSync('/dev/kvm')) {
    // A device node (libvirt carries /dev's mounts into each QEMU's own /dev, device nodes only): /dev/null's, mode 000.
    const noKvm = path.join(dir, 'no-kvm');
    await run('mknod', ['-m', '000', noKvm, 'c', '1', '3']);
    binds.push(`mount --bind ${noKvm} /dev/kvm`);
  }
  await run('unshare', ['-m', '--propagation', 'private', 'sh', '-c', `${binds.join(' && ')} && exec libvirtd -d`]);
  for (let i = 0; i < 100; i++) {
    if (existsSync('/run/libvirt/libvirt-sock')) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('libvirtd did not open its socket within 10 s');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

function fingerprintOf(publicLine: string): string {
  const blob = Buffer.from(publicLine.trim().split(/\s+/)[1] ?? '', 'base64');
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/**
 * `ownImages`: the storage gets an images folder of its own, so the first upload happens here. Otherwise
 * it shares the run's (test/support/rig-images.global-setup.ts) where that exists: a second remote
 * file finds the image there, as a user's second app finds it on their host.
 */
export async function startRemoteHost(opts: { ownImages?: boolean } = {}): Promise<RemoteHostRig> {
  await ensureLibvirtd();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'remote-host-'));
  chmodSync(dir, 0o755);
  const sharedImages = opts.ownImages ? undefined : inject('rigImagesDir');
  const hostKey = path.join(dir, 'ssh_host_ed25519_key');
  const keyFile = path.join(dir, 'client_key');
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', keyFile]);
  writeFileSync(path.join(dir, 'authorized_keys'), readFileSync(`${keyFile}.pub`), { mode: 0o600 });
  const storageDir = path.join(dir, 'storage');
  if (sharedImages) {
    mkdirSync(storageDir, { mode: 0o711 });
    symlinkSync(sharedImages, path.join(storageDir, 'images'));
  }
  const port = await freePort();
  const config = path.join(dir, 'sshd_config');
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `AuthorizedKeysFile ${path.join(dir, 'authorized_keys')}`,
      `PidFile ${path.join(dir, 'sshd.pid')}`,
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      'AllowTcpForwarding yes',
      'AllowStreamLocalForwarding yes',
      'StreamLocalBindUnlink yes',
      'Subsystem sftp internal-sftp',
      '',
    ].join('\n'),
  );
  // sshd's privilege separation folder; Debian's init script would make it.
  await run('mkdir', ['-p', '-m', '0755', '/run/sshd']);
  const sshd: ChildProcess = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let sshdLog = '';
  sshd.stderr?.on('data', (c: Buffer) => {
    if (sshdLog.length < 65536) sshdLog += c.toString();
  });
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (up) break;
    if (i > 100 || sshd.exitCode !== null) throw new Error(`sshd did not start: ${sshdLog}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const privateKey = readFileSync(keyFile, 'utf8');
  const hostPublicKey = readFileSync(`${hostKey}.pub`, 'utf8').trim();

  const exec: RemoteHostRig['exec'] = (command) =>
    new Promise((resolve, reject) => {
      const c = new ssh2.Client();
      c.on('error', reject);
      c.on('ready', () =>
        c.exec(command, (err, ch) => {
          if (err) return reject(err);
          let stdout = '';
          let stderr = '';
          let code: number | null = null;
          ch.on('data', (d: Buffer) => (stdout += d.toString()));
          ch.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          ch.on('exit', (c2: number | null) => (code = c2));
          ch.on('close', () => {
            c.end();
            resolve({ code, stdout, stderr });
          });
        }),
      );
      const pinned = Buffer.from(hostPublicKey.split(/\s+/)[1] ?? '', 'base64');
      c.connect({ host: '127.0.0.1', port, username: 'root', privateKey, hostVerifier: (k: Buffer) => k.equals(pinned) });
    });

  const target = (): SshHostTarget => ({ name: 'rig', host: '127.0.0.1', port, username: 'root', privateKey, hostKeyFingerprint: fingerprintOf(hostPublicKey) });
  let connection: SshHost | undefined;
  const connect = async (): Promise<SshHost> => (connection && !connection.isClosed ? connection : (connection = await SshHost.connect(target())));

  return {
    port,
    username: 'root',
    privateKey,
    keyFile,
    hostKeyFingerprint: fingerprintOf(hostPublicKey),
    hostPublicKey,
    storageDir,
    exec,
    hostSetting: (capacity) => ({
      name: 'rig', destination: 'root@127.0.0.1', port, keySource: 'file', keyFile,
      hostKeyFingerprint: fingerprintOf(hostPublicKey), capacity, storageDir, virtType: 'qemu',
    }),
    sshTarget: target,
    connect,
    sandboxDriver: () => new LibvirtSandboxDriver({ hostName: 'rig', connect, storageDir, virtType: 'qemu' }),
    async dropConnections() {
      // The listener is sshd itself; each connection is a child of it.
      const r = await run('pgrep', ['-P', String(sshd.pid)]).catch(() => ({ stdout: '' }));
      for (const pid of r.stdout.split('\n').filter(Boolean).map(Number)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch (err) {
          // ESRCH: that connection (e.g. an exec just closed) ended by itself between pgrep and here.
          if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
        }
      }
    },
    async stop() {
      connection?.close();
      // Domains whose disks live in this rig's storage go with it (a test that failed half-way leaves some).
      await exec(`for d in $(ls ${storageDir}/sandboxes 2>/dev/null); do virsh -q -c qemu:///system destroy "$d" >/dev/null 2>&1; done`).catch(() => undefined);
      sshd.kill('SIGTERM');
      await new Promise((r) => (sshd.exitCode !== null ? r(undefined) : sshd.once('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
