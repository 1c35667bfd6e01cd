// The host's side of a sandbox guest before any task uses it: waiting until
// SSH answers with the pinned host key, and re-keying a guest restored from a
// shared snapshot (its own keys, the current time, fresh entropy). The guest
// files this touches are named once, here; they are the files the image's
// PID 1 (vm-images/*/guest/factory-init) fills from fw_cfg on a cold boot.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { SandboxKeys } from '../ssh/sandbox-keys.js';
import { GUEST_AGENT_HOME } from './guest-shell.js';
import { perlOneLine } from './guest-perl.js';
import { HostKeyMismatchError, SandboxSsh } from '../ssh/sandbox-ssh.js';

/** Guest files of the SSH trust. Plain absolute paths: the re-key script uses them unquoted. */
export const GUEST_SSH_PATHS = {
  /** One per login user: root (the host's own commands) and agent (the stages). */
  authorizedKeys: ['/root/.ssh/authorized_keys', `${GUEST_AGENT_HOME}/.ssh/authorized_keys`],
  hostKey: '/etc/ssh/ssh_host_ed25519_key',
  sshdPidFile: '/run/sshd.pid',
};

/** Where a guest's sshd answers, and the keys that log in and pin it. */
export interface GuestEndpoint {
  port: number;
  keys: Pick<SandboxKeys, 'clientPrivateKey' | 'hostPublicKey'>;
}

/** What waiting needs to know of the VM: whether its process still runs. */
export interface GuestProcess {
  readonly hasExited: boolean;
  readonly exited: Promise<void>;
}

export function connectGuest(endpoint: GuestEndpoint, opts: { username?: string; readyTimeoutMs?: number } = {}): Promise<SandboxSsh> {
  return SandboxSsh.connect({
    port: endpoint.port,
    username: opts.username ?? 'root',
    privateKey: endpoint.keys.clientPrivateKey,
    hostPublicKey: endpoint.keys.hostPublicKey,
    readyTimeoutMs: opts.readyTimeoutMs ?? 30_000,
  });
}

export interface WaitForSshOptions {
  endpoint: GuestEndpoint;
  vm: GuestProcess;
  timeoutMs: number;
  /** Called once when the forwarded port first sends an SSH banner. */
  onBanner?: () => void;
  /** Pause between banner probes (ms; 200 by default). */
  pollMs?: number;
  /**
   * false: log in at once, without a banner probe first. For a restored guest,
   * whose sshd already listens: a probe would cost the guest one more
   * connection (a fork) before the login. Default true.
   */
  probeBanner?: boolean;
  /** The error to throw once the VM process has ended. */
  exitedError(): Error;
  /** The error to throw at the deadline, with the last failed login if sshd answered at all. */
  timeoutError(lastLoginError: Error | undefined): Error;
}

/**
 * Waits for the SSH banner on the forwarded port, then for a full login with
 * the pinned host key; resolves to that connection. A wrong host key fails at
 * once: it is never retried into acceptance.
 */
export async function waitForSsh(opts: WaitForSshOptions): Promise<SandboxSsh> {
  const deadline = Date.now() + opts.timeoutMs;
  let lastLoginError: Error | undefined;
  let bannerSeen = false;
  while (Date.now() < deadline) {
    if (opts.vm.hasExited) throw opts.exitedError();
    const banner = opts.probeBanner === false ? true : await firstSshBanner(opts.endpoint.port, { everyMs: opts.pollMs ?? 200, until: deadline, stop: opts.vm.exited });
    if (opts.vm.hasExited) throw opts.exitedError();
    if (banner) {
      if (!bannerSeen && opts.probeBanner !== false) opts.onBanner?.();
      bannerSeen = true;
      try {
        return await connectGuest(opts.endpoint, { readyTimeoutMs: Math.max(1000, Math.min(30_000, deadline - Date.now())) });
      } catch (err) {
        if (err instanceof HostKeyMismatchError) throw err;
        if (opts.vm.hasExited) throw opts.exitedError();
        lastLoginError = err as Error;
      }
    }
    await sleep(opts.pollMs ?? 200);
  }
  throw opts.timeoutError(lastLoginError);
}

/** The guest's machine id (systemd's format), new per clone. */
export const GUEST_MACHINE_ID = '/etc/machine-id';

/**
 * The {{NAME}}s of vm-images/perl/identity-apply.pl, the part of taking a new
 * identity that both ways of handing it in share (the SSH re-key below, the
 * identity port's waiter in identity-channel.ts). Paths are plain.
 */
export function identityApplyValues(): Record<string, string> {
  const [rootKeys, agentKeys] = GUEST_SSH_PATHS.authorizedKeys;
  return { MACHINE_ID: GUEST_MACHINE_ID, ROOT_AUTHORIZED_KEYS: rootKeys!, AGENT_AUTHORIZED_KEYS: agentKeys! };
}

/** The command run as root in a restored guest; its stdin is rekeyInput(). */
export function rekeyScript(): string {
  const program = perlOneLine('rekey.pl', { ...identityApplyValues(), HOST_KEY: GUEST_SSH_PATHS.hostKey, SSHD_PID_FILE: GUEST_SSH_PATHS.sshdPidFile });
  // bash -c with one simple command execs it: perl is the only process started.
  return `perl -e '${program}'`;
}

/** Lines read by rekeyScript(): time, entropy, a machine id, the client public key, then the host private key. */
export function rekeyInput(keys: Pick<SandboxKeys, 'clientPublicKey' | 'hostPrivateKey'>, nowMs = Date.now()): string {
  const pub = keys.clientPublicKey.trim();
  if (!/^ssh-ed25519 [A-Za-z0-9+/=]+( [^\r\n]*)?$/.test(pub)) throw new Error('the client public key for re-keying is not one ssh-ed25519 line');
  const hostKey = keys.hostPrivateKey.trim();
  if (!/^-----BEGIN OPENSSH PRIVATE KEY-----\n[\s\S]+\n-----END OPENSSH PRIVATE KEY-----$/.test(hostKey)) {
    throw new Error('the host private key for re-keying is not an OpenSSH private key');
  }
  const machineId = randomBytes(16).toString('hex');
  return `${(nowMs / 1000).toFixed(3)}\n${randomBytes(64).toString('hex')}\n${machineId}\n${pub}\n${hostKey}\n`;
}

/**
 * Installs new keys in a running guest over an existing root connection. On
 * success the connection stays open and usable: it was made to this very guest
 * before the re-key, and keeps its own session keys. Any later connection must
 * pin the new host key: loginAfterRekey() waits for sshd to serve it. On
 * failure the connection is closed.
 */
export async function rekeyGuest(
  ssh: SandboxSsh,
  endpoint: GuestEndpoint & { keys: SandboxKeys },
  timeoutMs: number,
  mark: (step: string) => void = () => {},
): Promise<SandboxSsh> {
  const input = rekeyInput(endpoint.keys);
  let result: { code: number | null; stderr: string };
  try {
    result = await runWithInput(ssh, rekeyScript(), input, timeoutMs);
  } catch (err) {
    ssh.close();
    throw err;
  }
  if (result.code !== 0) {
    ssh.close();
    // Guest output: escape sequences dropped, other control bytes made visible.
    const why = result.stderr
      .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, '')
      .replace(/[^\x20-\x7e\n]/g, '?')
      .split('\n')
      .filter((l) => l.trim())
      .slice(-3)
      .join(' / ');
    throw new Error(`re-keying the restored sandbox failed (exit ${result.code})${why ? `: ${why}` : ''}`);
  }
  mark('re-key script');
  return ssh;
}

/**
 * The first login after a re-key: sshd may serve the old host key (or refuse
 * connections) for a moment while it reloads, so failures, a mismatching host
 * key included, are retried until the deadline; then the last one is thrown.
 */
export async function loginAfterRekey(endpoint: GuestEndpoint, vm: GuestProcess, timeoutMs: number, opts: { username?: string } = {}): Promise<SandboxSsh> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await connectGuest(endpoint, { ...opts, readyTimeoutMs: Math.max(1000, Math.min(20_000, deadline - Date.now())) });
    } catch (err) {
      if (vm.hasExited || Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}

/** Runs `script` with `input` on stdin; a guest that never ends it within `timeoutMs` counts as failed (exit null). */
function runWithInput(ssh: SandboxSsh, script: string, input: string, timeoutMs: number): Promise<{ code: number | null; stderr: string }> {
  return ssh.exec(script).then(
    (channel) =>
      new Promise((resolve) => {
        let code: number | null = null;
        let stderr = '';
        const timer = setTimeout(() => {
          stderr += `\nno end within ${timeoutMs} ms`;
          channel.close();
        }, timeoutMs);
        channel.stderr.on('data', (c: Buffer) => {
          if (stderr.length < 2000) stderr += c.toString();
        });
        channel.on('data', () => {}); // drained, not kept: the script prints nothing we need
        channel.on('exit', (c: number | null) => {
          code = c;
        });
        channel.on('close', () => {
          clearTimeout(timer);
          resolve({ code, stderr });
        });
        channel.end(input);
      }),
  );
}

/** True once the forwarded port sends an SSH identification line. */
export function probeSshBanner(port: number, timeoutMs: number): Promise<boolean> {
  return bannerProbe(port, timeoutMs).result;
}

/** One banner probe; cancel() ends it at once with false. */
function bannerProbe(port: number, timeoutMs: number): { result: Promise<boolean>; cancel(): void } {
  let cancel = () => {};
  const result = new Promise<boolean>((resolve) => {
    const socket = net.createConnection({ host: '127.0.0.1', port });
    let data = '';
    const finish = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    cancel = () => finish(false);
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (c: Buffer) => {
      data += c.toString('latin1');
      if (data.startsWith('SSH-')) finish(true);
      else if (data.length >= 4) finish(false);
    });
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(false));
  });
  return { result, cancel };
}

/**
 * True at the first SSH banner on the forwarded port; false at `until` (ms since the epoch) or once
 * `stop` settles. A new probe starts every `everyMs` while earlier ones still wait, and the first
 * banner ends them all: QEMU's user network resends a SYN the guest did not answer (its network not
 * up yet) only 3 s later, so one probe at a time let a cold boot wait up to 3 s after sshd listened.
 */
export function firstSshBanner(port: number, opts: { everyMs: number; until: number; stop: Promise<unknown>; probeTimeoutMs?: number }): Promise<boolean> {
  return new Promise((resolve) => {
    const waiting = new Set<() => void>();
    let done = false;
    let next: NodeJS.Timeout | undefined;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(next);
      clearTimeout(deadline);
      for (const cancel of waiting) cancel();
      resolve(ok);
    };
    const deadline = setTimeout(() => finish(false), Math.max(0, opts.until - Date.now()));
    const probe = () => {
      if (done) return;
      const p = bannerProbe(port, Math.min(opts.probeTimeoutMs ?? 3000, Math.max(200, opts.until - Date.now())));
      waiting.add(p.cancel);
      void p.result.then((ok) => {
        waiting.delete(p.cancel);
        if (ok) finish(true);
      });
      next = setTimeout(probe, opts.everyMs);
    };
    void opts.stop.then(() => finish(false), () => finish(false));
    probe();
  });
}

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}
