// A sandbox host as Settings and the hosts.* API take it (issue 14). Every
// field reaches an SSH connection, a command line or libvirt XML on the host,
// so each is checked here with a message that names what is wrong (a control
// character, a space, a leading dash that ssh would read as an option, too long).
import { z } from 'zod';

const FINGERPRINT = /^SHA256:[A-Za-z0-9+/]{43}$/;

/** The first thing wrong with a free-text value, in words; undefined when none of the generic problems applies. */
export function textProblem(value: string, max: number, opts: { spaces?: boolean } = {}): string | undefined {
  if (value.length === 0) return 'is empty';
  if (value.length > max) return `is longer than ${max} characters`;
  if (/[\x00-\x1f\x7f-\x9f\u2028\u2029]/.test(value)) return 'contains a control character';
  if (opts.spaces ? /[^\S ]/.test(value) : /\s/.test(value)) return opts.spaces ? 'contains a space other than a plain one' : 'contains a space';
  if (value.startsWith('-')) return 'starts with a dash (ssh would read it as an option)';
  return undefined;
}

function text(max: number, rule: RegExp, says: string, extra?: (v: string) => string | undefined, opts: { spaces?: boolean } = {}) {
  return z.string().superRefine((v, ctx) => {
    const problem = textProblem(v, max, opts) ?? (rule.test(v) ? extra?.(v) : says);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
}

export const HostName = text(32, /^[a-z][a-z0-9-]*$/, 'must be lowercase letters, digits and dashes, starting with a letter', (n) =>
  n === 'local' || n === 'any' ? '"local" and "any" are placements, not host names' : undefined,
);

export const HostDestination = text(286, /^[^@]+@[^@]+$/, 'must be user@host', (d) => {
  const at = d.lastIndexOf('@');
  const user = d.slice(0, at);
  const host = d.slice(at + 1);
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(user)) return 'has a user name that is not a plain login (lowercase letters, digits, _ and -, at most 32)';
  if (host.startsWith('-')) return 'has a host that starts with a dash (ssh would read it as an option)';
  if (!/^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/.test(host) && !/^\[[0-9A-Fa-f:]{2,39}\]$/.test(host)) return 'has a host that is not a DNS name or an IP address';
  return undefined;
});

export const HostKeyFingerprint = z.string().regex(FINGERPRINT, 'must be a SHA256 fingerprint as ssh-keygen -l prints it (SHA256: and 43 characters)');

export const HostStorageDir = text(4000, /^\/[A-Za-z0-9._/+-]*$/, 'must be an absolute folder of letters, digits and . _ / + -', (p) =>
  p.split('/').includes('..') ? 'must not contain ..' : undefined,
);

// Only the app reads the key file (its contents go to the SSH client, never a command
// line), so a plain space in the path is fine, as in "~/Keys/work laptop/id_ed25519".
export const HostKeyFile = text(4096, /^(\/|~\/)/, 'must be an absolute path to a private key file (or start with ~/)', undefined, { spaces: true });

const base = {
  name: HostName,
  destination: HostDestination,
  port: z.number().int('must be a whole number').min(1, 'must be 1 to 65535').max(65535, 'must be 1 to 65535').default(22),
  /** 'file': the private key in keyFile (OpenSSH format, unencrypted); 'agent': the user's SSH agent (SSH_AUTH_SOCK). */
  keySource: z.enum(['file', 'agent']).default('file'),
  keyFile: HostKeyFile.optional(),
  /** Sandboxes at once on this host. */
  capacity: z.number().int('must be a whole number').min(1, 'must be at least 1').max(256, 'must be at most 256'),
  /** The folder on the host for base images and sandbox disks. */
  storageDir: HostStorageDir.default('/var/lib/factory-in-a-box'),
  /** 'kvm' on a host with KVM (the point of one); 'qemu' emulates. */
  virtType: z.enum(['kvm', 'qemu']).default('kvm'),
};

function keyFileWhenFile(h: { keySource: string; keyFile?: string | undefined }, ctx: z.RefinementCtx): void {
  if (h.keySource === 'file' && !h.keyFile) ctx.addIssue({ code: 'custom', path: ['keyFile'], message: 'is needed when the key comes from a file' });
}

/** A host as the user types it in Settings, before its key is trusted. */
export const HostDraft = z.object(base).strict().superRefine(keyFileWhenFile);
export type HostDraft = z.infer<typeof HostDraft>;

/** hosts.check: a draft, and the fingerprint to hold the host to once the user confirmed one. */
export const HostCheckInput = z
  .object({ ...base, hostKeyFingerprint: HostKeyFingerprint.optional() })
  .strict()
  .superRefine(keyFileWhenFile);

/** hosts.save: a new host or a change (previousName: the host edited, which may be renamed); the fingerprint the user confirmed. */
export const HostSaveInput = z
  .object({ ...base, hostKeyFingerprint: HostKeyFingerprint, previousName: HostName.optional() })
  .strict()
  .superRefine(keyFileWhenFile);

/** A saved host: the draft and the host key fingerprint the user trusted (or known_hosts vouched for). */
export const SandboxHostSetting = z
  .object({ ...base, hostKeyFingerprint: HostKeyFingerprint.optional() })
  .superRefine(keyFileWhenFile);
export type SandboxHostSetting = z.infer<typeof SandboxHostSetting>;

/** A Host alias of the user's SSH config (hosts.fromSshConfig): a plain name, never an option or a pattern. */
export const SshAlias = text(253, /^[A-Za-z0-9_][A-Za-z0-9._-]*$/, 'must be a Host name from your SSH config (letters, digits, . _ -)');

/** The host form's fields an SSH config alias stands for (ssh -G). */
export interface SshConfigHost {
  destination: string;
  port: number;
  keySource: 'file' | 'agent';
  /** The first of the alias's IdentityFile entries that exists; absent when none does. */
  keyFile?: string;
}

/** Facts about a host from hosts.check (what libvirt on it offers). */
export interface HostFacts {
  /** The QEMU version libvirt drives there; absent when libvirt does not answer. */
  qemu?: string;
  /** Whether libvirt offers the KVM accelerator there; false means emulation only. */
  kvm: boolean;
  freeBytes: number;
  /** What stops sandboxes from running there, each naming the problem; empty when none. */
  problems: string[];
}

export interface HostCheckResult {
  /** The SHA256 fingerprint of the key the host presented. */
  fingerprint: string;
  /**
   * 'pinned': equal to the fingerprint given; 'known_hosts': listed for this host in ~/.ssh/known_hosts;
   * 'unverified': neither, so nothing was run there: the user must compare and confirm it.
   */
  hostKey: 'pinned' | 'known_hosts' | 'unverified';
  /** Present only when the key was verified and the app logged in. */
  facts?: HostFacts;
}

export interface SandboxHostView {
  name: string;
  destination: string;
  port: number;
  keySource: 'file' | 'agent';
  keyFile?: string;
  capacity: number;
  storageDir: string;
  virtType: 'kvm' | 'qemu';
  hostKeyFingerprint?: string;
  connected: boolean;
  lost: boolean;
  running: number;
  error?: string;
}
